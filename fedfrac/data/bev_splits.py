"""The BEV fleet's trip-level splits (70/10/20 by trip, per vehicle), its speed
regimes (trips grouped by mean speed, and a partition of the clients' trips that
skews each client towards one regime, ``data.regime_skew``) and the
normalisation statistics fitted on the training split (robust centre and scale)."""
from __future__ import annotations

from typing import Any, Iterable, NamedTuple, Optional, Sequence

import numpy as np
from numpy.typing import ArrayLike

_SCALE_EPS = 1e-6


class NormStats(NamedTuple):
  """Per-client robust location/scale. ``center``/``scale``: ``[K, F]`` or ``[K]``."""
  center: np.ndarray
  scale: np.ndarray


def split_counts(n: int, fractions: Sequence[float] = (0.7, 0.1, 0.2)) -> tuple[int, ...]:
  """Trips per split for ``n`` trips.

  Rule: largest-remainder rounding of ``n · fractions``; then every split with a
  positive fraction that is still empty takes one trip from the currently largest
  split holding more than one trip, filling splits in order of decreasing fraction
  (ties: train, val, test order). So 1 trip → train; 2 trips → train + test (for
  70/10/20); ≥ 3 trips → all three non-empty.
  """
  fr = np.asarray(fractions, np.float64)
  if fr.shape != (3,) or np.any(fr < 0) or not np.isclose(fr.sum(), 1.0):
    raise ValueError(f"fractions must be 3 non-negative numbers summing to 1, got "
                     f"{fractions!r}")
  ideal = n * fr
  counts = np.floor(ideal).astype(int)
  rem = n - counts.sum()
  order = np.argsort(-(ideal - counts), kind="stable")
  counts[order[:rem]] += 1
  for i in np.argsort(-fr, kind="stable"):
    if fr[i] > 0 and counts[i] == 0:
      donors = [j for j in range(3) if counts[j] > 1]
      if not donors:
        break
      j = max(donors, key=lambda j: (counts[j], -j))
      counts[j] -= 1
      counts[i] += 1
  return tuple(int(c) for c in counts)


def split_trips(trip_clients: ArrayLike, seed: int = 0,
                fractions: Sequence[float] = (0.7, 0.1, 0.2),
                holdout_clients: Iterable[int] = ()) -> np.ndarray:
  """Assign each trip to train (0), val (1) or test (2), per client, by trip.

  Args:
    trip_clients: ``[M]`` client index of each trip (trips with ≥ 1 window).
    seed: seeds the per-client shuffle of trips.
    fractions: train/val/test fractions; counts follow :func:`split_counts`.
    holdout_clients: clients whose trips all go to test.
  Returns:
    ``[M] int`` split code per trip. Every trip is in exactly one split.
  """
  tc = np.asarray(trip_clients)
  out = np.zeros(tc.shape, np.int64)
  rng = np.random.default_rng(seed)
  hold = set(int(h) for h in holdout_clients)
  for c in np.unique(tc):
    idx = np.flatnonzero(tc == c)
    if int(c) in hold:
      out[idx] = 2
      continue
    perm = idx[rng.permutation(len(idx))]
    n_tr, n_va, _ = split_counts(len(idx), fractions)
    out[perm[n_tr:n_tr + n_va]] = 1
    out[perm[n_tr + n_va:]] = 2
  return out


def trip_regimes(mean_speed: ArrayLike, trip_group: ArrayLike,
                 num_regimes: int) -> np.ndarray:
  """Regime ``0..R-1`` of each trip: its mean-speed quantile band in its group.

  ``mean_speed [M]`` (m/s), ``trip_group [M]`` (vehicle class of each trip) ->
  ``[M] int64``. Within a group of ``M_g`` trips sorted by mean speed (stable), the
  trip of rank ``i`` gets regime ``⌊i · R / M_g⌋`` (equal-count bands; module
  docstring, step 1).
  """
  v = np.asarray(mean_speed, np.float64)
  g = np.asarray(trip_group)
  out = np.zeros(v.shape, np.int64)
  for grp in np.unique(g):  # host loop over vehicle classes
    idx = np.flatnonzero(g == grp)
    order = idx[np.argsort(v[idx], kind="stable")]
    out[order] = (np.arange(idx.size) * int(num_regimes)) // idx.size
  return out


def _largest_remainder_columns(quota: np.ndarray, totals: np.ndarray) -> np.ndarray:
  """Integer ``[K, R]`` counts whose column ``r`` sums to ``totals[r]``, nearest to
  ``quota [K, R]`` by largest remainder (ties: lower row index)."""
  base = np.floor(quota).astype(np.int64)
  rem = totals - base.sum(0)  # [R]
  order = np.argsort(-(quota - base), axis=0, kind="stable")
  rank = np.empty_like(order)
  np.put_along_axis(rank, order, np.broadcast_to(
      np.arange(quota.shape[0])[:, None], order.shape), axis=0)
  return base + (rank < rem[None, :])


