"""Host-side regression metrics in physical units: RMSE, MAE, MAPE.

Micro metrics pool all samples; macro metrics are the unweighted mean over clients
of each client's metric (clients without samples are skipped). MAPE is in percent.

MAPE rules (``rule``):

* ``"stabilized"`` (default; BEV paper Eq. 34):
  100/N Σ |ŷ − y| / (|y| + ε_Y) over all N samples — ε_Y keeps window energies
  near zero (a parked vehicle with no auxiliary load) from making it unbounded;
* ``"thresholded"``: 100 · mean |ŷ − y| / |y| over the samples with |y| > ε_Y
  only (the others are dropped).
"""
from __future__ import annotations

import numpy as np


def _prep(pred, y, mask=None):
  p = np.asarray(pred, np.float64).reshape(-1)
  t = np.asarray(y, np.float64).reshape(-1)
  if p.shape != t.shape:
    raise ValueError(f"pred and y must have the same number of elements, got "
                     f"{np.shape(pred)} and {np.shape(y)}")
  m = np.ones(p.shape, bool) if mask is None else np.asarray(mask, bool).reshape(-1)
  if m.shape != p.shape:
    raise ValueError(f"mask must have shape {p.shape}, got {np.shape(mask)}")
  return p[m], t[m]


def rmse(pred, y, mask=None) -> float:
  """sqrt(mean((pred - y)²)) over selected samples; NaN if none. ``pred, y [N]``."""
  p, t = _prep(pred, y, mask)
  return float(np.sqrt(np.mean((p - t) ** 2))) if p.size else float("nan")


def mae(pred, y, mask=None) -> float:
  """mean(|pred - y|) over selected samples; NaN if none. ``pred, y [N]``."""
  p, t = _prep(pred, y, mask)
  return float(np.mean(np.abs(p - t))) if p.size else float("nan")


MAPE_RULES = ("stabilized", "thresholded")


def mape(pred, y, mask=None, eps_y: float = 1.0, rule: str = "stabilized") -> float:
  """MAPE (%) over selected samples; NaN if none. ``pred, y [N]``.

  ``rule="stabilized"``: 100/N Σ |pred − y| / (|y| + ε_Y) (BEV paper Eq. 34);
  ``"thresholded"``: 100 · mean |pred − y| / |y| over samples with |y| > ε_Y.
  """
  if not eps_y >= 0:
    raise ValueError(f"eps_y must be >= 0, got {eps_y!r}")
  if rule not in MAPE_RULES:
    raise ValueError(f"rule={rule!r}: allowed values are "
                     f"{', '.join(repr(r) for r in MAPE_RULES)}")
  p, t = _prep(pred, y, mask)
  if rule == "stabilized":
    if not p.size:
      return float("nan")
    return float(100.0 * np.mean(np.abs(p - t) / (np.abs(t) + eps_y)))  # Eq. 34
  keep = np.abs(t) > eps_y
  if not np.any(keep):
    return float("nan")
  return float(100.0 * np.mean(np.abs(p[keep] - t[keep]) / np.abs(t[keep])))


def regression_metrics(pred, y, client_ids=None, eps_y: float = 1.0,
                       mask=None, mape_rule: str = "stabilized") -> dict[str, float]:
  """RMSE, MAE and MAPE (%), micro and macro.

  Args:
    pred, y: ``[N]`` predictions and targets in physical units (Wh).
    client_ids: ``[N]`` int client of each sample; None treats all as one client.
    eps_y: ε_Y of MAPE (same units as y).
    mask: optional ``[N]`` bool selecting samples.
    mape_rule: ``"stabilized"`` (Eq. 34) or ``"thresholded"`` (see :func:`mape`).
  Returns:
    ``{"rmse", "mae", "mape", "rmse_macro", "mae_macro", "mape_macro"}``; macro =
    mean over clients having samples (for thresholded MAPE: samples with
    ``|y| > eps_y``).
  """
  p = np.asarray(pred).reshape(-1)
  n = p.size
  m = np.ones(n, bool) if mask is None else np.asarray(mask, bool).reshape(-1)
  c = np.zeros(n, np.int64) if client_ids is None else np.asarray(
      client_ids).reshape(-1)
  if c.shape != (n,):
    raise ValueError(f"client_ids must have shape ({n},), got {np.shape(client_ids)}")
  out = {"rmse": rmse(pred, y, m), "mae": mae(pred, y, m),
         "mape": mape(pred, y, m, eps_y, mape_rule)}
  per = {"rmse": [], "mae": [], "mape": []}
  for k in np.unique(c[m]):
    mk = m & (c == k)
    per["rmse"].append(rmse(pred, y, mk))
    per["mae"].append(mae(pred, y, mk))
    per["mape"].append(mape(pred, y, mk, eps_y, mape_rule))
  for name, vals in per.items():
    vals = np.asarray(vals, np.float64)
    vals = vals[~np.isnan(vals)]
    out[f"{name}_macro"] = float(np.mean(vals)) if vals.size else float("nan")
  return out
