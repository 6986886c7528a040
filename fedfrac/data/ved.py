"""Vehicle Energy Dataset (VED, Oh et al. 2019) dynamic-data CSVs → :class:`BEVData`.

VED ships weekly CSVs (``VED_171101_week.csv``, ...) with one row per logged sample
and columns such as ``DayNum, VehId, Trip, Timestamp(ms), Latitude[deg],
Longitude[deg], Vehicle Speed[km/h], MAF[g/sec], Engine RPM[RPM], Absolute Load[%],
OAT[DegC], Fuel Rate[L/hr], Air Conditioning Power[kW], Air Conditioning
Power[Watts], Heater Power[Watts], HV Battery Current[A], HV Battery SOC[%],
HV Battery Voltage[V], ...``. Signals are logged asynchronously, so most cells are
empty. Obtain the files from the VED repository (github.com/gsoh/VED) and pass the
directory or the file paths; nothing is downloaded here.

Processing, per (VehId, Trip):

1. Rows sorted by ``Timestamp(ms)`` (ms since trip start). Cells are parsed per
   signal; an empty cell is a missing sample of that signal only.
2. Glitch filter (per signal, before resampling): voltage ≤ 0 V or > 1000 V,
   |current| > 1000 A, speed < 0 or > 250 km/h, and non-finite values are dropped
   (treated as missing).
3. Only trips with at least two valid current AND voltage samples are kept
   (EV/PHEV trips; ICE/HEV rows carry no HV battery signals and are dropped).
4. Segmentation: the trip is cut wherever speed, current or voltage has two
   consecutive valid samples more than ``max_gap_s`` apart; each resulting segment
   is treated as a separate trip (windows never span a gap). A segment spans the
   time where all three signals are observed.
5. Resampling onto ``t0 + k·Δτ``: speed, current, voltage and elevation by linear
   interpolation between valid samples; slow signals (SoC, OAT, AC and heater
   power) by forward fill (the last valid sample at or before the grid time; the
   first valid sample before the first observation; a default if never observed).
6. Pack power ``P = s · V · I`` (BEV paper, Eqs. 25–27) with ``s = ±1`` the current
   sign convention, chosen so that traction discharge gives positive energy and
   regeneration negative (see below). Window labels follow
   :func:`fedfrac.data.bev.make_windows` (left rectangle rule).

Sign convention. ``current_sign="auto"`` decides per vehicle from the data, since
which direction VED logs as positive is not stated with the columns:

* if the vehicle's SoC changes (Σ over segments of |ΔSoC| ≥ 1 %-point), ``s`` is
  chosen so that charge drawn, ``Q = Σ s·I·Δτ``, is anti-correlated with the SoC
  change over segments (``Σ_seg Q·ΔSoC < 0``): discharge lowers SoC;
* otherwise, ``s`` makes the mean of ``s·V·I`` positive over samples of hard
  acceleration (a > 0.5 m/s² at v > 2 m/s), where the pack must supply traction;
* otherwise ``s = +1``.

Pass ``current_sign=+1`` or ``-1`` to force a convention. The signs chosen are in
``BEVData.meta["current_sign"]`` (VehId → ±1).

Features (``FEATURE_NAMES``): speed (m/s); acceleration (m/s², backward speed
difference, see :func:`acceleration_from_speed`); grade proxy = Δelevation/Δdistance
if an elevation column (``Elevation Smoothed[m]``, else ``Elevation Raw[m]``, as in
eVED) exists, else 0 (plain VED has no elevation); OAT (°C, forward fill, default
``default_oat_c``); SoC (%, forward fill, default ``default_soc_pct``); auxiliary
load = AC power (kW column, else the Watts column / 1000) + heater power / 1000
(kW, forward fill, 0 if absent).

Vehicle class: ``'phev'`` if any valid Engine RPM, Fuel Rate or MAF sample of the
vehicle is > 0 (an engine ran), else ``'ev'``; override with ``vehicle_types``
(VehId → 'ev' | 'phev').
"""
from __future__ import annotations

import csv
import glob
import math
import os
from typing import Iterable, Mapping, Sequence, Union

import numpy as np

from fedfrac.data import bev

REQUIRED_COLUMNS = ("VehId", "Trip", "Timestamp(ms)", "Vehicle Speed[km/h]",
                    "HV Battery Current[A]", "HV Battery Voltage[V]")
