"""Named vmap axes whose members run their local-step loops in lockstep.

Under ``jax.vmap`` a ``lax.while_loop`` whose trip count differs across the
vmapped clients (or runs) becomes a loop that runs as long as the longest one
and, in every iteration, selects between the new and the old carry of each
member: for a client's parameters and Adam moments that is a read and a write of
the whole optimizer state per local step (measured on FIRMA's 784-input MLP,
10 clients vmapped, 2-core CPU: about a fifth of the step; docs/design.md §2.5).

The engine names the axes it vmaps (:func:`vmap`), and
:func:`~fedfrac.algorithms.local_training.local_train` asks for the smallest
step count over all of them (:func:`shared_min`, a ``lax.pmin`` over the named
axes, unbatched): that many steps every member takes, so they run in a loop
with an unbatched trip count and no select; only the remaining steps (clients
with more data than the smallest) run in the selecting loop. Same operations on
the same values; the two programs are compiled apart, so results agree to float
rounding (a few ulps after a round, ``tests/ops/test_lockstep.py``).

An axis is registered only while its vmapped function is being traced, so a
name is only ever asked for inside the vmap that binds it; a vmap the engine
did not name is simply not reduced over (its members keep the selecting loop).
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Callable, Iterator

import jax

_AXES: contextvars.ContextVar[tuple] = contextvars.ContextVar("lockstep_axes", default=())


def axes() -> tuple:
  """The named vmap axes in scope while tracing (outermost first)."""
  return _AXES.get()


@contextlib.contextmanager
def named_axis(name: str) -> Iterator[None]:
  """Register ``name`` (an axis the caller is vmapping over) during a trace."""
  token = _AXES.set(_AXES.get() + (name,))
  try:
    yield
  finally:
    _AXES.reset(token)


def vmap(fn: Callable, name: str, **vmap_kw: Any) -> Callable:
  """``jax.vmap(fn, axis_name=name, **vmap_kw)`` with ``name`` registered while
  ``fn`` is traced, so :func:`shared_min` inside it reduces over this axis."""
  def registered(*args):
    with named_axis(name):
      return fn(*args)
  return jax.vmap(registered, axis_name=name, **vmap_kw)


def shared_min(x: jax.Array) -> jax.Array:
  """The minimum of ``x`` over every registered axis in scope (``x`` itself when
  none is): a value the same for all members, so a loop bounded by it is not
  batched."""
  names = axes()
  return jax.lax.pmin(x, names) if names else x
