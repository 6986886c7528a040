"""Metrics: accuracy, Gini, rounds-to-target, seed statistics, communication.

Functions ending in ``_jnp`` run under jit; the rest are host-side NumPy.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import jax.numpy as jnp
import numpy as np


def gini(values) -> float:
  """Gini coefficient of non-negative values (0 = perfectly equal).

  G = Σ_i Σ_j |x_i − x_j| / (2 n² mean(x)); 0 for an all-zero vector.
  """
  x = np.asarray(values, np.float64).ravel()
  if x.size == 0:
    raise ValueError("gini: values is empty")
  if np.any(x < 0):
    raise ValueError("gini: values must be non-negative")
  mean = x.mean()
  if mean == 0:
    return 0.0
  return float(np.abs(x[:, None] - x[None, :]).sum() / (2 * x.size ** 2 * mean))


def gini_jnp(values, mask=None):
  """Jittable Gini over the entries where ``mask`` is true."""
  x = jnp.asarray(values, jnp.float32)
  m = jnp.ones_like(x) if mask is None else jnp.asarray(mask, jnp.float32)
  n = jnp.maximum(m.sum(), 1.0)
  mean = jnp.sum(m * x) / n
  diff = jnp.abs(x[:, None] - x[None, :]) * m[:, None] * m[None, :]
  return jnp.where(mean > 0, diff.sum() / (2 * n ** 2 * jnp.maximum(mean, 1e-12)), 0.0)


def accuracy(logits, labels) -> float:
  return float(np.mean(np.argmax(np.asarray(logits), -1) == np.asarray(labels)))


def rounds_to_target(rounds: Sequence[int], values: Sequence[float], target: float,
                     higher_is_better: bool = True) -> Optional[int]:
  """First evaluated round (1-based count of finished rounds) reaching ``target``."""
  for r, v in zip(rounds, values):
    if v is None or not np.isfinite(v):
      continue
    if (v >= target) if higher_is_better else (v <= target):
      return int(r)
  return None


def plateau_std(values: Sequence[float]) -> float:
  """Std of a curve over its last half (FIRMA plateau σ)."""
  v = np.asarray(values, np.float64)
  return float(v[len(v) // 2:].std()) if v.size else float("nan")


def seed_stats(values: Sequence[float]) -> dict:
  """Mean, sample std and 95% Student-t half-width over seeds."""
  v = np.asarray([x for x in values if x is not None], np.float64)
  n = v.size
  if n == 0:
    return {"mean": None, "std": None, "ci95": None, "n": 0}
  std = float(v.std(ddof=1)) if n > 1 else 0.0
  half = float(_t975(n - 1) * std / math.sqrt(n)) if n > 1 else 0.0
  return {"mean": float(v.mean()), "std": std, "ci95": half, "n": int(n)}


def _t975(dof: int) -> float:
  from scipy import stats
  return float(stats.t.ppf(0.975, dof))


def format_mean_std(values, digits=4) -> str:
  s = seed_stats(values)
  if s["mean"] is None:
    return "n/a"
  return f"{s['mean']:.{digits}f} ± {s['std']:.{digits}f}"
