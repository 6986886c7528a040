"""Byzantine clients simulated by the engine: message attacks and label flipping."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac import algorithms
from fedfrac import sim as sim_lib
from fedfrac import runner
from fedfrac.ops import attacks
from tests import helpers

SIZES = (20, 28, 24, 20, 32, 24)


def _fedavg(ctx):
  return algorithms.make("fedavg", ctx)


def recording_fedavg(ctx):
  """FedAvg whose server state also keeps the last round's uploaded messages."""
  fedavg = algorithms.make("fedavg", ctx)

  def init(key, params0, num_clients, data_info):
    server, clients = fedavg.init(key, params0, num_clients, data_info)
    cohort = jax.tree.map(lambda p: jnp.zeros((num_clients,) + p.shape, p.dtype), params0)
    return {**server, "messages": cohort}, clients

  def broadcast(state):
    return fedavg.broadcast({"params": state["params"]})

  def aggregate(state, clients, messages, weights, mask, key):
    out = fedavg.aggregate({"params": state["params"]}, clients, messages, weights, mask,
                           key)
    return {**out[0], "messages": messages}, out[1]

  return fedavg._replace(init=init, broadcast=broadcast, aggregate=aggregate)


def _messages(fed, attack=None, parallelism="vmap", seed=0):
  sim = helpers.simulation(fed, recording_fedavg, {"batch_size": 16}, rounds=1,
                           parallelism=parallelism, attack=attack)
  state = sim.init(seed)
  state, metrics = sim.run_chunk(state, 1)
  return state, metrics


def _leaves(tree):
  return [np.asarray(x) for x in jax.tree.leaves(tree)]


@pytest.fixture(scope="module")
def fed():
  return helpers.unequal_digits(sizes=SIZES)


@pytest.fixture(scope="module")
def clean(fed):
  return _messages(fed)


GAUSSIAN = sim_lib.AttackConfig(kind="gaussian", fraction=0.5, std=2.0)


@pytest.fixture(scope="module")
def gaussian(fed):
  return _messages(fed, GAUSSIAN)


def test_sign_flip_changes_only_byzantine_messages(fed, clean):
  attack = sim_lib.AttackConfig(kind="sign_flip", fraction=1 / 3, scale=3.0)
  state, metrics = _messages(fed, attack)
  byz = np.asarray(state.byzantine)
  np.testing.assert_array_equal(byz, attacks.byzantine_mask(len(SIZES), 1 / 3, 0))
  assert byz.sum() == 2 and float(metrics["byzantine_clients"][0]) == 2
  for got, want in zip(_leaves(state.server["messages"]),
                       _leaves(clean[0].server["messages"])):
    np.testing.assert_array_equal(got[~byz], want[~byz])      # honest: bit-identical
    np.testing.assert_allclose(got[byz], -3.0 * want[byz], rtol=1e-6, atol=1e-7)
    assert np.abs(want[byz]).max() > 0


def test_scaled_and_gaussian_attacks(fed, clean, gaussian):
  scaled, _ = _messages(fed, sim_lib.AttackConfig(kind="scaled", fraction=0.5,
                                                      scale=10.0))
  byz = np.asarray(scaled.byzantine)
  for got, want in zip(_leaves(scaled.server["messages"]),
                       _leaves(clean[0].server["messages"])):
    np.testing.assert_array_equal(got[~byz], want[~byz])
    np.testing.assert_allclose(got[byz], 10.0 * want[byz], rtol=1e-6, atol=1e-7)
  noisy = gaussian[0]
  byz = np.asarray(noisy.byzantine)
  z = np.concatenate([g[byz].ravel() for g in _leaves(noisy.server["messages"])])
  assert abs(z.std() - 2.0) < 0.1 and abs(z.mean()) < 0.1      # N(0, std²) uploads
  for got, want in zip(_leaves(noisy.server["messages"]),
                       _leaves(clean[0].server["messages"])):
    np.testing.assert_array_equal(got[~byz], want[~byz])


def test_label_flip_equals_training_on_flipped_labels(fed, clean):
  attack = sim_lib.AttackConfig(kind="label_flip", fraction=1 / 3)
  byz = attacks.byzantine_mask(len(SIZES), 1 / 3, 0)
  # The same clients with their own rows relabelled C - 1 - y, no attack.
  y = fed.y_train.copy()
  for k in np.flatnonzero(byz):
    rows = fed.client_index[k, :fed.client_size[k]]
    y[rows] = fed.num_classes - 1 - y[rows]
  poisoned = dataclasses.replace(fed, y_train=y)
  want, _ = _messages(poisoned)
  got, _ = _messages(fed, attack)
  for g, w, c in zip(_leaves(got.server["messages"]), _leaves(want.server["messages"]),
                     _leaves(clean[0].server["messages"])):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(g[~byz], c[~byz])
    assert not np.allclose(g[byz], c[byz], atol=1e-3)


