"""The GPU window's command, ``benchmarks/gpu/campaign.sh``, run on the CPU with a
tiny plan (a logistic model on IDX files the test writes): a window stopped by
SIGTERM packs what finished; the archive is collected into a checkout; the next
window skips what is committed, logs a failing plan entry and goes on, stops
before an item that does not fit its budget and ends inside it; collect
re-renders the table with the device in its title and refuses a tampered archive."""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import time

import pytest

from fedfrac.campaign import collect, files, plan as plan_lib
from tests.campaign.test_plan import off_image
from tests.data.test_files import write_mnist_idx

CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(CHECKOUT, "benchmarks", "gpu", "campaign.sh")

TINY_CONFIG = '''
from fedfrac.config import base_config


def get_config(arg=None):
  c = base_config()
  c.name = "tiny logistic on IDX files"
  c.seeds = (0,)
  c.rounds = 2
  c.eval_every = 1
  c.checkpoint_every = 0
  c.data.source = "files"
  c.data.num_clients = 3
  c.data.partition = "iid"
  c.model.name = "logistic"
  c.client.lr = 0.1
  c.client.batch_size = 16
  c.engine.unroll = 1
  c.methods = type(c.methods)({"fedavg": dict(name="fedavg"),
                               "fedprox": dict(name="fedprox")})
  return c
'''


def _plan(tmp_path):
  config = tmp_path / "tiny.py"
  config.write_text(TINY_CONFIG)
  group = {"table": "tiny", "kind": "jobs", "config": str(config),
           "set": {"data.dir": "{data}/idx"}, "seeds": [0, 1], "estimate_s": 1}
  plan = {"tables": {"tiny": {"kind": "jobs", "out": "results/tiny.md",
                              "title": "Tiny logistic", "metrics": ["accuracy"]}},
          "groups": [dict(group, labels=["fedavg", "nope", "fedprox"]),
                     # never fits a window: the run must stop before it
                     dict(group, labels=["fedavg"], seeds=[2], estimate_s=1e6)]}
  path = tmp_path / "plan.json"
  path.write_text(json.dumps(plan))
  return str(path)


def _window(tmp_path, name, root, plan, budget, **popen):
  out = tmp_path / name
  env = dict(os.environ, PYTHON=sys.executable, CAMPAIGN_WHEELS=str(tmp_path / "no_wheels"))
  argv = ["bash", SCRIPT, "--out", str(out), "--plan", plan, "--root", str(root),
          "--data", str(tmp_path / "data"), "--budget", str(budget), "--reserve", "3"]
  return out, subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, **popen)


