"""Bytes a client downloads (the broadcast payload) and uploads (its message),
from shapes only (``jax.eval_shape``; nothing runs)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac.algorithms.client_view import ClientView


def tree_bytes(tree) -> int:
  """Total bytes of a tree of arrays (or ``ShapeDtypeStruct``s)."""
  return int(sum(np.prod(x.shape, dtype=np.int64) * np.dtype(x.dtype).itemsize
                 for x in jax.tree.leaves(tree)))


def payload_and_message_bytes(algorithm, state, arrays, client_index_shape):
  """``(payload_bytes, message_bytes)`` per participating client.

  ``state``: a :class:`fedfrac.sim.state.SimState`; ``arrays``: the simulation's
  data arrays (``x``, ``y``); ``client_index_shape``: ``[n_max]`` of one
  client's index row.
  """
  payload = jax.eval_shape(algorithm.broadcast, state.server)
  first = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype),
                       state.clients)
  scalar = jax.ShapeDtypeStruct((), jnp.int32)

  def message_of(p, c, idx, size, steps, cid, k):
    view = ClientView(arrays["x"], arrays["y"], idx, size, steps, cid)
    return algorithm.client_update(p, c, view, k, jnp.zeros((), jnp.int32))[0]
  message = jax.eval_shape(
      message_of, payload, first,
      jax.ShapeDtypeStruct(tuple(client_index_shape), jnp.int32),
      scalar, scalar, scalar, jax.ShapeDtypeStruct((2,), jnp.uint32))
  return tree_bytes(payload), tree_bytes(message)
