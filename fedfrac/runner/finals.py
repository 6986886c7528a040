"""A run's and a sweep's methods as data, without drawing: per-round
:class:`Curve` s and final :class:`Final` values, the reference method (FedAvg),
the ranking and the marks (diverged, partial, stand-in).

:mod:`fedfrac.runner.overview` draws them and
:mod:`fedfrac.runner.summary_table` tabulates them; this module imports no
plotting library, so a table never loads matplotlib.
"""
from __future__ import annotations

import math
from typing import Mapping, NamedTuple, Optional, Sequence

import numpy as np

from fedfrac.algorithms import families as catalog


class Curve(NamedTuple):
  """One method's metric per round: ``values [seeds, n]`` at ``rounds [n]``, and
  the statuses of its runs."""
  label: str
  algorithm: str
  rounds: np.ndarray
  values: np.ndarray
  statuses: tuple = ()


class Final(NamedTuple):
  """One method's final value over seeds (mean, sample std, seeds counted) and
  the statuses of its runs (``ok``, ``partial``, ``diverged at round r``)."""
  label: str
  algorithm: str
  mean: Optional[float]
  std: float
  n: int
  statuses: tuple


def reference_label(items: Sequence) -> Optional[str]:
  """The label of the reference method among ``items`` (:class:`Curve` or
  :class:`Final`): the one labelled ``fedavg``, else the first whose algorithm
  is FedAvg; None when there is none."""
  labels = [i.label for i in items]
  if catalog.REFERENCE in labels:
    return catalog.REFERENCE
  return next((i.label for i in items if i.algorithm == catalog.REFERENCE), None)


def larger_is_better(metric: str) -> bool:
  """Whether a larger ``metric`` is better (not for errors and losses)."""
  return not any(word in metric for word in ("rmse", "mae", "mape", "loss"))


def marks(item) -> list:
  """What a method (a :class:`Final` or :class:`Curve`) is marked with:
  ``diverged``, ``partial``, ``stand-in``."""
  out = []
  if any(s.startswith("diverged") for s in item.statuses):
    out.append("diverged")
  if "partial" in item.statuses:
    out.append("partial")
  if item.algorithm in catalog.STAND_INS:
    out.append("stand-in")
  return out


def tagged(item) -> str:
  """``item``'s label with its :func:`marks`, e.g. ``fdse [stand-in]``."""
  return item.label + "".join(f" [{m}]" for m in marks(item))


def ranked(finals: Sequence[Final], higher_is_better: bool = True) -> list:
  """``finals`` best first, ties by label; methods with a diverged run after the
  others (their value is that of their last finite round), then those without
  a value."""
  sign = -1.0 if higher_is_better else 1.0
  return sorted(finals, key=lambda f: (f.mean is None, "diverged" in marks(f),
                                       0.0 if f.mean is None else sign * f.mean, f.label))


def results_curves(results, metric: str) -> list:
  """The :class:`Curve` of every method of ``results`` (runs cut to their common
  length; methods without rows are left out)."""
  out = []
  for method in results.methods():
    recs = [rec for rec in results.records if rec.method == method]
    pairs = [rec.curve(metric, default=np.nan) for rec in recs]
    length = min(len(r) for r, _ in pairs)
    if length:
      out.append(Curve(method, recs[0].algorithm, pairs[0][0][:length],
                       np.stack([v[:length] for _, v in pairs]),
                       tuple(sorted({rec.status for rec in recs}))))
  return out


def summary_finals(summary: Mapping, metric: str) -> list:
  """The :class:`Final` of every method of a run's summary (``Results.summary()``)."""
  out = []
  for method, m in summary["methods"].items():
    stats = m["mean"].get(metric) or {}
    mean = stats.get("mean")
    mean = None if mean is None or not math.isfinite(mean) else float(mean)
    out.append(Final(method, m["algorithm"], mean, stats.get("std") or 0.0,
                     stats.get("n", 0), tuple(sorted({e["status"] for e in
                                                      m["seeds"].values()}))))
  return out
