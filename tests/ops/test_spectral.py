from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac.ops.spectral import as_matrix, default_start_vector, spectral_flatness

kappa_fn = jax.jit(spectral_flatness, static_argnames=("num_iters",))


def _exact(w):
  w = np.asarray(w, np.float64)
  return np.linalg.svd(w, compute_uv=False)[0] / np.linalg.norm(w)


@pytest.mark.parametrize("shape", [(64, 32), (128, 10), (32, 64)])
def test_matches_svd_on_gaussian_matrices(shape):
  keys = jax.random.split(jax.random.PRNGKey(sum(shape)), 6)
  mats = jax.vmap(lambda k: jax.random.normal(k, shape))(keys)
  got = jax.jit(jax.vmap(spectral_flatness))(mats)  # default num_iters
  want = [_exact(m) for m in np.asarray(mats)]
  np.testing.assert_allclose(np.asarray(got), want, atol=1e-3)
  assert np.all(np.asarray(got) <= np.array(want) + 1e-5)  # power iteration ≤ σ₁


def test_random_start_key():
  w = jax.random.normal(jax.random.PRNGKey(5), (40, 20))
  got = kappa_fn(w, key=jax.random.PRNGKey(1))
  np.testing.assert_allclose(float(got), _exact(w), atol=1e-3)


def test_rank_one_gives_one():
  a = jnp.array([1.0, -2.0, 0.5, 3.0])
  for b in (jnp.array([0.3, 0.1, -0.7]), jnp.ones(3), jnp.array([0.0, 1.0, 0.0]),
            jnp.array([1.0, -1.0, 1.0])):
    kappa = kappa_fn(jnp.outer(a, b), num_iters=3)
    assert abs(float(kappa) - 1.0) < 1e-5


def test_identity_and_orthogonal_values():
  # All singular values equal: κ = 1/sqrt(rank).
  np.testing.assert_allclose(float(kappa_fn(jnp.eye(9))), 1 / 3, rtol=1e-5)
  q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((16, 4)))
  np.testing.assert_allclose(float(kappa_fn(jnp.asarray(q))), 0.5, rtol=1e-5)


def test_zero_matrix_gives_zero_without_nan():
  kappa = kappa_fn(jnp.zeros((5, 3)))
  assert float(kappa) == 0.0
  batch = jnp.stack([jnp.zeros((5, 3)), jnp.ones((5, 3))])
  np.testing.assert_allclose(np.asarray(jax.jit(jax.vmap(spectral_flatness))(batch)),
                             [0.0, 1.0], rtol=1e-5)


def test_scale_invariant_and_extreme_scales():
  w = jax.random.normal(jax.random.PRNGKey(2), (12, 6))
  base = float(kappa_fn(w, eps=0.0))
  for c in (1e-25, 1e25):
    np.testing.assert_allclose(float(kappa_fn(w * c, eps=0.0)), base,
                               rtol=1e-5)


def test_conv_kernel_reshape():
  k = jax.random.normal(jax.random.PRNGKey(3), (3, 3, 4, 8))
  assert as_matrix(k).shape == (36, 8)
  np.testing.assert_allclose(float(kappa_fn(k)),
                             _exact(np.asarray(k).reshape(36, 8)), atol=1e-3)
  assert as_matrix(jnp.ones(5)).shape == (1, 5)
  np.testing.assert_allclose(float(kappa_fn(jnp.arange(1.0, 6.0))), 1.0,
                             rtol=1e-5)


def test_start_vector_and_validation():
  v = np.asarray(default_start_vector(7))
  np.testing.assert_allclose(np.linalg.norm(v), 1.0, rtol=1e-6)
  assert np.all(v > 0)
  with pytest.raises(ValueError, match="num_iters"):
    spectral_flatness(jnp.eye(3), num_iters=0)
  with pytest.raises(ValueError, match="eps"):
    spectral_flatness(jnp.eye(3), eps=-1.0)
  with pytest.raises(ValueError, match="matrix"):
    spectral_flatness(jnp.array(2.0))
