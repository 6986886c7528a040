"""Each baseline at its neutral setting is FedAvg (docs/design.md §3.5)."""
from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

from fedfrac import algorithms
from tests import helpers
from tests import reference_loops as ref

# Step mode: every client runs exactly 4 steps (equal τ_k, as FedNova's reduction
# needs); unequal client sizes keep the sample weights unequal.
CLIENT = {"batch_size": 16, "local_steps": 4, "lr": 0.1, "optimizer": "sgd"}
SEED = 3


@functools.lru_cache(maxsize=None)
def _fed():
  return helpers.unequal_digits()


def _trajectory(name, **options):
  """Evaluated params after rounds 1 and 2 (one compiled 1-round chunk run twice)."""
  sim = helpers.simulation(_fed(), lambda ctx: algorithms.make(name, ctx, **options),
                           CLIENT, rounds=2)
  state = sim.init(SEED)
  out = []
  for _ in range(2):
    state, metrics = sim.run_chunk(state, 1)
    out.append(sim.algorithm.eval_params(state.server, None))
  np.testing.assert_array_equal(metrics["clients/steps"][0], np.full(4, 4.0))
  return out


@functools.lru_cache(maxsize=None)
def _fedavg():
  return _trajectory("fedavg")


def _differs(a, b, tol=1e-4):
  return any(float(np.max(np.abs(np.asarray(x) - np.asarray(y)))) > tol
             for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


@pytest.mark.parametrize("name,options", [
    ("fedprox", {"mu": 0.0}),
    ("fedavgm", {"momentum": 0.0, "server_lr": 1.0}),
    ("fedadam", {"server_opt": "sgd", "server_lr": 1.0}),
    ("fednova", {}),
])
def test_neutral_setting_equals_fedavg(name, options):
  got = _trajectory(name, **options)
  for g, w in zip(got, _fedavg()):
    ref.assert_trees_close(g, w, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name", ["scaffold", "moon"])
def test_first_round_equals_fedavg_then_departs(name):
  """SCAFFOLD's control variates and MOON's previous-model term are zero /
  gradient-free in round 0, so round 0 is FedAvg; round 1 is not. SCAFFOLD is
  weighted by n_k as FedAvg is (its default, Alg. 1, weights the sampled clients
  uniformly)."""
  got = _trajectory(name, **({"weighting": "samples"} if name == "scaffold" else {}))
  want = _fedavg()
  ref.assert_trees_close(got[0], want[0], atol=1e-6, rtol=1e-5)
  assert _differs(got[1], want[1])