def test_map_parallelism_applies_the_same_attack(fed, gaussian):
  b, _ = _messages(fed, GAUSSIAN, "map")
  for x, y in zip(_leaves(gaussian[0].server["messages"]), _leaves(b.server["messages"])):
    np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def test_byzantine_set_is_fixed_per_seed():
  fed = helpers.unequal_digits(sizes=(20,) * 10)
  attack = sim_lib.AttackConfig(kind="sign_flip", fraction=0.2)
  sim = helpers.simulation(fed, _fedavg, {"batch_size": 16}, rounds=3, participation=0.5,
                           attack=attack)
  masks = {s: np.asarray(sim.init(s).byzantine) for s in range(6)}
  for s, m in masks.items():
    assert m.sum() == 2
    np.testing.assert_array_equal(m, attacks.byzantine_mask(10, 0.2, s))
    np.testing.assert_array_equal(m, np.asarray(sim.init(s).byzantine))
  assert len({tuple(m) for m in masks.values()}) > 1     # the set depends on the seed
  # The set does not change over rounds; the cohort reports its own members.
  state, metrics = sim.run_chunk(sim.init(3), 3)
  np.testing.assert_array_equal(np.asarray(state.byzantine), masks[3])
  ids = np.asarray(metrics["clients/ids"])
  np.testing.assert_array_equal(np.asarray(metrics["clients/byzantine"]), masks[3][ids])
  # attack.seed pins one set for every run seed; batched runs keep per-seed sets.
  pinned = helpers.simulation(fed, _fedavg, {"batch_size": 16}, rounds=3,
                              attack=dataclasses.replace(attack, seed=7))
  for s in range(3):
    np.testing.assert_array_equal(np.asarray(pinned.init(s).byzantine),
                                  attacks.byzantine_mask(10, 0.2, 7))
  batch = sim_lib.BatchedSimulation(sim, [fed] * 3)
  np.testing.assert_array_equal(np.asarray(batch.init([0, 1, 2]).byzantine),
                                np.stack([masks[0], masks[1], masks[2]]))


def test_attack_config_reaches_the_engine_and_rows():
  c = helpers.tiny_config(rounds=2, eval_every=2)
  c.attack.kind = "sign_flip"
  c.attack.fraction = 0.5
  sim = runner.build_simulation(c, "fedavg", helpers.unequal_digits(sizes=(20,) * 6))
  assert sim.config.attack == sim_lib.AttackConfig("sign_flip", 0.5, 1.0, 1.0, None)
  c.methods.fedavg.attack = {"kind": "none"}
  sim = runner.build_simulation(c, "fedavg", helpers.unequal_digits(sizes=(20,) * 6))
  assert sim.config.attack is None and sim.init(0).byzantine is None


def label_sum_recorder(ctx):
  """FedAvg whose client state keeps Σ y over the client's rows as seen by
  ``prepare_cohort`` (the cohort-wide hook) and by ``client_update``."""
  fedavg = algorithms.make("fedavg", ctx)
  n_max = ctx.data_info.client_size.max()

  def own_sum(y, index, size):
    return jnp.sum(jnp.where(jnp.arange(n_max) < size, y[index], 0))

  def init(key, params0, num_clients, data_info):
    server, _ = fedavg.init(key, params0, num_clients, data_info)
    zeros = jnp.zeros((num_clients,), jnp.int32)
    return server, {"prepare": zeros, "update": zeros}

  def prepare_cohort(payload, states, views, keys, mask, t):
    sums = jax.vmap(lambda i, s: own_sum(views.y, i, s))(views.index, views.size)
    return {**states, "prepare": sums}

  def client_update(payload, state, view, key, t):
    message, _, metrics = fedavg.client_update(payload, None, view, key, t)
    return message, {**state, "update": own_sum(view.y, view.index, view.size)}, metrics

  return fedavg._replace(init=init, client_update=client_update,
                         prepare_cohort=prepare_cohort)


def test_label_flip_reaches_the_prepare_cohort_hook(fed):
  attack = sim_lib.AttackConfig(kind="label_flip", fraction=1 / 3)
  sim = helpers.simulation(fed, label_sum_recorder, {"batch_size": 16}, rounds=1,
                           attack=attack)
  state = sim.init(0)
  byz = np.asarray(state.byzantine)
  state, _ = sim.run_chunk(state, 1)
  want = []
  for k in range(len(SIZES)):
    y = fed.y_train[fed.client_index[k, :fed.client_size[k]]]
    want.append((fed.num_classes - 1 - y).sum() if byz[k] else y.sum())
  np.testing.assert_array_equal(np.asarray(state.clients["prepare"]), want)
  np.testing.assert_array_equal(np.asarray(state.clients["update"]), want)


@pytest.mark.parametrize("kind", ["sign_flip", "label_flip"])
def test_batched_runs_under_attack_equal_separate_runs(kind):
  # Regression: the [R, K] Byzantine masks of a batched run were not vmapped
  # (STATE_AXES left them unbatched), so every robust config crashed in run_many
  # with "Incompatible shapes for broadcasting".
  c = helpers.tiny_config(rounds=2, eval_every=1, seeds=(0, 1))
  c.data.partition = "iid"
  c.attack.kind = kind
  c.attack.fraction = 0.5
  c.attack.scale = 10.0
  c.methods.fedavg.server = {"aggregator": "median"}
  batched = runner.run_many(c)
  separate = runner.run(c)
  for seed in (0, 1):
    got = batched.record("fedavg", seed).rows[-1]
    want = separate.record("fedavg", seed).rows[-1]
    assert got["byzantine_clients"] == want["byzantine_clients"] == 3
    np.testing.assert_allclose(got["accuracy"], want["accuracy"], atol=1e-6)
    np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-4)
