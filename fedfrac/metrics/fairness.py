"""Fairness across clients: the Gini coefficient of per-client metrics."""
from __future__ import annotations

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
