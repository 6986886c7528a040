"""Ring gossip mixing for the FIRMA family (Hedjam, "FIRMA: FIbonacci Ring Model
Aggregation") and RDFL, as N×N row-stochastic mixing matrices.

Conventions used throughout:

* Clients are indexed ``0..n-1``. A ring ``order`` is a permutation σ: ``order[p]``
  is the client at ring position ``p``. For the client at position ``p`` the left
  neighbour is ``L = order[(p - 1) % n]`` and the right neighbour
  ``R = order[(p + 1) % n]``. With ``n = 2`` both neighbours are the same client
  (L = R), so that client receives the whole neighbour weight.
* Row ``i`` of a mixing matrix ``M`` mixes client ``i``: the new extractor is
  ``θ_i ← Σ_j M[i, j] θ_j``. Per-client quantities (``gamma`` given as an array,
  ``gates``) are indexed by client id, not by ring position.
* ``apply_mixing`` applies ``M`` to a pytree of stacked leaves ``[n, ...]`` with one
  einsum; this is the only way the engine touches the stacked extractors.
* Every matrix here is row-stochastic (rows are convex combinations). Which ones
  are also column-stochastic, i.e. doubly stochastic, so that mixing keeps the
  clients' mean (1ᵀM = 1ᵀ gives mean_i θ_i' = mean_i θ_i):

  ==========================================================  =================  ==============
  mode                                                        doubly stochastic  keeps the mean
  ==========================================================  =================  ==============
  synchronous, one γ for all clients (FibFL, RDFL, FibFL++)   yes (any passes)   yes
  sequential sweep (FibFL++ default)                          no                 no
  per-client γ ``[n]``                                        no                 no
  gated (FibFL+, ``gates`` given)                             no                 no
  ==========================================================  =================  ==============

  With one γ, a synchronous pass is γI + (1−γ)(α P_L + β P_R) with P_L, P_R
  permutation matrices (each client is the left neighbour of exactly one other),
  so every column also sums to γ + (1−γ)(α + β) = 1, for any ring order and
  n = 2 too. Otherwise column j sums to γ_j + α(1−γ_{R(j)}) + β(1−γ_{L(j)})
  (per-client γ), the gated weights differ per row, and the in-place sweep's
  elementary maps (identity with one row replaced) are not column-stochastic:
  those modes move the clients' mean (one sequential pass with γ = 0.5 over 4
  clients takes the mean of (1, 2, 4, 5) from 3 to 3.197;
  tests/ops/test_ring.py checks each mode).

Matrix builders are jittable in ``gamma``, ``gates``, ``tau`` and (unvalidated)
a traced ``order``; ``n``, ``passes`` and ``sweep`` are static. ``two_opt_ring``,
``ring_cost`` and ``spectral_gap`` run host-side in NumPy (once per run, or for
reporting).

This module holds the mixing matrices and :func:`spectral_gap`; the ring order
and its 2-opt search are :mod:`fedfrac.ops.ring_order`, the FibFL++ schedules
(passes, warm-up, γ per round) :mod:`fedfrac.ops.fibfl_schedule` and the shared
argument checks :mod:`fedfrac.ops.ring_checks`. Their names are re-exported here.
"""
from __future__ import annotations

import math
import numbers

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from fedfrac._types import PyTree
from fedfrac._validation import is_traced
from fedfrac.ops.fibfl_schedule import (  # noqa: F401  (re-exported)
    fibfl_pp_gamma, fibfl_pp_passes, fibfl_pp_warmup, per_pass_retention)
from fedfrac.ops.ring_checks import (  # noqa: F401  (re-exported)
    check_n, check_order_np, check_passes, check_unit_interval)
from fedfrac.ops.ring_order import (  # noqa: F401  (re-exported)
    COSTS, ring_cost_from_sim, similarity, ring_cost, two_opt_ring)


PHI = (1.0 + math.sqrt(5.0)) / 2.0
# Fibonacci weights α = 1/φ (left), β = 1/φ² (right); α + β = 1 (FIRMA, FibFL).
FIB_ALPHA = 1.0 / PHI
FIB_BETA = 1.0 / PHI**2
_SWEEPS = ("synchronous", "sequential")


