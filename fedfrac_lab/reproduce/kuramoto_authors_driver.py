"""One run of the Kuramoto-FedAvg authors' own code, for ``fedfrac-reproduce
kuramoto_authors`` (:mod:`fedfrac_lab.reproduce.kuramoto_authors`), and what that
command prepares for it (their ``src/`` in a checkout, their commit, Fashion-MNIST
in torchvision's layout).

Run as a script in a process of its own (it imports nothing of fedfrac, so the
authors' top-level packages ``algorithms`` and ``train_tools`` and their torch are
all the process holds)::

  python kuramoto_authors_driver.py SPEC.json

``SPEC.json``: ``{"src": their src/ directory, "config": "fedavg.json" |
"scaffold.json" | "kuramoto.json", "sync": 0 | 1, "root": the data root (holding
``mnist/FashionMNIST/raw/``), "args": their main.py flags but ``--device``,
"device": ``cuda:0``, ``cpu`` or ``auto`` (a GPU when torch sees one), "out": the
result file}``.

What runs is their ``src/main.py`` itself (``runpy``, as ``python main.py`` from
their ``src/``) with three things around it, none of which touch training:

* ``wandb`` is a stub module (``init``, ``log``, ``save``, ``config``), so their
  logging imports and runs without the network or the package;
* their shipped JSON is read from their checkout and written to a temporary file
  with two keys changed, ``data_setups.root`` (the data root) and
  ``train_setups.algo.sync`` (1 for the Kuramoto rows; every shipped JSON has 0);
  everything else comes from their file and the ``main.py`` flags in ``args``;
* ``BaseServer.update_csv``, which appends the round's global test accuracy (×100)
  to ``/home/$USER/Kuramoto-FedAvg/evaluation/...csv``, records the same numbers
  in ``out`` instead (rewritten after every round, so a stopped run keeps its
  rounds).
"""
from __future__ import annotations

import gzip
import json
import os
import random
import runpy
import shutil
import subprocess
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))


class _Config(dict):
  """``wandb.config``: a dict that also takes attributes."""

  def __getattr__(self, key):
    return self[key]

  def __setattr__(self, key, value):
    self[key] = value

def unique_tmp(path, ext: str = "") -> str:
  """A temporary name beside ``path`` no other writer uses (pid and 8 random
  digits): write there, then ``os.replace`` it onto ``path``."""
  return f"{path}.tmp{os.getpid()}{random.SystemRandom().randrange(10 ** 8):08d}{ext}"


def wandb_stub() -> types.ModuleType:
  """A ``wandb`` module whose calls do nothing (the ones their code makes)."""
  module = types.ModuleType("wandb")
  run = types.SimpleNamespace(dir=os.getcwd(), id="offline")
  module.config = _Config()
  module.run = run
  module.init = lambda *args, **kwargs: run
  module.log = lambda *args, **kwargs: None
  module.save = lambda *args, **kwargs: None
  module.finish = lambda *args, **kwargs: None
  return module


def device(name: str) -> str:
  """``name``, or for ``"auto"`` ``cuda:0`` when torch sees a GPU, else ``cpu``."""
  if name != "auto":
    return name
  try:
    import torch
  except ImportError:
    return "cpu"
  return "cuda:0" if torch.cuda.is_available() else "cpu"


def write_json(path, obj) -> None:
  tmp = unique_tmp(path)
  with open(tmp, "w") as f:
    json.dump(obj, f, indent=1)
  os.replace(tmp, path)


