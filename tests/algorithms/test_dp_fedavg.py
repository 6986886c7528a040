"""DP-FedAvg: reduction to FedAvg, the noise it adds, and ε reported every round."""
from __future__ import annotations

import math

import jax
import numpy as np
import pytest

import fedfrac as ff
from fedfrac import algorithms
from fedfrac import config as config_lib
from fedfrac.ops import dp
from tests import helpers


def _leaves(tree):
  return [np.asarray(x) for x in jax.tree.leaves(tree)]


def test_no_noise_and_a_huge_clip_is_fedavg():
  # Equal client sizes: FedAvg's n_k weights are uniform, like DP-FedAvg's.
  fed = helpers.unequal_digits(sizes=(24,) * 5)
  fedavg = helpers.simulation(fed, lambda ctx: algorithms.make("fedavg", ctx),
                              {"batch_size": 16}, rounds=2)
  dpavg = helpers.simulation(
      fed, lambda ctx: algorithms.make("dp_fedavg", ctx, noise_multiplier=0.0,
                                       clip_norm=1e6), {"batch_size": 16}, rounds=2)
  a, _ = fedavg.run_chunk(fedavg.init(0), 2)
  b, m = dpavg.run_chunk(dpavg.init(0), 2)
  for x, y in zip(_leaves(a.server["params"]), _leaves(b.server["params"])):
    np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(m["server/clip_fraction"], 0.0)
  np.testing.assert_array_equal(m["server/noise_std"], 0.0)


def test_noise_has_std_sigma_clip_over_cohort_and_updates_are_clipped():
  # A tiny clip makes the clipped sum negligible: the step is the noise, whose
  # std is σ·S / D (D = cohort size) times the server learning rate.
  fed = helpers.unequal_digits(sizes=(24,) * 4)
  sigma, clip, lr = 500.0, 1e-3, 0.5
  sim = helpers.simulation(
      fed, lambda ctx: algorithms.make("dp_fedavg", ctx, noise_multiplier=sigma,
                                       clip_norm=clip, server_lr=lr),
      {"batch_size": 16}, rounds=1)
  state = sim.init(0)
  new, m = sim.run_chunk(state, 1)
  step = np.concatenate([(b - a).ravel() for a, b in
                         zip(_leaves(state.server["params"]), _leaves(new.server["params"]))])
  want = lr * sigma * clip / 4
  assert abs(step.std() / want - 1) < 0.06 and abs(step.mean()) < 0.1 * want
  assert float(m["server/clip_fraction"][0]) == 1.0
  assert float(m["server/noise_std"][0]) == pytest.approx(sigma * clip / 4, rel=1e-6)


def _dp_config(rounds=4, **options):
  c = helpers.tiny_config(rounds=rounds, eval_every=2, participation=0.5)
  c.methods = type(c.methods)(dict(dp=dict(name="dp_fedavg", **options)))
  return c


def test_epsilon_is_reported_every_round_and_increases():
  c = _dp_config(noise_multiplier=1.2, clip_norm=1.0, delta=1e-4)
  res = ff.run(c)
  rows = res.round_rows
  assert [r["round"] for r in rows] == [1, 2, 3, 4]
  eps = np.asarray([r["dp_epsilon"] for r in rows])
  assert np.all(np.diff(eps) > 0) and eps[0] > 0
  q = 3 / 6                           # cohort ceil(0.5·6) = 3 of 6 clients
  want = [dp.dp_epsilon(1.2, q, t, 1e-4) for t in range(1, 5)]
  np.testing.assert_allclose(eps, want, rtol=1e-9)
  assert [r["dp_epsilon"] for r in res.rows] == [eps[1], eps[3]]   # evaluated rows too
  summary = res.summary()["methods"]["dp"]
  assert summary["mean"]["dp_epsilon"]["mean"] == pytest.approx(eps[-1])
  # Without noise there is no privacy: ε = inf, and the run is not marked diverged.
  res = ff.run(_dp_config(rounds=2, noise_multiplier=0.0))
  assert all(math.isinf(r["dp_epsilon"]) for r in res.round_rows)
  assert res.summary()["methods"]["dp"]["seeds"]["0"]["status"] == "ok"


@pytest.mark.parametrize("option,value,match", [
    ("noise_multiplier", -1.0, "methods.dp.noise_multiplier=-1.0"),
    ("clip_norm", 0.0, "methods.dp.clip_norm=0.0"),
    ("delta", 1.0, "methods.dp.delta=1.0"),
    ("accountant", "moments", "methods.dp.accountant='moments'"),
])
def test_bad_options_are_rejected(option, value, match):
  with pytest.raises(config_lib.ConfigError, match=match):
    config_lib.validate(_dp_config(**{option: value}))
