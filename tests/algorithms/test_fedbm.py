"""FedBM: the client starts from and is evaluated on the global/local balance, β = 1
is FedAvg, and the vmapped client update equals a per-client loop."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from fedfrac import algorithms
from fedfrac.algorithms import trees
from tests import helpers
from tests import reference_loops as ref

CLIENT = {"batch_size": 16, "local_epochs": 1, "lr": 0.1}


def _sim(name="fedbm", rounds=2, **kw):
  fed = helpers.unequal_digits()
  return helpers.simulation(fed, lambda ctx: algorithms.make(name, ctx, **kw), CLIENT,
                            rounds=rounds)


def test_client_starts_from_and_is_evaluated_on_the_balanced_model():
  beta = 0.25
  sim = _sim(beta=beta)
  alg = sim.algorithm
  state = sim.init(0)
  w = alg.broadcast(state.server)
  theta = jax.tree.map(lambda x: x + 0.3, w)                 # a client model ≠ w
  view = ref.client_view(sim, 1)._replace(num_steps=jnp.asarray(0))   # no training
  delta, new_state, _ = jax.jit(alg.client_update)(w, theta, view, jax.random.PRNGKey(0), 0)
  balanced = jax.tree.map(lambda g, l: beta * g + (1 - beta) * l, w, theta)
  ref.assert_trees_close(new_state, balanced)
  ref.assert_trees_close(delta, trees.tree_sub(balanced, w))   # (1 − β)(θ − w)
  ref.assert_trees_close(alg.eval_params(state.server, theta), balanced)
  # with training, the kept model is the trained balanced model: θ' − w = Δ
  view = ref.client_view(sim, 1)
  delta, new_state, _ = jax.jit(alg.client_update)(w, theta, view, jax.random.PRNGKey(0), 0)
  ref.assert_trees_close(trees.tree_add(w, delta), new_state)
  assert float(trees.tree_norm(trees.tree_sub(new_state, balanced))) > 0


def test_beta_one_is_fedavg():
  a, b = _sim(beta=1.0), _sim("fedavg")
  fa, _ = a.run_chunk(a.init(3), 2)
  fb, _ = b.run_chunk(b.init(3), 2)
  ref.assert_trees_close(fa.server["params"], fb.server["params"])


def test_vectorised_client_update_equals_per_client_loop():
  sim = _sim(beta=0.5)
  alg = sim.algorithm
  state = sim.init(0)
  payload = alg.broadcast(state.server)
  clients = jax.tree.map(lambda x: x + 0.01 * jnp.arange(x.shape[0]).reshape(
      (-1,) + (1,) * (x.ndim - 1)), state.clients)
  views = [ref.client_view(sim, k) for k in range(sim.num_clients)]
  keys = jax.random.split(jax.random.PRNGKey(5), sim.num_clients)
  stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *views)._replace(x=views[0].x,
                                                                      y=views[0].y)
  axes = views[0]._replace(x=None, y=None, index=0, size=0, num_steps=0, client_id=0)
  vm = jax.jit(jax.vmap(alg.client_update, in_axes=(None, 0, axes, 0, None)))(
      payload, clients, stacked, keys, 1)
  one = jax.jit(alg.client_update)
  for k in range(sim.num_clients):
    delta, new_state, _ = one(payload, jax.tree.map(lambda x: x[k], clients), views[k],
                              keys[k], 1)
    ref.assert_trees_close(jax.tree.map(lambda x: x[k], vm[0]), delta)
    ref.assert_trees_close(jax.tree.map(lambda x: x[k], vm[1]), new_state)
