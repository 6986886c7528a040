"""Two processes joined by ``jax.distributed`` (CPU backend, gloo collectives, a
loopback coordinator) run the cohort sharded over both processes' devices and
give the metrics of a one-process, one-device run (FedAvg and SCAFFOLD, partial
participation; SCAFFOLD also with ``engine.shard_client_state``, its control
variates, client tables and train rows sharded by client over the two
processes). Every run is a subprocess with a time limit, so a stuck
coordinator fails the test instead of hanging it."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from fedfrac.sim import distributed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT_S = 420

SCRIPT = r"""
import json
import jax
from fedfrac.sim import distributed
distributed.initialize_from_env(timeout_s=120)
import numpy as np
from fedfrac import algorithms
from tests import helpers

fed = helpers.unequal_digits(sizes=(13, 40, 75, 22, 30))   # 5 clients, 3 sampled
runs = {}
# "scaffold+rows": SCAFFOLD with engine.shard_client_state (control variates,
# client tables and train rows sharded over the processes' devices; one
# process with one device has nothing to shard).
for run, name, shard_state in (("fedavg", "fedavg", False), ("scaffold", "scaffold", False),
                               ("scaffold+rows", "scaffold", True)):
  sim = helpers.simulation(fed, lambda ctx: algorithms.make(name, ctx),
                           {"batch_size": 16, "lr": 0.05}, rounds=3,
                           participation=0.6, shard_clients="auto",
                           shard_client_state=shard_state)
  state, metrics = sim.run_chunk(sim.init(2), 3)
  host = distributed.to_host({"metrics": metrics, "eval": sim.evaluate(state)})
  kept = sim.host_state(state)
  host["server"], host["clients"] = kept.server, kept.clients
  local_rows = sorted({s.data.shape[0] for x in jax.tree.leaves((state.clients,
                                                                 state.available))
                       for s in x.addressable_shards})
  runs[run] = {
      "shards": sim.num_shards,
      "local_rows": local_rows,
      "metrics": {k: np.asarray(v, float).tolist() for k, v in host["metrics"].items()},
      "eval": {k: np.asarray(v, float).tolist() for k, v in host["eval"].items()},
      "server": [np.asarray(x, float).ravel().tolist() for x in jax.tree.leaves(host["server"])],
      "clients": [np.asarray(x, float).ravel().tolist() for x in jax.tree.leaves(host["clients"])],
  }
print("RESULT " + json.dumps({"process": jax.process_index(),
                              "processes": jax.process_count(),
                              "devices": jax.device_count(), "runs": runs}))
