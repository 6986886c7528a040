"""DP-FedAvg: per-client update clipping, Gaussian noise, privacy accounting.

McMahan, Ramage, Talwar, Zhang, "Learning Differentially Private Recurrent
Language Models" (ICLR 2018), Alg. 1 with the fixed-denominator estimator:

    Δ̃_k = Δ_k · min(1, S / ‖Δ_k‖)                  (per-client clipping)
    Δ   = (Σ_k w_k Δ̃_k + N(0, (σ S)² I)) / D          (noisy sum, fixed denominator)

with w_k = 1 (uniform weighting; the paper's capped weights w_k ≤ 1 are also
accepted) and D the number of participating clients, or, for the estimator
whose denominator does not depend on the sampled cohort, the expected cohort
size q·N given as ``expected_cohort_size``. The sensitivity of the sum to one
client is S·max_k w_k ≤ S, so the mechanism is the sampled Gaussian mechanism
with noise multiplier σ, accounted for by ``dp_epsilon`` / ``epsilon_curve`` /
``PrivacyAccountant`` (host side, via the ``dp_accounting`` package).

The array functions are pure and jittable; the accountant is plain Python.
"""
from __future__ import annotations

import contextlib
import logging
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from fedfrac._types import PyTree

ACCOUNTANTS = ("rdp", "pld")


def _concrete(x):
  try:
    return np.asarray(x)
  except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
    return None


def _check_nonneg(name, value, strict=False):
  v = _concrete(value)
  if v is None:
    return
  if v.ndim != 0 or not np.isfinite(v) or (v <= 0 if strict else v < 0):
    rng = "> 0" if strict else ">= 0"
    raise ValueError(f"{name}={value!r} is not allowed; it must be a finite scalar {rng}.")


def global_norm(tree: PyTree) -> jax.Array:
  """L2 norm of all leaves of a pytree together (scalar, float32 or wider)."""
  leaves = jax.tree.leaves(tree)
  sq = sum(jnp.sum(jnp.square(x.astype(jnp.promote_types(x.dtype, jnp.float32))))
           for x in leaves)
  return jnp.sqrt(sq)


def clip_update(tree: PyTree, clip_norm: ArrayLike) -> tuple[PyTree, jax.Array]:
  """Scale an update to global L2 norm at most S (DP-FedAvg Alg. 1, ClipFn).

  Args:
    tree: one client's update pytree.
    clip_norm: S > 0 (scalar, may be traced).
  Returns:
    ``(clipped, norm)``: ``tree · min(1, S/‖tree‖)`` and the original norm ‖tree‖.
    Updates with ‖tree‖ <= S are returned unchanged (bit for bit).
  """
  _check_nonneg("clip_norm", clip_norm, strict=True)
  norm = global_norm(tree)
  over = norm > clip_norm
  scale = jnp.where(over, clip_norm / jnp.where(over, norm, 1.0), 1.0)
  clipped = jax.tree.map(
      lambda x: jnp.where(over, x * scale.astype(x.dtype), x), tree)
  return clipped, norm


def gaussian_noise_like(tree: PyTree, key: jax.Array, stddev: ArrayLike) -> PyTree:
  """Independent N(0, stddev²) noise with the structure, shapes and dtypes of tree."""
  leaves, treedef = jax.tree.flatten(tree)
  keys = jax.random.split(key, len(leaves))
  noise = [jax.random.normal(k, jnp.shape(x), jnp.result_type(x)) *
           jnp.asarray(stddev, jnp.result_type(x))
           for k, x in zip(keys, leaves)]
  return jax.tree.unflatten(treedef, noise)


