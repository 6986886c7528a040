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

  ========================================  ================  ===============
  mode                                      doubly stochastic  keeps the mean
  ========================================  ================  ===============
  synchronous, one γ for all clients        yes (any passes)   yes
  (FibFL, RDFL, FibFL++ synchronous)
  sequential sweep (FibFL++ default)        no                 no
  per-client γ ``[n]``                      no                 no
  gated (FibFL+, ``gates`` given)           no                 no
  ========================================  ================  ===============

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

PHI = (1.0 + math.sqrt(5.0)) / 2.0
# Fibonacci weights α = 1/φ (left), β = 1/φ² (right); α + β = 1 (FIRMA, FibFL).
FIB_ALPHA = 1.0 / PHI
FIB_BETA = 1.0 / PHI**2

_SWEEPS = ("synchronous", "sequential")
_COSTS = ("cosine", "dot")


# ----------------------------------------------------------------------------
# validation helpers
# ----------------------------------------------------------------------------


def _check_n(n, name="n", minimum=2):
  if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < minimum:
    raise ValueError(
        f"{name} must be an integer >= {minimum} (the number of clients on the "
        f"ring; n = 2 means both neighbours are the same client), got {n!r}.")
  return int(n)


def _check_unit_interval(name, value, shape_ok=None):
  """Checks a concrete scalar/array lies in [0, 1]; tracers pass unchecked."""
  if value is None or is_traced(value):
    return
  arr = np.asarray(value, dtype=np.float64)
  if shape_ok is not None and arr.shape not in shape_ok:
    raise ValueError(
        f"{name} must have shape {' or '.join(str(s) for s in shape_ok)}, got "
        f"shape {arr.shape}.")
  if not np.all(np.isfinite(arr)) or np.any(arr < 0.0) or np.any(arr > 1.0):
    raise ValueError(f"{name} must lie in [0, 1], got {value!r}.")


def _check_passes(passes):
  if (isinstance(passes, bool) or not isinstance(passes, numbers.Integral)
      or passes < 1):
    raise ValueError(
        f"passes must be an integer >= 1 (gossip passes per round), got "
        f"{passes!r}.")
  return int(passes)


def _check_order_np(order, n, name="order"):
  """Concrete permutation of range(n) as an int64 array."""
  arr = np.asarray(order)
  if arr.ndim != 1 or arr.shape[0] != n:
    raise ValueError(
        f"{name} must be a permutation of range({n}) (shape ({n},)), got "
        f"shape {arr.shape}.")
  if arr.dtype.kind not in "iu":
    if arr.dtype.kind == "f" and np.all(arr == np.round(arr)):
      arr = arr.astype(np.int64)
    else:
      raise ValueError(
          f"{name} must hold integer client ids, got dtype {arr.dtype}.")
  arr = arr.astype(np.int64)
  if not np.array_equal(np.sort(arr), np.arange(n)):
    raise ValueError(
        f"{name} must be a permutation of range({n}), got {arr.tolist()}.")
  return arr


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
  return jnp.asarray(_check_order_np(order, n), dtype=jnp.int32)


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


# ----------------------------------------------------------------------------
# mixing matrices
# ----------------------------------------------------------------------------


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
  n = _check_n(n)
  passes = _check_passes(passes)
  if sweep not in _SWEEPS:
    raise ValueError(f"sweep must be one of {_SWEEPS}, got {sweep!r}.")
  _check_unit_interval("gamma", gamma, shape_ok=((), (n,)))
  if is_traced(gamma) and jnp.shape(gamma) not in ((), (n,)):
    raise ValueError(f"gamma must be a scalar or shape ({n},), got "
                     f"{jnp.shape(gamma)}.")
  if gates is not None:
    if jnp.shape(gates) != (n,):
      raise ValueError(f"gates must have shape ({n},) (one accuracy per "
                       f"client), got {jnp.shape(gates)}.")
    _check_unit_interval("gates", gates)
  _check_unit_interval("tau", tau, shape_ok=((),))
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


# ----------------------------------------------------------------------------
# FibFL++ schedules
# ----------------------------------------------------------------------------