# Internal key -> accepted header(s), first present wins.
_OPTIONAL_COLUMNS = {
    "soc": ("HV Battery SOC[%]",),
    "oat": ("OAT[DegC]",),
    "ac_kw": ("Air Conditioning Power[kW]",),
    "ac_w": ("Air Conditioning Power[Watts]",),
    "heat_w": ("Heater Power[Watts]",),
    "rpm": ("Engine RPM[RPM]",),
    "fuel": ("Fuel Rate[L/hr]",),
    "maf": ("MAF[g/sec]",),
    "elev": ("Elevation Smoothed[m]", "Elevation Raw[m]"),
}
_REQ_KEYS = ("veh", "trip", "t", "speed", "cur", "vol")
_SIGNALS = ("speed", "cur", "vol") + tuple(_OPTIONAL_COLUMNS)
_V_MAX, _I_MAX, _SPEED_MAX = 1000.0, 1000.0, 250.0


def _norm_header(h: str) -> str:
  return "".join(h.split()).lower()


def _list_files(paths_or_dir) -> list[str]:
  if isinstance(paths_or_dir, (str, os.PathLike)):
    items = [os.fspath(paths_or_dir)]
  else:
    items = [os.fspath(p) for p in paths_or_dir]
  if not items:
    raise ValueError("paths_or_dir is empty: pass a directory or a list of VED CSVs")
  files = []
  for p in items:
    if os.path.isdir(p):
      found = sorted(glob.glob(os.path.join(p, "**", "*.csv"), recursive=True))
      if not found:
        raise FileNotFoundError(f"no .csv files under directory {p!r}")
      files.extend(found)
    elif os.path.isfile(p):
      files.append(p)
    else:
      raise FileNotFoundError(f"VED CSV not found: {p!r} (download the VED dynamic "
                              "data from github.com/gsoh/VED and pass its path)")
  return files


def _num(s: str) -> float:
  s = s.strip()
  if not s:
    return math.nan
  try:
    return float(s)
  except ValueError:
    return math.nan


def _read_file(path, vehicles, store):
  """Append the rows of one CSV to ``store[(veh, trip)] -> {key: list}``."""
  with open(path, newline="", encoding="utf-8-sig") as fh:
    reader = csv.reader(fh)
    try:
      header = next(reader)
    except StopIteration:
      raise ValueError(f"VED CSV {path!r} is empty (no header row)") from None
    pos = {_norm_header(h): i for i, h in enumerate(header)}
    missing = [c for c in REQUIRED_COLUMNS if _norm_header(c) not in pos]
    if missing:
      raise ValueError(f"VED CSV {path!r} lacks required columns {missing}")
    idx = dict(zip(_REQ_KEYS, (pos[_norm_header(c)] for c in REQUIRED_COLUMNS)))
    for key, names in _OPTIONAL_COLUMNS.items():
      for n in names:
        if _norm_header(n) in pos:
          idx[key] = pos[_norm_header(n)]
          break
    sig_idx = [(k, idx[k]) for k in ("t",) + _SIGNALS if k in idx]
    i_veh, i_trip = idx["veh"], idx["trip"]
    file_keys = set()
    for row in reader:
      if not row or len(row) <= max(i_veh, i_trip):
        continue
      veh, trip = _num(row[i_veh]), _num(row[i_trip])
      if math.isnan(veh) or math.isnan(trip):
        continue
      veh, trip = int(veh), int(trip)
      if vehicles is not None and veh not in vehicles:
        continue
      key = (veh, trip)
      d = store.get(key)
      if d is None:
        d = store[key] = {k: [] for k in ("t",) + _SIGNALS}
      file_keys.add(key)
      n = len(row)
      for k, i in sig_idx:
        d[k].append(_num(row[i]) if i < n else math.nan)
      for k in _SIGNALS:
        if k not in idx:
          d[k].append(math.nan)
  # Free trips without any HV battery sample in this file and none before.
  for key in file_keys:
    d = store[key]
    if not (any(not math.isnan(v) for v in d["cur"])
            and any(not math.isnan(v) for v in d["vol"])):
      del store[key]


def _valid(t, v):
  """Valid (finite) samples of one signal, duplicates in time averaged."""
  m = np.isfinite(v) & np.isfinite(t)
  tv, vv = t[m], v[m]
  if tv.size == 0:
    return tv, vv
  ut, inv = np.unique(tv, return_inverse=True)
  if ut.size == tv.size:
    return tv, vv
  sums = np.bincount(inv, weights=vv)
  cnt = np.bincount(inv)
  return ut, sums / cnt


def _ffill(tv, vv, grid, default):
  if tv.size == 0:
    return np.full(grid.shape, default, np.float64)
  i = np.searchsorted(tv, grid, side="right") - 1
  return vv[np.clip(i, 0, tv.size - 1)]


