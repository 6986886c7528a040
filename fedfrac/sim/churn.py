"""Client availability (churn) and cohort sampling of one round.

Availability is a two-state Markov chain per client with rates
``(p_leave, p_join)`` (scalars or ``[K]`` per-client arrays).

Cohort size under churn (FO-RI-FedAvg paper §IV-N): S_t ⊆ A_t, the available
clients, with |S_t| = max(⌈C·|A_t|⌉, 1) (``cohort_rule="available"``, the
default). Shapes stay static: every round has the same ⌈C·K⌉ slots (the largest
possible cohort); the first |S_t| slots of a uniform random ranking of the
available clients take part and the other slots are masked. The earlier rule,
``"slots"``, fills all ⌈C·K⌉ slots from the available clients (fewer only when
fewer than ⌈C·K⌉ are available). Without churn A_t is every client, both rules
give |S_t| = ⌈C·K⌉ and the sampling is unchanged.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac.sim.stages import Stage


def check_availability(availability, num_clients):
  """Raise unless each rate is a scalar or one rate per client."""
  if availability is None:
    return
  for name, rate in zip(("p_leave", "p_join"), availability):
    if np.ndim(rate) not in (0, 1) or (np.ndim(rate) == 1 and
                                        np.shape(rate)[0] != num_clients):
      raise ValueError(f"engine.availability {name}: a scalar or one rate per "
                       f"client ({num_clients}), got shape {np.shape(rate)}")


COHORT_RULES = ("available", "slots")


def check_cohort_rule(rule):
  """Raise unless ``rule`` is one of :data:`COHORT_RULES`."""
  if rule not in COHORT_RULES:
    raise ValueError(f"churn.cohort_rule={rule!r}: allowed values are "
                     f"{', '.join(repr(r) for r in COHORT_RULES)}")


def cohort_sizes(participation, num_clients):
  """``[K + 1]`` int32 table: entry a is max(⌈C·a⌉, 1), |S_t| when a clients are
  available (§IV-N), computed in float64 on the host like ``cohort_size``."""
  return np.asarray([max(int(math.ceil(participation * a - 1e-9)), 1)
                     for a in range(num_clients + 1)], np.int32)


def sample_cohort(key, available, cohort, cohort_perm=None, sizes=None):
  """Cohort ids ``[S]`` (sorted, or in ``cohort_perm`` order) and participation
  mask ``[S]``.

  Args:
    key: the round's sampling key.
    available: ``[K]`` bool availability A_t.
    cohort: S, the static number of slots (⌈C·K⌉).
    cohort_perm: optional fixed ``[S]`` permutation of the slot order.
    sizes: ``None`` (rule ``"slots"``: all S slots are drawn from the available
      clients, a slot filled by an unavailable one is masked) or the ``[K + 1]``
      table of :func:`cohort_sizes` (rule ``"available"``: only the first
      sizes[|A_t|] clients of the random ranking take part).
  Returns:
    ``(ids [S] int32, mask [S] bool)``.
  """
  k = available.shape[0]
  if sizes is None and cohort == k:
    ids = jnp.arange(k, dtype=jnp.int32)
    mask = available
  else:
    scores = jax.random.uniform(key, (k,)) + jnp.where(available, 0.0, 2.0)
    ranked = jnp.argsort(scores)[:cohort]
    mask = available[ranked]
    if sizes is not None:
      taking_part = jnp.asarray(sizes)[jnp.sum(available.astype(jnp.int32))]
      mask = mask & (jnp.arange(cohort) < taking_part)
    order = jnp.argsort(ranked)
    ids = ranked[order].astype(jnp.int32)
    mask = mask[order]
  if cohort_perm is not None:
    ids, mask = ids[cohort_perm], mask[cohort_perm]
  return ids, mask


def next_availability(availability, available, key, t):
  """Availability ``[K]`` bool after round ``t``'s transition (round 0 keeps the
  all-available start; ``availability=None``: unchanged)."""
  if availability is None:
    return available
  p_leave, p_join = availability
  u = jax.random.uniform(key, available.shape)
  stay = jnp.where(available, u >= p_leave, u < p_join)
  return jnp.where(t == 0, available, stay)


class Churn(Stage):
  """Client availability as a stage of the round: before sampling, each
  client's two-state Markov chain with rates ``availability = (p_leave,
  p_join)`` moves one step (:func:`next_availability`)."""

  def __init__(self, availability):
    self.availability_rates = availability

  def availability(self, available, key, t):
    return next_availability(self.availability_rates, available, key, t)