def test_two_windows_continue_the_plan_inside_their_budgets(tmp_path):
  (tmp_path / "data" / "idx").mkdir(parents=True)
  write_mnist_idx(tmp_path / "data" / "idx", n_train=240, n_test=60, gz=True)
  plan = _plan(tmp_path)
  root = tmp_path / "checkout"
  items = plan_lib.load(plan).items
  # Window 1, stopped by SIGTERM once its first item is written.
  out1, proc = _window(tmp_path, "out1", root, plan, 300)
  log1 = out1 / "campaign.log"
  t0 = time.time()
  while not (log1.exists() and "done   tiny" in log1.read_text()):
    assert proc.poll() is None and time.time() - t0 < 120, proc.communicate()[0]
    time.sleep(0.2)
  proc.send_signal(signal.SIGTERM)
  text1 = proc.communicate(timeout=60)[0]
  assert proc.returncode == 143, text1
  assert "no wheels in" in text1 and "DRY RUN ON THE CPU" in text1
  assert "SIGTERM: stopping; packing what finished" in log1.read_text()
  manifest, blobs = files.read_archive(str(out1 / files.ARCHIVE))
  assert manifest["dry_run"] and manifest["device"]["platform"] == "cpu"
  first = f"items/tiny/{items[0].id}.json"
  assert first in blobs and "campaign.log" in blobs and "timings.md" in blobs
  done1 = {n for n in blobs if n.startswith("items/")}

  collect.collect(str(out1 / files.ARCHIVE), plan, str(root), log=lambda m: None)
  assert files.read_verified(str(root / "results" / "campaign" / "tiny"
                                 / f"{items[0].id}.json")) is not None

  # Window 2 picks up after what is committed and stops before the item that
  # cannot fit, inside its budget.
  budget = 90
  t0 = time.time()
  out2, proc = _window(tmp_path, "out2", root, plan, budget)
  text2 = proc.communicate(timeout=budget + 30)[0]
  wall = time.time() - t0
  assert wall < budget, text2
  log2 = (out2 / "campaign.log").read_text()
  assert proc.returncode == 1, text2        # the failing entry 'nope'
  assert f"start  {items[0].label}" not in log2          # committed: skipped
  assert "FAILED tiny - nope seeds=2" in log2 and "unknown method label 'nope'" in log2
  assert f"stop: the next item, {items[3].label}, needs about 1000000 s" in log2
  manifest2, blobs2 = files.read_archive(str(out2 / files.ARCHIVE))
  done2 = {n for n in blobs2 if n.startswith("items/")}
  assert done1 | done2 == {f"items/tiny/{i.id}.json" for i in items
                           if i.spec["label"] != "nope" and i.estimate_s < 1e6}
  assert not done1 & done2
  # The window's modules come from the image or the wheels (tests/campaign/test_plan).
  assert "ml_collections" in manifest2["modules"] and "jax" in manifest2["modules"]
  assert not off_image(manifest2["modules"]), off_image(manifest2["modules"])

  result = collect.collect(str(out2 / files.ARCHIVE), plan, str(root), log=lambda m: None)
  table = (root / "results" / "tiny.md").read_text()
  assert table.startswith(f"# Tiny logistic (devices: {result['device']})")
  assert "CPU" in result["device"]
  assert "| fedavg | 2 |" in table and "| fedprox | 2 |" in table
  timings = json.loads((root / "results" / "campaign" / "timings.json").read_text())
  assert {r["item"] for r in timings} == {items[0].id, items[2].id}

  # A tampered archive is refused before anything is written.
  bad = tmp_path / "bad.tar.gz"
  with tarfile.open(out2 / files.ARCHIVE) as src, tarfile.open(bad, "w:gz") as dst:
    for m in src.getmembers():
      data = src.extractfile(m).read()
      if m.name.startswith("items/"):
        data = data.replace(b'"accuracy"', b'"accuracy" ', 1)
        m.size = len(data)

      dst.addfile(m, io.BytesIO(data))
  assert collect.main([str(bad), "--plan", plan, "--root", str(tmp_path / "other")]) == 2
  assert not (tmp_path / "other").exists()


def test_without_the_wheels_modules_the_window_says_so_and_stops(tmp_path):
  python = tmp_path / "bare-python"      # no site-packages: no ml_collections
  python.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
  python.chmod(0o755)
  env = dict(os.environ, PYTHON=str(python), CAMPAIGN_WHEELS=str(tmp_path / "none"))
  out = tmp_path / "out"
  run = subprocess.run(["bash", SCRIPT, "--out", str(out)], env=env, capture_output=True,
                       text=True, timeout=60)
  assert run.returncode == 2
  log = (out / "campaign.log").read_text()
  assert "error: ml_collections or dp_accounting cannot be imported: run 'make " \
         "gpu-wheels'" in log
  assert "device check:" in log or "ModuleNotFoundError" in log


def test_collect_refuses_what_is_not_an_archive(tmp_path, capsys):
  (tmp_path / "x.tar.gz").write_text("not a tar")
  plan = _plan(tmp_path)
  assert collect.main([str(tmp_path / "x.tar.gz"), "--plan", plan]) == 2
  err = capsys.readouterr().err.strip()
  assert err.startswith("error: archive") and "not a readable tar.gz" in err
  assert len(err.splitlines()) == 1


if __name__ == "__main__":
  sys.exit(pytest.main([__file__]))
