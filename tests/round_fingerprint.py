"""The engine's numbers for a fixed set of short runs, to check a refactor of the
round leaves them bit for bit as they were.

Usage (from a clone)::

  python -m tests.round_fingerprint save  /tmp/before.npz    # on the old code
  python -m tests.round_fingerprint check /tmp/before.npz    # on the new code

``save`` runs every case (3 rounds each on a few digits clients; the sharded
cases in a subprocess with the CPU split into two XLA devices) and stores every
round metric and every leaf of the final state; ``check`` runs them again and
compares each array with ``np.array_equal``, printing the cases that differ and
exiting 1 if any does. About 2 CPU-minutes (7 minutes of wall time on the
shared 2-core machine), so it is not part of the test suite (the files of
tests/sim/ test the same features one by one).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = (13, 40, 75, 22, 31, 58)
CLIENT = {"batch_size": 8, "lr": 0.05}


def cases():
  """``name -> (algorithm, options, engine settings)`` of the single-device runs."""
  from fedfrac.ops import system as system_lib
  from fedfrac.sim.attacks import AttackConfig
  slow = system_lib.SystemConfig(speed="groups", group_speeds=(1.0, 0.25),
                                 groups=(0, 1, 1, 0, 1, 0), deadline=5.0, policy="drop")
  partial = system_lib.SystemConfig(speed="lognormal", sigma=1.0, deadline=8.0,
                                    policy="partial")
  return {
      "fedavg": ("fedavg", {}, {}),
      "fedavg_map": ("fedavg", {}, {"parallelism": "map"}),
      "fedavg_buckets_half": ("fedavg", {}, {"participation": 0.5, "step_buckets": 2}),
      "fedavg_perm": ("fedavg", {}, {"participation": 0.5, "cohort_permutation_seed": 3}),
      "fedprox": ("fedprox", {}, {}),
      "scaffold": ("scaffold", {}, {"participation": 0.5}),
      "fofedavg": ("fofedavg", {}, {}),
      "fo_ri_fedavg_probe": ("fo_ri_fedavg", {"probe": "on", "probe_every": 2}, {}),
      "fibfl_pp": ("fibfl_pp", {}, {}),
      "firma": ("fibfl", {}, {}),
      "kuramoto": ("kuramoto_fedavg", {}, {"participation": 0.5}),
      "fedavg_churn": ("fedavg", {}, {"participation": 0.5,
                                      "availability": (0.3, 0.5)}),
      "fedavg_churn_slots": ("fedavg", {}, {"participation": 0.5,
                                            "availability": (0.3, 0.5),
                                            "cohort_rule": "slots"}),
      "fedavg_deadline_drop": ("fedavg", {}, {"system": slow}),
      "fednova_deadline_partial": ("fednova", {}, {"system": partial}),
      "fedel_elastic": ("fedel", {"window": 2, "budget_steps": 1.0}, {"system": slow}),
      "fedavg_sign_flip": ("fedavg", {}, {"attack": AttackConfig("sign_flip", 0.34,
                                                                 scale=2.0)}),
      "fedavg_gaussian": ("fedavg", {}, {"attack": AttackConfig("gaussian", 0.34)}),
      "fedavg_label_flip": ("fedavg", {}, {"attack": AttackConfig("label_flip", 0.34)}),
      "fo_ri_probe_label_flip": ("fo_ri_fedavg", {"probe": "on", "probe_every": 2},
                                 {"attack": AttackConfig("label_flip", 0.34)}),
      "fedavg_flip_deadline_churn": ("fedavg", {}, {
          "participation": 0.5, "availability": (0.3, 0.5), "system": partial,
          "attack": AttackConfig("label_flip", 0.34)}),
  }


def sharded_cases():
  """The runs on two devices (``shard_clients``, ``shard_client_state``)."""
  from fedfrac.sim.attacks import AttackConfig
  return {
      "sharded_fedavg": ("fedavg", {}, {"shard_clients": True}),
      "sharded_scaffold_rows": ("scaffold", {}, {"shard_clients": True,
                                                  "shard_client_state": True,
                                                  "participation": 0.5}),
      "sharded_rows_label_flip": ("fedavg", {}, {
          "shard_clients": True, "shard_client_state": True,
          "attack": AttackConfig("label_flip", 0.34)}),
  }


def run_case(algorithm, options, engine):
  """Round metrics and final state of 3 rounds, as a flat ``name -> array`` dict."""
  import jax
  from fedfrac import algorithms
  from tests import helpers
  fed = helpers.unequal_digits(SIZES)
  sim = helpers.simulation(fed, lambda ctx: algorithms.make(algorithm, ctx, **options),
                           client_cfg=CLIENT, **engine)
  state, metrics = sim.run_chunk(sim.init(0), 3)
  out = {f"metric/{k}": np.asarray(v) for k, v in metrics.items()}
  host = sim.host_state(state)
  for path, leaf in jax.tree_util.tree_leaves_with_path(host):
    out["state" + jax.tree_util.keystr(path)] = np.asarray(leaf)
  out.update({f"eval/{k}": np.asarray(v) for k, v in sim.evaluate(state).items()})
  return out


def run_batched():
  """Two seeds of FedAvg vmapped into one program (BatchedSimulation)."""
  import jax
  from fedfrac import algorithms
  from fedfrac.sim.batched import BatchedSimulation
  from tests import helpers
  fed = helpers.unequal_digits(SIZES)
  sim = helpers.simulation(fed, lambda ctx: algorithms.make("fedavg", ctx),
                           client_cfg=CLIENT, participation=0.5)
  batched = BatchedSimulation(sim, [fed, fed])
  states, metrics = batched.run_chunk(batched.init([0, 1]), 3)
  out = {f"metric/{k}": np.asarray(v) for k, v in metrics.items()}
  for path, leaf in jax.tree_util.tree_leaves_with_path(states):
    out["state" + jax.tree_util.keystr(path)] = np.asarray(leaf)
  return out


def collect(names, table):
  arrays = {}
  for name in names:
    for k, v in run_case(*table[name]).items():
      arrays[f"{name}|{k}"] = v
  return arrays


def run_sharded_subprocess(path):
  env = dict(os.environ)
  env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "")
                      + " --xla_force_host_platform_device_count=2").strip()
  env["JAX_PLATFORMS"] = "cpu"
  env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
  subprocess.run([sys.executable, __file__, "sharded", path], env=env, check=True, cwd=ROOT)
  with np.load(path) as f:
    return dict(f)


def everything(tmp):
  arrays = collect(cases(), cases())
  arrays.update({f"batched|{k}": v for k, v in run_batched().items()})
  arrays.update(run_sharded_subprocess(tmp))
  return arrays


def main(argv):
  sys.path.insert(0, ROOT)
  mode, path = argv[1], argv[2]
  if mode == "sharded":
    import jax
    assert jax.device_count() == 2, jax.devices()
    np.savez(path, **collect(sharded_cases(), sharded_cases()))
    return 0
  arrays = everything(path + ".sharded.npz")
  if mode == "save":
    np.savez(path, **arrays)
    count = len(cases()) + len(sharded_cases()) + 1
    print(f"saved {len(arrays)} arrays of {count} cases to {path}")
    return 0
  with np.load(path) as f:
    before = dict(f)
  differ = sorted(k for k in set(before) | set(arrays)
                  if k not in before or k not in arrays
                  or before[k].dtype != arrays[k].dtype
                  or not np.array_equal(before[k], arrays[k]))
  print(json.dumps({"arrays": len(arrays), "differ": differ[:40], "count": len(differ)}))
  return 1 if differ else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