def _segments(key_series, max_gap_s):
  """Time intervals where all key signals are observed with gaps ≤ max_gap_s."""
  lo = max(tv[0] for tv, _ in key_series)
  hi = min(tv[-1] for tv, _ in key_series)
  if not hi > lo:
    return []
  holes = []
  for tv, _ in key_series:
    d = np.diff(tv)
    for j in np.flatnonzero(d > max_gap_s):
      holes.append((tv[j], tv[j + 1]))
  holes.sort()
  segs, start = [], lo
  for a, b in holes:
    if b <= start:
      continue
    if a > start:
      segs.append((start, min(a, hi)))
    start = max(start, b)
    if start >= hi:
      break
  if start < hi:
    segs.append((start, hi))
  return [(a, b) for a, b in segs if b > a]


def _process_trip(d, dt, max_gap_s, default_oat_c, default_soc_pct):
  """Resampled segments of one trip: list of dicts of ``[T]`` arrays."""
  t = np.asarray(d["t"], np.float64) / 1000.0
  order = np.argsort(t, kind="stable")
  t = t[order]
  raw = {k: np.asarray(d[k], np.float64)[order] for k in _SIGNALS}
  spd, cur, vol = raw["speed"], raw["cur"], raw["vol"]
  # Glitch filter: non-physical samples become missing before resampling.
  vol[(vol <= 0) | (vol > _V_MAX)] = np.nan
  cur[np.abs(cur) > _I_MAX] = np.nan
  spd[(spd < 0) | (spd > _SPEED_MAX)] = np.nan
  series = {k: _valid(t, raw[k]) for k in _SIGNALS}
  keys = [series["speed"], series["cur"], series["vol"]]
  if any(tv.size < 2 for tv, _ in keys):
    return []
  ac = series["ac_kw"] if series["ac_kw"][0].size else (
      series["ac_w"][0], series["ac_w"][1] / 1000.0)
  heat = (series["heat_w"][0], series["heat_w"][1] / 1000.0)
  out = []
  for a, b in _segments(keys, max_gap_s):
    n = int(np.floor((b - a) / dt + 1e-9)) + 1
    grid = a + dt * np.arange(n)
    lin = {k: np.interp(grid, *series[k]) for k in ("speed", "cur", "vol")}
    speed = lin["speed"] / 3.6
    if series["elev"][0].size >= 2:
      h = np.interp(grid, *series["elev"])
      ds = np.zeros(n)
      ds[1:] = 0.5 * (speed[1:] + speed[:-1]) * dt
      grade = np.zeros(n)
      ok = ds > 1.0  # metres; below this the elevation difference is noise
      grade[1:][ok[1:]] = (np.diff(h)[ok[1:]] / ds[1:][ok[1:]])
      grade = np.clip(grade, -0.3, 0.3)
    else:
      grade = np.zeros(n)
    soc_obs = series["soc"][0].size > 0
    out.append(dict(
        speed=speed, cur=lin["cur"], vol=lin["vol"], grade=grade,
        oat=_ffill(*series["oat"], grid, default_oat_c),
        soc=_ffill(*series["soc"], grid, default_soc_pct), soc_observed=soc_obs,
        aux=_ffill(*ac, grid, 0.0) + _ffill(*heat, grid, 0.0)))
  return out


def _engine_ran(d) -> bool:
  for k in ("rpm", "fuel", "maf"):
    v = np.asarray(d[k], np.float64)
    if np.any(np.isfinite(v) & (v > 0)):
      return True
  return False


def _auto_sign(segs, dt) -> int:
  """+1 or -1 so that traction discharge gives positive pack energy (module doc)."""
  with_soc = [s for s in segs if s["soc_observed"]]
  if with_soc and sum(abs(s["soc"][-1] - s["soc"][0]) for s in with_soc) >= 1.0:
    score = sum(np.sum(s["cur"]) * dt * (s["soc"][-1] - s["soc"][0])
                for s in with_soc)
    if score != 0:
      return 1 if score < 0 else -1
  num, cnt = 0.0, 0
  for s in segs:
    acc = bev.acceleration_from_speed(s["speed"], dt)
    m = (acc > 0.5) & (s["speed"] > 2.0)
    num += float(np.sum(s["vol"][m] * s["cur"][m]))
    cnt += int(m.sum())
  if cnt and num != 0:
    return 1 if num > 0 else -1
  return 1


