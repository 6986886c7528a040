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


Trip splits, speed regimes and the normalisation statistics are
:mod:`fedfrac.data.bev_splits` (re-exported here).
"""
from __future__ import annotations


import dataclasses
from typing import Any, Iterable, Mapping, NamedTuple, Optional, Sequence

import numpy as np
from numpy.typing import ArrayLike
from fedfrac.data.bev_splits import (  # noqa: F401  (re-exported)
    NormStats, check_regime_options, fit_norm_stats, regime_partition, robust_stats,
    split_counts, split_trips, trip_regimes)



FEATURE_NAMES = ("speed_mps", "accel_mps2", "grade", "oat_c", "soc_pct", "aux_kw")
VEHICLE_CLASSES = ("passenger", "truck", "bus", "ev", "phev")
SPLITS = ("train", "val", "test")


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
