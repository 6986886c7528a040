"""MOON: the contrastive loss on known cases and the vectorised algorithm against
a per-client Python loop."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac import algorithms
from fedfrac.algorithms import moon
from tests import helpers
from tests import reference_loops as ref


def test_contrastive_loss_known_values():
  z = jnp.asarray([[3.0, 4.0], [1.0, 0.0]])
  tau = 0.5
  # z_glob = z, z_prev = −z: sim = +1 and −1, ℓ = log(1 + e^{−2/τ}).
  got = moon.contrastive_loss(z, 2.0 * z, -z, tau)
  np.testing.assert_allclose(got, np.log1p(np.exp(-2.0 / tau)) * np.ones(2), rtol=2e-5)
  # Orthogonal negative: sims 1 and 0.
  got = moon.contrastive_loss(z[1:], z[1:], jnp.asarray([[0.0, 5.0]]), tau)
  np.testing.assert_allclose(got, [np.log1p(np.exp(-1.0 / tau))], rtol=2e-5)
  # Equal positive and negative: log 2, and zero gradient w.r.t. z.
  loss = lambda zz: jnp.sum(moon.contrastive_loss(zz, z, z, tau))
  np.testing.assert_allclose(loss(z + 0.3), 2 * np.log(2.0), rtol=1e-6)
  np.testing.assert_allclose(jax.grad(loss)(z + 0.3), 0.0, atol=1e-6)
  # A zero representation is handled without NaN.
  assert np.all(np.isfinite(jax.grad(loss)(jnp.zeros((2, 2)))))


def _reference_loss(model, task, mu, tau):
  """ℓ_sup + μ ℓ_con written out (Li et al. 2021, eqs. (2)–(3))."""
  def rep(net, x, train, key=None):
    out, f = model.apply(net["model"], x, train=train, key=key, return_features=True)
    pr = net["proj"]
    z = jnp.maximum(f @ pr["w1"] + pr["b1"], 0.0) @ pr["w2"] + pr["b2"]
    return out, z

  def cos(a, b):
    na = jnp.sqrt(jnp.maximum(jnp.sum(a * a, -1), 1e-16))
    nb = jnp.sqrt(jnp.maximum(jnp.sum(b * b, -1), 1e-16))
    return jnp.sum(a * b, -1) / (na * nb)

  def loss(net, x, y, mask, key, extra):
    glob, prev = extra
    out, z = rep(net, x, True, key)
    _, zg = rep(glob, x, False)
    _, zp = rep(prev, x, False)
    pos, neg = jnp.exp(cos(z, zg) / tau), jnp.exp(cos(z, zp) / tau)
    con = -jnp.log(pos / (pos + neg))
    m = mask.astype(jnp.float32)
    per = task.example_loss(out, y) + mu * con
    return jnp.sum(per * m) / jnp.maximum(jnp.sum(m), 1.0)
  return loss


def test_vectorised_moon_equals_per_client_loop():
  mu, tau = 2.0, 0.5
  fed = helpers.unequal_digits()
  sim = helpers.simulation(
      fed, lambda ctx: algorithms.make("moon", ctx, mu=mu, temperature=tau, proj_dim=8),
      {"batch_size": 16, "local_epochs": 2, "lr": 0.1}, rounds=3, participation=0.75)
  state = sim.init(0)
  final, metrics = sim.run_chunk(state, 3)
  ids = np.asarray(metrics["clients/ids"]).tolist()
  assert any(k in ids[t] and k in ids[s] for k in range(4) for t in range(3)
             for s in range(t)), "some client must take part twice"
  grad = ref.batch_grad_fn(sim, jax.grad(_reference_loss(sim.model, sim.task, mu, tau)))
  net = state.server["params"]
  assert net["proj"]["w2"].shape == (16, 8)
  prev = [net] * sim.num_clients
  for t, cohort in enumerate(ids):
    deltas = []
    for k in cohort:
      y, _ = ref.local_sgd(sim, net, k, t, state.key, grad, extra=(net, prev[k]))
      deltas.append(ref.tree_map(jnp.subtract, y, net))
      prev[k] = y
    p, _ = ref.cohort_weights(sim, cohort, "samples")
    net = ref.tree_map(jnp.add, net, ref.tree_sum(p, deltas))
  ref.assert_trees_close(final.server["params"], net)
  for k in range(sim.num_clients):
    ref.assert_trees_close(jax.tree.map(lambda a: a[k], final.clients["prev"]), prev[k])
  # Evaluation uses the model without the projection head.
  assert set(sim.algorithm.eval_params(final.server, None)) == {"extractor", "head"}


def test_proj_dim_zero_contrasts_features_and_uploads_only_the_model():
  sim = helpers.simulation(helpers.unequal_digits(),
                           lambda ctx: algorithms.make("moon", ctx, proj_dim=0))
  state = sim.init(0)
  assert state.server["params"]["proj"] == {}
  payload, message = sim.communication_bytes(state)
  assert payload == message == 4 * sum(
      x.size for x in jax.tree.leaves(state.server["params"]["model"]))


@pytest.mark.parametrize("options,match", [
    ({"proj_dim": -1}, "proj_dim=-1"), ({"proj_dim": 2.5}, "proj_dim=2.5"),
    ({"temperature": 0.0}, "temperature=0.0"), ({"mu": -1.0}, "mu=-1.0"),
    ({"buffer_size": 0}, "buffer_size=0")])
def test_invalid_options_are_rejected(options, match):
  with pytest.raises(ValueError, match=match):
    algorithms.hparams("moon", options)


def _reference_buffer_loss(model, task, mu, tau):
  """ℓ_sup + μ ℓ_con with every previous model of the buffer as a negative:
  −log(e^{pos} / (e^{pos} + Σ_j e^{neg_j})), written out per model."""
  def rep(net, x, train, key=None):
    out, f = model.apply(net["model"], x, train=train, key=key, return_features=True)
    pr = net["proj"]
    return out, jnp.maximum(f @ pr["w1"] + pr["b1"], 0.0) @ pr["w2"] + pr["b2"]

  def cos(a, b):
    na = jnp.sqrt(jnp.maximum(jnp.sum(a * a, -1), 1e-16))
    nb = jnp.sqrt(jnp.maximum(jnp.sum(b * b, -1), 1e-16))
    return jnp.sum(a * b, -1) / (na * nb)

  def loss(net, x, y, mask, key, extra):
    glob, prevs = extra
    out, z = rep(net, x, True, key)
    pos = jnp.exp(cos(z, rep(glob, x, False)[1]) / tau)
    neg = sum(jnp.exp(cos(z, rep(p, x, False)[1]) / tau) for p in prevs)
    con = -jnp.log(pos / (pos + neg))
    m = mask.astype(jnp.float32)
    return jnp.sum((task.example_loss(out, y) + mu * con) * m) / jnp.maximum(jnp.sum(m), 1.0)
  return loss


def test_model_buffer_equals_per_client_loop():
  mu, tau, size = 1.0, 0.5, 2
  fed = helpers.unequal_digits()
  sim = helpers.simulation(
      fed, lambda ctx: algorithms.make("moon", ctx, mu=mu, temperature=tau, proj_dim=8,
                                       buffer_size=size),
      {"batch_size": 16, "local_epochs": 1, "lr": 0.1}, rounds=4, participation=0.75)
  state = sim.init(0)
  final, metrics = sim.run_chunk(state, 4)
  ids = np.asarray(metrics["clients/ids"]).tolist()
  counts = np.bincount(np.ravel(ids), minlength=4)
  assert counts.max() >= 3, "some client must fill its buffer and then shift it"
  net0 = state.server["params"]
  net = net0
  buffers = [[] for _ in range(sim.num_clients)]     # newest first
  grad = ref.batch_grad_fn(sim, jax.grad(_reference_buffer_loss(sim.model, sim.task,
                                                                mu, tau)))
  for t, cohort in enumerate(ids):
    deltas = []
    for k in cohort:
      prevs = tuple(buffers[k]) or (net0,)  # before its first round: the initial model
      y, _ = ref.local_sgd(sim, net, k, t, state.key, grad, extra=(net, prevs))
      deltas.append(ref.tree_map(jnp.subtract, y, net))
      buffers[k] = [y] + buffers[k][:size - 1]
    p, _ = ref.cohort_weights(sim, cohort, "samples")
    net = ref.tree_map(jnp.add, net, ref.tree_sum(p, deltas))
  ref.assert_trees_close(final.server["params"], net)
  np.testing.assert_array_equal(np.asarray(final.clients["filled"]),
                                np.minimum(counts, size))
  for k in range(sim.num_clients):
    for j, model in enumerate(buffers[k]):
      ref.assert_trees_close(jax.tree.map(lambda a: a[k, j], final.clients["prev"]), model)


def test_buffer_loss_with_one_slot_is_the_single_negative_loss():
  rng = np.random.default_rng(0)
  z, zg, zp, other = (jnp.asarray(rng.normal(size=(5, 3)), jnp.float32) for _ in range(4))
  one = moon.contrastive_loss(z, zg, zp, 0.5)
  got = moon.contrastive_loss_buffer(z, zg, jnp.stack([zp, other]),
                                     jnp.asarray([True, False]), 0.5)
  np.testing.assert_allclose(got, one, rtol=1e-6)
