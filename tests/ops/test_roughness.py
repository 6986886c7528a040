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
                  static_argnames=("loss_fn", "num_directions", "grid", "batch_chunk",
                                   "increments"))


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
  # increments="paper": Eqs. 15-16 on the sampled loss values.
  amplitude, m, grid, eps_a, eps_t = 2e-3, 4, 20, 1e-8, 1e-8
  prof = profile(_rippled, W0, (TARGET, amplitude), jax.random.PRNGKey(3),
                 num_directions=m, radius=RADIUS, grid=grid, increments="paper")
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


def _rippled_slope_np(w, d, target, amplitude):
  w = np.asarray(w, np.float64)
  return float(np.dot(w - target + amplitude * OMEGA * np.cos(OMEGA * w), d))


def test_derivative_increments_equal_trapezoid_of_the_exact_slope():
  # increments="derivative" (default): Δφ_ij = h (φ'(s_j) + φ'(s_{j+1}))/2 with the
  # exact directional derivative, written out in float64 NumPy.
  amplitude, m, grid = 2e-3, 4, 40
  prof = profile(_rippled, W0, (TARGET, amplitude), jax.random.PRNGKey(3),
                 num_directions=m, radius=RADIUS, grid=grid)
  d = np.asarray(prof["directions"], np.float64)
  s = np.linspace(-RADIUS, RADIUS, grid + 1)
  flat0, target = np.asarray(_flat(W0), np.float64), np.asarray(TARGET, np.float64)
  t = []
  for i in range(m):
    slope = np.array([_rippled_slope_np(flat0 + sj * d[i], d[i], target, amplitude)
                      for sj in s])
    # float32 sin/cos at ω·w ≈ 500 rad are good to ~3e-5
    np.testing.assert_allclose(np.asarray(prof["slopes"][i]), slope, atol=1e-4)
    steps = 0.5 * np.diff(s) * (slope[1:] + slope[:-1])
    path = np.concatenate([[0.0], np.cumsum(steps)])
    tv, amp = np.abs(steps).sum(), path.max() - path.min()
    t.append(tv / (2 * RADIUS * (amp + 1e-8)))
    # the trapezoid sums agree with the exact loss differences on this grid
    phi = np.array([_rippled_np(flat0 + sj * d[i], target, amplitude) for sj in s])
    np.testing.assert_allclose(amp, phi.max() - phi.min(), rtol=0.05)
  t = np.array(t)
  np.testing.assert_allclose(np.asarray(prof["T"]), t, rtol=1e-3)
  np.testing.assert_allclose(float(prof["index"]), t.std() / (t.mean() + 1e-8), rtol=1e-2)


def _digits_probe_case(name, n):
  """A freshly initialised digits model (MLP (128, 64) or the MNIST CNN on 8x8
  inputs, whose max pool has a custom gradient) and its mean cross-entropy on n
  samples: slices at ℓ = 0.01 change the loss by ~1e-5 on a loss of 2.3, about
  one float32 spacing per grid step at m = 100."""
  from fedfrac import data as data_lib, models
  from fedfrac.algorithms import tasks
  from fedfrac.config import base_config
  ds = data_lib.sklearn_digits()
  c = base_config()
  c.model.name, c.model.hidden, c.model.padding = name, (128, 64), "SAME"
  model = models.build(c.model, ds.x_train.shape[1:], 10, ds.input_scale)
  batch = (jnp.asarray(ds.x_train[:n]), jnp.asarray(ds.y_train[:n]))

  def loss(p, b):
    return jnp.mean(tasks.cross_entropy(model.apply(p, b[0]), b[1]))
  return loss, model.init(jax.random.PRNGKey(0)), batch


def _assert_rounding_reported(prof):
  assert float(prof["rounding_fraction"]) >= 0.5
  np.testing.assert_array_equal(np.asarray(prof["rounding"]),
                                np.asarray(prof["resolution"]) < 10)


def _assert_same_index(a, b, rtol):
  assert abs(float(a["index"]) - float(b["index"])) <= 1e-4 + rtol * float(b["index"])
  np.testing.assert_allclose(np.asarray(a["A"]), np.asarray(b["A"]), rtol=1e-3)


def test_mlp_probe_agrees_eager_and_jit_at_the_defaults():
  # With the loss-value differences (increments="paper") this case gives
  # I = 0.048 eagerly and 0.063 under jit; the derivative increments (default)
  # give 3.254e-4 both ways.
  loss, params, batch = _digits_probe_case("mlp", 8)
  key = jax.random.PRNGKey(1)
  eager = roughness_profile(loss, params, batch, key)
  jitted = jax.jit(functools.partial(roughness_profile, loss))(params, batch, key)
  _assert_rounding_reported(jitted)
  _assert_same_index(eager, jitted, rtol=1e-2)


def test_cnn_probe_agrees_across_compilations_at_the_defaults():
  # Two compiled forms of the same probe (one vmap, lax.map in chunks): with
  # loss-value differences I = 0.951 and 0.801; with derivative increments
  # (default) the same.
  loss, params, batch = _digits_probe_case("cnn_mnist", 8)
  key = jax.random.PRNGKey(2)
  whole = jax.jit(functools.partial(roughness_profile, loss))(params, batch, key)
  chunked = jax.jit(functools.partial(roughness_profile, loss, batch_chunk=128))(
      params, batch, key)
  _assert_rounding_reported(whole)
  _assert_same_index(chunked, whole, rtol=1e-3)


def test_rounding_flags_slices_below_the_loss_float_spacing():
  # A linear loss on top of a large constant: the same slopes, but each grid step
  # changes the loss by far less than its float32 spacing in the second case.
  batch = jnp.arange(1.0, N + 1) * 1e-3
  for offset, flagged in ((0.0, False), (1e4, True)):
    prof = profile(lambda p, b: _linear(p, b) + offset, W0, batch,
                   jax.random.PRNGKey(1), radius=RADIUS, increments="paper")
    assert bool(np.all(np.asarray(prof["rounding"]))) is flagged
    assert float(prof["rounding_fraction"]) == float(flagged)
  # The derivative increments still see the linear slices (T = 1/(2ℓ), I ≈ 0).
  prof = profile(lambda p, b: _linear(p, b) + 1e4, W0, batch, jax.random.PRNGKey(1),
                 radius=RADIUS)
  assert bool(np.all(np.asarray(prof["rounding"])))
  amp = np.asarray(prof["A"], np.float64)
  np.testing.assert_allclose(np.asarray(prof["T"]), amp / (amp + 1e-8) / (2 * RADIUS),
                             rtol=1e-5)   # TV = A on every slice
  assert float(prof["index"]) < 1e-2


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
  with pytest.raises(ValueError, match="increments='values': allowed values are "
                                       "'derivative', 'paper'"):
    roughness_index(_linear, W0, TARGET, key, increments="values")
  with pytest.raises(ValueError, match="params"):
    roughness_index(lambda p, b: 0.0, {}, TARGET, key)
