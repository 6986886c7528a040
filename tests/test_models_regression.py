"""Window regression models, masked losses and host-side regression metrics."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac import regression_metrics as rm
from fedfrac.models import regression as reg

B, L, F = 5, 12, 6


@pytest.mark.parametrize("model", [reg.WindowMLP(hidden=(16, 8)), reg.WindowGRU(hidden=8),
                                   reg.WindowLSTM(hidden=8)])
def test_shapes_param_split_and_order(model):
  x = jax.random.normal(jax.random.key(0), (B, L, F))
  params = jax.jit(model.init)(jax.random.key(1), x)["params"]
  assert set(params) == {"extractor", "head"}
  apply = jax.jit(lambda p, x: model.apply({"params": p}, x, train=True,
                                           return_features=True))
  out, feats = apply(params, x)
  assert out.shape == (B,) and out.dtype == jnp.float32
  assert feats.shape == (B, 8)
  # Head is linear on the features.
  k = params["head"]["Dense_0"]["kernel"]
  b = params["head"]["Dense_0"]["bias"]
  np.testing.assert_allclose(out, feats @ k[:, 0] + b[0], rtol=1e-5, atol=1e-6)
  # Samples are independent: changing other rows leaves row 2 unchanged.
  x_other = x.at[np.array([0, 1, 3, 4])].set(5.0)
  out_other, _ = apply(params, x_other)
  np.testing.assert_allclose(out_other[2], out[2], rtol=1e-5, atol=1e-6)
  # The first time step matters (recurrent state carries it) and order matters.
  assert not np.allclose(apply(params, x.at[:, 0].add(3.0))[0], out)
  assert not np.allclose(apply(params, x[:, ::-1])[0], out)


def test_recurrent_cell_validation():
  with pytest.raises(ValueError, match="cell"):
    reg.RecurrentExtractor(hidden=4, cell="rnn").init(jax.random.key(0),
                                                      jnp.zeros((1, 3, 2)))


def test_mlp_hidden_sizes():
  model = reg.WindowMLP(hidden=(16, 8))
  params = jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((1, L, F)))["params"]
  ext = params["extractor"]
  assert ext["Dense_0"]["kernel"].shape == (L * F, 16)
  assert ext["Dense_1"]["kernel"].shape == (16, 8)
  assert params["head"]["Dense_0"]["kernel"].shape == (8, 1)


def _np_huber(e, d):
  a = np.abs(e)
  return np.where(a <= d, 0.5 * e * e, d * (a - 0.5 * d))


def test_losses_match_numpy_and_ignore_masked():
  rng = np.random.default_rng(0)
  p = rng.normal(size=20).astype(np.float32)
  y = rng.normal(size=20).astype(np.float32) * 2
  m = rng.random(20) > 0.4
  np.testing.assert_allclose(reg.mse_loss(p, y), np.mean((p - y) ** 2), rtol=1e-5)
  np.testing.assert_allclose(reg.mse_loss(p, y, m), np.mean((p[m] - y[m]) ** 2),
                             rtol=1e-5)
  for d in (0.5, 1.0, 3.0):
    np.testing.assert_allclose(reg.huber_loss(p, y, m, delta=d),
                               np.mean(_np_huber(p[m] - y[m], d)), rtol=1e-5)
  # Masked samples are ignored, even if they hold NaN or huge values.
  p_bad = np.where(m, p, np.nan).astype(np.float32)
  y_bad = np.where(m, y, 1e30).astype(np.float32)
  np.testing.assert_allclose(reg.mse_loss(p_bad, y_bad, m), reg.mse_loss(p, y, m),
                             rtol=1e-6)
  np.testing.assert_allclose(reg.huber_loss(p_bad, y_bad, m), reg.huber_loss(p, y, m),
                             rtol=1e-6)
  g = jax.jit(jax.grad(lambda q: reg.mse_loss(q, y_bad, m)))(jnp.asarray(p_bad))
  assert np.all(np.isfinite(g)) and np.all(np.asarray(g)[~m] == 0)
  # Empty mask gives 0 (not NaN); jit works.
  assert float(reg.mse_loss(p, y, np.zeros(20, bool))) == 0.0
  np.testing.assert_allclose(jax.jit(reg.huber_loss)(p, y, m), reg.huber_loss(p, y, m))
  with pytest.raises(ValueError, match="delta"):
    reg.huber_loss(p, y, m, delta=0.0)


def test_regression_metrics_vs_numpy():
  rng = np.random.default_rng(1)
  y = rng.normal(50, 30, size=40)
  y[:3] = [0.0, 0.5, -0.2]  # near-zero labels excluded from MAPE by eps_y=1
  p = y + rng.normal(0, 5, size=40)
  c = np.repeat([0, 1, 2, 3], 10)
  out = rm.regression_metrics(p, y, c, eps_y=1.0)
  e = p - y
  assert np.isclose(out["rmse"], np.sqrt(np.mean(e ** 2)))
  assert np.isclose(out["mae"], np.mean(np.abs(e)))
  keep = np.abs(y) > 1.0
  assert np.isclose(out["mape"], 100 * np.mean(np.abs(e[keep]) / np.abs(y[keep])))
  per_rmse = [np.sqrt(np.mean(e[c == k] ** 2)) for k in range(4)]
  per_mae = [np.mean(np.abs(e[c == k])) for k in range(4)]
  per_mape = [100 * np.mean(np.abs(e[(c == k) & keep]) / np.abs(y[(c == k) & keep]))
              for k in range(4)]
  assert np.isclose(out["rmse_macro"], np.mean(per_rmse))
  assert np.isclose(out["mae_macro"], np.mean(per_mae))
  assert np.isclose(out["mape_macro"], np.mean(per_mape))
  # Micro differs from macro when clients have unequal sizes.
  c2 = np.array([0] * 35 + [1] * 5)
  out2 = rm.regression_metrics(p, y, c2)
  assert np.isclose(out2["rmse"], out["rmse"])
  assert np.isclose(out2["rmse_macro"], np.mean(
      [np.sqrt(np.mean(e[:35] ** 2)), np.sqrt(np.mean(e[35:] ** 2))]))
  # Mask; all-near-zero labels give NaN MAPE; shape errors.
  m = c < 2
  assert np.isclose(rm.rmse(p, y, m), np.sqrt(np.mean(e[m] ** 2)))
  assert np.isnan(rm.mape(p[:3], y[:3], eps_y=1.0))
  assert np.isclose(rm.mape([2.0], [1.0], eps_y=0.0), 100.0)
  with pytest.raises(ValueError, match="same number"):
    rm.rmse(p, y[:-1])
  with pytest.raises(ValueError, match="client_ids"):
    rm.regression_metrics(p, y, c[:-1])
