"""The ring order of FibFL++ (FIRMA): the ring cost of an order from the clients'
extractor similarities (:func:`ring_cost`) and the 2-opt search for a cheaper
ring (:func:`two_opt_ring`). The mixing matrices over an order are
:mod:`fedfrac.ops.ring`.
"""
from __future__ import annotations

import numbers

import numpy as np
from jax.typing import ArrayLike
from fedfrac.ops.ring_checks import check_order_np



COSTS = ("cosine", "dot")


def similarity(class_proportions: ArrayLike, cost: str) -> np.ndarray:
  if cost not in COSTS:
    raise ValueError(f"cost must be one of {COSTS}, got {cost!r}.")
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


def ring_cost_from_sim(sim: np.ndarray, order: np.ndarray) -> float:
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
  sim = similarity(class_proportions, cost)
  order = check_order_np(order, sim.shape[0])
  return ring_cost_from_sim(sim, order)


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
  sim = similarity(class_proportions, cost)
  if not (isinstance(tol, numbers.Real) and tol >= 0):
    raise ValueError(f"tol must be a non-negative number, got {tol!r}.")
  n = sim.shape[0]
  order = np.arange(n, dtype=np.int64)
  cost_before = ring_cost_from_sim(sim, order)
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
  return order, cost_before, ring_cost_from_sim(sim, order)
