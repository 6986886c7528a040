"""FedEL: budgeted tensor selection inside a sliding window, importance adjustment,
FedAvg reduction and vectorised = per-client loop."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac import algorithms
from fedfrac.algorithms import fedel
from tests import helpers
from tests import reference_loops as ref

CLIENT = {"batch_size": 16, "local_epochs": 2, "lr": 0.1}


def _sim(name="fedel", rounds=2, **kw):
  fed = helpers.unequal_digits()
  return helpers.simulation(fed, lambda ctx: algorithms.make(name, ctx, **kw), CLIENT,
                            rounds=rounds)


def test_select_tensors_is_greedy_by_importance_under_the_budget():
  importance = jnp.array([0.1, 0.5, 0.3, 0.1])
  costs = jnp.array([0.25, 0.5, 0.2, 0.05])
  everything = jnp.ones(4, bool)
  # r = 0.5: the most important tensor (cost 0.5) fills the budget alone
  assert fedel.select_tensors(importance, costs, everything, 0.5).tolist() == [
      False, True, False, False]
  # r = 0.3: tensor 1 does not fit; tensors 2 (0.2) then 3 (0.05) do, 0 would exceed
  assert fedel.select_tensors(importance, costs, everything, 0.3).tolist() == [
      False, False, True, True]
  # outside the window nothing is taken, however important and cheap
  window = jnp.array([True, False, True, True])
  assert not bool(fedel.select_tensors(importance, costs, window, 1.0)[1])


def test_windows_slide_and_cover_every_tensor():
  masks = [np.asarray(fedel.window_mask(t, 5, 2)) for t in range(3)]
  assert all(m.sum() == 2 for m in masks)
  assert masks[0].tolist() == [True, True, False, False, False]
  assert masks[1].tolist() == [False, False, True, True, False]
  assert np.any(masks, axis=0).all()
  assert np.asarray(fedel.window_mask(3, 5, 0)).all()


def test_budget_trains_only_selected_tensors_inside_the_window():
  sim = _sim(window=2, budget_steps=1.0)
  alg = sim.algorithm
  state = sim.init(0)
  payload = alg.broadcast(state.server)
  leaves0 = jax.tree.leaves(state.server["params"])
  costs = np.asarray(fedel.tensor_costs(state.server["params"]))
  window = np.asarray(fedel.window_mask(1, len(leaves0), 2))
  for k in range(sim.num_clients):
    view = ref.client_view(sim, k)
    msg, _, metrics = jax.jit(alg.client_update)(payload, None, view,
                                                 jax.random.PRNGKey(k), 1)
    selected = np.asarray(msg["selected"])
    assert selected.any()
    assert not (selected & ~window).any()                      # respects the window
    affordable = min(1.0 / max(int(sim.num_steps[k]), 1), 1.0)
    assert costs[selected].sum() <= affordable + 1e-6            # respects the budget
    for s, d in zip(selected, jax.tree.leaves(msg["delta"])):
      if s:
        assert float(jnp.abs(d).max()) > 0
      else:
        assert float(jnp.abs(d).max()) == 0.0                   # untouched tensor
  # server: tensors nobody trained stay exactly where they were
  final, _ = sim.run_chunk(state, 1)
  window0 = np.asarray(fedel.window_mask(0, len(leaves0), 2))
  for inside, a, b in zip(window0, leaves0, jax.tree.leaves(final.server["params"])):
    if not inside:
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_full_global_importance_decides_the_selection():
  sim = _sim(window=0, budget_steps=1.0, beta=1.0)
  alg = sim.algorithm
  state = sim.init(0)
  payload = alg.broadcast(state.server)
  num_tensors = len(jax.tree.leaves(payload["params"]))
  costs = np.asarray(fedel.tensor_costs(payload["params"]))
  favourite = int(np.argmin(costs))
  payload = dict(payload, importance=jnp.zeros(num_tensors).at[favourite].set(1.0))
  view = ref.client_view(sim, 2)
  msg, _, _ = jax.jit(alg.client_update)(payload, None, view, jax.random.PRNGKey(0), 0)
  assert bool(msg["selected"][favourite])


def test_whole_window_and_unlimited_budget_is_fedavg():
  a, b = _sim(window=0, budget_steps=0.0), _sim("fedavg")
  fa, _ = a.run_chunk(a.init(3), 2)
  fb, _ = b.run_chunk(b.init(3), 2)
  ref.assert_trees_close(fa.server["params"], fb.server["params"])


def test_vectorised_client_update_equals_per_client_loop():
  sim = _sim(window=3, budget_steps=2.0)
  alg = sim.algorithm
  state = sim.init(0)
  payload = alg.broadcast(state.server)
  views = [ref.client_view(sim, k) for k in range(sim.num_clients)]
  keys = jax.random.split(jax.random.PRNGKey(5), sim.num_clients)
  stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *views)
  stacked = stacked._replace(x=views[0].x, y=views[0].y)
  axes = views[0]._replace(x=None, y=None, index=0, size=0, num_steps=0, client_id=0)
  vm, _, _ = jax.jit(jax.vmap(alg.client_update, in_axes=(None, None, axes, 0, None)))(
      payload, None, stacked, keys, 1)
  one = jax.jit(alg.client_update)
  for k in range(sim.num_clients):
    msg, _, _ = one(payload, None, views[k], keys[k], 1)
    ref.assert_trees_close(jax.tree.map(lambda x: x[k], vm), msg)


def test_bad_window_is_rejected():
  with pytest.raises(ValueError, match=r"window=-1: tensors per sliding window"):
    algorithms.hparams("fedel", {"window": -1})
