"""FOFedAvg: reductions to FedAvg, round-0 SGD, round memory via client state."""
from __future__ import annotations

import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import fedfrac as ff
from fedfrac import algorithms
from fedfrac import config as config_lib
from fedfrac import sim as sim_lib
from fedfrac.algorithms import contract, local_training, tasks
from fedfrac.optim import fractional, fractional_set_reference
from tests import helpers

CLIENT = {"schedule": "inv_sqrt", "batch_size": 16, "lr": 0.1}


@pytest.fixture(scope="module")
def fed():
  return helpers.unequal_digits(sizes=(13, 40, 75, 22))


@pytest.fixture(scope="module")
def fedavg_run(fed):
  sim = helpers.simulation(fed, lambda ctx: algorithms.make("fedavg", ctx), CLIENT)
  state = sim.init(0)
  one, _ = sim.run_chunk(state, 1)
  three, _ = sim.run_chunk(state, 3)
  return one.server["params"], three.server["params"]


def _params_equal(a, b):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("memory", ["step", "round"])
def test_alpha_one_is_fedavg_with_the_same_schedule(fed, fedavg_run, memory):
  sim = helpers.simulation(
      fed, lambda ctx: algorithms.make("fofedavg", ctx, alpha=1.0, memory=memory), CLIENT)
  state, metrics = sim.run_chunk(sim.init(0), 3)
  _params_equal(state.server["params"], fedavg_run[1])
  assert np.all(np.asarray(metrics["clients/drift"]) > 0)


def test_round_zero_is_plain_sgd_then_the_factor_acts(fed, fedavg_run):
  sim = helpers.simulation(fed, lambda ctx: algorithms.make("fofedavg", ctx, alpha=0.5),
                           CLIENT)
  state = sim.init(0)
  after_one, _ = sim.run_chunk(state, 1)
  _params_equal(after_one.server["params"], fedavg_run[0])
  after_three, _ = sim.run_chunk(state, 3)
  diff = max(float(jnp.max(jnp.abs(a - b))) for a, b in
             zip(jax.tree.leaves(after_three.server["params"]),
                 jax.tree.leaves(fedavg_run[1])))
  assert diff > 1e-4


def _reference_client_round_fn(sim, delta):
  """Client k's local training in round t, written directly with local_training.local_train
  (one jitted function for all clients and rounds)."""
  training = sim.training
  loss_fn = tasks.supervised_loss(sim.model, sim.task)

  @jax.jit
  def run(params, reference, valid, key, index, size, steps, k, lr, alpha_t):
    view = contract.ClientView(sim.arrays["x"], sim.arrays["y"], index, size, steps, k)
    tx = optax.chain(fractional(alpha_t, delta, "scalar", "round"), training.optimizer)
    opt_state = fractional_set_reference(tx.init(params), reference, valid)
    out, _, _ = local_training.local_train(params, opt_state, view, key, lr, loss_fn,
                                           training, optimizer=tx)
    return out

  def reference_round(params, k, t, root_key, reference, valid, alpha):
    key = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(root_key, t),
                                                sim_lib.CLIENT), k)
    return run(params, reference, jnp.asarray(valid), key, sim.arrays["client_index"][k],
               sim.arrays["client_size"][k], jnp.asarray(sim.num_steps[k], jnp.int32),
               jnp.asarray(k), training.lr_schedule(t),
               jnp.asarray(1.0 if t == 0 else alpha, jnp.float32))
  return reference_round


def test_round_memory_uses_previous_participation_params(fed):
  alpha, delta = 0.6, 1e-5
  sim = helpers.simulation(
      fed, lambda ctx: algorithms.make("fofedavg", ctx, alpha=alpha, delta=delta,
                                       memory="round"),
      CLIENT, rounds=4, participation=0.5)
  state = sim.init(3)
  reference_round = _reference_client_round_fn(sim, delta)
  assert not np.any(state.clients["has_participated"])
  seen_twice = False
  for t in range(4):
    before = state
    state, m = sim.run_chunk(state, 1)
    cohort = set(np.asarray(m["clients/ids"][0]).tolist())
    for k in range(fed.num_clients):
      last_before = jax.tree.map(lambda x: x[k], before.clients["last_params"])
      last_after = jax.tree.map(lambda x: x[k], state.clients["last_params"])
      if k not in cohort:
        _params_equal(last_after, last_before)
        assert (bool(state.clients["has_participated"][k])
                == bool(before.clients["has_participated"][k]))
        continue
      was = bool(before.clients["has_participated"][k])
      seen_twice |= was and t > 0
      want = reference_round(before.server["params"], k, t, state.key, last_before, was,
                             alpha)
      for x, y in zip(jax.tree.leaves(last_after), jax.tree.leaves(want)):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
      assert bool(state.clients["has_participated"][k])
      if was:
        # The reference matters: using the global model instead gives other params.
        wrong = reference_round(before.server["params"], k, t, state.key,
                                before.server["params"], True, alpha)
        gap = max(float(jnp.max(jnp.abs(a - b))) for a, b in
                  zip(jax.tree.leaves(wrong), jax.tree.leaves(want)))
        assert gap > 1e-6
  assert seen_twice, "some client must take part twice for this test to mean anything"