def dp_aggregate(stacked_deltas: PyTree, mask: ArrayLike | None, clip_norm: ArrayLike,
                 noise_multiplier: ArrayLike, key: jax.Array,
                 weights: ArrayLike | None = None,
                 expected_cohort_size: ArrayLike | None = None,
                 ) -> tuple[PyTree, dict[str, jax.Array]]:
  """DP-FedAvg server aggregate of a cohort's updates (McMahan et al. 2018, Alg. 1).

  Each participating client's update is clipped to norm S, the clipped updates are
  summed (optionally with per-client weights w_k ∈ [0, 1]), Gaussian noise of
  standard deviation σ·S is added to the sum, and the result is divided by the
  denominator D. DP-FedAvg uses uniform weighting (w_k = 1): weighting by n_k
  would make one client's influence data dependent and break the sensitivity
  bound. D is the number of participating clients (with fixed-size cohort
  sampling this is a constant, i.e. the fixed-denominator estimator), or
  ``expected_cohort_size`` (q·N, or Σ expected weights) when given, which keeps
  D independent of the sampled cohort under Poisson sampling.

  Args:
    stacked_deltas: pytree with leaves ``[S, ...]`` (the cohort's updates).
    mask: ``[S]`` participation mask or None (all participate).
    clip_norm: S > 0.
    noise_multiplier: σ >= 0 (noise std on the sum is σ·S).
    key: PRNG key for the noise.
    weights: optional ``[S]`` weights in [0, 1] (McMahan et al.'s capped
      weights); None = uniform.
    expected_cohort_size: optional fixed denominator D > 0.
  Returns:
    ``(aggregate, info)``: a pytree with leaves ``[...]`` and a dict with
    ``clip_fraction`` (share of participants whose update was clipped),
    ``mean_norm`` (mean pre-clipping norm over participants), ``norms [S]``,
    ``num_participants``, ``denominator`` and ``noise_std`` (std of the noise
    in the returned aggregate, σS/D).
  """
  _check_nonneg("clip_norm", clip_norm, strict=True)
  _check_nonneg("noise_multiplier", noise_multiplier)
  if expected_cohort_size is not None:
    _check_nonneg("expected_cohort_size", expected_cohort_size, strict=True)
  leaves = jax.tree.leaves(stacked_deltas)
  if not leaves:
    raise ValueError("stacked_deltas: the pytree has no leaves.")
  s = jnp.shape(leaves[0])[0]
  part = (jnp.ones((s,), bool) if mask is None
          else jnp.asarray(mask).astype(bool))
  if part.shape != (s,):
    raise ValueError(f"mask: shape {tuple(part.shape)}, expected ({s},).")
  if weights is None:
    w = part.astype(jnp.float32)
  else:
    wc = _concrete(weights)
    if wc is not None and (wc.shape != (s,) or np.any(wc < 0) or np.any(wc > 1)):
      raise ValueError(
          f"weights: got shape {wc.shape} and range [{wc.min()}, {wc.max()}]; "
          f"expected shape ({s},) with values in [0, 1] (larger weights raise the "
          "sensitivity above clip_norm).")
    w = jnp.where(part, jnp.asarray(weights, jnp.float32), 0.0)

  clipped, norms = jax.vmap(lambda t: clip_update(t, clip_norm))(stacked_deltas)
  total = jax.tree.map(
      lambda x: jnp.tensordot(w.astype(x.dtype),
                              jnp.where(jnp.reshape(part, (-1,) + (1,) * (x.ndim - 1)),
                                        x, jnp.zeros((), x.dtype)),
                              axes=(0, 0)),
      clipped)
  sigma = jnp.asarray(noise_multiplier, jnp.float32) * jnp.asarray(clip_norm, jnp.float32)
  noise = gaussian_noise_like(total, key, sigma)
  m = jnp.sum(part.astype(jnp.float32))
  if expected_cohort_size is None:
    denom = jnp.sum(w)                 # = m for uniform weights
    denom = jnp.where(denom > 0, denom, 1.0)
  else:
    denom = jnp.asarray(expected_cohort_size, jnp.float32)
  agg = jax.tree.map(lambda t, z: (t + z) / denom.astype(t.dtype), total, noise)

  partf = part.astype(jnp.float32)
  msafe = jnp.maximum(m, 1.0)
  info = {
      "clip_fraction": jnp.sum(partf * (norms > clip_norm)) / msafe,
      "mean_norm": jnp.sum(jnp.where(part, norms, 0.0)) / msafe,
      "norms": jnp.where(part, norms, 0.0),
      "num_participants": m,
      "denominator": denom,
      "noise_std": sigma / denom,
  }
  return agg, info


# ---------------------------------------------------------------------------
# Privacy accounting (host side): Poisson-subsampled Gaussian mechanism.
# ---------------------------------------------------------------------------


def _check_accounting_args(noise_multiplier, sampling_rate, delta, accountant):
  if accountant not in ACCOUNTANTS:
    raise ValueError(f"accountant={accountant!r} is not allowed; use one of {ACCOUNTANTS}.")
  if not (np.isfinite(noise_multiplier) and noise_multiplier >= 0):
    raise ValueError(f"noise_multiplier={noise_multiplier!r} is not allowed; it must be >= 0.")
  if not (0.0 <= sampling_rate <= 1.0):
    raise ValueError(f"sampling_rate={sampling_rate!r} is not allowed; it must be in [0, 1].")
  if not (0.0 < delta < 1.0):
    raise ValueError(f"delta={delta!r} is not allowed; it must be in (0, 1).")


def _check_count(name, value):
  if isinstance(value, bool) or not float(value).is_integer() or value < 0:
    raise ValueError(f"{name}={value!r} is not allowed; it must be an integer >= 0.")
  return int(value)


def _round_event(noise_multiplier, sampling_rate):
  import dp_accounting
  gauss = dp_accounting.GaussianDpEvent(float(noise_multiplier))
  if sampling_rate == 1.0:
    return gauss
  return dp_accounting.PoissonSampledDpEvent(float(sampling_rate), gauss)


