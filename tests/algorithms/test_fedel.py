"""FedEL: budgeted tensor selection inside a sliding window, importance adjustment,
FedAvg reduction and vectorised = per-client loop."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac import algorithms
from fedfrac.algorithms import fedel
from fedfrac.ops import system as system_lib
from tests import helpers
from tests import reference_loops as ref

CLIENT = {"batch_size": 16, "local_epochs": 2, "lr": 0.1}


def _sim(name="fedel", rounds=2, system=None, **kw):
  fed = helpers.unequal_digits()
  return helpers.simulation(fed, lambda ctx: algorithms.make(name, ctx, **kw), CLIENT,
                            rounds=rounds, system=system)


# Sizes 13, 40, 75, 22 -> τ_k = 2, 6, 10, 4 steps; clients 1 and 2 run at speed
# 1/4, so with T = 5 they need 24 and 40 time units for full steps (budget ⌊T·s⌋ = 1).
SLOW = system_lib.SystemConfig(speed="groups", group_speeds=(1.0, 0.25),
                               groups=(0, 1, 1, 0), deadline=5.0, policy="drop")


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


def test_drop_deadline_keeps_slow_clients_on_a_subset_of_tensors():
  fedavg = _sim("fedavg", rounds=2, system=SLOW)
  _, ma = fedavg.run_chunk(fedavg.init(0), 2)
  np.testing.assert_array_equal(np.asarray(ma["system/dropped"]), 2)   # FedAvg loses them
  np.testing.assert_array_equal(np.asarray(ma["clients/mask"])[:, 1:3], False)

  sim = _sim("fedel", rounds=2, system=SLOW)
  assert sim.algorithm.elastic
  _, m = sim.run_chunk(sim.init(0), 2)
  m = jax.tree.map(np.asarray, m)
  np.testing.assert_array_equal(m["clients/ids"], [[0, 1, 2, 3]] * 2)
  np.testing.assert_array_equal(m["system/dropped"], 0)                # FedEL keeps them
  np.testing.assert_array_equal(m["clients/mask"], True)
  cost = m["clients/step_cost"]
  np.testing.assert_array_equal(cost[:, [0, 3]], 1.0)                   # fast: full steps
  assert np.all(cost[:, 1:3] > 0) and np.all(cost[:, 1:3] < 1)          # slow: part
  assert np.all(m["clients/update_norm"][:, 1:3] > 0)
  needed = np.asarray(sim.num_steps)
  assert np.all(needed[1:3] * cost[:, 1:3] <= 1.0 + 1e-5)              # τ·c ≤ ⌊T·s⌋ = 1
  np.testing.assert_array_equal(m["system/steps_run"], needed.sum())   # all steps run
  np.testing.assert_allclose(m["system/cost_steps"], (cost * needed).sum(axis=1),
                             rtol=1e-5)
  np.testing.assert_array_equal(m["system/stragglers"], 2)
  times = cost * needed / np.array([1.0, 0.25, 0.25, 1.0])
  np.testing.assert_allclose(m["system/wall_time"], times.max(axis=1), rtol=1e-5)
  assert np.all(m["system/wall_time"] <= 5.0 * (1 + 1e-5))

  # the slow client's upload: nonzero delta on the selected tensors only
  state = sim.init(0)
  payload = sim.algorithm.broadcast(state.server)
  view = ref.client_view(sim, 1)._replace(step_budget=jnp.asarray(1, jnp.int32))
  msg, _, metrics = jax.jit(sim.algorithm.client_update)(payload, None, view,
                                                         jax.random.PRNGKey(1), 0)
  selected = np.asarray(msg["selected"])
  assert 0 < selected.sum() < selected.size
  for chosen, d in zip(selected, jax.tree.leaves(msg["delta"])):
    assert (float(jnp.abs(d).max()) > 0) == bool(chosen)
  costs = np.asarray(fedel.tensor_costs(payload["params"]))
  np.testing.assert_allclose(float(metrics["step_cost"]), costs[selected].sum(), rtol=1e-6)


def test_client_that_cannot_afford_any_tensor_is_dropped():
  # speed 1/4 and T = 3: budget ⌊0.75⌋ = 0 -> nothing affordable
  system = SLOW._replace(deadline=3.0)
  sim = _sim("fedel", rounds=1, system=system)
  _, m = sim.run_chunk(sim.init(0), 1)
  m = jax.tree.map(np.asarray, m)
  np.testing.assert_array_equal(m["clients/mask"][0], [True, False, False, True])
  np.testing.assert_array_equal(m["clients/step_cost"][0, 1:3], 0.0)
  np.testing.assert_array_equal(m["clients/update_norm"][0, 1:3], 0.0)
  np.testing.assert_array_equal(m["system/dropped"], 2)
  np.testing.assert_array_equal(m["system/wall_time"], 3.0)        # drop: the round lasts T


@pytest.mark.parametrize("policy,window", [("drop", 0), ("partial", None)])
def test_equal_speeds_and_generous_deadline_is_fedavg(policy, window):
  system = system_lib.SystemConfig(speed="equal", deadline=1e6, policy=policy)
  kw = {} if window is None else {"window": window}
  a, b = _sim(system=system, **kw), _sim("fedavg", system=system)
  fa, ma = a.run_chunk(a.init(3), 2)
  fb, mb = b.run_chunk(b.init(3), 2)
  ref.assert_trees_close(fa.server["params"], fb.server["params"])
  for k in ("system/wall_time", "system/steps_run", "system/cost_steps", "system/dropped"):
    np.testing.assert_allclose(np.asarray(ma[k]), np.asarray(mb[k]), err_msg=k)


def test_default_window_is_one_layer():
  assert algorithms.hparams("fedel", {})["window"] == 2


def test_bad_window_is_rejected():
  with pytest.raises(ValueError, match=r"window=-1: tensors per sliding window"):
    algorithms.hparams("fedel", {"window": -1})
