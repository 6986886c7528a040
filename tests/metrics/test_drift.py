"""Drift and roughness–drift diagnostics: NumPy helpers vs SciPy, jnp vs NumPy."""
from __future__ import annotations

import jax
import numpy as np
import pytest
from scipy import stats

from fedfrac import metrics


def test_drift_stats_known_values():
  out = metrics.drift_stats([1.0, 2.0, 3.0])
  assert out["drift_mean"] == pytest.approx(2.0)
  assert out["drift_cv"] == pytest.approx(np.sqrt(2.0 / 3.0) / 2.0)
  assert metrics.drift_stats([0.0, 0.0])["drift_cv"] == 0.0
  assert np.isnan(metrics.drift_stats([])["drift_mean"])


def test_numpy_correlations_match_scipy_with_ties():
  rng = np.random.default_rng(0)
  for _ in range(5):
    x = rng.integers(0, 4, 9).astype(float)       # many ties
    y = x + rng.normal(size=9)
    assert metrics.pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
    assert metrics.spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)
  np.testing.assert_array_equal(metrics.average_ranks([3, 1, 3, 2]), [3.5, 1, 3.5, 2])
  assert np.isnan(metrics.pearson([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))
  assert np.isnan(metrics.spearman([1.0], [2.0]))
  with pytest.raises(ValueError, match="equal lengths"):
    metrics.pearson([1.0, 2.0], [1.0])


@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 11, 13])
def test_tertiles_split_like_array_split(n):
  key = np.random.default_rng(n).permutation(n).astype(float)
  groups = metrics.tertile_groups(key)
  sizes = [int(np.sum(groups == g)) for g in range(3)]
  assert sizes == [len(a) for a in np.array_split(np.arange(n), 3)]
  order = np.argsort(key)
  assert np.all(np.diff(groups[order]) >= 0)     # low keys in low tertiles


def test_jnp_versions_match_numpy_under_a_mask():
  rng = np.random.default_rng(1)
  jitted = jax.jit(lambda r, d, m: {**metrics.drift_stats_jnp(d, m),
                                    **metrics.roughness_drift_diagnostics_jnp(r, d, m)})
  for trial in range(6):
    s = 10
    rough = rng.integers(0, 5, s).astype(np.float32) / 4 if trial % 2 else \
        rng.random(s).astype(np.float32)
    drift = (rough + rng.normal(scale=0.3, size=s)).astype(np.float32) ** 2
    mask = rng.random(s) < 0.8
    mask[:3] = True
    got = jitted(rough, drift, mask)
    r, d = rough[mask].astype(np.float64), drift[mask].astype(np.float64)
    want = metrics.drift_stats(d)
    assert float(got["drift_mean"]) == pytest.approx(want["drift_mean"], rel=1e-5)
    assert float(got["drift_cv"]) == pytest.approx(want["drift_cv"], rel=1e-4)
    assert float(got["pearson_roughness_drift"]) == pytest.approx(metrics.pearson(r, d),
                                                                  abs=1e-5)
    assert float(got["spearman_roughness_drift"]) == pytest.approx(
        stats.spearmanr(r, d)[0], abs=1e-5)
    tert = [float(got[f"drift_tertile_{n}"]) for n in ("low", "mid", "high")]
    np.testing.assert_allclose(tert, metrics.tertile_means(r, d), rtol=1e-5)
    assert float(got["roughness_mean"]) == pytest.approx(r.mean(), rel=1e-5)


def test_jnp_undefined_cases_are_nan_not_errors():
  one = np.asarray([True, False, False])
  out = metrics.roughness_drift_diagnostics_jnp(np.ones(3), np.arange(3.0), one)
  assert np.isnan(float(out["pearson_roughness_drift"]))
  assert np.isnan(float(out["drift_tertile_mid"]))
  none = metrics.drift_stats_jnp(np.ones(3), np.zeros(3, bool))
  assert np.isnan(float(none["drift_mean"]))
