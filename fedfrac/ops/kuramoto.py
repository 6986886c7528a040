"""Kuramoto-FedAvg: server re-weighting of client updates by phase alignment.

Muhebwa, Selialia, Anwar, Osman, "Kuramoto-FedAvg" (arXiv:2505.19605). Each
client's update Δ_k = w_k − w_t is an oscillator whose phase is its angle to the
(p-weighted) mean update,

    Δ̄ = Σ_k p_k Δ_k,    θ_k = arccos(clip(cos(Δ_k, Δ̄), −1, 1)) ∈ [0, π],

and the server re-weights the updates by how far each phase is from the mean
phase θ̄ = (1/K) Σ_k θ_k (an unweighted mean over the participating clients, as in
the paper). Three weightings are provided:

* ``"coupled"`` (default, stable): ρ_k ∝ p_k · max(0, 1 + κ sin(θ̄ − θ_k)),
  normalised to sum one; w_{t+1} = w_t + Σ_k ρ_k Δ_k. κ = 0 is FedAvg.
* ``"paper"``: the paper's equation taken literally,
  ρ_k = sin(θ̄ − θ_k) / Σ_j sin(θ̄ − θ_j), w_{t+1} = w_t + κ Σ_k ρ_k Δ_k.
  Because Σ_j (θ̄ − θ_j) = 0 the denominator is of third order in the phase
  spread, so ρ is often huge and of mixed sign; when |denominator| < eps or a
  weight is not finite the round falls back to ρ = p (reported in the info).
* ``"reference_code"``: reproduces the authors' public code, not the paper's
  equation: FedAvg plus κ/(K−1) Σ_i Σ_{j≠i} cos(φ_j − φ_i)(w_j − w_avg), where φ_k
  is client k's mean local gradient norm (``phase_signal``).

``kuramoto_weights`` returns the per-client coefficients; ``kuramoto_update``
returns the combined server update with each mode's application rule already
applied, so ``w_{t+1} = w_t + kuramoto_update(...)[0]`` in every mode.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from fedfrac._types import PyTree

from fedfrac.ops.aggregate import normalize_weights

WEIGHTINGS = ("coupled", "paper", "reference_code")


def flatten_stacked(tree: PyTree) -> jax.Array:
  """Stacked pytree (leaves ``[K, ...]``) -> one array ``[K, d]``.

  Each leaf is reshaped to ``[K, -1]`` and the leaves are concatenated along the
  feature axis in ``jax.tree.leaves`` order; stays on device and is jittable.
  """
  leaves = jax.tree.leaves(tree)
  if not leaves:
    raise ValueError("flatten_stacked: tree has no leaves.")
  k = leaves[0].shape[0] if leaves[0].ndim else None
  for leaf in leaves:
    if leaf.ndim == 0 or leaf.shape[0] != k:
      raise ValueError(
          "flatten_stacked: every leaf needs the same leading client axis; got "
          f"leaf shapes {[tuple(l.shape) for l in leaves]}.")
  return jnp.concatenate([jnp.reshape(leaf, (k, -1)) for leaf in leaves], axis=1)


def _check_weighting(weighting):
  if weighting not in WEIGHTINGS:
    raise ValueError(
        f"weighting={weighting!r} is not allowed; use one of {WEIGHTINGS}.")


def _safe_sqrt(x):
  """sqrt with a finite gradient at 0 (double-where)."""
  pos = x > 0
  return jnp.where(pos, jnp.sqrt(jnp.where(pos, x, 1.0)), 0.0)


def _num_clients(tree):
  leaves = jax.tree.leaves(tree)
  if not leaves:
    raise ValueError("deltas: the update pytree has no leaves.")
  shapes = [tuple(l.shape) for l in leaves]
  if any(len(s) == 0 for s in shapes) or len({s[0] for s in shapes}) != 1:
    raise ValueError(
        f"deltas: every leaf needs the same leading client axis [K, ...]; got {shapes}.")
  return shapes[0][0]


def _masked(tree, mask):
  """Zero the rows of absent clients so padding (even NaN) cannot leak in."""
  if mask is None:
    return tree
  def f(x):
    m = jnp.reshape(jnp.asarray(mask).astype(bool), (-1,) + (1,) * (x.ndim - 1))
    return jnp.where(m, x, jnp.zeros((), x.dtype))
  return jax.tree.map(f, tree)


def _combine(tree, coeffs, precision=None):
  """Σ_k c_k x_k over the leading axis of every leaf (as ``weighted_mean``)."""
  return jax.tree.map(
      lambda x: jnp.tensordot(coeffs.astype(x.dtype), x, axes=(0, 0),
                              precision=precision), tree)


def _phases(deltas, p, part):
  """Phases θ_k ∈ [0, π] of each update against the p-weighted mean update.

  θ_k = arccos(cos(Δ_k, Δ̄)), evaluated as 2·atan2(‖u_k − v‖, ‖u_k + v‖) with
  u_k = Δ_k/‖Δ_k‖, v = Δ̄/‖Δ̄‖ (Kahan): the same angle, but accurate near 0 and π
  where arccos of a rounded cosine loses half the digits (≈3e-4 rad in float32),
  which matters because the "paper" denominator is third order in the phase
  spread. A zero update or a zero mean update has no direction: cos is taken as
  1 (θ = 0), without NaN. Absent clients get θ = 0. Returns theta ``[K]``.
  """
  # Full float32 precision for the reference direction (GPUs may otherwise use
  # TF32 for this contraction, which would perturb every phase by ~1e-3 rad).
  mean = _combine(deltas, p, precision=jax.lax.Precision.HIGHEST)
  leaves = []
  for x, m in zip(jax.tree.leaves(deltas), jax.tree.leaves(mean)):
    dt = jnp.promote_types(x.dtype, jnp.float32)
    leaves.append((jnp.reshape(x, (x.shape[0], -1)).astype(dt),
                   jnp.reshape(m, (-1,)).astype(dt)))
  sq = sum(jnp.sum(xf * xf, axis=1) for xf, _ in leaves)
  msq = sum(jnp.sum(mf * mf) for _, mf in leaves)
  nk, nm = _safe_sqrt(sq), _safe_sqrt(msq)
  ok = (nk > 0) & (nm > 0) & part
  inv_k = jnp.where(ok, 1.0 / jnp.where(ok, nk, 1.0), 0.0)
  inv_m = jnp.where(nm > 0, 1.0 / jnp.where(nm > 0, nm, 1.0), 0.0)
  diff_sq, sum_sq = 0.0, 0.0
  for xf, mf in leaves:
    u = xf * inv_k[:, None]
    v = (mf * inv_m)[None, :]
    diff_sq = diff_sq + jnp.sum(jnp.square(u - v), axis=1)
    sum_sq = sum_sq + jnp.sum(jnp.square(u + v), axis=1)
  theta = 2.0 * jnp.arctan2(_safe_sqrt(diff_sq), _safe_sqrt(sum_sq))
  theta = jnp.clip(theta, 0.0, jnp.pi)
  return jnp.where(ok, theta, 0.0)


def kuramoto_weights(deltas: PyTree, base_weights: ArrayLike, kappa: ArrayLike,
                     weighting: str = "coupled", eps: float = 1e-8,
                     phase_signal: ArrayLike | None = None, mask: ArrayLike | None = None,
                     ) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Kuramoto-FedAvg aggregation coefficients (Kuramoto-FedAvg paper Eqs. 2–3;
  docs/design.md §3.4).

  Args:
    deltas: client updates Δ_k = w_k − w_t, either an array ``[K, d]`` or a
      stacked pytree whose leaves are ``[K, ...]`` (flattened per client).
    base_weights: ``[K]`` non-negative base weights (e.g. n_k); normalised to
      p_k (over participating clients).
    kappa: scalar coupling strength κ_t (may be traced).
    weighting: ``"coupled"`` | ``"paper"`` | ``"reference_code"`` (static).
    eps: ``"paper"`` guard on |Σ_j sin(θ̄ − θ_j)|.
    phase_signal: ``[K]`` per-client mean local gradient norm φ_k; required by
      (and only used in) ``"reference_code"``.
    mask: optional ``[K]`` participation mask; absent clients get weight 0 and
      do not enter Δ̄, θ̄, p or the coupling sums.

  Returns:
    ``(weights [K], info)``. What the caller must do with ``weights``:

    * ``"coupled"``: update = Σ_k weights_k Δ_k (weights sum to 1).
    * ``"paper"``: update = κ · Σ_k weights_k Δ_k (weights sum to 1, may be
      negative or large; on fallback they are p and the update is κ Δ̄).
    * ``"reference_code"``: update = Σ_k weights_k Δ_k, where weights are the
      effective coefficients e_j = p_j + κ/(K−1)(c_j − p_j Σ_i c_i) (sum to 1).

    ``kuramoto_update`` applies these rules for you. ``info`` holds
    ``phases [K]`` (θ_k ∈ [0, π], 0 for absent clients), ``mean_phase`` (θ̄),
    ``order_parameter`` (|mean_k e^{iθ_k}| over participants, 1 = in sync),
    ``fallback`` (bool scalar), ``base_weights [K]`` (p), ``cosine [K]``,
    ``denominator`` (Σ_j sin(θ̄ − θ_j)), ``num_participants`` and, for
    ``"reference_code"``, ``coupling_sums [K]`` c_j = Σ_{i≠j} cos(φ_j − φ_i)
    over participants (zeros in the other weightings).
  """
  _check_weighting(weighting)
  k = _num_clients(deltas)
  base_weights = jnp.asarray(base_weights)
  if base_weights.shape != (k,):
    raise ValueError(
        f"base_weights: shape {tuple(base_weights.shape)} does not match the "
        f"{k} clients in deltas; expected ({k},).")
  if mask is not None:
    mask = jnp.asarray(mask)
    if mask.shape != (k,):
      raise ValueError(f"mask: shape {tuple(mask.shape)}, expected ({k},).")
    part = mask.astype(bool)
  else:
    part = jnp.ones((k,), bool)
  if weighting == "reference_code":
    if phase_signal is None:
      raise ValueError(
          "phase_signal: required for weighting='reference_code' (each client's "
          "mean local gradient norm φ_k, shape [K]); got None.")
    phase_signal = jnp.asarray(phase_signal, jnp.float32)
    if phase_signal.shape != (k,):
      raise ValueError(
          f"phase_signal: shape {tuple(phase_signal.shape)}, expected ({k},).")

  deltas = _masked(deltas, mask)
  p = normalize_weights(base_weights, part)
  kappa = jnp.asarray(kappa, jnp.float32)
  partf = part.astype(jnp.float32)
  m = jnp.sum(partf)
  msafe = jnp.maximum(m, 1.0)

  theta = _phases(deltas, p, part)
  mean_phase = jnp.sum(theta) / msafe            # θ̄: unweighted, as in the paper
  order = jnp.sqrt(jnp.sum(partf * jnp.cos(theta)) ** 2
                   + jnp.sum(partf * jnp.sin(theta)) ** 2) / msafe
  # x_k = θ̄ − θ_k sums to zero exactly, so Σ_k sin(x_k) = Σ_k (sin x_k − x_k): that
  # form is third order and keeps full relative precision in float32, whereas the
  # direct sum is dominated by the rounding of θ̄. s_k is shifted by the rounding
  # residual r/m (zero in exact arithmetic) so that Σ_k s_k equals the denominator.
  x = jnp.where(part, mean_phase - theta, 0.0)
  resid = jnp.sum(x)
  s = jnp.where(part, jnp.sin(x) - resid / msafe, 0.0)
  denom = jnp.sum(jnp.where(part, jnp.sin(x) - x, 0.0))

  if weighting == "paper":
    # Kuramoto-FedAvg eq. (ρ_k): ρ_k = sin(θ̄ − θ_k) / Σ_j sin(θ̄ − θ_j)
    rho = s / jnp.where(denom == 0, 1.0, denom)
    fallback = (jnp.abs(denom) < eps) | ~jnp.all(jnp.isfinite(rho))
    weights = jnp.where(fallback, p, rho)
  elif weighting == "coupled":
    # ρ_k ∝ p_k · max(0, 1 + κ sin(θ̄ − θ_k)) (stable variant, docs/design.md §3.4)
    r = p * jnp.maximum(0.0, 1.0 + kappa * s)
    total = jnp.sum(r)
    fallback = ~(total > 0) | ~jnp.isfinite(total)
    weights = jnp.where(fallback | (kappa == 0), p,
                        r / jnp.where(total > 0, total, 1.0))
  else:
    # Authors' code: Δ = Δ̄ + κ/(K−1) Σ_j c_j (Δ_j − Δ̄), c_j = Σ_{i≠j} cos(φ_j − φ_i)
    phi = jnp.asarray(phase_signal)  # validated [K] float32 above
    diff = phi[:, None] - phi[None, :]
    pair = part[:, None] & part[None, :] & ~jnp.eye(k, dtype=bool)
    c = jnp.sum(jnp.where(pair, jnp.cos(diff), 0.0), axis=1)
    scale = kappa / jnp.maximum(m - 1.0, 1.0)
    weights = p + scale * (c - p * jnp.sum(c))
    fallback = jnp.asarray(False)
  if weighting != "reference_code":
    c = jnp.zeros((k,), jnp.float32)

  info = {
      "phases": theta,
      "mean_phase": mean_phase,
      "order_parameter": order,
      "fallback": fallback,
      "base_weights": p,
      "cosine": jnp.cos(theta),
      "denominator": denom,
      "num_participants": m,
      "coupling_sums": c,
  }
  return weights, info


