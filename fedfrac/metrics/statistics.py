"""Statistics of learning curves and over seeds: rounds to target, plateau σ,
mean / std / 95% confidence interval."""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np


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
  """``mean ± sample std`` over ``values`` (None skipped); one value alone
  (no spread to show), ``n/a`` for none."""
  s = seed_stats(values)
  if s["mean"] is None:
    return "n/a"
  if s["n"] == 1:
    return f"{s['mean']:.{digits}f}"
  return f"{s['mean']:.{digits}f} ± {s['std']:.{digits}f}"