def run(spec: dict) -> dict:
  """Run their main.py as ``spec`` says; returns (and writes to ``spec["out"]``)
  ``{"curve": [global test accuracy after round 1, 2, ...], "rounds": [...],
  "train_acc_std": [...], "wall_s", "status", "torch", "device_name"}``."""
  src = os.path.abspath(spec["src"])
  # Their code imports top-level names (algorithms, train_tools, utils): only their
  # src/ may provide them, not this file's directory.
  sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
  sys.path.insert(0, src)
  sys.modules["wandb"] = wandb_stub()
  os.chdir(src)
  from algorithms import BaseServer as base_server   # their module (algorithms/BaseServer.py)

  result = {"status": "running", "curve": [], "rounds": [], "train_acc_std": [],
            "config": spec["config"], "sync": spec["sync"], "args": spec["args"],
            "authors_commit": spec.get("commit", "")}
  t0 = time.time()

  def update_csv(self, acc, var):   # replaces their CSV writer: same numbers, our file
    result["curve"].append(round(float(acc) / 100.0, 6))
    result["rounds"].append(len(result["curve"]))
    result["train_acc_std"].append(float(var))
    result["wall_s"] = round(time.time() - t0, 1)
    write_json(spec["out"], result)

  base_server.BaseServer.update_csv = update_csv
  with open(os.path.join(src, "config", spec["config"])) as f:
    config = json.load(f)
  config["data_setups"]["root"] = spec["root"]
  config["train_setups"]["algo"]["sync"] = int(spec["sync"])
  config_path = f"{spec['out']}.config.json"
  write_json(config_path, config)
  sys.argv = (["main.py", "--config_path", config_path] + [str(a) for a in spec["args"]]
              + ["--device", device(spec.get("device", "auto"))])
  try:
    runpy.run_path(os.path.join(src, "main.py"), run_name="__main__")
    result["status"] = "ok"
  except BaseException as e:   # their error, kept in the result; the caller reports it
    result["status"] = f"failed: {type(e).__name__}: {' '.join(str(e).split())[:300]}"
    raise
  finally:
    result["wall_s"] = round(time.time() - t0, 1)
    torch = sys.modules.get("torch")
    if torch is not None:
      result["torch"] = str(torch.__version__)
      cuda = getattr(torch, "cuda", None)
      if cuda is not None and cuda.is_available():
        result["device_name"] = cuda.get_device_name(0)
    write_json(spec["out"], result)
  return result


IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
             "t10k-labels-idx1-ubyte")


# ------------------------------------------ what the caller prepares for the runs


def authors_src(path):
  """Their ``src/`` directory in a checkout (``DIR/src`` or ``DIR`` itself), or None."""
  for candidate in (os.path.join(path, "src"), path):
    if os.path.isfile(os.path.join(candidate, "main.py")):
      return os.path.abspath(candidate)
  return None


def idx_path(data_dir, name):
  """``DIR/name`` or ``DIR/name.gz``, whichever exists (None if neither)."""
  for candidate in (os.path.join(data_dir, name), os.path.join(data_dir, name + ".gz")):
    if os.path.isfile(candidate):
      return candidate
  return None


def torchvision_root(data_dir, work):
  """The four IDX files unpacked into ``work/data/mnist/FashionMNIST/raw/`` (what
  their ``MNIST_truncated`` reads: ``FashionMNIST(root + "/mnist")``); returns
  ``work/data``, their ``data_setups.root``."""
  raw = os.path.join(work, "data", "mnist", "FashionMNIST", "raw")
  os.makedirs(raw, exist_ok=True)
  for name in IDX_FILES:
    source, target = idx_path(data_dir, name), os.path.join(raw, name)
    if not os.path.exists(target):
      opener = gzip.open if source.endswith(".gz") else open
      tmp = unique_tmp(target)
      with opener(source, "rb") as f, open(tmp, "wb") as g:
        shutil.copyfileobj(f, g)
      os.replace(tmp, target)
  return os.path.join(work, "data")


def authors_commit(path):
  """Their commit: ``DIR/COMMIT`` (make authors-kuramoto), else ``git rev-parse
  HEAD`` when ``DIR`` is a clone of its own, else ``""``."""
  try:
    with open(os.path.join(path, "COMMIT")) as f:
      return f.read().strip()
  except OSError:
    pass
  if not os.path.exists(os.path.join(path, ".git")):
    return ""
  try:
    return subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True,
                          text=True, timeout=10).stdout.strip()
  except (OSError, subprocess.SubprocessError):
    return ""


def main(argv=None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  with open(argv[0]) as f:
    spec = json.load(f)
  run(spec)
  return 0


if __name__ == "__main__":
  sys.exit(main())
