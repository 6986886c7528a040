"""Client drift and roughness–drift diagnostics (BEV paper Eqs. 36–38, docs/design.md §3.2).

Drift of client k in round t is Δ_t^k = w_{t+1}^k − w_t (its local model after
the round minus the global model it started from); D_t^k = ‖Δ_t^k‖₂.
D_mean = mean_k D_t^k and D_cv = std_k D_t^k / D_mean (population std) over the
clients that took part in the round. Correlations and tertiles relate D_t^k to
the clients' roughness indices I_k. The ``_jnp`` versions take a participation
mask ``[S]`` and run under jit; the NumPy versions take only the valid entries.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np


def drift_stats(norms) -> dict:
  """``{"drift_mean", "drift_cv"}`` of drift norms ``[n]`` (BEV paper Eqs. 36–38).

  D_cv is 0 when every norm is 0; both are NaN for an empty input.
  """
  d = np.asarray(norms, np.float64).ravel()
  if d.size == 0:
    return {"drift_mean": float("nan"), "drift_cv": float("nan")}
  mean = d.mean()
  return {"drift_mean": float(mean),
          "drift_cv": float(d.std() / mean) if mean > 0 else 0.0}


def drift_stats_jnp(norms, mask):
  """Jittable :func:`drift_stats` over the entries where ``mask`` is true."""
  d = jnp.asarray(norms, jnp.float32)
  m = jnp.asarray(mask, jnp.float32)
  n = m.sum()
  mean = jnp.sum(m * d) / jnp.maximum(n, 1.0)  # D_mean (Eq. 37)
  std = jnp.sqrt(jnp.sum(m * (d - mean) ** 2) / jnp.maximum(n, 1.0))
  cv = jnp.where(mean > 0, std / jnp.where(mean > 0, mean, 1.0), 0.0)  # D_cv (Eq. 38)
  nan = jnp.full((), jnp.nan, jnp.float32)
  return {"drift_mean": jnp.where(n > 0, mean, nan), "drift_cv": jnp.where(n > 0, cv, nan)}


def pearson(x, y) -> float:
  """Pearson correlation of ``x``, ``y`` ``[n]``; NaN if n < 2 or a variance is 0."""
  x = np.asarray(x, np.float64).ravel()
  y = np.asarray(y, np.float64).ravel()
  if x.shape != y.shape:
    raise ValueError(f"pearson: x and y need equal lengths, got {x.size} and {y.size}")
  if x.size < 2:
    return float("nan")
  xc, yc = x - x.mean(), y - y.mean()
  den = np.sqrt((xc ** 2).sum() * (yc ** 2).sum())
  return float((xc * yc).sum() / den) if den > 0 else float("nan")


def average_ranks(x) -> np.ndarray:
  """1-based ranks of ``x`` ``[n]`` with ties given their average rank."""
  x = np.asarray(x, np.float64).ravel()
  less = (x[None, :] < x[:, None]).sum(1)
  equal = (x[None, :] == x[:, None]).sum(1)
  return less + (equal + 1) / 2.0


def spearman(x, y) -> float:
  """Spearman rank correlation (Pearson of average ranks); NaN when undefined."""
  return pearson(average_ranks(x), average_ranks(y))


def tertile_groups(key) -> np.ndarray:
  """Tertile (0, 1, 2) of each entry of ``key`` ``[n]`` by ascending value.

  Entries are ordered by (value, position); the one at 0-based order r goes to
  tertile floor(3r/n), so sizes differ by at most one and larger groups come
  first (as ``np.array_split``).
  """
  key = np.asarray(key, np.float64).ravel()
  order = np.argsort(key, kind="stable")
  ranks = np.empty(key.size, np.int64)
  ranks[order] = np.arange(key.size)
  return (3 * ranks) // max(key.size, 1)


def tertile_means(key, values) -> np.ndarray:
  """Mean of ``values`` within each tertile of ``key``: ``[3]`` (NaN if empty)."""
  groups = tertile_groups(key)
  v = np.asarray(values, np.float64).ravel()
  return np.asarray([v[groups == g].mean() if np.any(groups == g) else np.nan
                     for g in range(3)])


def _pearson_jnp(x, y, m):
  n = m.sum()
  mx = jnp.sum(m * x) / jnp.maximum(n, 1.0)
  my = jnp.sum(m * y) / jnp.maximum(n, 1.0)
  xc, yc = m * (x - mx), m * (y - my)
  den = jnp.sqrt(jnp.sum(xc ** 2) * jnp.sum(yc ** 2))
  ok = (n >= 2) & (den > 0)
  return jnp.where(ok, jnp.sum(xc * yc) / jnp.where(ok, den, 1.0), jnp.nan)


def _average_ranks_jnp(x, m):
  valid = m[None, :] > 0
  less = jnp.sum(valid & (x[None, :] < x[:, None]), axis=1)
  equal = jnp.sum(valid & (x[None, :] == x[:, None]), axis=1)
  return less + (equal + 1) / 2.0


def pearson_jnp(x, y, mask):
  """Jittable :func:`pearson` over the entries where ``mask`` is true."""
  x = jnp.asarray(x, jnp.float32)
  y = jnp.asarray(y, jnp.float32)
  return _pearson_jnp(x, y, jnp.asarray(mask, jnp.float32))


def spearman_jnp(x, y, mask):
  """Jittable :func:`spearman` (average ranks among the masked-in entries)."""
  m = jnp.asarray(mask, jnp.float32)
  x = jnp.asarray(x, jnp.float32)
  y = jnp.asarray(y, jnp.float32)
  return _pearson_jnp(_average_ranks_jnp(x, m), _average_ranks_jnp(y, m), m)


def tertile_means_jnp(key, values, mask):
  """Jittable :func:`tertile_means` over the masked-in entries: ``[3]``."""
  key = jnp.asarray(key, jnp.float32)
  v = jnp.asarray(values, jnp.float32)
  valid = jnp.asarray(mask, bool)
  n = valid.sum()
  order = jnp.argsort(jnp.where(valid, key, jnp.inf), stable=True)
  ranks = jnp.zeros(key.shape, jnp.int32).at[order].set(
      jnp.arange(key.shape[0], dtype=jnp.int32))
  groups = (3 * ranks) // jnp.maximum(n, 1)
  out = []
  for g in range(3):
    w = (valid & (groups == g)).astype(jnp.float32)
    out.append(jnp.where(w.sum() > 0, jnp.sum(w * v) / jnp.maximum(w.sum(), 1.0), jnp.nan))
  return jnp.stack(out)


def roughness_drift_diagnostics_jnp(roughness, drift, mask) -> dict:
  """Per-round roughness–drift diagnostics of a cohort (all ``[S]``).

  Returns scalars ``roughness_mean``, ``pearson_roughness_drift``,
  ``spearman_roughness_drift`` and ``drift_tertile_{low,mid,high}`` (mean drift
  norm of the clients in the lowest / middle / highest roughness tertile).
  """
  m = jnp.asarray(mask, jnp.float32)
  rough = jnp.asarray(roughness, jnp.float32)
  tert = tertile_means_jnp(rough, drift, mask)
  n = m.sum()
  return {
      "roughness_mean": jnp.where(n > 0, jnp.sum(m * rough) / jnp.maximum(n, 1.0), jnp.nan),
      "pearson_roughness_drift": pearson_jnp(rough, drift, mask),
      "spearman_roughness_drift": spearman_jnp(rough, drift, mask),
      "drift_tertile_low": tert[0], "drift_tertile_mid": tert[1],
      "drift_tertile_high": tert[2],
  }
