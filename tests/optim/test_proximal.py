from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from fedfrac.optim.fractional import fractional
from fedfrac.optim.proximal import ProximalState, proximal, proximal_set_reference


def test_coefficient_zero_is_bit_identical():
  g = jnp.array([-0.0, 0.0, 1.5, -2.25, 1e-30])
  w = jnp.array([3.0, -3.0, 0.1, 7.0, 2.0])
  tx = proximal(0.0)
  state = proximal_set_reference(tx.init(w), jnp.zeros(5), 0.0)
  u, _ = tx.update(g, state, w)
  np.testing.assert_array_equal(np.signbit(np.asarray(u)), np.signbit(np.asarray(g)))
  np.testing.assert_array_equal(np.asarray(u), np.asarray(g))


def test_pull_matches_formula_and_init_reference_is_params():
  w0 = {"a": jnp.array([1.0, 2.0]), "b": jnp.array(0.5)}
  tx = proximal(0.3)
  state = tx.init(w0)
  g = {"a": jnp.array([0.1, -0.2]), "b": jnp.array(1.0)}
  u, _ = tx.update(g, state, w0)  # w = w_ref: no pull
  np.testing.assert_allclose(np.asarray(u["a"]), [0.1, -0.2])
  w = {"a": jnp.array([2.0, 0.0]), "b": jnp.array(-0.5)}
  u, _ = tx.update(g, state, w)
  np.testing.assert_allclose(np.asarray(u["a"]), [0.1 + 0.3 * 1.0, -0.2 + 0.3 * -2.0],
                             rtol=1e-6)
  np.testing.assert_allclose(float(u["b"]), 1.0 + 0.3 * -1.0, rtol=1e-6)


def test_set_reference_inside_chain_and_fedprox_gradient():
  # FedProx: chain(proximal(mu), sgd) equals SGD on f(w) + mu/2 ||w - w_t||^2.
  mu, lr = 0.5, 0.1
  f = lambda w: jnp.sum(jnp.sin(w) * jnp.arange(1.0, 4.0))
  w_t = jnp.array([0.3, -0.2, 1.0])
  w_start = jnp.array([1.0, 1.0, 1.0])
  tx = optax.chain(fractional(1.0, 1e-5), proximal(0.0), optax.sgd(lr))
  state = proximal_set_reference(tx.init(w_start), w_t, mu)
  assert isinstance(state[1], ProximalState)
  w = w_start
  w_ref = w_start
  for _ in range(3):
    u, state = tx.update(jax.grad(f)(w), state, w)
    w = optax.apply_updates(w, u)
    g_full = jax.grad(lambda v: f(v) + 0.5 * mu * jnp.sum((v - w_t) ** 2))(w_ref)
    w_ref = w_ref - lr * g_full
  np.testing.assert_allclose(np.asarray(w), np.asarray(w_ref), rtol=1e-6)


def test_vmap_per_client_reference_and_coefficient():
  tx = proximal()
  w = jnp.array([[1.0, 1.0], [2.0, 0.0], [0.0, 0.0]])
  refs = jnp.zeros((3, 2))
  coefs = jnp.array([0.0, 0.5, 2.0])
  states = jax.vmap(tx.init)(w)
  states = jax.vmap(proximal_set_reference)(states, refs, coefs)
  u, _ = jax.jit(jax.vmap(tx.update))(jnp.ones((3, 2)), states, w)
  np.testing.assert_allclose(np.asarray(u), [[1.0, 1.0], [2.0, 1.0], [1.0, 1.0]])


def test_validation():
  with pytest.raises(ValueError, match="coefficient"):
    proximal(-0.1)
  tx = proximal(0.1)
  with pytest.raises(ValueError, match="params"):
    tx.update(jnp.ones(2), tx.init(jnp.zeros(2)), None)
  with pytest.raises(ValueError, match="ProximalState"):
    proximal_set_reference(optax.sgd(0.1).init(jnp.zeros(2)), jnp.zeros(2), 0.1)
  with pytest.raises(ValueError, match="coefficient"):
    proximal_set_reference(tx.init(jnp.zeros(2)), jnp.zeros(2), float("inf"))