def regime_partition(trip_regime: ArrayLike, trip_group: ArrayLike,
                     client_group: ArrayLike, num_regimes: int, alpha: float,
                     seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
  """Deal whole trips to clients with Dirichlet(α_D) regime mixtures.

  Args:
    trip_regime: ``[M]`` regime ``0..R-1`` of each trip (:func:`trip_regimes`).
    trip_group: ``[M]`` group (vehicle class) of each trip.
    client_group: ``[K]`` group of each client; trips go only to clients of their
      group.
    num_regimes: ``R``.
    alpha: α_D > 0, the concentration of ``π_k ~ Dirichlet(α_D · 1_R)``.
    seed: the data seed; the Generator is ``SeedSequence(seed)``'s child 1.
  Returns:
    ``(trip_client [M] int64, pi [K, R] float64)``: the client of each trip and
    the drawn mixtures. Rule: module docstring, steps 2–3. Every client gets at
    least one trip.
  Raises:
    ValueError naming ``data.bev.regime_skew`` if a group has fewer trips than
    clients.
  """
  reg = np.asarray(trip_regime, np.int64)
  tg = np.asarray(trip_group)
  cg = np.asarray(client_group)
  r_n, k_n = int(num_regimes), int(cg.size)
  rng = np.random.default_rng(np.random.SeedSequence(int(seed)).spawn(2)[1])
  pi = rng.dirichlet(np.full(r_n, float(alpha)), size=k_n)  # [K, R]
  out = np.full(reg.shape, -1, np.int64)
  stray = sorted(set(tg.tolist()) - set(cg.tolist()))
  if stray:
    raise ValueError(f"trips of groups {stray} have no client of their group "
                     f"(client groups: {sorted(set(cg.tolist()))})")
  for grp in np.unique(cg):  # host loop over vehicle classes
    clients = np.flatnonzero(cg == grp)
    tsel = np.flatnonzero(tg == grp)
    if tsel.size < clients.size:
      raise ValueError(
          f"data.bev.regime_skew={alpha!r}: the {clients.size} clients of class "
          f"{grp!r} share only {tsel.size} trips with windows, and every client needs "
          f"at least one whole trip; use data.bev.regime_skew=0 (one client per "
          f"vehicle), more driving per vehicle, or a shorter data.bev.window")
    n_r = np.bincount(reg[tsel], minlength=r_n)  # [R] trips per regime
    pig = pi[clients]  # [Kc, R]
    tot = pig.sum(0)
    share = np.where(tot > 0, pig / np.where(tot > 0, tot, 1.0), 1.0 / clients.size)
    counts = _largest_remainder_columns(share * n_r, n_r)  # [Kc, R]
    for k in np.flatnonzero(counts.sum(1) == 0):  # host loop over empty clients
      totals = counts.sum(1)
      for r in np.argsort(-pig[k], kind="stable"):
        donors = np.flatnonzero((counts[:, r] > 0) & (totals > 1))
        if donors.size:
          j = donors[np.argmax(counts[donors, r])]
          counts[j, r] -= 1
          counts[k, r] += 1
          break
    for r in range(r_n):  # host loop over regimes
      idx = tsel[reg[tsel] == r]
      out[idx[rng.permutation(idx.size)]] = np.repeat(clients, counts[:, r])
  return out, pi


def check_regime_options(regime_skew: Any, num_regimes: Any) -> Optional[float]:
  """α_D as a float (None when the natural per-vehicle partition is asked for).

  Raises one ValueError naming ``data.bev.regime_skew`` / ``data.bev.num_regimes``
  for a value outside what is allowed.
  """
  if regime_skew is None:
    return None
  if (isinstance(regime_skew, bool) or not isinstance(regime_skew, (int, float, np.number))
      or not np.isfinite(regime_skew) or regime_skew < 0):
    raise ValueError(f"data.bev.regime_skew={regime_skew!r}: must be a finite number "
                     f">= 0 (0 or None = one client per vehicle; > 0 = the Dirichlet "
                     f"concentration α_D of the regime partition)")
  if (isinstance(num_regimes, bool) or not isinstance(num_regimes, (int, np.integer))
      or num_regimes < 2):
    raise ValueError(f"data.bev.num_regimes={num_regimes!r}: must be an integer >= 2")
  return float(regime_skew) if regime_skew > 0 else None


def robust_stats(values: ArrayLike,
                 axis: int | None = 0) -> tuple[np.ndarray | np.float64, np.ndarray]:
  """Median and IQR along ``axis``; IQR below 1e-6 falls back to std, then to 1."""
  v = np.asarray(values, np.float64)
  med = np.median(v, axis=axis)
  q75, q25 = np.percentile(v, [75, 25], axis=axis)
  scale = q75 - q25
  std = np.std(v, axis=axis)
  scale = np.where(scale > _SCALE_EPS, scale, np.where(std > _SCALE_EPS, std, 1.0))
  return med, scale


def fit_norm_stats(x_train: np.ndarray, y_train: np.ndarray, client_train: np.ndarray,
                   num_clients: int) -> tuple[NormStats, NormStats]:
  """Per-client (median, IQR) of train features ``[K, F]`` and labels ``[K]``.

  Feature statistics pool all time steps of the client's train windows. Clients
  with no train windows get the pooled train statistics of all clients.
  """
  f = x_train.shape[-1]
  if len(y_train) == 0:
    raise ValueError("no train windows: cannot fit normalisation statistics")
  gx_c, gx_s = robust_stats(x_train.reshape(-1, f), axis=0)
  gy_c, gy_s = robust_stats(y_train)
  xc = np.tile(gx_c, (num_clients, 1))
  xs = np.tile(gx_s, (num_clients, 1))
  yc = np.full((num_clients,), gy_c)
  ys = np.full((num_clients,), gy_s)
  for k in range(num_clients):
    m = client_train == k
    if not np.any(m):
      continue
    xc[k], xs[k] = robust_stats(x_train[m].reshape(-1, f), axis=0)
    yc[k], ys[k] = robust_stats(y_train[m])
  return (NormStats(xc.astype(np.float32), xs.astype(np.float32)),
          NormStats(yc.astype(np.float32), ys.astype(np.float32)))
