"""FDSE (our reading): the feature-statistics consistency term changes the update and
shrinks the gap to the global model's statistics, λ = 0 is FedAvg, and the vmapped
client update equals a per-client loop."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from fedfrac import algorithms
from fedfrac.algorithms import fdse, trees
from tests import helpers
from tests import reference_loops as ref

CLIENT = {"batch_size": 16, "local_epochs": 3, "lr": 0.2}


def _sim(name="fdse", rounds=2, client=None, **kw):
  fed = helpers.unequal_digits()
  return helpers.simulation(fed, lambda ctx: algorithms.make(name, ctx, **kw),
                            client or CLIENT, rounds=rounds)


def test_consistency_term_is_zero_at_the_global_model_and_positive_elsewhere():
  feats = jax.random.normal(jax.random.PRNGKey(0), (8, 5))
  mask = jnp.arange(8) < 6
  assert float(fdse.consistency(feats, feats, mask)) == 0.0
  assert float(fdse.consistency(feats + 1.0, feats, mask)) > 0.0
  # padded rows do not count
  padded = feats.at[6:].set(100.0)
  assert float(fdse.consistency(padded, feats, mask)) == 0.0


def test_consistency_shrinks_the_feature_statistics_gap():
  gaps = {}
  for lam in (0.0, 1.0):
    sim = _sim(lam=lam, client=dict(CLIENT, lr=0.05))   # small steps: the variance
    # term is stiff, and at lr 0.2 with λ = 1 local training overshoots
    alg = sim.algorithm
    state = sim.init(0)
    w = alg.broadcast(state.server)
    view = ref.client_view(sim, 2)
    delta, _, _ = jax.jit(alg.client_update)(w, None, view, jax.random.PRNGKey(0), 0)
    local = trees.tree_add(w, delta)
    rows = view.index[:view.size]
    x = view.x[rows]
    _, f_local = sim.model.apply(local, x, return_features=True)
    _, f_glob = sim.model.apply(w, x, return_features=True)
    gaps[lam] = float(fdse.consistency(f_local, f_glob, jnp.ones(x.shape[0], bool)))
  assert gaps[1.0] < 0.5 * gaps[0.0]


def test_lambda_zero_is_fedavg():
  a, b = _sim(lam=0.0), _sim("fedavg")
  fa, _ = a.run_chunk(a.init(3), 2)
  fb, _ = b.run_chunk(b.init(3), 2)
  ref.assert_trees_close(fa.server["params"], fb.server["params"])


def test_vectorised_client_update_equals_per_client_loop():
  sim = _sim(lam=1.0)
  alg = sim.algorithm
  state = sim.init(0)
  payload = alg.broadcast(state.server)
  views = [ref.client_view(sim, k) for k in range(sim.num_clients)]
  keys = jax.random.split(jax.random.PRNGKey(5), sim.num_clients)
  stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *views)._replace(x=views[0].x,
                                                                      y=views[0].y)
  axes = views[0]._replace(x=None, y=None, index=0, size=0, num_steps=0, client_id=0)
  vm, _, _ = jax.jit(jax.vmap(alg.client_update, in_axes=(None, None, axes, 0, None)))(
      payload, None, stacked, keys, 1)
  one = jax.jit(alg.client_update)
  for k in range(sim.num_clients):
    delta, _, _ = one(payload, None, views[k], keys[k], 1)
    ref.assert_trees_close(jax.tree.map(lambda x: x[k], vm), delta)
