"""Fractional-order gradient scaling as an optax transformation.

``fractional`` multiplies incoming gradients by the Caputo-type fractional factor
of FOSGD / FOFedAvg (scalar) or of the FO-RI-FedAvg element-wise preconditioner,
so it composes with any optax optimiser::

  tx = optax.chain(fractional(0.9, 1e-5), optax.sgd(learning_rate))

Memory modes (what ``w_prev`` is):

* ``memory="step"`` -- ``w_prev`` is the previous local iterate. The state keeps
  the ``params`` seen at the previous ``update`` call; the first call after
  ``init`` (no previous iterate) uses factor 1 exactly. An algorithm that wants
  "s = 1 on the first local step of every round" simply re-``init``s the
  optimiser state from the round's starting parameters (or calls
  ``fractional_set_reference(state, params, valid=False)``).
* ``memory="round"`` -- ``w_prev`` is supplied by the caller: the client's
  parameters from the previous round it took part in. ``update`` never changes it.
  Each round, before local training, the algorithm does::

    opt_state = tx.init(w_t)                       # fresh per-round state
    opt_state = fractional_set_reference(
        opt_state, client_state.last_params,       # w from the client's last round
        valid=client_state.has_participated)       # False -> factor 1 (plain SGD)

  and after local training stores the client's final parameters and sets its
  ``has_participated`` flag. Both the reference and the flag may carry a leading
  client axis under ``jax.vmap``.

``alpha`` and ``delta`` may be traced JAX scalars (e.g. to ``vmap`` whole runs
over an alpha grid); they are validated only when concrete.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from fedfrac._validation import concrete_scalar

_GRANULARITIES = ("scalar", "elementwise")
_MEMORIES = ("step", "round")


class FractionalState(NamedTuple):
  """State of ``fractional``.

  Attributes:
    count: int32 ``[]``, number of ``update`` calls so far.
    prev_params: pytree like ``params``; ``w_prev`` in the factor.
    has_prev: bool ``[]``; when False the factor is exactly 1.
  """
  count: jax.Array
  prev_params: Any
  has_prev: jax.Array


def _check_positive(name, value):
  v = concrete_scalar(value)
  if v is not None and not (np.isfinite(v) and v > 0):
    raise ValueError(f"{name} must be a finite number > 0, got {value!r}.")
  return v


def _validate(alpha, delta, granularity, memory, p_min, p_max,
              allow_heuristic_alpha):
  if granularity not in _GRANULARITIES:
    raise ValueError(
        f"granularity must be one of {_GRANULARITIES}, got {granularity!r}.")
  if memory not in _MEMORIES:
    raise ValueError(f"memory must be one of {_MEMORIES}, got {memory!r}.")
  a = concrete_scalar(alpha)
  if a is not None:
    if allow_heuristic_alpha:
      if not 0.0 < a < 2.0:
        raise ValueError(
            f"alpha must be in (0, 2) with allow_heuristic_alpha=True, got {alpha!r}.")
    elif not 0.0 < a <= 1.0:
      raise ValueError(
          f"alpha must be in (0, 1] (or in (0, 2) with allow_heuristic_alpha=True), "
          f"got {alpha!r}.")
  _check_positive("delta", delta)
  if granularity != "elementwise" and (p_min is not None or p_max is not None):
    raise ValueError(
        "p_min/p_max clip the element-wise preconditioner and are only allowed with "
        f"granularity='elementwise', got granularity={granularity!r}, "
        f"p_min={p_min!r}, p_max={p_max!r}.")
  lo = _check_positive("p_min", p_min) if p_min is not None else None
  hi = _check_positive("p_max", p_max) if p_max is not None else None
  if lo is not None and hi is not None and lo > hi:
    raise ValueError(f"p_min must be <= p_max, got p_min={p_min!r}, p_max={p_max!r}.")


def fractional_factor(diff_magnitude, alpha, delta):
  """(x + δ)^(1−α) / Γ(2−α), element-wise on ``diff_magnitude`` (any shape).

  FOSGD factor (paper Eq. for s, DESIGN 3.1) / FO-RI preconditioner (DESIGN 3.2).
  At α = 1 the result is exactly 1: x^0 = 1 and 1/Γ(1) is set to 1 exactly
  (float32 ``lgamma(1)`` is not exactly 0).
  """
  x = jnp.asarray(diff_magnitude)
  dtype = x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else jnp.float32
  x = x.astype(dtype)
  alpha = jnp.asarray(alpha, dtype)
  one_minus_alpha = 1.0 - alpha
  inv_gamma = jnp.where(one_minus_alpha == 0, jnp.ones((), dtype),
                        jnp.exp(-lax.lgamma(2.0 - alpha)))  # Γ(2−α) > 0 on (0, 2)
  return jnp.power(x + jnp.asarray(delta, dtype), one_minus_alpha) * inv_gamma


def fractional(alpha, delta, granularity="scalar", memory="step", p_min=None,
               p_max=None, allow_heuristic_alpha=False
               ) -> optax.GradientTransformation:
  """Scale gradients by the fractional-order factor (FOSGD / FO-RI-FedAvg).

  ``granularity="scalar"`` (DESIGN 3.1):
    g ← s·g, s = (‖w − w_prev‖₂ + δ)^(1−α) / Γ(2−α), the norm taken over the whole
    pytree.
  ``granularity="elementwise"`` (DESIGN 3.2):
    g ← p ⊙ g, p = (|w − w_prev| + δ)^(1−α) / Γ(2−α) per entry, then clipped to
    ``[p_min, p_max]`` when given.
  When there is no valid ``w_prev`` the factor is exactly 1 (unclipped): p_0 = 1.

  Args:
    alpha: fractional order; (0, 1], or (0, 2) with ``allow_heuristic_alpha``.
      May be a traced scalar.
    delta: δ > 0, keeps the factor finite when w = w_prev. May be traced.
    granularity: ``"scalar"`` or ``"elementwise"``.
    memory: ``"step"`` (previous local iterate) or ``"round"`` (caller-supplied
      reference, see ``fractional_set_reference``).
    p_min, p_max: optional positive clip bounds (element-wise only).
    allow_heuristic_alpha: permit α ∈ (1, 2) (the paper's α = 1.5 ablation).

  Returns:
    ``optax.GradientTransformation`` with state ``FractionalState``; its
    ``update(updates, state, params)`` requires ``params``.
  """
  _validate(alpha, delta, granularity, memory, p_min, p_max, allow_heuristic_alpha)

  def init_fn(params):
    return FractionalState(
        count=jnp.zeros((), jnp.int32),
        prev_params=jax.tree.map(jnp.zeros_like, params),
        has_prev=jnp.zeros((), bool))

  def update_fn(updates, state, params=None):
    if params is None:
      raise ValueError(
          "fractional: update(updates, state, params) needs params (the current "
          "iterate w), got params=None.")
    if granularity == "scalar":
      diffs = jax.tree.map(
          lambda w, v: (w - v).astype(jnp.promote_types(w.dtype, jnp.float32)),
          params, state.prev_params)
      norm = jnp.sqrt(sum(jnp.sum(jnp.square(d)) for d in jax.tree.leaves(diffs)))
      s = fractional_factor(norm, alpha, delta)  # s = (‖Δw‖₂+δ)^(1−α)/Γ(2−α)
      s = jnp.where(state.has_prev, s, jnp.ones_like(s))
      new_updates = jax.tree.map(lambda g: g * s.astype(g.dtype), updates)
    else:
      def precondition(g, w, v):
        diff = (w - v).astype(jnp.promote_types(w.dtype, jnp.float32))
        p = fractional_factor(jnp.abs(diff), alpha, delta)  # DESIGN 3.2, p_h
        if p_min is not None or p_max is not None:
          p = jnp.clip(p, p_min, p_max)
        p = jnp.where(state.has_prev, p, jnp.ones_like(p))  # p_0 = 1
        return g * p.astype(g.dtype)
      new_updates = jax.tree.map(precondition, updates, params, state.prev_params)
    count = optax.safe_int32_increment(state.count)
    if memory == "step":
      new_state = FractionalState(
          count=count, prev_params=jax.tree.map(jnp.asarray, params),
          has_prev=jnp.ones_like(state.has_prev))
    else:
      new_state = state._replace(count=count)
    return new_updates, new_state

  return optax.GradientTransformation(init_fn, update_fn)


def _is_fractional_state(x):
  return isinstance(x, FractionalState)


def fractional_set_reference(state, reference_params, valid=True):
  """Set ``w_prev`` and its validity in every ``FractionalState`` inside ``state``.

  Works on a bare ``FractionalState`` or on any optimiser state containing one
  (e.g. the tuple state of ``optax.chain``). Used with ``memory="round"`` to
  supply the client's parameters from its previous participation; ``valid=False``
  makes the factor exactly 1 (first participation uses SGD). Also usable with
  ``memory="step"`` to reset (``valid=False``) or seed the previous iterate.

  Args:
    state: optimiser state.
    reference_params: pytree with the structure of the params.
    valid: bool scalar (may be traced).
  Returns:
    the state with ``prev_params`` and ``has_prev`` replaced.
  """
  found = []

  def set_one(x):
    if not _is_fractional_state(x):
      return x
    found.append(True)
    ref = jax.tree.map(lambda r, old: jnp.asarray(r, old.dtype), reference_params,
                       x.prev_params)
    flag = jnp.broadcast_to(jnp.asarray(valid, bool), x.has_prev.shape)
    return x._replace(prev_params=ref, has_prev=flag)

  new_state = jax.tree.map(set_one, state, is_leaf=_is_fractional_state)
  if not found:
    raise ValueError(
        f"fractional_set_reference: state contains no FractionalState, got "
        f"{type(state).__name__}.")
  return new_state