"""


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _env(**extra):
  env = dict(os.environ)
  env["XLA_FLAGS"] = " ".join(  # keep the suite's level, drop any device count
      f for f in env.get("XLA_FLAGS", "").split()
      if not f.startswith("--xla_force_host_platform_device_count"))
  for key in (distributed.ENV_COORDINATOR, distributed.ENV_NUM_PROCESSES,
              distributed.ENV_PROCESS_ID):
    env.pop(key, None)
  env["JAX_PLATFORMS"] = "cpu"
  env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
  env.update(extra)
  return env


def _result(stdout: str) -> dict:
  line = [l for l in stdout.splitlines() if l.startswith("RESULT ")][-1]
  return json.loads(line[len("RESULT "):])


def _run_processes(num: int, tmp_path) -> list:
  """Start ``num`` processes of SCRIPT joined by a loopback coordinator; kill
  them all if any exceeds TIMEOUT_S. Output goes to files: a process blocked on
  a full pipe would hold the others at JAX's shutdown barrier."""
  port = _free_port()
  procs, files = [], []
  for i in range(num):
    env = _env() if num == 1 else _env(**{
        distributed.ENV_COORDINATOR: f"127.0.0.1:{port}",
        distributed.ENV_NUM_PROCESSES: str(num), distributed.ENV_PROCESS_ID: str(i)})
    out = open(tmp_path / f"out{num}_{i}.txt", "w+")
    err = open(tmp_path / f"err{num}_{i}.txt", "w+")
    files.append((out, err))
    procs.append(subprocess.Popen([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env,
                                  stdout=out, stderr=err, text=True))
  results = []
  try:
    for p, (out, err) in zip(procs, files):
      p.wait(timeout=TIMEOUT_S)
      err.seek(0)
      assert p.returncode == 0, err.read()[-4000:]
      out.seek(0)
      results.append(_result(out.read()))
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
        p.wait()
    for out, err in files:
      out.close()
      err.close()
  return results


def _max_diff(a, b) -> float:
  diffs = [float(np.max(np.abs(np.asarray(x) - np.asarray(y)))) if np.size(x) else 0.0
           for x, y in zip(a, b)]
  return max(diffs, default=0.0)


def test_two_processes_equal_one_process(tmp_path):
  (single,) = _run_processes(1, tmp_path)
  pair = _run_processes(2, tmp_path)
  assert single["processes"] == 1 and single["devices"] == 1
  assert [r["process"] for r in pair] == [0, 1]
  for r in pair:
    assert r["processes"] == 2 and r["devices"] == 2
  for name, one in single["runs"].items():
    assert one["shards"] == 1
    for r in pair:
      two = r["runs"][name]
      assert two["shards"] == 2, name
      # executed_steps counts each device's padded work: it differs by design.
      keys = sorted(set(one["metrics"]) - {"executed_steps"})
      assert keys == sorted(set(two["metrics"]) - {"executed_steps"})
      assert one["metrics"]["clients/ids"] == two["metrics"]["clients/ids"], name
      assert _max_diff([one["metrics"][k] for k in keys],
                       [two["metrics"][k] for k in keys]) <= 1e-6, name
      assert _max_diff([one["eval"][k] for k in sorted(one["eval"])],
                       [two["eval"][k] for k in sorted(one["eval"])]) <= 1e-6, name
      assert _max_diff(one["server"], two["server"]) <= 1e-6, name
      assert _max_diff(one["clients"], two["clients"]) <= 1e-6, name
    # The runs trained: losses fell and the parameters moved from zero scale.
    losses = one["metrics"]["train_loss"]
    assert losses[-1] < losses[0], (name, losses)
  assert len(single["runs"]["scaffold"]["clients"]) > 0   # control variates compared
  # Replicated: each process holds all 5 client rows; shard_client_state: 3 of
  # the 6 (5 padded to a multiple of 2) on each process's device.
  assert single["runs"]["scaffold+rows"]["local_rows"] == [5]
  for r in pair:
    assert r["runs"]["scaffold"]["local_rows"] == [5]
    assert r["runs"]["scaffold+rows"]["local_rows"] == [3]


def test_settings_from_env():
  assert distributed.settings_from_env({}) is None
  s = distributed.settings_from_env({"FEDFRAC_COORDINATOR": "10.0.0.1:1234",
                                     "FEDFRAC_NUM_PROCESSES": "4",
                                     "FEDFRAC_PROCESS_ID": "3",
                                     "FEDFRAC_LOCAL_DEVICE_IDS": "0,1"})
  assert s == {"coordinator_address": "10.0.0.1:1234", "num_processes": 4,
               "process_id": 3, "local_device_ids": [0, 1]}
  auto = distributed.settings_from_env({"FEDFRAC_COORDINATOR": "auto"})
  assert auto["coordinator_address"] is None and auto["num_processes"] is None
  with pytest.raises(ValueError, match="FEDFRAC_PROCESS_ID"):
    distributed.settings_from_env({"FEDFRAC_COORDINATOR": "h:1",
                                   "FEDFRAC_NUM_PROCESSES": "2",
                                   "FEDFRAC_PROCESS_ID": "2"})
  with pytest.raises(ValueError, match="FEDFRAC_NUM_PROCESSES"):
    distributed.settings_from_env({"FEDFRAC_COORDINATOR": "h:1"})
  with pytest.raises(ValueError, match="host:port"):
    distributed.settings_from_env({"FEDFRAC_COORDINATOR": "h",
                                   "FEDFRAC_NUM_PROCESSES": "2",
                                   "FEDFRAC_PROCESS_ID": "0"})
  with pytest.raises(ValueError, match="FEDFRAC_NUM_PROCESSES='x'"):
    distributed.settings_from_env({"FEDFRAC_COORDINATOR": "h:1",
                                   "FEDFRAC_NUM_PROCESSES": "x",
                                   "FEDFRAC_PROCESS_ID": "0"})
