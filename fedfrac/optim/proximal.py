"""Proximal pull towards a reference point as an optax transformation.

``proximal`` adds c·(w − w_ref) to the incoming gradient: the gradient of the
FedProx term (c/2)‖w − w_t‖² (Li et al. 2020) and the roughness-informed pull of
FO-RI-FedAvg, g̃ = g + λ_t r(I_k)(w − w_t) (docs/design.md §3.2).

``init(params)`` takes ``params`` as the reference, so a client that re-inits its
optimiser from the global model each round gets w_ref = w_t with no further work.
To change the reference or the coefficient per round (e.g. c = λ_t·r(I_k)), the
algorithm calls ``proximal_set_reference(opt_state, w_t, coefficient)`` after
``init``; both may carry a leading client axis under ``jax.vmap``.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import ArrayLike

from fedfrac._validation import concrete_scalar


class ProximalState(NamedTuple):
  """State of ``proximal``.

  Attributes:
    reference: pytree like ``params``; w_ref.
    coefficient: float32 ``[]``; c ≥ 0 (λ for FedProx, λ_t·r(I_k) for RI).
  """
  reference: Any
  coefficient: jax.Array


def _check_coefficient(coefficient):
  c = concrete_scalar(coefficient)
  if c is not None and not (np.isfinite(c) and c >= 0):
    raise ValueError(
        f"coefficient must be a finite number >= 0, got {coefficient!r}.")


def proximal(coefficient: ArrayLike = 0.0) -> optax.GradientTransformation:
  """g ← g + c·(w − w_ref) (FedProx gradient; the proximal gradient g̃ of BEV
  paper Eq. 22, docs/design.md §3.2).

  Args:
    coefficient: initial c ≥ 0 (μ of FedProx, λ of RI); may be traced. The state
      holds it, so ``proximal_set_reference`` can change it per round.

  Returns:
    ``optax.GradientTransformation`` with state ``ProximalState``; ``init(params)``
    sets w_ref = params; ``update(updates, state, params)`` requires ``params``.
    With c = 0 the updates are returned bit-identical.
  """
  _check_coefficient(coefficient)

  def init_fn(params):
    return ProximalState(reference=jax.tree.map(jnp.asarray, params),
                         coefficient=jnp.asarray(coefficient, jnp.float32))

  def update_fn(updates, state, params=None):
    if params is None:
      raise ValueError(
          "proximal: update(updates, state, params) needs params (the current "
          "iterate w), got params=None.")
    c = state.coefficient

    def pull(g, w, r):
      pulled = g + c.astype(g.dtype) * (w - r).astype(g.dtype)  # g + c(w − w_ref)
      return jnp.where(c == 0, g, pulled)  # c = 0: exactly g (also keeps −0.0)
    return jax.tree.map(pull, updates, params, state.reference), state

  return optax.GradientTransformation(init_fn, update_fn)


def _is_proximal_state(x):
  return isinstance(x, ProximalState)


def proximal_set_reference(state: Any, reference: Any, coefficient: ArrayLike) -> Any:
  """Set w_ref and c in every ``ProximalState`` inside ``state``.

  Args:
    state: a ``ProximalState`` or any optimiser state containing one (e.g. the
      tuple state of ``optax.chain``).
    reference: pytree with the structure of the params (e.g. w_t).
    coefficient: c ≥ 0, scalar (may be traced), e.g. λ_t·r(I_k).
  Returns:
    the state with ``reference`` and ``coefficient`` replaced.
  """
  _check_coefficient(coefficient)
  found = []

  def set_one(x):
    if not _is_proximal_state(x):
      return x
    found.append(True)
    ref = jax.tree.map(lambda r, old: jnp.asarray(r, old.dtype), reference,
                       x.reference)
    coef = jnp.broadcast_to(jnp.asarray(coefficient, jnp.float32),
                            x.coefficient.shape)
    return ProximalState(reference=ref, coefficient=coef)

  new_state = jax.tree.map(set_one, state, is_leaf=_is_proximal_state)
  if not found:
    raise ValueError(
        f"proximal_set_reference: state contains no ProximalState, got "
        f"{type(state).__name__}.")
  return new_state
