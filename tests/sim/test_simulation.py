"""The vectorised engine against a plain per-client Python loop, masking, keys."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac import algorithms
from fedfrac import sim as sim_lib
from fedfrac.algorithms import contract, local_training, tasks
from tests import helpers


def _fedavg(ctx):
  return algorithms.make("fedavg", ctx)


def reference_fedavg_round(sim, params, t, root_key):
  """One FedAvg round written as plain Python loops over clients and steps.

  Uses the engine's documented key derivation and batch sampler, but none of its
  scan / vmap / masking machinery.
  """
  training = sim.training
  data = sim.data
  loss_fn = tasks.supervised_loss(sim.model, sim.task)
  grad_fn = jax.jit(jax.grad(lambda p, x, y, m, k: loss_fn(p, x, y, m, k)[0]))
  key_t = jax.random.fold_in(root_key, t)
  client_root = jax.random.fold_in(key_t, sim_lib.CLIENT)
  lr = training.lr_schedule(t)
  deltas, weights = [], []
  for k in range(data.num_clients):
    key = jax.random.fold_in(client_root, k)
    batch_key, step_key = jax.random.split(key)
    view = contract.ClientView(jnp.asarray(data.x_train), jnp.asarray(data.y_train),
                               jnp.asarray(data.client_index[k]),
                               jnp.asarray(data.client_size[k]),
                               jnp.asarray(sim.num_steps[k]), jnp.asarray(k))
    perms = None
    if training.local_steps is None:
      perms = local_training.epoch_permutations(batch_key, view.size, view.index.shape[0],
                                                training.local_epochs, training.batch_size)
    p = params
    opt_state = training.optimizer.init(p)
    for h in range(int(sim.num_steps[k])):
      pos, mask = local_training.batch_positions(view, batch_key, h, training, perms)
      rows = view.index[pos]
      g = grad_fn(p, view.x[rows], view.y[rows], mask, jax.random.fold_in(step_key, h))
      updates, opt_state = training.optimizer.update(g, opt_state, p)
      p = jax.tree.map(lambda a, u: a + lr * u, p, updates)
    deltas.append(jax.tree.map(jnp.subtract, p, params))
    weights.append(float(data.client_size[k]))
  w = np.asarray(weights) / np.sum(weights)
  mean = jax.tree.map(lambda *d: sum(wi * di for wi, di in zip(w, d)), *deltas)
  return jax.tree.map(jnp.add, params, mean)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_vmapped_engine_equals_per_client_loop(optimizer):
  fed = helpers.unequal_digits()
  lr = 0.1 if optimizer == "sgd" else 0.01
  sim = helpers.simulation(fed, _fedavg, {"optimizer": optimizer, "lr": lr,
                                          "batch_size": 16, "local_epochs": 2})
  state = sim.init(0)
  assert len(set(sim.num_steps.tolist())) > 1, "client step counts must differ"
  params = state.server["params"]
  for t in range(2):
    params = reference_fedavg_round(sim, params, t, state.key)
  state, _ = sim.run_chunk(state, 2)
  for got, want in zip(jax.tree.leaves(state.server["params"]), jax.tree.leaves(params)):
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)


def test_masked_steps_leave_params_and_optimizer_state_bit_identical():
  fed = helpers.unequal_digits()
  sim = helpers.simulation(fed, _fedavg, {"optimizer": "adam", "lr": 0.01,
                                          "batch_size": 16})
  training = sim.training
  params = sim.init(0).server["params"]
  loss_fn = tasks.supervised_loss(sim.model, sim.task)
  view = contract.ClientView(sim.arrays["x"], sim.arrays["y"],
                             sim.arrays["client_index"][0],
                             sim.arrays["client_size"][0], jnp.asarray(1, jnp.int32),
                             jnp.asarray(0))
  key = jax.random.PRNGKey(3)
  opt0 = training.optimizer.init(params)
  import dataclasses
  one = dataclasses.replace(training, max_steps=1)
  many = dataclasses.replace(training, max_steps=6)
  p1, o1, _ = local_training.local_train(params, opt0, view, key, 0.01, loss_fn, one)
  p6, o6, m6 = local_training.local_train(params, opt0, view, key, 0.01, loss_fn, many)
  for a, b in zip(jax.tree.leaves((p1, o1)), jax.tree.leaves((p6, o6))):
    np.testing.assert_array_equal(a, b)
  assert float(m6["steps"]) == 1.0
  # A client with zero active steps keeps its params and state exactly.
  idle = view._replace(num_steps=jnp.asarray(0, jnp.int32))
  p0, o0, _ = local_training.local_train(params, opt0, idle, key, 0.01, loss_fn, many)
  for a, b in zip(jax.tree.leaves((p0, o0)), jax.tree.leaves((params, opt0))):
    np.testing.assert_array_equal(a, b)


def test_map_parallelism_equals_vmap():
  fed = helpers.unequal_digits()
  cfg = {"batch_size": 16}
  a = helpers.simulation(fed, _fedavg, cfg, parallelism="vmap")
  b = helpers.simulation(fed, _fedavg, cfg, parallelism="map")
  sa, _ = a.run_chunk(a.init(1), 2)
  sb, _ = b.run_chunk(b.init(1), 2)
  for x, y in zip(jax.tree.leaves(sa.server), jax.tree.leaves(sb.server)):
    np.testing.assert_allclose(x, y, atol=1e-6)


def test_chunk_size_and_cohort_order_do_not_change_results():
  fed = helpers.unequal_digits(sizes=(13, 40, 75, 22, 30, 51))
  cfg = {"batch_size": 16}
  base_sim = helpers.simulation(fed, _fedavg, cfg, rounds=4, participation=0.5)
  s_all, m_all = base_sim.run_chunk(base_sim.init(2), 4)
  s = base_sim.init(2)
  for _ in range(2):
    s, _ = base_sim.run_chunk(s, 2)
  perm_sim = helpers.simulation(fed, _fedavg, cfg, rounds=4, participation=0.5,
                                cohort_permutation_seed=5)
  s_perm, m_perm = perm_sim.run_chunk(perm_sim.init(2), 4)
  assert base_sim.cohort == 3
  # Same cohorts drawn, presented in a different order.
  np.testing.assert_array_equal(np.sort(m_perm["clients/ids"], 1), m_all["clients/ids"])
  assert not np.array_equal(m_perm["clients/ids"], m_all["clients/ids"])
  for x, y, z in zip(jax.tree.leaves(s_all.server), jax.tree.leaves(s.server),
                     jax.tree.leaves(s_perm.server)):
    np.testing.assert_array_equal(x, y)
    np.testing.assert_allclose(x, z, atol=1e-6)


def test_partial_participation_cohort_size_and_sampling():
  fed = helpers.unequal_digits(sizes=(20,) * 7)
  sim = helpers.simulation(fed, _fedavg, {"batch_size": 16}, rounds=5, participation=0.3)
  assert sim.cohort == 3   # max(ceil(0.3 * 7), 1)
  _, m = sim.run_chunk(sim.init(0), 5)
  ids = np.asarray(m["clients/ids"])
  assert ids.shape == (5, 3)
  assert all(len(set(row)) == 3 for row in ids.tolist())
  assert len({tuple(r) for r in ids.tolist()}) > 1   # cohorts vary across rounds
  assert sim_lib.cohort_size(0.01, 7) == 1


def test_step_mode_runs_exactly_h_steps():
  fed = helpers.unequal_digits()
  sim = helpers.simulation(fed, _fedavg, {"local_steps": 5, "batch_size": 16})
  assert sim.training.max_steps == 5
  _, m = sim.run_chunk(sim.init(0), 1)
  np.testing.assert_array_equal(m["clients/steps"][0], np.full(4, 5.0))


def test_epoch_mode_step_counts_and_masked_work():
  fed = helpers.unequal_digits(sizes=(13, 40, 75, 22))
  sim = helpers.simulation(fed, _fedavg, {"batch_size": 16, "local_epochs": 2})
  np.testing.assert_array_equal(sim.num_steps, 2 * np.ceil(np.array([13, 40, 75, 22]) / 16))
  _, m = sim.run_chunk(sim.init(0), 1)
  np.testing.assert_array_equal(m["clients/steps"][0], sim.num_steps)


def test_churn_availability_masks_unavailable_clients():
  fed = helpers.unequal_digits(sizes=(20,) * 8)
  sim = helpers.simulation(fed, _fedavg, {"batch_size": 16}, rounds=6,
                           participation=0.5, availability=(0.5, 0.2))
  _, m = sim.run_chunk(sim.init(0), 6)
  cohort = np.asarray(m["cohort"])
  assert cohort[0] == 4 and cohort.min() < 4   # churn leaves slots empty


def _rounds_one_by_one(sim, rounds, seed=0):
  """(A_t [K] bool, metrics of round t) for each round, one round per chunk."""
  state, out = sim.init(seed), []
  for _ in range(rounds):
    state, m = sim.run_chunk(state, 1)
    out.append((np.asarray(state.available),
                jax.tree.map(lambda x: np.asarray(x[0]), m)))
  return out


@pytest.mark.parametrize("participation", [0.3, 0.5])
def test_churn_cohort_is_ceil_c_times_available_clients(participation):
  # FO-RI-FedAvg paper §IV-N: S_t ⊆ A_t with |S_t| = max(ceil(C·|A_t|), 1).
  fed = helpers.unequal_digits(sizes=(12,) * 10)
  sim = helpers.simulation(fed, _fedavg, {"batch_size": 16}, rounds=12,
                           participation=participation, availability=(0.3, 0.3))
  assert sim.cohort == int(np.ceil(participation * 10))     # static slots
  seen = set()
  for available, m in _rounds_one_by_one(sim, 12):
    n_avail = int(available.sum())
    ids = m["clients/ids"][m["clients/mask"]]
    assert int(m["cohort"]) == max(int(np.ceil(participation * n_avail - 1e-9)), 1) \
        or n_avail == 0
    assert available[ids].all() and len(set(ids.tolist())) == len(ids)
    seen.add(n_avail)
  assert len(seen - {0, 10}) >= 2      # the check ran at several |A_t| < K


def test_churn_cohort_slots_rule_fills_ceil_c_k_slots():
  fed = helpers.unequal_digits(sizes=(12,) * 10)
  sim = helpers.simulation(fed, _fedavg, {"batch_size": 16}, rounds=10,
                           participation=0.5, availability=(0.3, 0.3),
                           cohort_rule="slots")
  for available, m in _rounds_one_by_one(sim, 10):
    assert int(m["cohort"]) == min(5, int(available.sum()))
  with pytest.raises(ValueError, match="cohort_rule='fixed'"):
    helpers.simulation(fed, _fedavg, participation=0.5, availability=(0.3, 0.3),
                       cohort_rule="fixed")


def test_sampling_without_churn_is_unchanged_by_the_cohort_rule():
  # Without churn A_t is every client: the cohort is the ceil(C·K) clients with the
  # lowest uniform scores, whatever the rule (bit-identical runs).
  key = jax.random.PRNGKey(3)
  available = jnp.ones((10,), bool)
  ids, mask = sim_lib.churn.sample_cohort(key, available, 3)
  scores = np.asarray(jax.random.uniform(key, (10,)))
  np.testing.assert_array_equal(np.asarray(ids), np.sort(np.argsort(scores)[:3]))
  assert np.asarray(mask).all()
  ids2, mask2 = sim_lib.churn.sample_cohort(key, available, 3,
                                            sizes=sim_lib.churn.cohort_sizes(0.3, 10))
  np.testing.assert_array_equal(np.asarray(ids2), np.asarray(ids))
  np.testing.assert_array_equal(np.asarray(mask2), np.asarray(mask))


def test_communication_bytes_come_from_shapes():
  fed = helpers.unequal_digits()
  sim = helpers.simulation(fed, _fedavg)
  state = sim.init(0)
  payload, message = sim.communication_bytes(state)
  n_params = sum(x.size for x in jax.tree.leaves(state.server["params"]))
  assert payload == message == 4 * n_params