def _resolve_order(order, n):
  """Returns the ring order as an int32 jnp array (validated when concrete)."""
  if order is None:
    return jnp.arange(n, dtype=jnp.int32)
  if is_traced(order):
    if order.shape != (n,) or not jnp.issubdtype(order.dtype, jnp.integer):
      raise ValueError(
          f"order must be an integer array of shape ({n},), got "
          f"{order.dtype}{order.shape}.")
    return order.astype(jnp.int32)
  return jnp.asarray(check_order_np(order, n), dtype=jnp.int32)


def _resolve_fib_weights(alpha, beta):
  """Left/right neighbour weights; defaults are the Fibonacci (1/φ, 1/φ²)."""
  if alpha is None and beta is None:
    return FIB_ALPHA, FIB_BETA
  if alpha is None:
    alpha = 1.0 - float(beta)
  if beta is None:
    beta = 1.0 - float(alpha)
  alpha, beta = float(alpha), float(beta)
  if (not (math.isfinite(alpha) and math.isfinite(beta)) or alpha < 0.0
      or beta < 0.0 or abs(alpha + beta - 1.0) > 1e-6):
    raise ValueError(
        "alpha and beta must be non-negative and sum to 1 (row-stochastic "
        f"mixing), got alpha={alpha!r}, beta={beta!r}.")
  return alpha, beta


def _neighbours(order, n):
  """Client-indexed left/right neighbours ``[n]`` for ring ``order [n]``."""
  pos = jnp.argsort(order)  # inverse permutation: position of each client
  left = order[(pos - 1) % n]
  right = order[(pos + 1) % n]
  return left, right


def _row_coefficients(n, gamma, left, right, gates, tau, alpha, beta, eps):
  """Per-client coefficients (self, left, right), each ``[n]`` float32.

  Row i of the single-pass map is
  ``c_self[i] e_i + c_left[i] e_{L(i)} + c_right[i] e_{R(i)}``.
  """
  gamma = jnp.broadcast_to(jnp.asarray(gamma, jnp.float32), (n,))
  if gates is None:
    # FibFL: θ_i ← γθ_i + (1−γ)(αθ_L + βθ_R) (FIRMA, FibFL update).
    a_left = jnp.full((n,), alpha, jnp.float32)
    a_right = jnp.full((n,), beta, jnp.float32)
    keep = jnp.zeros((n,), bool)
  else:
    acc = jnp.asarray(gates, jnp.float32)
    # FibFL+ gate g_j = a_j·1[a_j ≥ τ] (FIRMA, FibFL+ accuracy gate).
    g = jnp.where(acc >= jnp.asarray(tau, jnp.float32), acc, 0.0)
    g_left, g_right = g[left], g[right]
    total = g_left + g_right
    keep = total < eps  # both neighbours gated out: keep own extractor
    safe = jnp.where(keep, 1.0, total)
    w_left, w_right = g_left / safe, g_right / safe
    # Prior/posterior mix a_L = α/2 + w_L/2, a_R = β/2 + w_R/2 (FIRMA, FibFL+).
    a_left = 0.5 * alpha + 0.5 * w_left
    a_right = 0.5 * beta + 0.5 * w_right
  c_self = jnp.where(keep, 1.0, gamma)
  c_left = jnp.where(keep, 0.0, (1.0 - gamma) * a_left)
  c_right = jnp.where(keep, 0.0, (1.0 - gamma) * a_right)
  return c_self, c_left, c_right


def _mix_rows(mat, c_self, c_left, c_right, left, right):
  """Synchronous pass applied to the rows of ``mat [n, m]`` (all read a snapshot)."""
  return (c_self[:, None] * mat + c_left[:, None] * mat[left]
          + c_right[:, None] * mat[right])


