"""Adversarial client transforms for robustness experiments.

Pure functions applied to one client's update (a pytree) or labels; they are
jittable and vmappable, so an algorithm can apply them inside ``client_update``
and select per client with ``jnp.where(is_byzantine, attacked, honest)``.
``byzantine_mask`` (host side) fixes which clients are Byzantine for a seed.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from fedfrac._types import PyTree


def sign_flip(delta: PyTree, scale: ArrayLike = 1.0) -> PyTree:
  """Sign-flipping attack: send −scale·Δ instead of Δ (pytree -> pytree)."""
  return jax.tree.map(lambda x: -jnp.asarray(scale, x.dtype) * x, delta)


def scaled_update(delta: PyTree, factor: ArrayLike) -> PyTree:
  """Scaling (boosting / model-replacement) attack: send factor·Δ."""
  return jax.tree.map(lambda x: jnp.asarray(factor, x.dtype) * x, delta)


def gaussian_attack(delta: PyTree, key: jax.Array, std: ArrayLike,
                    additive: bool = False) -> PyTree:
  """Gaussian attack (Blanchard et al. 2017, Sec. 5): send N(0, std² I) noise.

  Args:
    delta: one client's update pytree (only its structure, shapes and dtypes are
      used unless ``additive``).
    key: PRNG key.
    std: noise standard deviation (scalar, may be traced).
    additive: if True send Δ + noise instead of pure noise.
  Returns:
    pytree like ``delta``.
  """
  leaves, treedef = jax.tree.flatten(delta)
  keys = jax.random.split(key, len(leaves))
  out = []
  for k, x in zip(keys, leaves):
    dtype = jnp.result_type(x)
    z = jax.random.normal(k, jnp.shape(x), dtype) * jnp.asarray(std, dtype)
    out.append(x + z if additive else z)
  return jax.tree.unflatten(treedef, out)


def label_flip(labels: ArrayLike, num_classes: int) -> jax.Array:
  """Label-flipping attack: y -> C − 1 − y (integer labels ``[...]``)."""
  if isinstance(num_classes, bool) or not float(num_classes).is_integer() or num_classes < 1:
    raise ValueError(f"num_classes={num_classes!r} is not allowed; it must be an integer >= 1.")
  labels = jnp.asarray(labels)
  return (int(num_classes) - 1 - labels).astype(labels.dtype)


def byzantine_mask(num_clients: int, fraction: float,
                   seed: int) -> np.ndarray:
  """Host-side bool mask ``[num_clients]`` with exactly round(fraction·K) True.

  Rounds half up (0.25·10 -> 3). The chosen clients depend only on
  (num_clients, fraction, seed).
  """
  if isinstance(num_clients, bool) or not float(num_clients).is_integer() or num_clients < 1:
    raise ValueError(f"num_clients={num_clients!r} is not allowed; it must be an integer >= 1.")
  if not (0.0 <= fraction <= 1.0):
    raise ValueError(f"fraction={fraction!r} is not allowed; it must be in [0, 1].")
  k = int(num_clients)
  n_bad = int(np.floor(fraction * k + 0.5 + 1e-9))
  rng = np.random.default_rng(seed)
  mask = np.zeros((k,), bool)
  mask[rng.choice(k, size=n_bad, replace=False)] = True
  return mask
