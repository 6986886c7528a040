"""The FibFL++ schedules (FIRMA): mixing passes per round, the warm-up rounds and
the self-weight γ per round (:func:`fibfl_pp_gamma`), and the share of a
client's own model one pass keeps (:func:`per_pass_retention`).
"""
from __future__ import annotations

import numbers

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from fedfrac.ops.ring_checks import check_n, check_passes, check_unit_interval



def fibfl_pp_passes(n: int) -> int:
  """Gossip passes per round ``K_g = ceil(n/2)`` (FIRMA Prop. 2, ring coverage)."""
  n = check_n(n)
  return (n + 1) // 2


def fibfl_pp_warmup(total_rounds: int, min_rounds: int = 0) -> int:
  """FedAvg warm-up rounds ``W = max(min_rounds, floor(R/6))``.

  ``min_rounds=0`` is the paper's ``floor(R/6)``; the authors' code uses
  ``max(1, R // 6)`` (``min_rounds=1``).
  """
  total_rounds = check_n(total_rounds, "total_rounds", minimum=1)
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
  total_rounds = check_n(total_rounds, "total_rounds", minimum=1)
  if (isinstance(warmup_rounds, bool)
      or not isinstance(warmup_rounds, numbers.Integral)
      or not 0 <= warmup_rounds <= total_rounds):
    raise ValueError(f"warmup_rounds must be an integer in [0, total_rounds="
                     f"{total_rounds}], got {warmup_rounds!r}.")
  check_unit_interval("gamma_start", gamma_start, shape_ok=((),))
  check_unit_interval("gamma_end", gamma_end, shape_ok=((),))
  span = max(total_rounds - warmup_rounds - 1, 1)
  t = jnp.clip(jnp.asarray(round_index, jnp.float32) - warmup_rounds, 0.0, span)
  g0 = jnp.asarray(gamma_start, jnp.float32)
  g1 = jnp.asarray(gamma_end, jnp.float32)
  return g1 + 0.5 * (g0 - g1) * (1.0 + jnp.cos(jnp.pi * t / span))


def per_pass_retention(gamma_r: ArrayLike, passes: int) -> jax.Array:
  """Per-pass retention ``γ_in = γ_r^(1/K_g)`` (FIRMA Eq. 9, Prop. 3), so that K_g
  passes retain γ_r of the own model on the self path. Jittable in ``gamma_r``."""
  passes = check_passes(passes)
  check_unit_interval("gamma_r", gamma_r)
  return jnp.power(jnp.asarray(gamma_r, jnp.float32), 1.0 / passes)
