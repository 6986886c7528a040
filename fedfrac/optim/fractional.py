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
over an alpha grid). A concrete value outside its range is refused in one line
(``ValueError``); a traced one cannot raise, so outside its range it makes every
update NaN, the first step's included, and the run diverges visibly instead of
training with a value the factor does not define (α = 2.5 trained to 9 %
accuracy with factors of 4e6): the rule of traced algorithm options
(:func:`fedfrac.algorithms.schema.nan_outside`).
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import ArrayLike
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
    gate: float32 ``[]``; with ``gated=True`` the element-wise preconditioner is
      multiplied by it before the clip (the FO-RI-FedAvg spectral gate, BEV paper
      Eq. 24), set per round with :func:`fractional_set_gate`; 1 after ``init``.
    factor_sum: float32 ``[]``, sum of the factor over the calls that had a
      valid ``w_prev`` (scalar: s; element-wise: the mean of p over entries).
    factor_steps: float32 ``[]``, number of those calls.
  """
  count: jax.Array  # type: ignore[assignment]  # a field, shadows tuple.count
  prev_params: Any
  has_prev: jax.Array
  gate: Any = None
  factor_sum: Any = 0.0
  factor_steps: Any = 0.0


def _check_positive(name, value):
  v = concrete_scalar(value)
  if v is not None and not (np.isfinite(v) and v > 0):
    raise ValueError(f"{name} must be a finite number > 0, got {value!r}.")
  return v


def alpha_range_error(alpha: ArrayLike, allow_heuristic_alpha: bool = False
                      ) -> Optional[str]:
  """The range rule of the fractional order α: None when α is allowed (or traced),
  else what is allowed. α ∈ (0, 1] is the Caputo range of the theory (FOFedAvg
  paper §III, appendix B); α ∈ (0, 2) needs ``allow_heuristic_alpha=True``: the
  FOFedAvg paper's heuristic rescaling of the trajectory factor (its Table IV /
  Fig. 18 run α = 1.5; not a fractional derivative). The upper end 2 keeps
  Γ(2 − α) finite and positive."""
  a = concrete_scalar(alpha)
  if a is None:
    return None
  if allow_heuristic_alpha:
    return None if 0.0 < a < 2.0 else "must be in (0, 2) with allow_heuristic_alpha=True"
  if 0.0 < a <= 1.0:
    return None
  return "must be in (0, 1]; values in (1, 2) need allow_heuristic_alpha=True"


def _validate(alpha, delta, granularity, memory, p_min, p_max,
              allow_heuristic_alpha):
  if granularity not in _GRANULARITIES:
    raise ValueError(
        f"granularity must be one of {_GRANULARITIES}, got {granularity!r}.")
  if memory not in _MEMORIES:
    raise ValueError(f"memory must be one of {_MEMORIES}, got {memory!r}.")
  message = alpha_range_error(alpha, allow_heuristic_alpha)
  if message:
    raise ValueError(f"alpha={alpha!r}: {message}")
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


def _traced_in_range(alpha, delta, allow_heuristic_alpha):
  """``(alpha, delta, unit)`` as the update uses them: a traced α outside
  (0, 1] ((0, 2) with ``allow_heuristic_alpha``) or a traced δ that is not a
  finite number > 0 becomes NaN, and ``unit`` (the factor of a step without
  ``w_prev``) is then NaN too, else 1. Concrete values pass unchanged (they
  were checked by :func:`_validate`)."""
  ok = jnp.ones((), bool)
  if concrete_scalar(alpha) is None:
    hi = (alpha < 2.0) if allow_heuristic_alpha else (alpha <= 1.0)
    ok = ok & jnp.isfinite(alpha) & (alpha > 0) & hi
    alpha = jnp.where(ok, alpha, jnp.nan)
  if concrete_scalar(delta) is None:
    good = jnp.isfinite(delta) & (delta > 0)
    ok = ok & good
    delta = jnp.where(good, delta, jnp.nan)
  return alpha, delta, jnp.where(ok, 1.0, jnp.nan).astype(jnp.float32)


def fractional_factor(diff_magnitude: ArrayLike, alpha: ArrayLike,
                      delta: ArrayLike) -> jax.Array:
  """(x + δ)^(1−α) / Γ(2−α), element-wise on ``diff_magnitude`` (any shape).

  The FOSGD step factor (FOFedAvg paper Eq. 8, docs/design.md §3.1) and, element-wise,
  the FO-RI-FedAvg preconditioner (BEV paper Eq. 10, docs/design.md §3.2).
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