def fibonacci_mixing_matrix(n: int, gamma: ArrayLike, order: ArrayLike | None = None,
                            gates: ArrayLike | None = None, tau: ArrayLike = 0.35,
                            passes: int = 1, sweep: str = "synchronous",
                            alpha: float | None = None, beta: float | None = None,
                            eps: float = 1e-12) -> jax.Array:
  """Mixing matrix of FibFL / FibFL+ / FibFL++ ring gossip (FIRMA Eqs. 3–7,
  Alg. 1–3).

  One pass updates every client ``i`` (at ring position p, neighbours L, R):

  * FibFL (``gates=None``): ``θ_i ← γ_i θ_i + (1−γ_i)(α θ_L + β θ_R)``.
  * FibFL+ (``gates`` = local training accuracies a_j ∈ [0, 1]):
    ``g_j = a_j·1[a_j ≥ τ]``, ``w_L = g_L/(g_L+g_R)``, ``w_R = 1 − w_L``,
    ``a_L = α/2 + w_L/2``, ``a_R = β/2 + w_R/2`` and
    ``θ_i ← γ_i θ_i + (1−γ_i)(a_L θ_L + a_R θ_R)``; if ``g_L + g_R < eps`` the
    client keeps its own extractor (row ``i`` is ``e_i``). The gates are the
    accuracies of the round and stay fixed across positions and passes.

  ``sweep="synchronous"``: every client reads a snapshot taken at the start of
  the pass, so a pass is one matrix W and ``passes=K`` gives ``W^K``.

  ``sweep="sequential"`` (the in-place sweep of FIRMA Alg. 3, Gauss–Seidel along
  σ): positions are visited in order p = 0, 1, …, n−1 and client σ(p) is
  overwritten with the mix of the *current* values. A pass is the product
  ``E_{σ(n−1)} ··· E_{σ(1)} E_{σ(0)}`` where ``E_c`` is the identity with row c
  replaced by the row of W for client c, and ``passes=K`` repeats it K times.
  Wrap-around, exactly as a literal in-place loop behaves: position 0 reads its
  left neighbour σ(n−1) *before* σ(n−1) is updated in this pass (i.e. its value
  from the previous pass), while position n−1 reads its right neighbour σ(0)
  *after* σ(0) was updated in this pass.

  Every row is non-negative and sums to one (convex combinations of rows). The
  matrix is also doubly stochastic (keeps the clients' mean) only for
  ``sweep="synchronous"`` with one scalar γ and no gates; the sequential sweep,
  a per-client γ and the FibFL+ gates give columns that do not sum to one (see
  the module docstring).

  Args:
    n: number of clients (static), ``n ≥ 2``. With n = 2 the left and right
      neighbour are the same client, which receives ``(1−γ)(a_L + a_R) = 1−γ``.
    gamma: self-retention in [0, 1], scalar or per-client ``[n]``. For FibFL++
      pass the per-pass retention ``γ_in = γ_r^(1/K_g)`` (``per_pass_retention``).
    order: ring permutation σ ``[n]`` (client at each position); None = identity.
      A concrete order is validated; a traced integer array is accepted as is.
    gates: None (FibFL) or per-client accuracies ``[n]`` in [0, 1] (FibFL+).
    tau: gate threshold τ in [0, 1].
    passes: number of gossip passes K_g ≥ 1 (static).
    sweep: ``"synchronous"`` or ``"sequential"`` (static).
    alpha, beta: neighbour weights (default 1/φ and 1/φ²); must be ≥ 0 and sum
      to 1. Giving one sets the other to its complement.
    eps: threshold on ``g_L + g_R`` below which a client keeps its extractor.
  Returns:
    ``[n, n]`` float32 row-stochastic matrix M; new ``θ_i = Σ_j M[i, j] θ_j``.
  """
  n = check_n(n)
  passes = check_passes(passes)
  if sweep not in _SWEEPS:
    raise ValueError(f"sweep must be one of {_SWEEPS}, got {sweep!r}.")
  check_unit_interval("gamma", gamma, shape_ok=((), (n,)))
  if is_traced(gamma) and jnp.shape(gamma) not in ((), (n,)):
    raise ValueError(f"gamma must be a scalar or shape ({n},), got "
                     f"{jnp.shape(gamma)}.")
  if gates is not None:
    if jnp.shape(gates) != (n,):
      raise ValueError(f"gates must have shape ({n},) (one accuracy per "
                       f"client), got {jnp.shape(gates)}.")
    check_unit_interval("gates", gates)
  check_unit_interval("tau", tau, shape_ok=((),))
  if not (isinstance(eps, numbers.Real) and eps > 0):
    raise ValueError(f"eps must be a positive number, got {eps!r}.")
  alpha, beta = _resolve_fib_weights(alpha, beta)

  order = _resolve_order(order, n)
  left, right = _neighbours(order, n)
  c_self, c_left, c_right = _row_coefficients(n, gamma, left, right, gates, tau,
                                              alpha, beta, eps)
  eye = jnp.eye(n, dtype=jnp.float32)

  if sweep == "synchronous":
    # One pass W (FIRMA Lemma 5.1 circulant for σ = id); K passes are W^K, built
    # by K sparse row-mixes (O(K n²), no dense matmul).
    mix = lambda _, m: _mix_rows(m, c_self, c_left, c_right, left, right)
    w = mix(0, eye)
    return w if passes == 1 else jax.lax.fori_loop(1, passes, mix, w)

  def sequential_step(t, m):
    # Alg. 3 in place: row σ(p) is replaced by its mix of the current rows.
    c = order[t % n]
    row = c_self[c] * m[c] + c_left[c] * m[left[c]] + c_right[c] * m[right[c]]
    return m.at[c].set(row)

  return jax.lax.fori_loop(0, passes * n, sequential_step, eye)


