"""Loss-landscape roughness index from random 1-D slices (BEV paper Eqs. 13-18).

M random unit directions d_i in the flattened parameter space; on each, the loss
slice φ_i(s) = loss(w + s·d_i) is sampled at m+1 evenly spaced s ∈ [−ℓ, ℓ]. The
normalised total variation T_i = TV_i / (2ℓ(A_i + ε_A)) is 1/(2ℓ) for a monotone
slice and grows with oscillation; the index I = std(T) / (mean(T) + ε_T) measures
how unevenly rough the landscape is across directions.

All M·(m+1) losses are evaluated as one batched computation (``jax.vmap`` over
the flattened grid, or ``lax.map`` over chunks of it); wrap the call in
``jax.jit`` with ``loss_fn``, ``num_directions``, ``grid`` and ``batch_chunk``
static, or call it inside an already-jitted function.

Precision: in float32, Δφ between neighbouring grid points is about
2ℓ/m·|∇φ| while each loss carries rounding of about 1e-7·|φ|; when |φ| is large
relative to 2ℓ/m·|∇φ| the T_i pick up rounding noise. Keep ℓ/m from being tiny
relative to the loss scale, or enable float64 for the probe.
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from jax.typing import ArrayLike

from fedfrac._types import PyTree
from fedfrac._validation import concrete_scalar


def _validate(num_directions, radius, grid, eps_a, eps_t, batch_chunk):
  for name, v in (("num_directions", num_directions), ("grid", grid)):
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
      raise ValueError(f"{name} must be a Python int >= 1, got {v!r}.")
  if batch_chunk is not None and (not isinstance(batch_chunk, int)
                                  or isinstance(batch_chunk, bool) or batch_chunk < 1):
    raise ValueError(f"batch_chunk must be None or a Python int >= 1, got {batch_chunk!r}.")
  r = concrete_scalar(radius)
  if r is not None and not r > 0:
    raise ValueError(f"radius must be > 0, got {radius!r}.")
  for name, v in (("eps_a", eps_a), ("eps_t", eps_t)):
    c = concrete_scalar(v)
    if c is not None and not c >= 0:
      raise ValueError(f"{name} must be >= 0, got {v!r}.")


def roughness_profile(loss_fn: Callable[[PyTree, Any], ArrayLike], params: PyTree,
                      batch: Any, key: jax.Array, num_directions: int = 10,
                      radius: float = 0.01, grid: int = 100, eps_a: float = 1e-8,
                      eps_t: float = 1e-8, batch_chunk: int | None = None,
                      ) -> dict[str, jax.Array]:
  """Per-direction roughness diagnostics and the index.

  Args:
    loss_fn: ``loss_fn(params, batch) -> scalar``.
    params: pytree w (the point probed, e.g. the global model w_t).
    batch: probe batch passed unchanged to ``loss_fn``.
    key: PRNG key for the directions.
    num_directions: M.
    radius: ℓ > 0, half-width of the slice.
    grid: m; the slice has m+1 points.
    eps_a, eps_t: ε_A, ε_T.
    batch_chunk: None evaluates all M·(m+1) losses in one ``vmap``; an int
      evaluates them with ``lax.map`` in chunks of that many (less memory). Both
      evaluate the same points; results agree up to floating-point rounding.

  Returns:
    dict with ``index`` ``[]``, ``T``/``TV``/``A`` ``[M]``, ``losses`` ``[M, m+1]``,
    ``offsets`` ``[m+1]`` (the s values) and ``directions`` ``[M, P]`` (unit
    vectors in the ``ravel_pytree`` order of ``params``, P parameters).
  """
  _validate(num_directions, radius, grid, eps_a, eps_t, batch_chunk)
  flat, unravel = ravel_pytree(params)
  if flat.size == 0:
    raise ValueError("params must contain at least one parameter, got an empty pytree.")
  dtype = flat.dtype if jnp.issubdtype(flat.dtype, jnp.floating) else jnp.float32
  flat = flat.astype(dtype)
  d = jax.random.normal(key, (num_directions, flat.size), dtype)
  d = d / jnp.linalg.norm(d, axis=1, keepdims=True)  # unit d_i over the whole vector
  offsets = jnp.linspace(-radius, radius, grid + 1, dtype=dtype)  # s_j ∈ [−ℓ, ℓ]

  def loss_at(ij):
    i, j = ij // (grid + 1), ij % (grid + 1)
    return loss_fn(unravel(flat + offsets[j] * d[i]), batch)  # φ_i(s_j)

  idx = jnp.arange(num_directions * (grid + 1))
  if batch_chunk is None:
    losses = jax.vmap(loss_at)(idx)
  else:
    losses = jax.lax.map(loss_at, idx, batch_size=batch_chunk)
  losses = losses.reshape(num_directions, grid + 1)

  tv = jnp.sum(jnp.abs(jnp.diff(losses, axis=1)), axis=1)  # TV_i = Σ|Δφ_i|
  amp = jnp.max(losses, axis=1) - jnp.min(losses, axis=1)  # A_i = max φ_i − min φ_i
  t = tv / (2.0 * radius * (amp + eps_a))  # T_i (BEV Eqs. 13-18)
  index = jnp.std(t) / (jnp.mean(t) + eps_t)  # I (population std)
  return {"index": index, "T": t, "TV": tv, "A": amp, "losses": losses,
          "offsets": offsets, "directions": d}


def roughness_index(loss_fn: Callable[[PyTree, Any], ArrayLike], params: PyTree,
                    batch: Any, key: jax.Array, num_directions: int = 10,
                    radius: float = 0.01, grid: int = 100, eps_a: float = 1e-8,
                    eps_t: float = 1e-8, batch_chunk: int | None = None) -> jax.Array:
  """Roughness index I = std(T)/(mean(T)+ε_T) (BEV paper Eqs. 13-18), scalar ``[]``.

  See ``roughness_profile`` for the arguments; this returns only ``index``.
  """
  return roughness_profile(loss_fn, params, batch, key, num_directions, radius,
                           grid, eps_a, eps_t, batch_chunk)["index"]