def test_alpha_range_and_heuristic_flag():
  c = helpers.tiny_config()
  c.methods = type(c.methods)({"fo": type(c.methods)(dict(name="fofedavg", alpha=1.5))})
  with pytest.raises(config_lib.ConfigError,
                     match=r"methods\.fo\.alpha=1\.5.*allow_heuristic_alpha"):
    config_lib.validate(c)
  c.methods.fo.allow_heuristic_alpha = True
  config_lib.validate(c)
  for key, value in (("alpha", 0.0), ("delta", 0.0), ("memory", "global")):
    bad = helpers.tiny_config()
    bad.methods = type(c.methods)({"fo": type(c.methods)({"name": "fofedavg", key: value})})
    with pytest.raises(config_lib.ConfigError, match=f"methods.fo.{key}="):
      config_lib.validate(bad)


def _fofedavg_config(name):
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  return config_lib.import_config_file(os.path.join(root, "configs/fofedavg", name))


def test_paper_configs_hold_the_fofedavg_papers_settings():
  """configs/fofedavg follow the paper: Fig. 1 (K = 10, 25 rounds), Tables V–VI
  (Dirichlet 0.1, K ∈ {10, 100, 1000}, 60 % target), Fig. 11 (B = 50, E = 20),
  C = 0.2 and μ0/sqrt(t+1) (appendix B), Table IV's α grid with α = 1.5."""
  mnist = _fofedavg_config("mnist_cnn.py")
  fig1 = mnist.get_config()
  assert (fig1.data.num_clients, fig1.rounds, fig1.participation) == (10, 25, 0.2)
  assert (fig1.client.batch_size, fig1.client.local_epochs) == (50, 20)
  assert (fig1.client.lr, fig1.client.schedule) == (0.01, "inv_sqrt")
  assert {"fedavg", "fofedavg", "scaffold"} <= {m.name for m in fig1.methods.values()}
  for k in (10, 100, 1000):
    c = mnist.get_config(f"severe,{k}")
    assert (c.data.num_clients, c.data.partition, c.data.alpha) == (k, "dirichlet", 0.1)
    assert c.target_accuracy == 0.6
    config_lib.validate(c)
  with pytest.raises(ValueError, match="clients=50"):
    mnist.get_config("severe,50")
  iid = mnist.get_config("iid")
  assert iid.data.partition == "iid" and iid.eval_every == 1   # Tables II–III per round
  alpha = mnist.get_config("alpha")
  got = sorted(m.alpha for m in alpha.methods.values())
  assert got == [0.5, 0.6, 0.97, 1.5]
  assert all(m.allow_heuristic_alpha == (m.alpha > 1) for m in alpha.methods.values())
  config_lib.validate(alpha)                      # α = 1.5 allowed as the heuristic
  assert {0.5, 0.6, 0.8, 0.97, 1.0} == set(mnist.ALPHA_GRID)
  for level in ("mild", "moderate", "shard_severe"):
    c = mnist.get_config(level)
    assert c.data.partition == "pathological"
    config_lib.validate(c)
  cifar = _fofedavg_config("cifar10_cnn.py")
  c = cifar.get_config()
  assert (c.data.num_clients, c.rounds, c.client.local_epochs) == (10, 30, 20)
  assert c.model.name == "cnn_cifar" and c.data.tfds.name == "cifar10"
  a = cifar.get_config("alpha")
  assert sorted(m.alpha for m in a.methods.values()) == [0.96, 0.97, 0.985, 0.99]
  config_lib.validate(a)


def test_alpha_grid_as_traced_values_equals_separate_runs():
  c = helpers.tiny_config(rounds=2, eval_every=2, seeds=(0,))
  c.client.schedule = "inv_sqrt"
  c.methods = type(c.methods)({"fo": type(c.methods)(dict(name="fofedavg"))})
  many = ff.run_many(c, grid={"alpha": [0.5, 1.0]})
  c.methods.fo.alpha = 0.5
  single = ff.run(c).records[0].rows[-1]
  got = many.record("fo[alpha=0.5]", 0).rows[-1]
  assert got["accuracy"] == pytest.approx(single["accuracy"], abs=1e-6)
  assert got["server/drift_mean"] == pytest.approx(single["server/drift_mean"], rel=1e-4)
  other = many.record("fo[alpha=1.0]", 0).rows[-1]
  assert other["server/drift_mean"] > got["server/drift_mean"]   # s < 1 shrinks steps



def test_mean_factor_is_public_in_optim():
  # FOFedAvg's ``fractional_factor`` metric, for users: ff.optim.fractional_mean_factor
  # reads it from any optax state holding the fractional transformation.
  tx = optax.chain(ff.optim.fractional(0.5, 1e-5), optax.sgd(0.1))
  w = jnp.ones(3)
  state = tx.init(w)
  assert float(ff.optim.fractional_mean_factor(state)) == 1.0
  for _ in range(2):   # the first step has no previous iterate (factor 1, not counted)
    updates, state = tx.update(jnp.ones(3), state, w)
    w = optax.apply_updates(w, updates)
  step = 0.1 * np.sqrt(3.0)          # ‖w_1 − w_0‖ of the first (plain SGD) step
  want = (step + 1e-5) ** 0.5 / math.gamma(1.5)
  assert float(ff.optim.fractional_mean_factor(state)) == pytest.approx(want, rel=1e-4)