def fractional(alpha: ArrayLike, delta: ArrayLike, granularity: str = "scalar",
               memory: str = "step", p_min: Optional[float] = None,
               p_max: Optional[float] = None, allow_heuristic_alpha: bool = False,
               gated: bool = False
               ) -> optax.GradientTransformation:
  """Scale gradients by the fractional-order factor (FOSGD / FO-RI-FedAvg).

  ``granularity="scalar"`` (FOFedAvg paper Eq. 8; docs/design.md §3.1):
    g ← s·g, s = (‖w − w_prev‖₂ + δ)^(1−α) / Γ(2−α), the norm taken over the whole
    pytree.
  ``granularity="elementwise"`` (BEV paper Eqs. 10–12; docs/design.md §3.2):
    g ← p ⊙ g, p = (|w − w_prev| + δ)^(1−α) / Γ(2−α) per entry, then (with
    ``gated=True``) p ← p · gate, then clipped to ``[p_min, p_max]`` when given:
    preconditioner → gate → clip, the order of BEV Alg. 1 l.22–26.
  When there is no valid ``w_prev`` the factor is exactly 1 (ungated, unclipped):
  p_0 = 1.

  Args:
    alpha: fractional order; (0, 1], or (0, 2) with ``allow_heuristic_alpha``.
      May be a traced scalar: outside that range every update is then NaN
      (a concrete one raises ``ValueError``).
    delta: δ > 0, keeps the factor finite when w = w_prev. May be traced (NaN
      updates when not > 0).
    granularity: ``"scalar"`` or ``"elementwise"``.
    memory: ``"step"`` (previous local iterate) or ``"round"`` (caller-supplied
      reference, see ``fractional_set_reference``).
    p_min, p_max: optional positive clip bounds (element-wise only).
    allow_heuristic_alpha: permit α ∈ (1, 2) (the paper's α = 1.5 ablation).
    gated: multiply the element-wise preconditioner by the state's ``gate``
      (set with :func:`fractional_set_gate`) before the clip, on steps with a
      valid ``w_prev`` only. False leaves the computation as without a gate.

  Returns:
    ``optax.GradientTransformation`` with state ``FractionalState``; its
    ``update(updates, state, params)`` requires ``params``.
  """
  _validate(alpha, delta, granularity, memory, p_min, p_max, allow_heuristic_alpha)
  if gated and granularity != "elementwise":
    raise ValueError(f"gated=True gates the element-wise preconditioner; got "
                     f"granularity={granularity!r}.")

  def init_fn(params):
    return FractionalState(
        count=jnp.zeros((), jnp.int32),
        prev_params=jax.tree.map(jnp.zeros_like, params),
        has_prev=jnp.zeros((), bool),
        gate=jnp.ones((), jnp.float32),
        factor_sum=jnp.zeros((), jnp.float32),
        factor_steps=jnp.zeros((), jnp.float32))

  def update_fn(updates, state, params=None):
    if params is None:
      raise ValueError(
          "fractional: update(updates, state, params) needs params (the current "
          "iterate w), got params=None.")
    alpha_, delta_, unit = _traced_in_range(alpha, delta, allow_heuristic_alpha)
    if granularity == "scalar":
      diffs = jax.tree.map(
          lambda w, v: (w - v).astype(jnp.promote_types(w.dtype, jnp.float32)),
          params, state.prev_params)
      norm = jnp.sqrt(sum(jnp.sum(jnp.square(d)) for d in jax.tree.leaves(diffs)))
      s = fractional_factor(norm, alpha_, delta_)  # s = (‖Δw‖₂+δ)^(1−α)/Γ(2−α)
      s = jnp.where(state.has_prev, s, unit.astype(s.dtype))
      new_updates = jax.tree.map(lambda g: g * s.astype(g.dtype), updates)
      factor = s
    else:
      factors = []
      def precondition(g, w, v):
        diff = (w - v).astype(jnp.promote_types(w.dtype, jnp.float32))
        p = fractional_factor(jnp.abs(diff), alpha_, delta_)  # docs/design.md §3.2, p_h
        if gated:
          p = p * state.gate.astype(p.dtype)  # p ← p/(1 + β_κ κ_k), BEV Eq. 24
        if p_min is not None or p_max is not None:
          p = jnp.clip(p, p_min, p_max)
        p = jnp.where(state.has_prev, p, unit.astype(p.dtype))  # p_0 = 1
        factors.append((jnp.sum(p), p.size))
        return g * p.astype(g.dtype)
      new_updates = jax.tree.map(precondition, updates, params, state.prev_params)
      factor = sum(f for f, _ in factors) / max(sum(n for _, n in factors), 1)
    valid = state.has_prev.astype(jnp.float32)
    state = state._replace(
        factor_sum=state.factor_sum + valid * jnp.asarray(factor, jnp.float32),
        factor_steps=state.factor_steps + valid)
    count = optax.safe_int32_increment(state.count)
    if memory == "step":
      new_state = state._replace(
          count=count, prev_params=jax.tree.map(jnp.asarray, params),
          has_prev=jnp.ones_like(state.has_prev), gate=state.gate)
    else:
      new_state = state._replace(count=count)
    return new_updates, new_state

  return optax.GradientTransformation(init_fn, update_fn)


