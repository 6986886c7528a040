from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac.ops.roughness import roughness_index, roughness_profile

N = 6
W0 = {"a": jnp.linspace(0.5, 1.5, 4), "b": jnp.array([0.2, -0.7])}
TARGET = -jnp.ones(N)
RADIUS = 0.01


def _flat(p):
  return jnp.concatenate([p["a"], p["b"]])


def _linear(p, batch):
  return jnp.dot(_flat(p), batch)


def _rippled(amplitude, omega=500.0):
  # Quadratic far from its minimum (monotone slices) plus a high-frequency ripple
  # whose period 2π/(ω|d_k|) is below the slice width 2ℓ.
  def loss(p, batch):
    w = _flat(p)
    return 0.5 * jnp.sum((w - batch) ** 2) + amplitude * jnp.sum(jnp.sin(omega * w))
  return loss


def test_linear_loss_gives_flat_t_and_zero_index():
  prof = roughness_profile(_linear, W0, jnp.arange(1.0, N + 1), jax.random.PRNGKey(1),
                           radius=RADIUS)
  np.testing.assert_allclose(np.asarray(prof["T"]), 1.0 / (2 * RADIUS), rtol=1e-4)
  np.testing.assert_allclose(np.asarray(prof["TV"]), np.asarray(prof["A"]), rtol=1e-4)
  assert float(prof["index"]) < 1e-4


def test_ripple_index_positive_and_grows_with_amplitude():
  key = jax.random.PRNGKey(0)
  base = float(roughness_index(_rippled(0.0), W0, TARGET, key, radius=RADIUS))
  assert base < 1e-4  # monotone quadratic slices
  values = [float(roughness_index(_rippled(a), W0, TARGET, key, radius=RADIUS))
            for a in (1e-3, 2e-3, 3e-3)]
  assert values[0] > 0.01
  assert values[0] < values[1] < values[2]
  prof = roughness_profile(_rippled(3e-3), W0, TARGET, key, radius=RADIUS)
  # TV ≥ A on every slice, hence T_i ≥ (1/2ℓ)·A/(A+ε) ≈ 1/(2ℓ).
  assert np.all(np.asarray(prof["T"]) >= (1 - 1e-5) / (2 * RADIUS))


def test_batched_probe_equals_per_direction_loop():
  loss = _rippled(2e-3)
  m, grid, eps_a, eps_t = 4, 20, 1e-8, 1e-8
  prof = roughness_profile(loss, W0, TARGET, jax.random.PRNGKey(3), num_directions=m,
                           radius=RADIUS, grid=grid)
  d = np.asarray(prof["directions"])
  s = np.linspace(-RADIUS, RADIUS, grid + 1)
  np.testing.assert_allclose(np.linalg.norm(d, axis=1), 1.0, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(prof["offsets"]), s, atol=1e-8)
  flat0 = np.asarray(_flat(W0))
  t = []
  for i in range(m):
    phi = []
    for sj in s:
      w = flat0 + sj * d[i]
      phi.append(float(loss({"a": jnp.asarray(w[:4]), "b": jnp.asarray(w[4:])},
                            TARGET)))
    phi = np.array(phi)
    np.testing.assert_allclose(np.asarray(prof["losses"][i]), phi, rtol=1e-5)
    tv, amp = np.abs(np.diff(phi)).sum(), phi.max() - phi.min()
    t.append(tv / (2 * RADIUS * (amp + eps_a)))
  t = np.array(t)
  np.testing.assert_allclose(np.asarray(prof["T"]), t, rtol=1e-3)
  np.testing.assert_allclose(float(prof["index"]), t.std() / (t.mean() + eps_t),
                             rtol=1e-3)


def test_one_compiled_call_and_chunking():
  traces = []

  def loss(p, batch):
    traces.append(1)
    return _rippled(2e-3)(p, batch)

  m, grid = 5, 30
  probe = jax.jit(functools.partial(roughness_profile, loss, num_directions=m,
                                    radius=RADIUS, grid=grid))
  compiled = probe.lower(W0, TARGET, jax.random.PRNGKey(0)).compile()
  assert len(traces) == 1  # one batched trace of the loss for all M·(m+1) points
  prof = compiled(W0, TARGET, jax.random.PRNGKey(0))
  assert prof["losses"].shape == (m, grid + 1)
  chunked = jax.jit(functools.partial(roughness_profile, loss, num_directions=m,
                                      radius=RADIUS, grid=grid, batch_chunk=16)
                    )(W0, TARGET, jax.random.PRNGKey(0))
  np.testing.assert_allclose(np.asarray(chunked["losses"]), np.asarray(prof["losses"]),
                             rtol=1e-6)
  # Same points; losses agree to float rounding (XLA may vectorise differently),
  # and T inherits that rounding through the differences Δφ.
  np.testing.assert_allclose(float(chunked["index"]), float(prof["index"]), rtol=1e-3)


def test_deterministic_for_fixed_key_and_key_matters():
  loss = _rippled(2e-3)
  a = roughness_index(loss, W0, TARGET, jax.random.PRNGKey(7))
  b = roughness_index(loss, W0, TARGET, jax.random.PRNGKey(7))
  c = roughness_index(loss, W0, TARGET, jax.random.PRNGKey(8))
  assert float(a) == float(b)
  assert float(a) != float(c)


def test_validation():
  key = jax.random.PRNGKey(0)
  with pytest.raises(ValueError, match="num_directions"):
    roughness_index(_linear, W0, TARGET, key, num_directions=0)
  with pytest.raises(ValueError, match="grid"):
    roughness_index(_linear, W0, TARGET, key, grid=2.5)
  with pytest.raises(ValueError, match="radius"):
    roughness_index(_linear, W0, TARGET, key, radius=0.0)
  with pytest.raises(ValueError, match="batch_chunk"):
    roughness_index(_linear, W0, TARGET, key, batch_chunk=0)
  with pytest.raises(ValueError, match="params"):
    roughness_index(lambda p, b: 0.0, {}, TARGET, key)


def test_vmap_over_clients():
  loss = _rippled(2e-3)
  params = jax.tree.map(lambda x: jnp.stack([x, x + 0.3]), W0)
  keys = jax.random.split(jax.random.PRNGKey(2), 2)
  probe = functools.partial(roughness_profile, loss, num_directions=3, grid=20)
  batched = jax.jit(jax.vmap(probe, in_axes=(0, None, 0)))(params, TARGET, keys)
  for k in range(2):
    single = probe(jax.tree.map(lambda x: x[k], params), TARGET, keys[k])
    np.testing.assert_allclose(np.asarray(batched["losses"][k]),
                               np.asarray(single["losses"]), rtol=1e-6)
