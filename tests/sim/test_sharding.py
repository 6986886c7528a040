"""The cohort sharded over 2 forced CPU devices (shard_map) gives the results of a
single-device run. JAX fixes its device count at start-up, so the sharded runs
happen in a subprocess started with ``--xla_force_host_platform_device_count=2``."""
from __future__ import annotations

import os
import subprocess
import sys

from tests import helpers


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = r"""
import json
import jax
import numpy as np
from fedfrac import algorithms, models, runner
from fedfrac import sim as sim_lib
from fedfrac.algorithms import contract, tasks
from fedfrac.config import base_config
from tests import helpers

assert jax.device_count() == 2, jax.devices()
fed = helpers.unequal_digits(sizes=(13, 40, 75, 22, 30))   # 5 clients: one pad slot


def sim(parallelism, shard, participation):
  c = base_config()
  c.client.batch_size = 16
  c.client.optimizer = "adam"
  c.client.lr = 0.01
  c.model.hidden = (16,)
  model = models.build(c.model, fed.input_shape, fed.num_classes, fed.input_scale)
  task = tasks.classification_task()
  training = runner.make_training(c.client, fed.client_size, 3, 1, True)
  ctx = contract.BuildContext(model, task, training, fed.info(), 3, c.client)
  cfg = sim_lib.EngineConfig(participation=participation,
                                client_parallelism=parallelism, shard_clients=shard)
  return sim_lib.Simulation(algorithms.make("fedavg", ctx), fed, model, task,
                               training, cfg)


out = {}
for parallelism, participation in (("vmap", 1.0), ("map", 0.6)):
  a = sim(parallelism, False, participation)
  b = sim(parallelism, True, participation)
  assert a.num_shards == 1 and b.num_shards == 2
  sa, ma = a.run_chunk(a.init(3), 2)
  sb, mb = b.run_chunk(b.init(3), 2)
  out[parallelism] = {
      "max_param_diff": max(float(np.max(np.abs(x - y))) for x, y in
                            zip(jax.tree.leaves(sa.server), jax.tree.leaves(sb.server))),
      "same_ids": bool(np.array_equal(ma["clients/ids"], mb["clients/ids"])),
      "same_steps": bool(np.array_equal(ma["clients/steps"], mb["clients/steps"])),
      "loss_diff": float(np.max(np.abs(ma["clients/loss"] - mb["clients/loss"]))),
      "param_scale": max(float(np.max(np.abs(x))) for x in jax.tree.leaves(sa.server)),
  }
print("RESULT " + json.dumps(out))
"""


def test_sharded_cohort_equals_single_device():
  result = helpers.run_on_two_cpu_devices(SCRIPT)
  for parallelism, r in result.items():
    assert r["same_ids"] and r["same_steps"], (parallelism, r)
    assert r["param_scale"] > 0.01
    # Clients run the same per-client programs and the stacked cohort is
    # replicated before aggregation: equal to float rounding of the vmapped
    # batch width.
    assert r["max_param_diff"] <= 1e-6, (parallelism, r)
    assert r["loss_diff"] <= 1e-5, (parallelism, r)


def test_shard_clients_without_several_devices_is_a_single_shard():
  from fedfrac import algorithms
  from tests import helpers
  import jax
  fed = helpers.unequal_digits(sizes=(13, 40))
  sim = helpers.simulation(fed, lambda ctx: algorithms.make("fedavg", ctx),
                           {"batch_size": 16}, shard_clients=True)
  assert sim.num_shards == jax.device_count()
  state, _ = sim.run_chunk(sim.init(0), 1)
  assert int(state.round) == 1


CPU_DEVICES_SCRIPT = r"""
import jax
from fedfrac.sim import use_cpu_devices
assert use_cpu_devices(2)
assert jax.device_count() == 2                  # JAX starts with the requested devices
assert use_cpu_devices(2)                       # unchanged setting: still in effect
assert not use_cpu_devices(3, strict=False)     # too late for a new count
try:
  use_cpu_devices(3)
except RuntimeError as e:
  assert "already initialised" in str(e), e
else:
  raise AssertionError("a too-late use_cpu_devices(3) must raise")
print("OK")
"""


def test_use_cpu_devices_before_and_after_jax_starts():
  env = dict(os.environ)
  env["XLA_FLAGS"] = " ".join(  # keep the suite's level, drop any device count
      f for f in env.get("XLA_FLAGS", "").split()
      if not f.startswith("--xla_force_host_platform_device_count"))
  env["JAX_PLATFORMS"] = "cpu"
  env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
  proc = subprocess.run([sys.executable, "-c", CPU_DEVICES_SCRIPT], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-4000:]