def _is_fractional_state(x):
  return isinstance(x, FractionalState)


def fractional_mean_factor(state: Any) -> jax.Array:
  """Mean fractional factor over the ``update`` calls that had a valid ``w_prev``
  (float32 ``[]``; 1 when there were none, the factor of a plain SGD step), read
  from the first ``FractionalState`` inside ``state`` (e.g. an ``optax.chain``
  state). The effective step of FOSGD is μ_t times this factor."""
  found = [x for x in jax.tree.leaves(state, is_leaf=_is_fractional_state)
           if _is_fractional_state(x)]
  if not found:
    raise ValueError(f"fractional_mean_factor: state contains no FractionalState, got "
                     f"{type(state).__name__}.")
  st = found[0]
  return jnp.where(st.factor_steps > 0, st.factor_sum / jnp.maximum(st.factor_steps, 1.0),
                   jnp.ones((), jnp.float32))


def fractional_set_reference(state: Any, reference_params: Any,
                             valid: ArrayLike = True) -> Any:
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


def fractional_set_gate(state: Any, gate: ArrayLike) -> Any:
  """Set the spectral gate (a scalar, may be traced) of every ``FractionalState``
  inside ``state``; used by FO-RI-FedAvg once per round with 1/(1 + β_κ κ_k)
  (BEV paper Eq. 24). Only a ``fractional(..., gated=True)`` reads it."""
  found = []

  def set_one(x):
    if not _is_fractional_state(x):
      return x
    found.append(True)
    return x._replace(gate=jnp.broadcast_to(jnp.asarray(gate, jnp.float32),
                                            jnp.shape(x.gate)))

  new_state = jax.tree.map(set_one, state, is_leaf=_is_fractional_state)
  if not found:
    raise ValueError(
        f"fractional_set_gate: state contains no FractionalState, got "
        f"{type(state).__name__}.")
  return new_state
