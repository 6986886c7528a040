"""Small helpers shared by argument checks across fedfrac."""
from __future__ import annotations

import numbers

import jax
import numpy as np


def concrete_scalar(x):
  """``float(x)`` for a concrete real scalar; None for a traced value.

  Non-scalar or non-numeric concrete input gives NaN, which every range check
  rejects, so callers report it with their own ValueError.
  """
  if is_traced(x):
    return None
  if isinstance(x, (numbers.Real, np.number)) and not isinstance(x, np.complexfloating):
    return float(x)
  arr = np.asarray(x)
  if arr.ndim != 0 or not (np.issubdtype(arr.dtype, np.integer)
                           or np.issubdtype(arr.dtype, np.floating)):
    return float("nan")
  return float(arr)


def is_traced(x) -> bool:
  """Whether ``x`` is a traced JAX value (under jit/vmap/eval_shape): its number
  is not known yet, so range checks skip it. The one traced-value test of fedfrac."""
  return isinstance(x, jax.core.Tracer)
