"""Aggregation of stacked client pytrees.

Every function takes pytrees whose leaves have a leading client axis ``[S, ...]``
(the sampled cohort) and returns one pytree without it. All functions are pure and
jittable; weights are normalised here so callers may pass raw sample counts.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


def normalize_weights(weights, mask=None):
  """Weights ``[S]`` (optionally masked by ``mask [S]``) scaled to sum to one.

  A cohort whose weights are all zero gets all-zero weights (not NaN), so an
  empty round leaves the server model unchanged under ``weighted_mean``.
  """
  w = jnp.asarray(weights, jnp.float32)
  if mask is not None:
    w = w * jnp.asarray(mask, w.dtype)
  total = jnp.sum(w)
  return jnp.where(total > 0, w / jnp.where(total > 0, total, 1.0), jnp.zeros_like(w))


def weighted_mean(stacked, weights, mask=None):
  """Σ_k p_k x_k over the leading axis (FedAvg, McMahan et al. 2017, Alg. 1).

  Args:
    stacked: pytree with leaves ``[S, ...]``.
    weights: ``[S]`` non-negative (e.g. n_k); normalised internally.
    mask: optional ``[S]`` 0/1 participation mask.
  Returns:
    pytree with leaves ``[...]``.
  """
  p = normalize_weights(weights, mask)
  return jax.tree.map(
      lambda x: jnp.tensordot(p.astype(x.dtype), x, axes=(0, 0)), stacked)
