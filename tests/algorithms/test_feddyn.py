"""FedDyn: client and server state updates against a per-client Python loop."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac import algorithms
from tests import helpers
from tests import reference_loops as ref


def reference_feddyn(sim, state, ids, alpha, weighting):
  """Acar et al. 2021, Alg. 1, as plain Python loops."""
  grad = ref.supervised_grad(sim)
  theta = state.server["params"]
  h = jax.tree.map(jnp.zeros_like, theta)
  h_k = [h] * sim.num_clients
  for t, cohort in enumerate(ids):
    deltas = []
    for k in cohort:
      # ∇L_k(v) − h_k + α (v − θ^{t−1})
      hook = lambda g, v, k=k: ref.tree_map(
          lambda gi, hi, vi, wi: gi - hi + alpha * (vi - wi), g, h_k[k], v, theta)
      y, _ = ref.local_sgd(sim, theta, k, t, state.key, grad, hook=hook)
      d = ref.tree_map(jnp.subtract, y, theta)
      h_k[k] = ref.tree_map(lambda a, b: a - alpha * b, h_k[k], d)
      deltas.append(d)
    p, q = ref.cohort_weights(sim, cohort, weighting)
    h = ref.tree_map(lambda a, b: a - alpha * b, h, ref.tree_sum(q, deltas))
    theta = ref.tree_map(lambda w, d, hh: w + d - hh / alpha, theta,
                         ref.tree_sum(p, deltas), h)
  return theta, h, h_k


def test_default_weighting_is_the_papers_uniform_one():
  # Alg. 1: h^t = h^{t−1} − α (1/m) Σ Δ_k, θ^t = (1/|P_t|) Σ θ_k^t − h^t/α.
  assert algorithms.hparams("feddyn")["weighting"] == "uniform"


# Both weightings share scaffold.cohort_weights (tested with both in
# tests/algorithms/test_scaffold.py); the default (None) is the uniform one.
@pytest.mark.parametrize("weighting", [None, "samples"])
def test_feddyn_state_updates_equal_per_client_loop(weighting):
  alpha = 0.1
  fed = helpers.unequal_digits()
  options = {} if weighting is None else {"weighting": weighting}
  sim = helpers.simulation(
      fed, lambda ctx: algorithms.make("feddyn", ctx, alpha=alpha, **options),
      {"batch_size": 16, "local_epochs": 1, "lr": 0.1}, rounds=3, participation=0.5)
  state = sim.init(4)
  final, metrics = sim.run_chunk(state, 3)
  ids = np.asarray(metrics["clients/ids"]).tolist()
  weighting = weighting or "uniform"
  theta, h, h_k = reference_feddyn(sim, state, ids, alpha, weighting)
  ref.assert_trees_close(final.server["params"], theta)
  ref.assert_trees_close(final.server["h"], h)
  for k in range(sim.num_clients):
    ref.assert_trees_close(jax.tree.map(lambda a: a[k], final.clients["h"]), h_k[k])
  # h is the population average of the h_k (with the chosen shares).
  n = np.asarray(sim.data.client_size, np.float64)
  share = n / n.sum() if weighting == "samples" else np.full(4, 0.25)
  avg = jax.tree.map(lambda a: jnp.tensordot(jnp.asarray(share, a.dtype), a, 1),
                     final.clients["h"])
  ref.assert_trees_close(final.server["h"], avg, atol=1e-6)
  assert float(metrics["server/h_norm"][-1]) > 0


def test_alpha_must_be_positive():
  with pytest.raises(ValueError, match="alpha=0: regularisation"):
    algorithms.hparams("feddyn", {"alpha": 0})
