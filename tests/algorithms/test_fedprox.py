"""FedProx: the vectorised proximal local objective equals a per-client loop."""
from __future__ import annotations

import jax.numpy as jnp
import pytest

from fedfrac import algorithms
from tests import helpers
from tests import reference_loops as ref


def test_fedprox_equals_per_client_loop():
  mu = 0.5
  fed = helpers.unequal_digits()
  sim = helpers.simulation(fed, lambda ctx: algorithms.make("fedprox", ctx, mu=mu),
                           {"batch_size": 16, "local_epochs": 2, "lr": 0.1}, rounds=2)
  assert len(set(sim.num_steps.tolist())) > 1
  state = sim.init(1)
  final, _ = sim.run_chunk(state, 2)
  grad = ref.supervised_grad(sim)
  w = state.server["params"]
  for t in range(2):
    deltas = []
    for k in range(sim.num_clients):
      # ∇F_k(v) + μ (v − w_t)   (Li et al. 2020, eq. (2))
      y, _ = ref.local_sgd(sim, w, k, t, state.key, grad,
                           hook=lambda g, v, w=w: ref.tree_map(
                               lambda gi, vi, wi: gi + mu * (vi - wi), g, v, w))
      deltas.append(ref.tree_map(jnp.subtract, y, w))
    p, _ = ref.cohort_weights(sim, list(range(sim.num_clients)), "samples")
    w = ref.tree_map(jnp.add, w, ref.tree_sum(p, deltas))
  ref.assert_trees_close(final.server["params"], w)


def test_negative_mu_is_rejected():
  with pytest.raises(ValueError, match=r"mu=-0.1: proximal weight"):
    algorithms.hparams("fedprox", {"mu": -0.1})
