"""Execution strategies of the engine give the same numbers: dynamic local-step
loops vs the masked scan, step buckets, map vs vmap, and the masked-work
accounting (``executed_steps``, ``auto_step_buckets``) against hand counts."""
from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from fedfrac import algorithms, models, runner
from fedfrac import sim as sim_lib
from fedfrac.algorithms import contract, local_training, tasks
from fedfrac.config import base_config
from tests import helpers

SIZES = (13, 40, 75, 22, 30, 7, 51)   # steps with B=16, E=1: 1 3 5 2 2 1 4


def _sim(fed, dynamic=True, unroll=1, optimizer="sgd", parallelism="vmap",
         algorithm=("fedavg", {}), **engine):
  c = base_config()
  c.client.batch_size = 16
  c.client.optimizer = optimizer
  c.client.lr = 0.1 if optimizer == "sgd" else 0.01
  c.model.hidden = (16,)
  model = models.build(c.model, fed.input_shape, fed.num_classes, fed.input_scale)
  task = tasks.classification_task()
  training = runner.make_training(c.client, fed.client_size, 3, unroll, dynamic)
  ctx = contract.BuildContext(model, task, training, fed.info(), 3, c.client)
  cfg = sim_lib.EngineConfig(client_parallelism=parallelism, **engine)
  return sim_lib.Simulation(algorithms.make(algorithm[0], ctx, **algorithm[1]), fed,
                               model, task, training, cfg)


def _run(sim, rounds=2, seed=1):
  state, metrics = sim.run_chunk(sim.init(seed), rounds)
  return jax.device_get(state), jax.device_get(metrics)