def kuramoto_update(deltas: PyTree, base_weights: ArrayLike, kappa: ArrayLike,
                    weighting: str = "coupled", eps: float = 1e-8,
                    phase_signal: ArrayLike | None = None, mask: ArrayLike | None = None,
                    sync_clip: float = 0.0) -> tuple[PyTree, dict[str, jax.Array]]:
  """Combined Kuramoto-FedAvg server update, ready to add to w_t (Kuramoto-FedAvg
  paper Eq. 4).

  Args: as ``kuramoto_weights``; ``deltas`` is a stacked pytree (leaves
    ``[K, ...]``) or a ``[K, d]`` array.
  Returns:
    ``(update, info)`` with ``update`` shaped like one client's update, so
    w_{t+1} = w_t + update:
    ``"paper"`` → κ Σ_k ρ_k Δ_k (κ Δ̄ on fallback); ``"coupled"`` → Σ_k ρ_k Δ_k;
    ``"reference_code"`` → Δ̄ + κ/(K−1) Σ_j c_j (Δ_j − Δ̄), or with ``sync_clip``
    > 0 the authors' clamped form Δ̄ + κ · clip(1/(K−1) Σ_j c_j (Δ_j − Δ̄),
    −sync_clip, sync_clip), clamped element by element (their
    ``_aggregation_with_kuramoto``: ``max_sync_clip`` 1e3 on FedAvg clients, 10
    on SCAFFOLD clients). ``info`` is that of ``kuramoto_weights`` plus
    ``"weights"`` and ``"update_scale"`` (κ or 1).
  """
  weights, info = kuramoto_weights(deltas, base_weights, kappa, weighting, eps,
                                   phase_signal, mask)
  coeffs = weights
  scale = jnp.asarray(1.0, jnp.float32)
  if weighting == "paper":
    scale = jnp.asarray(kappa, jnp.float32)
    coeffs = scale * weights        # w_{t+1} = w_t + κ_t Σ ρ_k Δ_k
  masked = _masked(deltas, None if mask is None else jnp.asarray(mask))
  if weighting == "reference_code" and not (isinstance(sync_clip, (int, float))
                                             and sync_clip <= 0):
    # Authors' code: w_avg + K_t · clamp(sync_term / max(1, K−1), ±max_sync_clip)
    p, c = info["base_weights"], info["coupling_sums"]
    denom = jnp.maximum(info["num_participants"] - 1.0, 1.0)
    mean = _combine(masked, p)
    sync = jax.tree.map(lambda s, m: s - (jnp.sum(c) / denom) * m,
                        _combine(masked, c / denom), mean)
    kappa = jnp.asarray(kappa, jnp.float32)
    update = jax.tree.map(lambda m, s: m + kappa * jnp.clip(s, -sync_clip, sync_clip),
                          mean, sync)
  else:
    update = _combine(masked, coeffs)  # absent rows zeroed: padding never leaks in
  info = dict(info, weights=weights, update_scale=scale)
  return update, info
