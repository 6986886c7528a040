"""Tests for fedfrac.ops.attacks (Byzantine client transforms)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac.ops import attacks


def _tree():
  r = np.random.default_rng(0)
  return {"w": jnp.asarray(r.normal(size=(3, 4)), jnp.float32),
          "b": jnp.asarray(r.normal(size=(4,)), jnp.float32)}


def test_sign_flip_and_scaled_update():
  t = _tree()
  flipped = jax.jit(attacks.sign_flip)(t, 2.5)
  scaled = jax.jit(attacks.scaled_update)(t, -3.0)
  for k in t:
    np.testing.assert_allclose(flipped[k], -2.5 * np.asarray(t[k]), rtol=1e-6)
    np.testing.assert_allclose(scaled[k], -3.0 * np.asarray(t[k]), rtol=1e-6)
  np.testing.assert_array_equal(attacks.sign_flip(t)["w"], -np.asarray(t["w"]))


def test_gaussian_attack_statistics_and_determinism():
  t = {"w": jnp.ones((200, 100), jnp.float32)}
  z = jax.jit(attacks.gaussian_attack)(t, jax.random.key(0), 3.0)["w"]
  assert abs(float(z.std()) - 3.0) < 0.1 and abs(float(z.mean())) < 0.1
  z2 = jax.jit(attacks.gaussian_attack)(t, jax.random.key(0), 3.0)["w"]
  np.testing.assert_array_equal(z, z2)      # same key, same attack
  z3 = jax.jit(attacks.gaussian_attack)(t, jax.random.key(1), 3.0)["w"]
  assert not np.allclose(z, z3)
  add = attacks.gaussian_attack(t, jax.random.key(0), 3.0, additive=True)["w"]
  np.testing.assert_allclose(add, 1.0 + np.asarray(z), rtol=1e-6, atol=1e-6)


def test_attacks_vmap_with_per_client_selection():
  stacked = jax.tree.map(lambda x: jnp.stack([x, x, x]), _tree())
  is_byz = jnp.array([False, True, False])

  def client(delta, bad):
    attacked = attacks.sign_flip(delta)
    return jax.tree.map(lambda a, h: jnp.where(bad, a, h), attacked, delta)

  out = jax.jit(jax.vmap(client))(stacked, is_byz)
  np.testing.assert_array_equal(out["w"][1], -stacked["w"][1])
  np.testing.assert_array_equal(out["w"][0], stacked["w"][0])


def test_label_flip():
  y = jnp.arange(10, dtype=jnp.int32)
  flipped = jax.jit(attacks.label_flip, static_argnums=1)(y, 10)
  np.testing.assert_array_equal(flipped, 9 - np.arange(10))
  assert flipped.dtype == jnp.int32
  np.testing.assert_array_equal(attacks.label_flip(flipped, 10), y)   # involution
  with pytest.raises(ValueError, match="num_classes"):
    attacks.label_flip(y, 0)


@pytest.mark.parametrize("k,frac,expected", [(10, 0.2, 2), (10, 0.25, 3), (7, 0.5, 4),
                                             (20, 0.0, 0), (5, 1.0, 5), (100, 0.3, 30)])
def test_byzantine_mask_count(k, frac, expected):
  m = attacks.byzantine_mask(k, frac, seed=3)
  assert m.shape == (k,) and m.dtype == bool and int(m.sum()) == expected


def test_byzantine_mask_seeded():
  a = attacks.byzantine_mask(50, 0.2, seed=7)
  np.testing.assert_array_equal(a, attacks.byzantine_mask(50, 0.2, seed=7))
  assert any(not np.array_equal(a, attacks.byzantine_mask(50, 0.2, seed=s)) for s in range(8, 12))
  with pytest.raises(ValueError, match="fraction"):
    attacks.byzantine_mask(10, 1.5, 0)
  with pytest.raises(ValueError, match="num_clients"):
    attacks.byzantine_mask(0, 0.1, 0)
