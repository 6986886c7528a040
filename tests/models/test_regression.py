"""Window regression models, masked losses and host-side regression metrics."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac.metrics import regression as rm
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
  y[:3] = [0.0, 0.5, -0.2]  # near-zero labels: excluded by the thresholded MAPE
  p = y + rng.normal(0, 5, size=40)
  c = np.repeat([0, 1, 2, 3], 10)
  out = rm.regression_metrics(p, y, c, eps_y=1.0, mape_rule="thresholded")
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
  assert np.isnan(rm.mape(p[:3], y[:3], eps_y=1.0, rule="thresholded"))
  assert np.isclose(rm.mape([2.0], [1.0], eps_y=0.0), 100.0)
  with pytest.raises(ValueError, match="rule='drop'"):
    rm.mape(p, y, rule="drop")
  with pytest.raises(ValueError, match="same number"):
    rm.rmse(p, y[:-1])
  with pytest.raises(ValueError, match="client_ids"):
    rm.regression_metrics(p, y, c[:-1])


def _mape_eq34(pred, y, eps_y):
  """FO-RI-FedAvg Eq. 34 transcribed: 100/N Σ |ŷ − y| / (|y| + ε_Y), all N windows."""
  total = 0.0
  for yh, yt in zip(pred, y):
    total += abs(yh - yt) / (abs(yt) + eps_y)
  return 100.0 * total / len(y)


def test_mape_is_eq34_over_every_window():
  rng = np.random.default_rng(4)
  y = rng.normal(200, 120, size=60)
  y[:6] = [0.0, 1.5, -3.0, 4.0, -0.5, 9.0]   # windows with |Y| < ε_Y = 10
  p = y + rng.normal(0, 20, size=60)
  c = np.repeat(np.arange(4), 15)
  eps = 10.0
  assert np.isclose(rm.mape(p, y, eps_y=eps), _mape_eq34(p, y, eps), rtol=1e-12)
  out = rm.regression_metrics(p, y, c, eps_y=eps)
  assert np.isclose(out["mape"], _mape_eq34(p, y, eps), rtol=1e-12)
  assert np.isclose(out["mape_macro"], np.mean(
      [_mape_eq34(p[c == k], y[c == k], eps) for k in range(4)]), rtol=1e-12)
  # The engine's per-example terms (task.example_stats) give the same MAPE, with
  # the labels de-normalised per sample (y = y_n · scale + center).
  from fedfrac.algorithms import tasks
  scale, center = rng.uniform(50, 150, 60), rng.uniform(-20, 20, 60)
  yn, pn = (y - center) / scale, (p - center) / scale
  st = tasks.regression_task("mse", mape_eps=eps).example_stats(
      jnp.asarray(pn, jnp.float32), jnp.asarray(yn, jnp.float32),
      jnp.asarray(scale, jnp.float32), jnp.asarray(center, jnp.float32))
  got = float(jnp.sum(st["ape"]) / jnp.sum(st["ape_count"]))
  assert got == pytest.approx(_mape_eq34(p, y, eps), rel=1e-4)
  thr = tasks.regression_task("mse", mape_eps=eps, mape_rule="thresholded").example_stats(
      jnp.asarray(pn, jnp.float32), jnp.asarray(yn, jnp.float32),
      jnp.asarray(scale, jnp.float32), jnp.asarray(center, jnp.float32))
  keep = np.abs(y) > eps
  assert float(jnp.sum(thr["ape"]) / jnp.sum(thr["ape_count"])) == pytest.approx(
      100 * np.mean(np.abs(p - y)[keep] / np.abs(y[keep])), rel=1e-4)
