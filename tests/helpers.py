"""Shared builders for small, fast test cases."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from fedfrac import data as data_lib
from fedfrac import sim as sim_lib
from fedfrac import models, runner
from fedfrac.algorithms import contract, tasks
from fedfrac.config import base_config


def tiny_config(**overrides):
  """Digits, 6 clients, tiny MLP, few rounds: compiles and runs in seconds."""
  c = base_config()
  c.progress = False
  c.rounds = 4
  c.eval_every = 2
  c.checkpoint_every = 1
  c.data.num_clients = 6
  c.data.partition = "dirichlet"
  c.data.alpha = 0.5
  c.model.hidden = (16,)
  c.client.lr = 0.1
  c.client.batch_size = 32
  c.client.local_epochs = 1
  for key, value in overrides.items():
    target = c
    parts = key.split(".")
    for p in parts[:-1]:
      target = target[p]
    target[parts[-1]] = value
  return c


def diverging_config(**overrides):
  """:func:`tiny_config` with ``on_divergence="error"`` and a second FedAvg method
  ``wild`` at client lr 1e6 that diverges in its first round."""
  import ml_collections
  c = tiny_config(**overrides)
  c.on_divergence = "error"
  c.methods.wild = ml_collections.ConfigDict(dict(name="fedavg"))
  c.methods.wild.client = ml_collections.ConfigDict(dict(lr=1e6))
  return c


def unequal_digits(sizes=(13, 40, 75, 22), seed=0, test_size=100):
  """A FederatedData of digits with hand-picked, unequal client sizes."""
  ds = data_lib.sklearn_digits()
  rng = np.random.default_rng(seed)
  perm = rng.permutation(len(ds.y_train))
  parts, start = [], 0
  for n in sizes:
    parts.append(np.sort(perm[start:start + n]))
    start += n
  test_parts = data_lib.split_iid(test_size, len(sizes), seed)
  small = data_lib.Dataset(ds.name, ds.x_train, ds.y_train, ds.x_test[:test_size],
                           ds.y_test[:test_size], ds.num_classes)
  return data_lib.federate(small, parts, test_parts)


def simulation(fed, algorithm_builder, client_cfg=None, rounds=3, participation=1.0,
               hidden=(16,), parallelism="vmap", unroll=1, **engine_kwargs):
  """A Simulation of ``algorithm_builder(ctx)`` on ``fed``."""
  c = base_config()
  if client_cfg:
    for k, v in client_cfg.items():
      c.client[k] = v
  c.model.hidden = hidden
  task = tasks.classification_task()
  model = models.build(c.model, fed.input_shape, fed.num_classes, fed.input_scale)
  training = runner.make_training(c.client, fed.client_size, rounds, unroll)
  ctx = contract.BuildContext(model, task, training, fed.info(), rounds, c.client)
  algorithm = algorithm_builder(ctx)
  cfg = sim_lib.EngineConfig(participation=participation,
                                client_parallelism=parallelism, **engine_kwargs)
  return sim_lib.Simulation(algorithm, fed, model, task, training, cfg)


def run_on_two_cpu_devices(script: str) -> dict:
  """Run ``script`` in a fresh Python with the CPU split into 2 XLA devices and
  return the JSON it prints on its last ``RESULT `` line (the device count is
  fixed when JAX starts, hence the subprocess)."""
  import json
  import os
  import subprocess
  import sys
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env = dict(os.environ)
  env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                      " --xla_force_host_platform_device_count=2").strip()
  env["JAX_PLATFORMS"] = "cpu"
  env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
  proc = subprocess.run([sys.executable, "-c", script], cwd=root, env=env,
                        capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-4000:]
  line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1]
  return json.loads(line[len("RESULT "):])


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_cli_in_process(args):
  """The command line ``fedfrac-run <args>`` run in this process as ``python -m
  fedfrac.main`` runs it (absl's ``app.run`` with fedfrac's flag parser), from the
  repository root: a namespace with ``returncode`` (from ``SystemExit``),
  ``stdout`` and ``stderr`` (captured). For what only a process shows (a real
  exit status, a traceback printed, signals) run ``python -m fedfrac.main``."""
  import contextlib
  import io
  import types
  from absl import app
  from fedfrac import main as main_lib
  out, err, status, here = io.StringIO(), io.StringIO(), 0, os.getcwd()
  os.chdir(ROOT)
  try:
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
      app.run(main_lib.main, argv=["fedfrac-run", *args], flags_parser=main_lib.parse_flags)
  except SystemExit as e:
    status = e.code if isinstance(e.code, int) else int(e.code is not None)
  finally:
    os.chdir(here)
  return types.SimpleNamespace(returncode=status, stdout=out.getvalue(),
                               stderr=err.getvalue())


def run_quickstart_cli(args, workdir):
  """``python -m fedfrac.main --config=configs/quickstart.py --workdir=<workdir>
  <args>`` in a process of its own (CPU, the repository first on the path):
  the completed process, its output captured as text."""
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
             JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
  return subprocess.run([sys.executable, "-m", "fedfrac.main",
                         "--config=configs/quickstart.py", f"--workdir={workdir}", *args],
                        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
