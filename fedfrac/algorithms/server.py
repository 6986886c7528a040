"""The server's "combine the cohort's updates" step, shared by every server algorithm.

Every star-topology algorithm whose server turns the cohort's stacked updates
into one update (FedAvg, FedAvgM, FedOpt, FedProx, SCAFFOLD, ...) calls

    combined, info = server.combine_deltas(messages, weights, mask, key, ctx.aggregator)

instead of ``ops.aggregate.weighted_mean``; the rule is chosen by the config
section ``server`` (``aggregator``, ``trim_beta``, ``num_byzantine``, ``multi``,
overridable per method as ``methods.<label>.server``) and reaches the builder as
``BuildContext.aggregator`` (an :class:`AggregatorSpec`). With the default
``"mean"`` the result is exactly ``weighted_mean(messages, weights, mask)``.
A module that calls it registers with ``robust_aggregation=True`` so config validation
lets that method run with a non-mean rule (others are refused with a clear
error instead of silently ignoring the setting).

Rules (docs/design.md §3.5), over the participating rows of a stacked pytree ``[S, ...]``:

  mean          Σ_k p_k Δ_k, p_k = n_k / Σ n_j           (McMahan et al. 2017)
  median        coordinate-wise median                     (Yin et al. 2018)
  trimmed_mean  coordinate-wise β-trimmed mean             (Yin et al. 2018)
  krum          the update with the lowest Krum score, f Byzantine tolerated
                                                           (Blanchard et al. 2017)
  multi_krum    uniform mean of the ``multi`` lowest-scoring updates
                (``multi = 0``: S − f)                      (Blanchard et al. 2017)

Robust rules ignore the sample-count weights (a Byzantine client can lie about
n_k); only the participation mask is used.
"""
from __future__ import annotations

import dataclasses
import math

import jax

from fedfrac.algorithms import contract, trees
from fedfrac.ops import aggregate as agg

AGGREGATORS = ("mean", "median", "trimmed_mean", "krum", "multi_krum")


@dataclasses.dataclass(frozen=True)
class AggregatorSpec:
  """Which rule combines the cohort's updates, and its options (static).

  Attributes:
    name: one of :data:`AGGREGATORS`.
    trim_beta: β of ``trimmed_mean``, the fraction trimmed per side, in [0, 0.5).
    num_byzantine: f of ``krum`` / ``multi_krum``; needs cohort size S > 2f + 2.
    multi: clients averaged by ``multi_krum`` (0 = S − f); ``krum`` uses 1.
  """
  name: str = "mean"
  trim_beta: float = 0.1
  num_byzantine: int = 0
  multi: int = 0

  @property
  def is_mean(self) -> bool:
    return self.name == "mean"

  def check(self, cohort=None, prefix="server."):
    """Raise ValueError naming the option if it is invalid (``cohort`` = S if known)."""
    if self.name not in AGGREGATORS:
      raise ValueError(f"{prefix}aggregator={self.name!r}: allowed values are "
                       f"{', '.join(AGGREGATORS)}")
    b = self.trim_beta
    if not (_is_number(b) and 0 <= b < 0.5):
      raise ValueError(f"{prefix}trim_beta={b!r}: must be in [0, 0.5)")
    f = self.num_byzantine
    if not (_is_int(f) and f >= 0):
      raise ValueError(f"{prefix}num_byzantine={f!r}: must be an integer >= 0")
    if not (_is_int(self.multi) and self.multi >= 0):
      raise ValueError(f"{prefix}multi={self.multi!r}: must be an integer >= 0 "
                       "(0 = cohort size minus num_byzantine)")
    if cohort is not None and self.name in ("krum", "multi_krum"):
      if not cohort > 2 * f + 2:
        raise ValueError(
            f"{prefix}num_byzantine={f!r}: {self.name} needs a cohort of more than "
            f"2f+2 = {2 * f + 2} clients; the cohort has {cohort} (raise "
            "participation or lower num_byzantine)")
      if self.name == "multi_krum" and self.multi > cohort:
        raise ValueError(f"{prefix}multi={self.multi!r}: must be <= the cohort size "
                         f"{cohort}")
    return self

  def num_selected(self, cohort: int) -> int:
    """Clients averaged by Krum-type rules for a cohort of ``cohort`` slots."""
    if self.name == "krum":
      return 1
    return self.multi if self.multi > 0 else max(cohort - self.num_byzantine, 1)


def combine_deltas(messages, weights, mask, key=None, spec: AggregatorSpec | None = None):
  """Combine a cohort's stacked updates into one update with the configured rule.

  Args:
    messages: pytree with leaves ``[S, ...]`` (one update per cohort slot).
    weights: ``[S]`` non-negative weights (n_k; zero for masked slots); used by
      ``mean`` only.
    mask: ``[S]`` participation mask; absent rows never influence the result.
    key: PRNG key (unused by the current rules; part of the signature so a
      randomised rule needs no caller change).
    spec: :class:`AggregatorSpec` (None = ``mean``).
  Returns:
    ``(combined, info)``: a pytree with leaves ``[...]`` and a dict of server
    metrics (``krum_selected [S]`` bool for the Krum rules, else empty).
  """
  del key
  spec = (spec or AggregatorSpec()).check(_num_rows(messages), prefix="")
  if spec.name == "mean":
    return agg.weighted_mean(messages, weights, mask), {}
  if spec.name == "median":
    return agg.coordinate_median(messages, mask), {}
  if spec.name == "trimmed_mean":
    return agg.trimmed_mean(messages, mask, beta=spec.trim_beta), {}
  combined, selected = agg.krum(messages, mask, num_byzantine=spec.num_byzantine,
                                multi=spec.num_selected(_num_rows(messages)))
  return combined, {"krum_selected": selected}


def _num_rows(stacked):
  return int(jax.tree.leaves(stacked)[0].shape[0])


def _is_int(v):
  return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v):
  return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def global_delta_aggregate(spec: AggregatorSpec | None, server_lr):
  """``aggregate`` of a server that keeps only the global model:
  w_{t+1} = w_t + η_g · combine(Δ_k) (FedAvg's mean, or the robust rule of ``spec``);
  the rule's metrics (Krum's selection) are the round's server metrics."""

  def aggregate(server_state, client_states, messages, weights, mask, key):
    delta, info = combine_deltas(messages, weights, mask, key, spec)
    params = trees.tree_add(server_state["params"], trees.tree_scale(delta, server_lr))
    return contract.ServerUpdate({"params": params}, client_states, info)
  return aggregate
