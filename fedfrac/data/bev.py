"""Shared pieces of the battery-electric-vehicle (BEV) energy data sources.

Clients are vehicles; a sample is a window of ``L`` consecutive samples of driving
signals ``[L, F]`` and its label is the pack energy over that window in Wh
(BEV paper, Eqs. 25–27). This module holds what the VED loader
(:mod:`fedfrac.data.ved`) and the synthetic fleet (:mod:`fedfrac.data.synthetic_bev`)
share:

* :class:`BEVData` — a frozen container of host-side NumPy arrays per split, with
  per-client robust normalisation statistics fitted on the TRAIN split only;
* :func:`make_windows` — windows and window-energy labels from one trip;
* :func:`acceleration_from_speed` — the acceleration feature used by both sources;
* :func:`split_trips` — the seeded trip-level 70/10/20 split;
* :func:`trip_regimes`, :func:`regime_partition` — the optional regime-based
  non-IID partition (``data.bev.regime_skew``, see below);
* :func:`assemble_bev_data` — trips → windows → splits → :class:`BEVData`.

Window-energy discretisation (used by :func:`make_windows`, both sources and the
tests): a trip sampled at times ``t_j`` with pack power ``P_j = V_j · I_j`` (W) is
treated as piecewise constant, ``P_j`` holding on ``[t_j, t_j + Δτ_j)``. The window
that starts at sample ``s`` covers samples ``s .. s+L-1`` and its energy is the
left-rectangle sum

    E_s = Σ_{j=s}^{s+L-1} P_j · Δτ_j / 3600      [Wh]     (BEV paper, Eqs. 25–27)

so a window of L = 60 samples at Δτ = 1 s spans exactly 60 s and consecutive
non-overlapping windows (stride = L) add up to the trip energy.

Regime-based non-IID partition (``regime_skew`` = α_D > 0; FO-RI-FedAvg paper
§IV-P "Client construction and non-IID control", α_D = 0.3 in §IV-K/N/O). The
paper groups trips "into discrete operating regimes (e.g., based on route and
context)" and varies "the client-level regime mixture" with a concentration α_D,
but gives no rule for either; this module's rule:

1. Regimes (:func:`trip_regimes`). A trip's regime is the quantile band of its
   mean speed (``speed_mps``) among the trips of its vehicle class: the trips of
   a class sorted by mean speed (ties by trip order) are cut into ``R`` bands of
   equal count, regime ``r = ⌊rank · R / M_class⌋``. Mean speed is the trip-level
   summary of the route (stop-and-go urban, suburban, highway and their mixes,
   which set the energy per window); ambient temperature is mostly a property of
   the vehicle's climate (binning on it would rebuild the per-vehicle partition)
   and mean road grade averages out over a trip. Bands are per class because a
   bus route's mean speed sits well below a car's: fleet-wide bands would put
   most of a class into one or two regimes.
2. Mixtures (:func:`regime_partition`). Every client ``k`` draws
   ``π_k ~ Dirichlet(α_D · 1_R)``, ``π [K, R]``, from a NumPy Generator seeded
   from the data seed (a child of ``SeedSequence(seed)``, independent of the
   split's stream).
3. Dealing. Clients keep the vehicle class of vehicle ``k`` and receive trips of
   that class only (the features carry no mass or drag, so a client mixing car
   and bus trips would see the same inputs with labels ~8× apart: heterogeneity
   of the vehicle, not of the operating regime that α_D is meant to control). In
   each class and regime ``r`` with ``n_r`` trips, client ``k`` gets
   ``n_r · π_k[r] / Σ_j π_j[r]`` trips (sum over the class's clients), rounded by
   largest remainder (ties: lower client index); the trips of the regime are
   shuffled and cut in that order. A client left without trips then takes one
   trip of its most-preferred regime (largest ``π_k[r]`` holding a trip) from the
   client holding most trips of that regime among those with ≥ 2 trips. Every
   kept vehicle has a trip with windows, so each class has at least as many trips
   as clients and this always succeeds; a class with fewer trips than clients
   raises one error naming ``data.bev.regime_skew``. Small α_D gives clients
   dominated by one regime, large α_D mixtures near ``1/R`` each.
4. Splits. Whole trips are dealt, never windows; the trip-level 70/10/20 split
   (:func:`split_trips`) then runs per new client on the dealt trips, so each
   trip (and all its windows) lies in exactly one split, and every client's
   train/val/test trips follow the same mixture ``π_k``.

With a regime partition, client ``k`` is a slot of the class of vehicle ``k``
(``vehicle_ids[k]``, ``vehicle_class[k]``), holding trips of several vehicles;
``meta`` records ``regime_skew``, ``num_regimes``, ``regime_mixture [K, R]`` (π),
and per trip index (the values of ``trip_<split>``) ``trip_regime``,
``trip_vehicle`` (the original vehicle, re-indexed) and ``trip_client`` (−1 for
trips of dropped vehicles).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, NamedTuple, Optional, Sequence

import numpy as np
from numpy.typing import ArrayLike

FEATURE_NAMES = ("speed_mps", "accel_mps2", "grade", "oat_c", "soc_pct", "aux_kw")
VEHICLE_CLASSES = ("passenger", "truck", "bus", "ev", "phev")
SPLITS = ("train", "val", "test")
_SCALE_EPS = 1e-6


class NormStats(NamedTuple):
  """Per-client robust location/scale. ``center``/``scale``: ``[K, F]`` or ``[K]``."""
  center: np.ndarray
  scale: np.ndarray


class Trip(NamedTuple):
  """One contiguous, uniformly sampled driving segment of one vehicle.

  client: vehicle index ``0..K-1``; signals ``[T, F]``; power_w ``[T]`` pack power
  (W, discharge positive); dt_s: sample spacing in seconds.
  """
  client: int
  signals: np.ndarray
  power_w: np.ndarray
  dt_s: float


@dataclasses.dataclass(frozen=True, eq=False)
class BEVData:
  """Windows of driving signals and window-energy labels, per split.

  Shapes: ``x_<split> [N, L, F] float32``, ``y_<split> [N] float32`` (Wh, physical
  units unless ``is_normalized``), ``client_<split> [N] int32`` (vehicle index
  ``0..K-1``), ``trip_<split> [N] int32`` (global trip index, for split checks).
  ``vehicle_ids [K]``, ``vehicle_class [K]`` (str). ``x_norm_stats`` has
  ``[K, F]`` arrays, ``y_norm_stats`` ``[K]`` arrays: median and IQR of each
  client's TRAIN split (clients without train windows, e.g. held-out vehicles, get
  the statistics of the pooled train split). ``holdout [K] bool`` marks vehicles
  whose windows were all put in test. ``meta`` says where the data came from
  (``meta["source"]`` is ``"ved_csv"`` or ``"synthetic_bev"``) and source details.
  """
  x_train: np.ndarray
  y_train: np.ndarray
  client_train: np.ndarray
  x_val: np.ndarray
  y_val: np.ndarray
  client_val: np.ndarray
  x_test: np.ndarray
  y_test: np.ndarray
  client_test: np.ndarray
  feature_names: tuple[str, ...]
  vehicle_ids: np.ndarray
  vehicle_class: np.ndarray
  x_norm_stats: NormStats
  y_norm_stats: NormStats
  trip_train: np.ndarray
  trip_val: np.ndarray
  trip_test: np.ndarray
  holdout: np.ndarray
  dt_s: float = 1.0
  window: int = 60
  is_normalized: bool = False
  meta: dict = dataclasses.field(default_factory=dict)

  @property
  def num_clients(self) -> int:
    return int(len(self.vehicle_ids))

  @property
  def num_features(self) -> int:
    return int(len(self.feature_names))

  def split(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x, y, client_ids)`` of split ``name`` in {'train', 'val', 'test'}."""
    if name not in SPLITS:
      raise ValueError(f"split must be one of {SPLITS}, got {name!r}")
    return (getattr(self, f"x_{name}"), getattr(self, f"y_{name}"),
            getattr(self, f"client_{name}"))

  def normalized(self) -> "BEVData":
    """A copy with ``x`` and ``y`` standardised per client by the TRAIN statistics.

    ``x' = (x - center_x[c]) / scale_x[c]`` feature-wise and
    ``y' = (y - center_y[c]) / scale_y[c]`` with ``c`` each sample's client; invert
    ``y'`` with :meth:`denormalize_y`. Statistics are those stored on this object
    (fitted on train only), so val/test never influence them.
    """
    if self.is_normalized:
      raise ValueError("normalized() called on data that is already normalised "
                       "(is_normalized=True); call it on the physical-unit data")
    xc, xs = self.x_norm_stats
    yc, ys = self.y_norm_stats
    upd = {}
    for s in SPLITS:
      x, y, c = self.split(s)
      upd[f"x_{s}"] = ((x - xc[c][:, None, :]) / xs[c][:, None, :]).astype(np.float32)
      upd[f"y_{s}"] = ((y - yc[c]) / ys[c]).astype(np.float32)
    return dataclasses.replace(self, is_normalized=True, **upd)

  def denormalize_y(self, y_norm: ArrayLike, client_ids: ArrayLike) -> np.ndarray:
    """Physical-unit labels (Wh) from normalised ones.

    ``y_norm [N]``, ``client_ids [N]`` -> ``[N] float32``.
    """
    y_norm = np.asarray(y_norm, np.float64)
    c = np.asarray(client_ids)
    if c.shape != y_norm.shape:
      raise ValueError(f"client_ids shape {c.shape} must equal y_norm shape "
                       f"{y_norm.shape}")
    if c.size and (c.min() < 0 or c.max() >= self.num_clients):
      raise ValueError(f"client_ids must lie in [0, {self.num_clients}), got range "
                       f"[{c.min()}, {c.max()}]")
    yc, ys = self.y_norm_stats
    return (y_norm * ys[c] + yc[c]).astype(np.float32)