def mixing_matrix_ring_uniform(n: int, gamma: ArrayLike,
                               order: ArrayLike | None = None) -> jax.Array:
  """RDFL ring mixing: ``θ_i ← γθ_i + (1−γ)(θ_L + θ_R)/2`` (synchronous).

  Args:
    n: number of clients, ``n ≥ 2`` (n = 2: the single neighbour gets ``1−γ``).
    gamma: self-retention in [0, 1], scalar or per-client ``[n]``.
    order: ring permutation ``[n]``; None = identity.
  Returns:
    ``[n, n]`` float32 row-stochastic matrix; doubly stochastic (keeps the
    clients' mean) for a scalar γ, not for a per-client one.
  """
  return fibonacci_mixing_matrix(n, gamma, order=order, alpha=0.5, beta=0.5)


def apply_mixing(matrix: jax.Array, stacked_tree: PyTree) -> PyTree:
  """Applies a mixing matrix to every leaf: ``einsum('ij,j...->i...')``.

  Computed at full float32 precision (``Precision.HIGHEST``: no reduced-precision
  matmul on accelerators) and cast back to each leaf's dtype.

  Args:
    matrix: ``[n, n]`` mixing matrix (row i mixes client i).
    stacked_tree: pytree whose leaves are floating arrays ``[n, ...]``.
  Returns:
    pytree of the same structure; leaf ``x`` becomes ``M x`` along axis 0.
  """
  if jnp.ndim(matrix) != 2 or matrix.shape[0] != matrix.shape[1]:
    raise ValueError(
        f"matrix must be square [n, n], got shape {jnp.shape(matrix)}.")
  n = matrix.shape[0]
  matrix = jnp.asarray(matrix)

  def mix(x):
    x = jnp.asarray(x)
    if x.ndim < 1 or x.shape[0] != n:
      raise ValueError(
          f"every leaf of stacked_tree must have leading axis {n} (one row per "
          f"client), got a leaf of shape {x.shape}.")
    if not jnp.issubdtype(x.dtype, jnp.inexact):
      raise ValueError(
          f"stacked_tree leaves must be floating point, got dtype {x.dtype}.")
    dtype = jnp.promote_types(x.dtype, jnp.float32)
    out = jnp.einsum("ij,j...->i...", matrix.astype(dtype), x.astype(dtype),
                     precision=jax.lax.Precision.HIGHEST)
    return out.astype(x.dtype)

  return jax.tree.map(mix, stacked_tree)


def spectral_gap(matrix: ArrayLike) -> float:
  """Spectral gap ``1 − |λ₂|`` of a row-stochastic mixing matrix.

  Eigenvalue moduli are sorted in decreasing order (|λ₁| = 1 for a
  row-stochastic matrix) and ``|λ₂|`` is the second; a repeated eigenvalue 1
  (e.g. a client that keeps its own extractor) gives gap 0. Host-side NumPy
  (``np.linalg.eigvals`` in float64), not jittable; accepts NumPy or JAX arrays.

  Args:
    matrix: ``[n, n]`` with ``n ≥ 2``.
  Returns:
    Python float.
  """
  m = np.asarray(matrix, dtype=np.float64)
  if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] < 2:
    raise ValueError(f"matrix must be square [n, n] with n >= 2, got shape "
                     f"{m.shape}.")
  if not np.all(np.isfinite(m)):
    raise ValueError("matrix must be finite.")
  moduli = np.sort(np.abs(np.linalg.eigvals(m)))[::-1]
  return float(1.0 - moduli[1])
