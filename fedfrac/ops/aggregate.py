"""Aggregation of stacked client pytrees.

Every function takes pytrees whose leaves have a leading client axis ``[S, ...]``
(the sampled cohort) and returns one pytree without it. All functions are pure and
jittable; weights are normalised here so callers may pass raw sample counts.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from fedfrac._types import PyTree


def normalize_weights(weights: ArrayLike, mask: ArrayLike | None = None) -> jax.Array:
  """Weights ``[S]`` (optionally masked by ``mask [S]``) scaled to sum to one.

  A cohort whose weights are all zero gets all-zero weights (not NaN), so an
  empty round leaves the server model unchanged under ``weighted_mean``.
  """
  w = jnp.asarray(weights, jnp.float32)
  if mask is not None:
    w = w * jnp.asarray(mask, w.dtype)
  total = jnp.sum(w)
  return jnp.where(total > 0, w / jnp.where(total > 0, total, 1.0), jnp.zeros_like(w))


def weighted_mean(stacked: PyTree, weights: ArrayLike,
                  mask: ArrayLike | None = None) -> PyTree:
  """Σ_k p_k x_k over the leading axis (FedAvg, McMahan et al. 2017, Alg. 1).

  Args:
    stacked: pytree with leaves ``[S, ...]`` (every leaf the same S; a tree
      without leaves is returned as it is).
    weights: ``[S]`` non-negative (e.g. n_k); normalised internally.
    mask: optional ``[S]`` 0/1 participation mask.
  Returns:
    pytree with leaves ``[...]``.
  Raises:
    ValueError: leaves without one common leading axis S, or ``weights`` /
      ``mask`` not of shape ``[S]`` (checked at trace time, as the robust rules do).
  """
  if not jax.tree.leaves(stacked):   # e.g. a parameter-free extractor
    return stacked
  s = _num_rows(stacked)
  if tuple(jnp.shape(weights)) != (s,):
    raise ValueError(f"weights: shape {tuple(jnp.shape(weights))}, expected ({s},) for "
                     f"S={s} rows.")
  _participation(stacked, mask)
  p = normalize_weights(weights, mask)
  return jax.tree.map(
      lambda x: jnp.tensordot(p.astype(x.dtype), x, axes=(0, 0)), stacked)


# ---------------------------------------------------------------------------
# Robust aggregation (docs/design.md §3.5): coordinate-wise median, trimmed mean, Krum.
# All take a stacked pytree (leaves [S, ...]) and an optional participation mask
# [S]; absent rows never influence the result (they may even hold NaN). S is
# static; the number of participants m = Σ mask may be traced. An empty cohort
# (m = 0) aggregates to zeros, like `weighted_mean`.
# ---------------------------------------------------------------------------


def _num_rows(stacked, name="stacked"):
  leaves = jax.tree.leaves(stacked)
  if not leaves:
    raise ValueError(f"{name}: the pytree has no leaves.")
  shapes = [tuple(jnp.shape(l)) for l in leaves]
  if any(len(s) == 0 for s in shapes) or len({s[0] for s in shapes}) != 1:
    raise ValueError(
        f"{name}: every leaf needs the same leading client axis [S, ...]; got {shapes}.")
  return shapes[0][0]


def _participation(stacked, mask):
  """(S, participation bool [S], m int32 scalar)."""
  s = _num_rows(stacked)
  if mask is None:
    part = jnp.ones((s,), bool)
  else:
    mask = jnp.asarray(mask)
    if mask.shape != (s,):
      raise ValueError(f"mask: shape {tuple(mask.shape)}, expected ({s},) for S={s} rows.")
    part = mask.astype(bool)
  return s, part, jnp.sum(part.astype(jnp.int32))


def _concrete(x):
  """x as a NumPy value when it is known at trace time, else None."""
  try:
    return np.asarray(x)
  except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
    return None


def _concrete_count(num_rows, mask):
  """Number of participants when it is known at trace time, else None."""
  if mask is None:
    return num_rows
  mc = _concrete(mask)
  return None if mc is None else int(np.sum(mc.astype(bool)))


def _rows(mask_like, x):
  """Broadcast a [S] vector against a leaf [S, ...]."""
  return jnp.reshape(mask_like, (-1,) + (1,) * (x.ndim - 1))


def _sorted_participants(x, part):
  """Sort a leaf along the client axis with absent rows (set to +inf) last."""
  x = x.astype(jnp.promote_types(x.dtype, jnp.float32))
  return jnp.sort(jnp.where(_rows(part, x), x, jnp.inf), axis=0)


def coordinate_median(stacked: PyTree, mask: ArrayLike | None = None) -> PyTree:
  """Coordinate-wise median over participating clients (Yin et al. 2018).

  Args:
    stacked: pytree with leaves ``[S, ...]``.
    mask: optional ``[S]`` participation mask.
  Returns:
    pytree with leaves ``[...]``: per coordinate, the middle participating value
    (odd m) or the mean of the two middle values (even m); zeros when m = 0.
  """
  _, part, m = _participation(stacked, mask)
  lo = jnp.maximum((m - 1) // 2, 0)
  hi = jnp.maximum(m // 2, 0)

  def leaf(x):
    xs = _sorted_participants(x, part)
    a = jax.lax.dynamic_index_in_dim(xs, lo, axis=0, keepdims=False)
    b = jax.lax.dynamic_index_in_dim(xs, hi, axis=0, keepdims=False)
    med = (a + b) * 0.5
    return jnp.where(m > 0, med, jnp.zeros_like(med)).astype(x.dtype)

  return jax.tree.map(leaf, stacked)


def trimmed_mean(stacked: PyTree, mask: ArrayLike | None = None,
                 beta: ArrayLike = 0.1) -> PyTree:
  """Coordinate-wise β-trimmed mean over participating clients (Yin et al. 2018).

  Per coordinate, drops the k = floor(β·m) largest and k smallest of the m
  participating values and averages the remaining m − 2k (the definition of
  ``scipy.stats.trim_mean``).

  Args:
    stacked: pytree with leaves ``[S, ...]``.
    mask: optional ``[S]`` participation mask.
    beta: trimming fraction per side, 0 <= β < 0.5 (β = 0 is the plain mean).
  Returns:
    pytree with leaves ``[...]``; zeros when m = 0.
  """
  s, part, m = _participation(stacked, mask)
  beta_c = _concrete(beta)
  if beta_c is not None:
    b = float(beta_c)
    if not (0.0 <= b < 0.5):
      raise ValueError(f"beta={b!r} is not allowed; the trimming fraction must be in [0, 0.5).")
    # floor(β·m) for every possible m, in float64 on the host (exact for decimal β).
    table = jnp.asarray(np.floor(b * np.arange(s + 1)).astype(np.int32))
    k = table[m]
  else:
    k = jnp.floor(jnp.asarray(beta, jnp.float32) * m + 1e-6).astype(jnp.int32)
  k = jnp.clip(k, 0, jnp.maximum((m - 1) // 2, 0))
  kept = m - 2 * k
  idx = jnp.arange(s)

  def leaf(x):
    xs = _sorted_participants(x, part)
    keep = _rows((idx >= k) & (idx < m - k), xs)
    total = jnp.sum(jnp.where(keep, xs, 0.0), axis=0)
    out = total / jnp.maximum(kept, 1).astype(total.dtype)
    return jnp.where(m > 0, out, jnp.zeros_like(out)).astype(x.dtype)

  return jax.tree.map(leaf, stacked)


def _check_byzantine(num_byzantine, m_concrete, name="num_byzantine"):
  f = _concrete(num_byzantine)
  if f is None or f.ndim != 0 or not float(f).is_integer() or f < 0:
    raise ValueError(f"{name}={num_byzantine!r} is not allowed; it must be a "
                     "non-negative Python int (static).")
  f = int(f)
  if m_concrete is not None and not m_concrete > 2 * f + 2:
    raise ValueError(
        f"{name}={f} needs more than 2f+2 = {2 * f + 2} participating clients "
        f"for Krum; got m={int(m_concrete)}.")
  return f


def pairwise_sq_distances(stacked: PyTree, mask: ArrayLike | None = None) -> jax.Array:
  """Squared Euclidean distances ``[S, S]`` between clients' flattened updates.

  Computed from a Gram matrix of updates centred on the participants' mean (which
  keeps the cancellation error small when updates are large and close); rows and
  columns of absent clients are zero.
  """
  _, part, m = _participation(stacked, mask)
  partf = part.astype(jnp.float32)
  gram: jax.Array | float = 0.0
  for x in jax.tree.leaves(stacked):
    dt = jnp.promote_types(x.dtype, jnp.float32)
    xf = jnp.reshape(x, (x.shape[0], -1)).astype(dt)
    xf = jnp.where(part[:, None], xf, 0.0)
    mu = jnp.sum(xf, axis=0) / jnp.maximum(m, 1).astype(dt)
    xc = jnp.where(part[:, None], xf - mu, 0.0)
    gram = gram + jnp.matmul(xc, xc.T, precision=jax.lax.Precision.HIGHEST)
  sq = jnp.diagonal(gram)
  d = jnp.maximum(sq[:, None] + sq[None, :] - 2.0 * gram, 0.0)
  return d * partf[:, None] * partf[None, :]


def krum_scores(stacked: PyTree, mask: ArrayLike | None = None,
                num_byzantine: int = 0) -> jax.Array:
  """Krum scores ``[S]`` (Blanchard et al. 2017, Sec. 4).

  score_k = Σ of squared distances from client k to its m − f − 2 nearest other
  participating clients; absent clients score +inf.
  """
  s, part, m = _participation(stacked, mask)
  mc = _concrete_count(s, mask)
  f = _check_byzantine(num_byzantine, mc)
  d = pairwise_sq_distances(stacked, mask)
  valid = part[:, None] & part[None, :] & ~jnp.eye(s, dtype=bool)
  ds = jnp.sort(jnp.where(valid, d, jnp.inf), axis=1)
  n_near = jnp.maximum(m - f - 2, 0)
  take = jnp.arange(s)[None, :] < n_near
  score = jnp.sum(jnp.where(take, ds, 0.0), axis=1)
  return jnp.where(part, score, jnp.inf)


def krum(stacked: PyTree, mask: ArrayLike | None = None, num_byzantine: int = 0,
         multi: ArrayLike = 1) -> tuple[PyTree, jax.Array]:
  """Krum / Multi-Krum aggregation (Blanchard et al. 2017).

  Selects the ``multi`` participating clients with the lowest Krum score and
  averages them uniformly (``multi = 1`` is Krum: the single selected update).
  Requires m > 2f + 2, checked when the mask is concrete.

  Args:
    stacked: pytree with leaves ``[S, ...]``.
    mask: optional ``[S]`` participation mask.
    num_byzantine: f, the number of Byzantine clients tolerated (static int).
    multi: number of selected clients, 1 <= multi <= m (may be traced).
  Returns:
    ``(aggregate, selected)``: pytree with leaves ``[...]`` and a bool ``[S]``
    mask of the selected clients. Ties are broken by lower client index.
  """
  s, part, m = _participation(stacked, mask)
  mc = _concrete_count(s, mask)
  multi_c = _concrete(multi)
  if multi_c is not None:
    if multi_c.ndim != 0 or not float(multi_c).is_integer() or multi_c < 1:
      raise ValueError(f"multi={multi!r} is not allowed; it must be an integer >= 1.")
    if mc is not None and multi_c > mc:
      raise ValueError(
          f"multi={int(multi_c)} exceeds the m={int(mc)} participating clients.")
  score = krum_scores(stacked, mask, num_byzantine)
  order = jnp.argsort(score, stable=True)
  rank = jnp.zeros((s,), jnp.int32).at[order].set(jnp.arange(s, dtype=jnp.int32))
  selected = (rank < multi) & part
  n_sel = jnp.maximum(jnp.sum(selected.astype(jnp.int32)), 1)

  def leaf(x):
    dt = jnp.promote_types(x.dtype, jnp.float32)
    xs = jnp.where(_rows(selected, x), x.astype(dt), 0.0)
    return (jnp.sum(xs, axis=0) / n_sel.astype(dt)).astype(x.dtype)

  return jax.tree.map(leaf, stacked), selected