def acceleration_from_speed(speed_mps: ArrayLike, dt_s: float) -> np.ndarray:
  """Backward-difference acceleration ``a_j = (v_j - v_{j-1}) / Δτ``, ``a_0 = 0``.

  ``speed_mps [T]`` → ``[T]`` (m/s²). Applied per trip, so it never differences
  across a trip boundary.
  """
  v = np.asarray(speed_mps, np.float64)
  a = np.zeros_like(v)
  if v.size > 1:
    a[1:] = np.diff(v) / dt_s
  return a


def make_windows(signals: ArrayLike, power_w: ArrayLike, dt_s: ArrayLike, window: int = 60,
                 stride: int = 1) -> tuple[np.ndarray, np.ndarray]:
  """Sliding windows of one trip and their pack energy in Wh.

  Args:
    signals: ``[T, F]`` features of ONE trip (windows never cross trips: call this
      per trip).
    power_w: ``[T]`` pack power ``P = V·I`` in W (discharge positive).
    dt_s: sample spacing Δτ in s: a positive scalar, or ``[T]`` per-sample durations
      (sample ``j`` holds on ``[t_j, t_j + Δτ_j)``).
    window: window length ``L`` in samples.
    stride: step between window starts.
  Returns:
    ``(x [n, L, F] float32, y [n] float32)`` with
    ``n = max(0, (T - L) // stride + 1)`` windows starting at ``0, stride, ...`` and
    ``y_s = Σ_{j=s}^{s+L-1} P_j Δτ_j / 3600`` (BEV paper, Eqs. 25–27; left rectangle
    rule, see the module docstring).
  """
  if int(window) != window or window < 1:
    raise ValueError(f"window must be a positive integer, got {window!r}")
  if int(stride) != stride or stride < 1:
    raise ValueError(f"stride must be a positive integer, got {stride!r}")
  window, stride = int(window), int(stride)
  sig = np.asarray(signals, np.float32)
  p = np.asarray(power_w, np.float64)
  if sig.ndim != 2:
    raise ValueError(f"signals must have shape [T, F], got {sig.shape}")
  if p.shape != (sig.shape[0],):
    raise ValueError(f"power_w must have shape [T]=({sig.shape[0]},), got {p.shape}")
  dt = np.asarray(dt_s, np.float64)
  if dt.ndim == 0:
    dt = np.full(p.shape, float(dt))
  if dt.shape != p.shape or not np.all(dt > 0):
    raise ValueError(f"dt_s must be a positive scalar or [T] positive array, got "
                     f"shape {np.shape(dt_s)}")
  t_len, f = sig.shape
  n = max(0, (t_len - window) // stride + 1)
  if n == 0:
    return np.zeros((0, window, f), np.float32), np.zeros((0,), np.float32)
  starts = np.arange(n) * stride
  x = np.lib.stride_tricks.sliding_window_view(sig, window, axis=0)[starts]
  x = np.ascontiguousarray(np.moveaxis(x, -1, 1))  # [n, F, L] -> [n, L, F]
  cum = np.concatenate([[0.0], np.cumsum(p * dt)])  # Joules up to each sample
  y = (cum[starts + window] - cum[starts]) / 3600.0  # Eqs. 25–27: Wh per window
  return x.astype(np.float32), y.astype(np.float32)


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


def assemble_bev_data(trips: Sequence[Trip], vehicle_ids: ArrayLike,
                      vehicle_class: ArrayLike, feature_names: Sequence[str] = FEATURE_NAMES,
                      window: int = 60, stride: int = 1, seed: int = 0,
                      fractions: Sequence[float] = (0.7, 0.1, 0.2),
                      holdout_clients: Iterable[int] = (), min_windows: int = 1,
                      meta: Optional[Mapping[str, Any]] = None,
                      regime_skew: Optional[float] = None,
                      num_regimes: int = 4) -> BEVData:
  """Window every trip, split by trip, and pack a :class:`BEVData`.

  Trips shorter than ``window`` give no windows and are dropped; vehicles with fewer
  than ``min_windows`` windows in total are dropped and the remaining vehicles are
  re-indexed ``0..K-1`` in their given order. ``holdout_clients`` are indices into
  the given ``vehicle_ids``. ``regime_skew`` 0 or None (default): client ``k`` is
  vehicle ``k`` with its own trips. ``regime_skew`` = α_D > 0: the same ``K``
  clients receive whole trips dealt by :func:`regime_partition` over
  ``num_regimes`` mean-speed regimes before the trip-level split (module
  docstring); it needs the ``speed_mps`` feature and no held-out vehicles.
  """
  vehicle_ids = np.asarray(vehicle_ids)
  vehicle_class = np.asarray(vehicle_class, dtype=object).astype(str)
  bad = sorted(set(vehicle_class) - set(VEHICLE_CLASSES))
  if bad:
    raise ValueError(f"vehicle_class values must be in {VEHICLE_CLASSES}, got {bad}")
  if int(min_windows) != min_windows or min_windows < 1:
    raise ValueError(f"min_windows must be a positive integer, got {min_windows!r}")
  alpha_d = check_regime_options(regime_skew, num_regimes)
  if alpha_d is not None and "speed_mps" not in tuple(feature_names):
    raise ValueError(f"data.bev.regime_skew={regime_skew!r}: the regime partition bins "
                     f"trips by mean speed and needs the 'speed_mps' feature, "
                     f"feature_names are {tuple(feature_names)}")
  speed_col = list(feature_names).index("speed_mps") if alpha_d is not None else 0
  f = len(feature_names)
  xs, ys, tclient, tspeed = [], [], [], []
  for tr in trips:
    if tr.signals.shape[1] != f:
      raise ValueError(f"trip signals have {tr.signals.shape[1]} features, "
                       f"feature_names has {f}")
    x, y = make_windows(tr.signals, tr.power_w, tr.dt_s, window, stride)
    if len(y):
      xs.append(x)
      ys.append(y)
      tclient.append(int(tr.client))
      if alpha_d is not None:
        tspeed.append(float(np.mean(tr.signals[:, speed_col])))
  trip_client = np.asarray(tclient, np.int64)
  counts = np.bincount(trip_client, weights=[len(y) for y in ys],
                       minlength=len(vehicle_ids)) if len(ys) else np.zeros(
                           len(vehicle_ids))
  keep = np.flatnonzero(counts >= min_windows)
  if keep.size == 0:
    raise ValueError(f"no vehicle has at least min_windows={min_windows} windows of "
                     f"length {window}")
  remap = -np.ones(len(vehicle_ids), np.int64)
  remap[keep] = np.arange(keep.size)
  hold_new = sorted(int(remap[h]) for h in holdout_clients if remap[h] >= 0)
  kept_trips = [i for i, c in enumerate(trip_client) if remap[c] >= 0]
  new_client = remap[trip_client[kept_trips]] if kept_trips else np.zeros(0, np.int64)
  meta = dict(meta or {})
  if alpha_d is not None:
    if hold_new:
      raise ValueError(f"data.bev.regime_skew={regime_skew!r} with held-out vehicles "
                       f"{hold_new}: a regime partition deals every vehicle's trips to "
                       f"clients, so data.bev.holdout_vehicles must be empty")
    kept_class = vehicle_class[keep]
    regime = trip_regimes(np.asarray(tspeed)[kept_trips], kept_class[new_client],
                          num_regimes)
    vehicle_of_trip = new_client
    new_client, pi = regime_partition(regime, kept_class[new_client], kept_class,
                                      num_regimes, alpha_d, seed)
    n_all = len(ys)
    per_trip = {name: np.full(n_all, -1, np.int64) for name in
                ("trip_regime", "trip_vehicle", "trip_client")}
    per_trip["trip_regime"][kept_trips] = regime
    per_trip["trip_vehicle"][kept_trips] = vehicle_of_trip
    per_trip["trip_client"][kept_trips] = new_client
    meta.update(regime_skew=alpha_d, num_regimes=int(num_regimes), regime_mixture=pi,
                **per_trip)
  codes = split_trips(new_client, seed, fractions, hold_new)
  parts = {}
  for code, name in enumerate(SPLITS):
    sel = [kept_trips[i] for i in np.flatnonzero(codes == code)]
    sel_pos = np.flatnonzero(codes == code)
    if sel:
      x = np.concatenate([xs[i] for i in sel])
      y = np.concatenate([ys[i] for i in sel])
      c = np.concatenate([np.full(len(ys[i]), new_client[p], np.int32)
                          for i, p in zip(sel, sel_pos)])
      t = np.concatenate([np.full(len(ys[i]), i, np.int32) for i in sel])
    else:
      x = np.zeros((0, window, f), np.float32)
      y = np.zeros((0,), np.float32)
      c = np.zeros((0,), np.int32)
      t = np.zeros((0,), np.int32)
    parts[name] = (x, y, c, t)
  k = keep.size
  x_stats, y_stats = fit_norm_stats(parts["train"][0], parts["train"][1],
                                    parts["train"][2], k)
  holdout = np.zeros(k, bool)
  holdout[hold_new] = True
  dt = float(np.mean([np.mean(tr.dt_s) for tr in trips])) if trips else 1.0
  return BEVData(
      x_train=parts["train"][0], y_train=parts["train"][1],
      client_train=parts["train"][2], x_val=parts["val"][0], y_val=parts["val"][1],
      client_val=parts["val"][2], x_test=parts["test"][0], y_test=parts["test"][1],
      client_test=parts["test"][2], feature_names=tuple(feature_names),
      vehicle_ids=vehicle_ids[keep], vehicle_class=vehicle_class[keep],
      x_norm_stats=x_stats, y_norm_stats=y_stats, trip_train=parts["train"][3],
      trip_val=parts["val"][3], trip_test=parts["test"][3], holdout=holdout,
      dt_s=dt, window=int(window), meta=meta)


def resolve_holdout(holdout_vehicles: Optional[Iterable[Any]],
                    vehicle_ids: ArrayLike) -> list[int]:
  """Indices into ``vehicle_ids`` of the ids in ``holdout_vehicles``."""
  if holdout_vehicles is None:
    return []
  ids = [v.item() if hasattr(v, "item") else v for v in np.asarray(vehicle_ids)]
  out = []
  for h in holdout_vehicles:
    if h not in ids:
      raise ValueError(f"holdout_vehicles contains {h!r}, not among the vehicle ids "
                       f"{ids}")
    out.append(ids.index(h))
  return out