def fibfl_pp_passes(n: int) -> int:
  """Gossip passes per round ``K_g = ceil(n/2)`` (FIRMA Prop. 2, ring coverage)."""
  n = _check_n(n)
  return (n + 1) // 2


def fibfl_pp_warmup(total_rounds: int, min_rounds: int = 0) -> int:
  """FedAvg warm-up rounds ``W = max(min_rounds, floor(R/6))``.

  ``min_rounds=0`` is the paper's ``floor(R/6)``; the authors' code uses
  ``max(1, R // 6)`` (``min_rounds=1``).
  """
  total_rounds = _check_n(total_rounds, "total_rounds", minimum=1)
  if (isinstance(min_rounds, bool) or not isinstance(min_rounds, numbers.Integral)
      or not 0 <= min_rounds <= total_rounds):
    raise ValueError(f"min_rounds must be an integer in [0, total_rounds="
                     f"{total_rounds}], got {min_rounds!r}.")
  return max(int(min_rounds), total_rounds // 6)


def fibfl_pp_gamma(round_index: ArrayLike, warmup_rounds: int, total_rounds: int,
                   gamma_start: float = 0.4, gamma_end: float = 0.05) -> jax.Array:
  """Cosine-annealed round retention γ_r of FibFL++ (FIRMA Eq. 10).

  With ``t = r − W`` and ``T = max(R − W − 1, 1)``:
  ``γ_r = γ_end + (γ_start − γ_end)(1 + cos(π t / T)) / 2``, so the first
  post-warm-up round (r = W) gets γ_start and the last (r = R − 1) gets γ_end.
  ``t`` is clipped to [0, T]: warm-up rounds (whose value is unused) return
  γ_start. Jittable in ``round_index`` (rounds are 0-based).

  Args:
    round_index: 0-based round r (int or traced int scalar).
    warmup_rounds: W, static int in [0, total_rounds].
    total_rounds: R, static int ≥ 1.
    gamma_start, gamma_end: retention at the start/end of annealing, in [0, 1].
  Returns:
    float32 scalar γ_r.
  """
  total_rounds = _check_n(total_rounds, "total_rounds", minimum=1)
  if (isinstance(warmup_rounds, bool)
      or not isinstance(warmup_rounds, numbers.Integral)
      or not 0 <= warmup_rounds <= total_rounds):
    raise ValueError(f"warmup_rounds must be an integer in [0, total_rounds="
                     f"{total_rounds}], got {warmup_rounds!r}.")
  _check_unit_interval("gamma_start", gamma_start, shape_ok=((),))
  _check_unit_interval("gamma_end", gamma_end, shape_ok=((),))
  span = max(total_rounds - warmup_rounds - 1, 1)
  t = jnp.clip(jnp.asarray(round_index, jnp.float32) - warmup_rounds, 0.0, span)
  g0 = jnp.asarray(gamma_start, jnp.float32)
  g1 = jnp.asarray(gamma_end, jnp.float32)
  return g1 + 0.5 * (g0 - g1) * (1.0 + jnp.cos(jnp.pi * t / span))


def per_pass_retention(gamma_r: ArrayLike, passes: int) -> jax.Array:
  """Per-pass retention ``γ_in = γ_r^(1/K_g)`` (FIRMA Eq. 9, Prop. 3), so that K_g
  passes retain γ_r of the own model on the self path. Jittable in ``gamma_r``."""
  passes = _check_passes(passes)
  _check_unit_interval("gamma_r", gamma_r)
  return jnp.power(jnp.asarray(gamma_r, jnp.float32), 1.0 / passes)


# ----------------------------------------------------------------------------
# ring order (host side)
# ----------------------------------------------------------------------------


def _similarity(class_proportions, cost):
  if cost not in _COSTS:
    raise ValueError(f"cost must be one of {_COSTS}, got {cost!r}.")
  q = np.asarray(class_proportions, dtype=np.float64)
  if q.ndim != 2 or q.shape[0] < 2 or q.shape[1] < 1:
    raise ValueError(
        "class_proportions must be a 2-D array [n, C] with n >= 2 clients, got "
        f"shape {q.shape}.")
  if not np.all(np.isfinite(q)):
    raise ValueError("class_proportions must be finite.")
  sim = q @ q.T
  if cost == "cosine":
    norms = np.linalg.norm(q, axis=1)
    denom = np.outer(norms, norms)
    # A zero vector has no direction: its similarity to anything is 0.
    sim = np.where(denom > 0, sim / np.where(denom > 0, denom, 1.0), 0.0)
  return sim


def _ring_cost_from_sim(sim, order):
  return float(np.sum(sim[order, np.roll(order, -1)]))


def ring_cost(class_proportions: ArrayLike, order: ArrayLike, cost: str = "cosine") -> float:
  """Ring cost ``Σ_p c(q_σ(p), q_σ(p+1))`` including the wrap-around edge
  (FIRMA Eq. 8).

  Args:
    class_proportions: ``[n, C]`` per-client class proportions q_i.
    order: ring permutation σ ``[n]``.
    cost: ``"cosine"`` (paper, FibFL++ ring cost) or ``"dot"`` (raw dot product, as in
      the authors' code). Zero vectors have cosine similarity 0.
  Returns:
    Python float.
  """
  sim = _similarity(class_proportions, cost)
  order = _check_order_np(order, sim.shape[0])
  return _ring_cost_from_sim(sim, order)


def two_opt_ring(class_proportions: ArrayLike, cost: str = "cosine",
                 tol: float = 1e-9) -> tuple[np.ndarray, float, float]:
  """Ring order σ* minimising the ring cost by 2-opt (FIRMA Eq. 8, Alg. 3).

  Deterministic first-improvement 2-opt from the identity order: position pairs
  ``(i, j)``, ``0 ≤ i``, ``i + 2 ≤ j ≤ n − 1`` (excluding ``(0, n−1)``, which
  removes two adjacent edges) are scanned in lexicographic order; the move
  reverses ``σ[i+1..j]``, replacing edges (σ_i, σ_{i+1}), (σ_j, σ_{j+1}) by
  (σ_i, σ_j), (σ_{i+1}, σ_{j+1}). An improving move (gain > ``tol``) is applied
  at once and the scan continues; scans repeat until one makes no move. Runs
  host-side in NumPy (called once before training).

  Args:
    class_proportions: ``[n, C]`` per-client class-proportion vectors.
    cost: ``"cosine"`` (paper, default) or ``"dot"`` (authors' code).
    tol: minimum cost decrease for a move to count as improving.
  Returns:
    ``(order, cost_before, cost_after)``: ``order`` an int64 permutation ``[n]``
    (client at each ring position), ``cost_before`` the identity-order cost and
    ``cost_after`` the cost of ``order`` (Python floats).
  """
  sim = _similarity(class_proportions, cost)
  if not (isinstance(tol, numbers.Real) and tol >= 0):
    raise ValueError(f"tol must be a non-negative number, got {tol!r}.")
  n = sim.shape[0]
  order = np.arange(n, dtype=np.int64)
  cost_before = _ring_cost_from_sim(sim, order)
  improved = True
  while improved:
    improved = False
    for i in range(n - 2):
      j = i + 2
      while j < n:
        # Gains of every move (i, j'), j' ≥ j, under the current order.
        js = np.arange(j, n)
        if i == 0:
          js = js[js != n - 1]
        if js.size == 0:
          break
        a, b = order[i], order[i + 1]
        c, d = order[js], order[(js + 1) % n]
        delta = sim[a, c] + sim[b, d] - sim[a, b] - sim[c, d]
        hits = np.flatnonzero(delta < -tol)
        if hits.size == 0:
          break
        j = int(js[hits[0]])
        order[i + 1:j + 1] = order[i + 1:j + 1][::-1].copy()
        improved = True
        j += 1
  return order, cost_before, _ring_cost_from_sim(sim, order)


# ----------------------------------------------------------------------------
# diagnostics
# ----------------------------------------------------------------------------


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
