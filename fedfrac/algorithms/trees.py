"""Small pytree helpers used by several algorithms."""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax
from jax.typing import ArrayLike


def select_tree(pred: ArrayLike, on_true: Any, on_false: Any) -> Any:
  """Leaf-wise ``where(pred, a, b)``; bit-identical ``b`` when pred is False."""
  return jax.tree.map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)


def tree_sub(a: Any, b: Any) -> Any:
  return jax.tree.map(jnp.subtract, a, b)


def tree_add(a: Any, b: Any) -> Any:
  return jax.tree.map(jnp.add, a, b)


def tree_scale(a: Any, s: ArrayLike) -> Any:
  return jax.tree.map(lambda x: s * x, a)


def tree_zeros_like(a: Any) -> Any:
  return jax.tree.map(jnp.zeros_like, a)


def tree_norm(a: Any) -> jax.Array:
  return optax.global_norm(a)


def stack_for_clients(tree: Any, num_clients: int) -> Any:
  """Broadcast a pytree to ``[K, ...]`` leaves (initial per-client state)."""
  return jax.tree.map(lambda x: jnp.broadcast_to(x, (num_clients,) + x.shape).copy(),
                      tree)
