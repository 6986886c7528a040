"""Argument checks shared by the ring modules (:mod:`fedfrac.ops.ring`,
:mod:`fedfrac.ops.ring_order`, :mod:`fedfrac.ops.fibfl_schedule`): client counts,
values in [0, 1], pass counts and ring orders, each a ``ValueError`` naming the
argument.
"""
from __future__ import annotations

import numbers
from typing import Any, Optional

import numpy as np
from numpy.typing import ArrayLike

from fedfrac._validation import is_traced


def check_n(n: int, name: str = "n", minimum: int = 2) -> int:
  if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < minimum:
    raise ValueError(
        f"{name} must be an integer >= {minimum} (the number of clients on the "
        f"ring; n = 2 means both neighbours are the same client), got {n!r}.")
  return int(n)


def check_unit_interval(name: str, value: Any, shape_ok: Optional[tuple] = None) -> None:
  """Checks a concrete scalar/array lies in [0, 1]; tracers pass unchecked."""
  if value is None or is_traced(value):
    return
  arr = np.asarray(value, dtype=np.float64)
  if shape_ok is not None and arr.shape not in shape_ok:
    raise ValueError(
        f"{name} must have shape {' or '.join(str(s) for s in shape_ok)}, got "
        f"shape {arr.shape}.")
  if not np.all(np.isfinite(arr)) or np.any(arr < 0.0) or np.any(arr > 1.0):
    raise ValueError(f"{name} must lie in [0, 1], got {value!r}.")


def check_passes(passes: int) -> int:
  if (isinstance(passes, bool) or not isinstance(passes, numbers.Integral)
      or passes < 1):
    raise ValueError(
        f"passes must be an integer >= 1 (gossip passes per round), got "
        f"{passes!r}.")
  return int(passes)


def check_order_np(order: ArrayLike, n: int, name: str = "order") -> np.ndarray:
  """Concrete permutation of range(n) as an int64 array."""
  arr = np.asarray(order)
  if arr.ndim != 1 or arr.shape[0] != n:
    raise ValueError(
        f"{name} must be a permutation of range({n}) (shape ({n},)), got "
        f"shape {arr.shape}.")
  if arr.dtype.kind not in "iu":
    if arr.dtype.kind == "f" and np.all(arr == np.round(arr)):
      arr = arr.astype(np.int64)
    else:
      raise ValueError(
          f"{name} must hold integer client ids, got dtype {arr.dtype}.")
  arr = arr.astype(np.int64)
  if not np.array_equal(np.sort(arr), np.arange(n)):
    raise ValueError(
        f"{name} must be a permutation of range({n}), got {arr.tolist()}.")
  return arr