def _assert_same(a, b, exact=True):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    if exact:
      np.testing.assert_array_equal(x, y)
    else:
      np.testing.assert_allclose(x, y, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_dynamic_loop_equals_masked_scan_bit_for_bit(optimizer):
  fed = helpers.unequal_digits(sizes=SIZES)
  static = _sim(fed, dynamic=False, optimizer=optimizer)
  dynamic = _sim(fed, dynamic=True, optimizer=optimizer, step_buckets=1)
  unrolled = _sim(fed, dynamic=True, unroll=3, optimizer=optimizer, step_buckets=1)
  sa, ma = _run(static)
  sb, mb = _run(dynamic)
  sc, mc = _run(unrolled)
  # SGD: bit for bit. Adam: the dynamic loop's shared part runs without select
  # (fedfrac.ops.lockstep), a program compiled apart from the scan's, and its
  # square root and division agree to a few ulps.
  _assert_same(sa.server, sb.server, exact=optimizer == "sgd")
  _assert_same(sa.server, sc.server, exact=optimizer == "sgd")
  # Reported losses may differ in the last bit (the loss value is reduced in a
  # differently fused program); the trained parameters above may not.
  np.testing.assert_allclose(ma["clients/loss"], mb["clients/loss"], rtol=1e-6)
  # Executed work: static scan = S * max_steps; dynamic = S * cohort max;
  # unroll 3 rounds the cohort max (5) up to 6.
  assert ma["executed_steps"][0] == 7 * 5
  assert mb["executed_steps"][0] == 7 * 5
  assert mc["executed_steps"][0] == 7 * 6
  np.testing.assert_array_equal(ma["client_steps"], [18, 18])


def test_step_buckets_and_map_give_identical_results():
  fed = helpers.unequal_digits(sizes=SIZES)
  one, _ = _run(_sim(fed, step_buckets=1))
  sim3 = _sim(fed, step_buckets=3)
  assert sim3.step_buckets == 3
  three, m3 = _run(sim3)
  mapped, mm = _run(_sim(fed, parallelism="map"))
  _assert_same(one.server, three.server)
  _assert_same(one.server, mapped.server, exact=False)
  # Sorted steps 1 1 2 2 3 4 5 in groups of 3 (two zero-step pads first):
  # [0 0 1] [1 2 2] [3 4 5] -> 3 * (1 + 2 + 5) executed; map runs exactly 18.
  assert m3["executed_steps"][0] == 24
  assert mm["executed_steps"][0] == 18


@pytest.mark.parametrize("parallelism,expected", [("map", 4 * 18), ("vmap", 7 * 4 * 5)])
def test_executed_steps_count_every_local_loop_of_two_phase_training(parallelism,
                                                                       expected):
  # FedRep runs E_h = 2 head epochs then E_e = 2 extractor epochs, each a dynamic
  # loop over the client's own steps (1 3 5 2 2 1 4 per epoch): 4 × 18 active steps;
  # one vmapped group runs every client as long as the largest (4 × 5).
  fed = helpers.unequal_digits(sizes=SIZES)
  sim = _sim(fed, parallelism=parallelism, step_buckets=1,
             algorithm=("fedrep", {"head_epochs": 2, "extractor_epochs": 2}))
  _, m = _run(sim, rounds=1)
  assert m["client_steps"][0] == 4 * 18
  assert m["executed_steps"][0] == expected


def test_bucketed_cohort_order_is_restored_with_partial_participation():
  fed = helpers.unequal_digits(sizes=SIZES)
  a, ma = _run(_sim(fed, participation=0.6, step_buckets=1), rounds=3)
  b, mb = _run(_sim(fed, participation=0.6, step_buckets=2), rounds=3)
  np.testing.assert_array_equal(ma["clients/ids"], mb["clients/ids"])
  np.testing.assert_array_equal(ma["clients/steps"], mb["clients/steps"])
  np.testing.assert_allclose(ma["clients/loss"], mb["clients/loss"], rtol=1e-6)
  _assert_same(a.server, b.server)


def test_executed_steps_matches_hand_counts():
  steps = np.array([5, 1, 3, 3, 8])
  assert sim_lib.executed_steps(steps, 1) == 5 * 8
  assert sim_lib.executed_steps(steps, 5) == steps.sum()
  # sorted 1 3 3 5 8, one zero pad: [0 1 3] [3 5 8] -> 3 * 3 + 3 * 8
  assert sim_lib.executed_steps(steps, 2) == 33
  assert sim_lib.executed_steps(steps, 5, unroll=4) == 4 + 4 + 4 + 8 + 8
  assert sim_lib.executed_steps(steps, 2, dynamic=False, max_steps=10) == 50
  assert int(sim_lib.executed_steps(jax.numpy.asarray(steps), 2)) == 33


def test_auto_step_buckets_picks_fewest_groups_under_target():
  equal = np.full(12, 4)
  assert sim_lib.auto_step_buckets(equal, 12) == 1
  two_sizes = np.array([1] * 6 + [10] * 6)
  assert sim_lib.auto_step_buckets(two_sizes, 12) == 2
  assert sim_lib.auto_step_buckets(two_sizes, 12, max_buckets=1) == 1
  # Partial participation: expectation over random cohorts, still in range.
  g = sim_lib.auto_step_buckets(np.arange(1, 41), 10)
  assert 1 < g <= 8


def test_auto_parallelism_by_backend_and_model():
  cfg = base_config().model
  mlp = models.build(cfg, (8, 8, 1), 10)
  cfg.name, cfg.padding = "cnn_mnist", "SAME"
  cnn = models.build(cfg, (8, 8, 1), 10)
  assert sim_lib.is_convolutional(cnn) and not sim_lib.is_convolutional(mlp)
  assert sim_lib.auto_parallelism(cnn, "cpu") == "map"
  assert sim_lib.auto_parallelism(cnn, "gpu") == "vmap"
  assert sim_lib.auto_parallelism(mlp, "cpu") == "vmap"


def test_invalid_step_buckets_is_rejected():
  fed = helpers.unequal_digits(sizes=SIZES)
  with pytest.raises(ValueError, match="step_buckets=-1"):
    _sim(fed, step_buckets=-1)


def test_masked_training_matches_when_num_steps_exceeds_max_steps():
  fed = helpers.unequal_digits(sizes=SIZES)
  sim = _sim(fed)
  training = dataclasses.replace(sim.training, max_steps=2)
  loss_fn = tasks.supervised_loss(sim.model, sim.task)
  params = sim.init(0).server["params"]
  view = contract.ClientView(sim.arrays["x"], sim.arrays["y"],
                             sim.arrays["client_index"][2],
                             sim.arrays["client_size"][2], sim.arrays["num_steps"][2],
                             jax.numpy.asarray(2))
  key = jax.random.PRNGKey(0)
  out = [local_training.local_train(params, training.optimizer.init(params), view, key,
                                    0.1, loss_fn,
                                    dataclasses.replace(training, dynamic_steps=d))
         for d in (False, True)]
  # The scan stops at its static length; the dynamic loop is documented to run
  # the client's own step count (it has no static bound).
  assert float(out[0][2]["steps"]) == 2.0
  assert float(out[1][2]["steps"]) == float(sim.arrays["num_steps"][2]) > 2.0


def test_vmap_and_map_differ_only_as_documented():
  # Row 12: the module docstring says what differs: float rounding in losses and
  # the executed_steps cost measure; client_steps (the steps that train) agree.
  fed = helpers.unequal_digits(sizes=SIZES)
  sv, mv = _run(_sim(fed, parallelism="vmap", step_buckets=1), rounds=3)
  sm, mm = _run(_sim(fed, parallelism="map"), rounds=3)
  np.testing.assert_array_equal(mv["client_steps"], mm["client_steps"])
  assert np.all(mv["executed_steps"] >= mm["executed_steps"])
  assert np.any(mv["executed_steps"] > mm["executed_steps"])   # padding is counted
  np.testing.assert_allclose(mv["train_loss"], mm["train_loss"], rtol=1e-4)
  _assert_same(sv.server, sm.server, exact=False)
  doc = sim_lib.execution.__doc__
  assert "float rounding" in doc and "executed_steps" in doc and "client_steps" in doc
