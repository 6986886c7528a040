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
OMEGA = 500.0

profile = jax.jit(roughness_profile,
                  static_argnames=("loss_fn", "num_directions", "grid", "batch_chunk"))


def _flat(p):
  return jnp.concatenate([p["a"], p["b"]])


def _linear(p, batch):
  return jnp.dot(_flat(p), batch)


def _rippled(p, batch):
  # Quadratic far from its minimum (monotone slices) plus a high-frequency ripple
  # of amplitude a whose period 2π/(ω|d_k|) is below the slice width 2ℓ.
  target, amplitude = batch
  w = _flat(p)
  return 0.5 * jnp.sum((w - target) ** 2) + amplitude * jnp.sum(jnp.sin(OMEGA * w))


def _rippled_np(w, target, amplitude):
  w = np.asarray(w, np.float64)
  return 0.5 * np.sum((w - target) ** 2) + amplitude * np.sum(np.sin(OMEGA * w))


def test_linear_loss_gives_flat_t_and_zero_index():
  prof = profile(_linear, W0, jnp.arange(1.0, N + 1), jax.random.PRNGKey(1),
                 radius=RADIUS)
  np.testing.assert_allclose(np.asarray(prof["T"]), 1.0 / (2 * RADIUS), rtol=1e-4)
  np.testing.assert_allclose(np.asarray(prof["TV"]), np.asarray(prof["A"]), rtol=1e-4)
  assert float(prof["index"]) < 1e-4


def test_ripple_index_positive_and_grows_with_amplitude():
  key = jax.random.PRNGKey(0)
  index = lambda a: float(profile(_rippled, W0, (TARGET, a), key, radius=RADIUS)["index"])
  assert index(0.0) < 1e-4  # monotone quadratic slices
  values = [index(a) for a in (1e-3, 2e-3, 3e-3)]
  assert values[0] > 0.01
  assert values[0] < values[1] < values[2]
  prof = profile(_rippled, W0, (TARGET, 3e-3), key, radius=RADIUS)
  # TV ≥ A on every slice, hence T_i ≥ (1/2ℓ)·A/(A+ε) ≈ 1/(2ℓ).
  assert np.all(np.asarray(prof["T"]) >= (1 - 1e-5) / (2 * RADIUS))


def test_batched_probe_equals_per_direction_loop():
  amplitude, m, grid, eps_a, eps_t = 2e-3, 4, 20, 1e-8, 1e-8
  prof = profile(_rippled, W0, (TARGET, amplitude), jax.random.PRNGKey(3),
                 num_directions=m, radius=RADIUS, grid=grid)
  d = np.asarray(prof["directions"], np.float64)
  s = np.linspace(-RADIUS, RADIUS, grid + 1)
  np.testing.assert_allclose(np.linalg.norm(d, axis=1), 1.0, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(prof["offsets"]), s, atol=1e-8)
  flat0 = np.asarray(_flat(W0), np.float64)
  target = np.asarray(TARGET, np.float64)
  t = []
  for i in range(m):  # the explicit per-direction loop, in float64 NumPy
    phi = np.array([_rippled_np(flat0 + sj * d[i], target, amplitude) for sj in s])
    np.testing.assert_allclose(np.asarray(prof["losses"][i]), phi, rtol=1e-5)
    tv, amp = np.abs(np.diff(phi)).sum(), phi.max() - phi.min()
    t.append(tv / (2 * RADIUS * (amp + eps_a)))
  t = np.array(t)
  np.testing.assert_allclose(np.asarray(prof["T"]), t, rtol=1e-3)
  np.testing.assert_allclose(float(prof["index"]), t.std() / (t.mean() + eps_t),
                             rtol=1e-2)


def test_one_compiled_call_and_chunking():
  traces = []

  def loss(p, batch):
    traces.append(1)
    return _rippled(p, batch)

  m, grid, batch = 5, 30, (TARGET, 2e-3)
  probe = jax.jit(functools.partial(roughness_profile, loss, num_directions=m,
                                    radius=RADIUS, grid=grid))
  compiled = probe.lower(W0, batch, jax.random.PRNGKey(0)).compile()
  assert len(traces) == 1  # one batched trace of the loss for all M·(m+1) points
  prof = compiled(W0, batch, jax.random.PRNGKey(0))
  assert prof["losses"].shape == (m, grid + 1)
  chunked = profile(loss, W0, batch, jax.random.PRNGKey(0), num_directions=m,
                    radius=RADIUS, grid=grid, batch_chunk=16)
  # Same points; losses agree to float rounding (XLA may vectorise differently),
  # and T inherits that rounding through the differences Δφ.
  np.testing.assert_allclose(np.asarray(chunked["losses"]), np.asarray(prof["losses"]),
                             rtol=1e-6)
  np.testing.assert_allclose(float(chunked["index"]), float(prof["index"]), rtol=1e-3)


def test_deterministic_for_fixed_key_and_key_matters():
  batch = (TARGET, 2e-3)
  a = profile(_rippled, W0, batch, jax.random.PRNGKey(7))["index"]
  b = profile(_rippled, W0, batch, jax.random.PRNGKey(7))["index"]
  c = profile(_rippled, W0, batch, jax.random.PRNGKey(8))["index"]
  assert float(a) == float(b)
  assert float(a) != float(c)
  index = jax.jit(functools.partial(roughness_index, _rippled))
  assert float(index(W0, batch, jax.random.PRNGKey(7))) == pytest.approx(float(a),
                                                                         rel=1e-3)


def test_vmap_over_clients():
  params = jax.tree.map(lambda x: jnp.stack([x, x + 0.3]), W0)
  keys = jax.random.split(jax.random.PRNGKey(2), 2)
  batch = (TARGET, 2e-3)
  probe = jax.jit(functools.partial(roughness_profile, _rippled, num_directions=3,
                                    grid=20))
  batched = jax.jit(jax.vmap(probe, in_axes=(0, None, 0)))(params, batch, keys)
  for k in range(2):
    single = probe(jax.tree.map(lambda x: x[k], params), batch, keys[k])
    np.testing.assert_allclose(np.asarray(batched["losses"][k]),
                               np.asarray(single["losses"]), rtol=1e-6)


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