@contextlib.contextmanager
def _quiet_absl():
  """Hold back dp_accounting's absl warnings while it builds an RDP curve.

  For small σ (e.g. 0.5) its series for a few fractional orders α ≤ 1.6 does not
  converge; it then leaves those orders out of the ε minimisation (ε stays a
  valid bound over the remaining orders) and logs one warning line per order and
  per accountant, dozens of lines in a quickstart run. Errors still show.
  """
  logger = logging.getLogger("absl")
  level = logger.level
  logger.setLevel(logging.ERROR)
  try:
    yield
  finally:
    logger.setLevel(level)


class PrivacyAccountant:
  """Running (ε, δ) of DP-FedAvg: one Poisson-sampled Gaussian event per round.

  Host-side, incremental: ``step(n)`` composes n more rounds and ``epsilon``
  reads ε at the fixed δ without recomposing from the start. With
  ``accountant="rdp"`` the per-round RDP curve is computed once and scaled by
  the number of rounds (RDP composes additively); ``"pld"`` composes privacy
  loss distributions (tighter, slower).

  Args:
    noise_multiplier: σ (noise std on the clipped sum / clip norm); 0 = no privacy.
    sampling_rate: q, the probability that a client takes part in a round.
    delta: target δ.
    accountant: ``"rdp"`` | ``"pld"``.
  """

  def __init__(self, noise_multiplier, sampling_rate, delta, accountant="rdp"):
    _check_accounting_args(noise_multiplier, sampling_rate, delta, accountant)
    self.noise_multiplier = float(noise_multiplier)
    self.sampling_rate = float(sampling_rate)
    self.delta = float(delta)
    self.accountant = accountant
    self.steps = 0
    self._trivial = self.sampling_rate == 0.0
    self._nonprivate = self.noise_multiplier == 0.0 and not self._trivial
    self._rdp_one = None
    self._pld = None
    if self._trivial or self._nonprivate:
      return
    if accountant == "rdp":
      from dp_accounting import rdp
      acc = rdp.RdpAccountant()
      with _quiet_absl():
        acc.compose(_round_event(self.noise_multiplier, self.sampling_rate), 1)
      self._orders = np.asarray(acc.orders, np.float64)
      self._rdp_one = np.asarray(acc.rdp, np.float64)
    else:
      # One round's privacy loss distribution, built once and composed per step
      # (same construction and defaults as dp_accounting.pld.PLDAccountant).
      from dp_accounting.pld import privacy_loss_distribution as pld_lib
      self._pld_one = pld_lib.from_gaussian_mechanism(
          standard_deviation=self.noise_multiplier,
          sampling_prob=self.sampling_rate)

  def step(self, count: int = 1) -> PrivacyAccountant:
    """Compose ``count`` more rounds; returns self."""
    count = _check_count("count", count)
    if count and self._rdp_one is None and not (self._trivial or self._nonprivate):
      more = self._pld_one if count == 1 else self._pld_one.self_compose(count)
      self._pld = more if self._pld is None else self._pld.compose(more)
    self.steps += count
    return self

  @property
  def epsilon(self) -> float:
    """ε at ``delta`` after ``steps`` rounds (0 before any round, inf if σ = 0)."""
    if self.steps == 0 or self._trivial:
      return 0.0
    if self._nonprivate:
      return math.inf
    if self._rdp_one is not None:
      from dp_accounting.rdp import rdp_privacy_accountant as rpa
      eps, _ = rpa.compute_epsilon(self._orders, self.steps * self._rdp_one, self.delta)
      return float(eps)
    return float(self._pld.get_epsilon_for_delta(self.delta))


def dp_epsilon(noise_multiplier: float, sampling_rate: float, steps: int, delta: float,
               accountant: str = "rdp") -> float:
  """ε at δ after ``steps`` rounds of the Poisson-sampled Gaussian mechanism.

  Host side (not jittable). ``noise_multiplier = 0`` gives ``inf``; ``steps = 0``
  or ``sampling_rate = 0`` gives 0.
  """
  steps = _check_count("steps", steps)
  return PrivacyAccountant(noise_multiplier, sampling_rate, delta, accountant).step(steps).epsilon


def epsilon_curve(noise_multiplier: float, sampling_rate: float, rounds: int, delta: float,
                  accountant: str = "rdp") -> np.ndarray:
  """ε after each of rounds 1..``rounds`` -> ``np.ndarray [rounds]`` (non-decreasing).

  Composes incrementally (one accountant, one round at a time).
  """
  rounds = _check_count("rounds", rounds)
  acc = PrivacyAccountant(noise_multiplier, sampling_rate, delta, accountant)
  out = np.empty((rounds,), np.float64)
  for t in range(rounds):
    out[t] = acc.step(1).epsilon
  return out