def load_ved_csv(paths_or_dir: Union[str, os.PathLike, Iterable[Union[str, os.PathLike]]],
                 window: int = 60, stride: int = 1,
                 resample_dt_s: float = 1.0, max_gap_s: float = 10.0,
                 vehicles: Iterable[int] | None = None, min_windows: int = 1,
                 seed: int = 0, holdout_vehicles: Iterable[int] | None = None,
                 current_sign: Union[str, int] = "auto",
                 vehicle_types: Mapping[int, str] | None = None,
                 default_oat_c: float = 20.0, default_soc_pct: float = 50.0,
                 fractions: Sequence[float] = (0.7, 0.1, 0.2),
                 regime_skew: float | None = None,
                 num_regimes: int = 4) -> bev.BEVData:
  """Load VED dynamic-data CSVs as windowed EV/PHEV energy data, one client per vehicle.

  Args:
    paths_or_dir: a CSV path, a directory (all ``*.csv`` below it), or a list of
      either.
    window, stride: window length ``L`` and stride in resampled samples.
    resample_dt_s: uniform grid spacing Δτ (s).
    max_gap_s: a trip is cut where speed, current or voltage is unobserved for
      longer than this (s); the parts are separate trips.
    vehicles: VehIds to keep (all EV/PHEV vehicles if None).
    min_windows: vehicles with fewer windows (all splits) are dropped.
    seed: seeds the trip-level 70/10/20 split (:func:`bev.split_trips`).
    holdout_vehicles: VehIds whose windows all go to test.
    current_sign: ``"auto"`` (per vehicle, module doc), ``1`` or ``-1``.
    vehicle_types: optional VehId → ``'ev'``/``'phev'`` overriding the engine test.
    default_oat_c, default_soc_pct: fill values for never-observed OAT / SoC.
    fractions: train/val/test trip fractions.
    regime_skew, num_regimes: 0/None (default) = one client per vehicle; α_D > 0 =
      the regime-based partition of :mod:`fedfrac.data.bev`.
  Returns:
    :class:`bev.BEVData` with ``x [N, L, 6]`` (``bev.FEATURE_NAMES``), ``y [N]`` Wh,
    vehicle index ``0..K-1`` in increasing VehId order. ``meta`` holds the files,
    the current sign per VehId and the counts of trips and segments.
  """
  if not resample_dt_s > 0:
    raise ValueError(f"resample_dt_s must be > 0, got {resample_dt_s!r}")
  if not max_gap_s > 0:
    raise ValueError(f"max_gap_s must be > 0, got {max_gap_s!r}")
  if current_sign not in ("auto", 1, -1):
    raise ValueError(f"current_sign must be 'auto', 1 or -1, got {current_sign!r}")
  files = _list_files(paths_or_dir)
  veh_filter = None if vehicles is None else set(int(v) for v in vehicles)
  store: dict = {}
  for f in files:
    _read_file(f, veh_filter, store)
  if not store:
    raise ValueError(f"no EV/PHEV trips with HV battery current and voltage in "
                     f"{len(files)} file(s): {files[:5]}")
  dt = float(resample_dt_s)
  per_vehicle: dict[int, list] = {}
  engine: dict[int, bool] = {}
  n_trips = 0
  for (veh, _), d in sorted(store.items()):
    segs = _process_trip(d, dt, max_gap_s, default_oat_c, default_soc_pct)
    engine[veh] = engine.get(veh, False) or _engine_ran(d)
    if segs:
      n_trips += 1
      per_vehicle.setdefault(veh, []).extend(segs)
  if not per_vehicle:
    raise ValueError(f"no EV/PHEV trips with usable HV battery current and voltage "
                     f"(≥ 2 valid samples each) in {files[:5]}")
  if veh_filter is not None:
    absent = sorted(veh_filter - set(per_vehicle))
    if absent:
      raise ValueError(f"vehicles {absent} have no EV/PHEV trips with battery "
                       f"signals in the given files")
  veh_ids = sorted(per_vehicle)
  vt = dict(vehicle_types or {})
  bad = {k: v for k, v in vt.items() if v not in ("ev", "phev")}
  if bad:
    raise ValueError(f"vehicle_types values must be 'ev' or 'phev', got {bad}")
  classes, signs, trips = [], {}, []
  for k, veh in enumerate(veh_ids):
    segs = per_vehicle[veh]
    classes.append(vt.get(veh, "phev" if engine[veh] else "ev"))
    s = _auto_sign(segs, dt) if current_sign == "auto" else int(current_sign)
    signs[veh] = s
    for seg in segs:
      feats = np.stack([seg["speed"], bev.acceleration_from_speed(seg["speed"], dt),
                        seg["grade"], seg["oat"], seg["soc"], seg["aux"]], axis=1)
      power = s * seg["vol"] * seg["cur"]  # Eqs. 25–27: P = V·I, discharge > 0
      trips.append(bev.Trip(k, feats, power, dt))
  hold = bev.resolve_holdout(holdout_vehicles, veh_ids)
  meta = dict(source="ved_csv", files=list(files), current_sign=signs,
              num_trips=n_trips, num_segments=len(trips))
  return bev.assemble_bev_data(
      trips, np.asarray(veh_ids, np.int64), classes, bev.FEATURE_NAMES, window,
      stride, seed, fractions, hold, min_windows, meta=meta, regime_skew=regime_skew,
      num_regimes=num_regimes)
