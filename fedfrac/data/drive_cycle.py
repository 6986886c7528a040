"""Drive cycles of the synthetic BEV fleet (:mod:`fedfrac.data.synthetic_bev`):
for a vehicle class (passenger car, truck, bus), trips of legs between stops
with acceleration ramps to a cruise speed, a road grade drawn along the
distance, and the auxiliary load from the outside temperature; the physical
constants and the class parameters they use."""
from __future__ import annotations


import math
from typing import Any, Mapping

import numpy as np


RHO_AIR = 1.225       # kg/m^3, ISA sea level
G = 9.81              # m/s^2
DT = 1.0              # s, sampling period of the fleet
CLASSES = ("passenger", "truck", "bus")
# Drive-cycle segment types: cruise speed range (km/h), leg length (m), stop
# probability at the end of a leg, dwell (s), segment length (km).
SEGMENTS: dict[str, dict[str, Any]] = {
    "urban": dict(v_kmh=(30.0, 50.0), leg_m=(150.0, 600.0), p_stop=0.75,
                  dwell_s=(5.0, 45.0), seg_km=(1.5, 4.0)),
    "suburban": dict(v_kmh=(55.0, 80.0), leg_m=(600.0, 2500.0), p_stop=0.5,
                     dwell_s=(5.0, 40.0), seg_km=(3.0, 8.0)),
    "highway": dict(v_kmh=(95.0, 120.0), leg_m=(2000.0, 8000.0), p_stop=0.0,
                    dwell_s=(0.0, 0.0), seg_km=(8.0, 25.0)),
    "bus_route": dict(v_kmh=(25.0, 45.0), leg_m=(250.0, 500.0), p_stop=0.95,
                      dwell_s=(15.0, 40.0), seg_km=(3.0, 8.0)),
}

CLASS_PARAMS = {
    "passenger": dict(
        curb_kg=1750.0, payload_kg=(0.0, 400.0), cda=0.65, crr=0.010,
        eta_drive=0.90, eta_regen=0.65, p_regen_max_w=60e3, n_series=96,
        capacity_kwh=60.0, r0=0.08, r1=0.04, tau_s=40.0, aux_base_kw=0.3,
        heat_kw_per_c=0.20, heat_max_kw=3.5, cool_kw_per_c=0.15, cool_max_kw=2.5,
        accel=1.5, decel=1.8, p_accel_max_w=100e3, v_max_kmh=130.0,
        trip_min=(10.0, 45.0),
        trips_per_day=(2, 4),
        duty={"urban": 0.45, "suburban": 0.35, "highway": 0.20}),
    "truck": dict(
        curb_kg=8000.0, payload_kg=(0.0, 4000.0), cda=5.0, crr=0.007,
        eta_drive=0.90, eta_regen=0.65, p_regen_max_w=150e3, n_series=180,
        capacity_kwh=300.0, r0=0.12, r1=0.06, tau_s=40.0, aux_base_kw=1.0,
        heat_kw_per_c=0.4, heat_max_kw=6.0, cool_kw_per_c=0.3, cool_max_kw=4.0,
        accel=0.7, decel=1.2, p_accel_max_w=180e3, v_max_kmh=90.0,
        trip_min=(20.0, 60.0),
        trips_per_day=(2, 3),
        duty={"urban": 0.10, "suburban": 0.30, "highway": 0.60}),
    "bus": dict(
        curb_kg=13000.0, payload_kg=(0.0, 5000.0), cda=5.6, crr=0.008,
        eta_drive=0.90, eta_regen=0.65, p_regen_max_w=150e3, n_series=180,
        capacity_kwh=350.0, r0=0.12, r1=0.06, tau_s=40.0, aux_base_kw=4.0,
        heat_kw_per_c=1.2, heat_max_kw=18.0, cool_kw_per_c=1.0, cool_max_kw=12.0,
        accel=0.9, decel=1.2, p_accel_max_w=160e3, v_max_kmh=70.0,
        trip_min=(25.0, 50.0),
        trips_per_day=(3, 6),
        duty={"bus_route": 0.85, "suburban": 0.15}),
}


def _accel_ramp(v0, v1, acc, pm):
  """Acceleration phases from ``v0`` to ``v1 > v0``: ``(phases, distance)``.

  Constant ``acc`` up to the knee speed ``pm / acc``, then constant power per unit
  mass ``pm`` (W/kg, motor limited): ``v(τ) = sqrt(v_s² + 2 pm τ)``.
  """
  vk = pm / acc
  phases, dist = [], 0.0
  if v0 < vk:
    va = min(v1, vk)
    phases.append(((va - v0) / acc, v0, acc, 0))
    dist += (va * va - v0 * v0) / (2.0 * acc)
    v0 = va
  if v1 > v0:
    phases.append(((v1 * v1 - v0 * v0) / (2.0 * pm), v0, pm, 1))
    dist += (v1 ** 3 - v0 ** 3) / (3.0 * pm)
  return phases, dist


def _ramp_dist(v0, v1, acc, pm):
  return _accel_ramp(v0, v1, acc, pm)[1]


def _solve_speed(f, lo, hi, target):
  """Bisection for an increasing scalar ``f`` on ``[lo, hi]``: ``f(v) = target``."""
  for _ in range(40):
    mid = 0.5 * (lo + hi)
    if f(mid) < target:
      lo = mid
    else:
      hi = mid
  return 0.5 * (lo + hi)


def _leg_phases(v0, vc, length, stop, acc, dec, pm):
  """Phases ``(duration, v_start, rate, kind)`` of one leg and its end speed.

  ``kind`` 0: speed linear in time with slope ``rate`` (m/s²); 1: constant power
  per unit mass ``rate`` (W/kg).
  """
  if stop and v0 * v0 / (2.0 * dec) >= length:   # can only brake: uniform decel
    b = v0 * v0 / (2.0 * length)
    return [(v0 / b, v0, -b, 0)], 0.0
  d_stop = (lambda v: v * v / (2.0 * dec)) if stop else (lambda v: 0.0)
  phases = []
  if vc > v0:
    if _ramp_dist(v0, vc, acc, pm) + d_stop(vc) > length:  # short leg: lower peak
      vc = _solve_speed(lambda v: _ramp_dist(v0, v, acc, pm) + d_stop(v), v0, vc,
                        length)
      if not stop:
        ph, _ = _accel_ramp(v0, vc, acc, pm)
        return ph, vc
    ph, d_ramp = _accel_ramp(v0, vc, acc, pm)
    phases.extend(ph)
  else:
    d_ramp = (v0 * v0 - vc * vc) / (2.0 * dec)
    if not stop and d_ramp >= length:            # decel does not finish in this leg
      v1 = math.sqrt(max(v0 * v0 - 2.0 * dec * length, 0.0))
      return [((v0 - v1) / dec, v0, -dec, 0)], v1
    if vc < v0:
      phases.append(((v0 - vc) / dec, v0, -dec, 0))
  cruise = max(length - d_ramp - d_stop(vc), 0.0)
  if cruise > 0:
    phases.append((cruise / vc, vc, 0.0, 0))
  if stop:
    phases.append((vc / dec, vc, -dec, 0))
    return phases, 0.0
  return phases, vc


def trip_speed(rng: np.random.Generator, cp: Mapping[str, Any], agg: float, speed_factor: float,
               mass_kg: float) -> np.ndarray:
  """1 Hz speed (m/s) of one trip, starting and ending at rest. ``-> [T]``."""
  target_s = 60.0 * rng.uniform(*cp["trip_min"])
  acc, dec = cp["accel"] * agg, cp["decel"] * agg
  pm = cp["p_accel_max_w"] / mass_kg
  kinds = list(cp["duty"])
  probs = np.array([cp["duty"][k] for k in kinds])
  probs = probs / probs.sum()
  phases, v, t = [], 0.0, 0.0
  while t < target_s:
    seg = SEGMENTS[kinds[rng.choice(len(kinds), p=probs)]]
    seg_left = 1000.0 * rng.uniform(*seg["seg_km"])
    while seg_left > 0 and t < target_s:
      length = min(rng.uniform(*seg["leg_m"]), seg_left)
      seg_left -= length
      vc = min(rng.uniform(*seg["v_kmh"]) * speed_factor, cp["v_max_kmh"]) / 3.6
      stop = rng.random() < seg["p_stop"] or t + length / vc >= target_s
      ph, v = _leg_phases(v, vc, length, stop, acc, dec, pm)
      if stop:
        dwell = rng.uniform(*seg["dwell_s"])
        if dwell > 0:
          ph.append((dwell, 0.0, 0.0, 0))
      phases.extend(ph)
      t += sum(p[0] for p in ph)
  if v > 0:  # end at rest
    phases.append((v / dec, v, -dec, 0))
  dur = np.array([p[0] for p in phases])
  v_start = np.array([p[1] for p in phases])
  rate = np.array([p[2] for p in phases])
  power_phase = np.array([p[3] for p in phases]) == 1
  t_start = np.concatenate([[0.0], np.cumsum(dur)])
  n = int(math.ceil(t_start[-1] / DT)) + 1
  grid = DT * np.arange(n)
  i = np.clip(np.searchsorted(t_start, grid, side="right") - 1, 0, len(dur) - 1)
  tau = np.minimum(grid - t_start[i], dur[i])
  speed = np.where(power_phase[i],
                   np.sqrt(np.maximum(v_start[i] ** 2 + 2.0 * rate[i] * tau, 0.0)),
                   np.maximum(v_start[i] + rate[i] * tau, 0.0))
  speed[-1] = 0.0
  # Cruise fluctuations: AR(1) multiplicative noise (σ 4 %, ~15 s correlation).
  phi = math.exp(-DT / 15.0)
  noise = _ar1([0.04 * math.sqrt(1 - phi * phi)], [1.0, -phi],
               rng.standard_normal(n + 100))[100:]
  speed = np.minimum(speed * (1.0 + noise), 1.03 * cp["v_max_kmh"] / 3.6)
  # 5 s moving average limits jerk; zero padding keeps rest at both ends.
  kernel = np.ones(5) / 5.0
  speed = np.convolve(np.concatenate([np.zeros(4), speed, np.zeros(4)]), kernel,
                      mode="same")[4:-4]
  speed[0] = speed[-1] = 0.0
  return np.maximum(speed, 0.0)


def _ar1(b, a, noise):
  """``scipy.signal.lfilter(b, a, noise)``, imported here: SciPy's signal module
  takes most of a second to import, and only the synthetic BEV fleet needs it
  (``import fedfrac`` does not load it)."""
  from scipy import signal as sp_signal
  return sp_signal.lfilter(b, a, noise)


def grade_along(rng: np.random.Generator, distance_m: np.ndarray, sigma: float) -> np.ndarray:
  """OU road grade (tan θ) at the given cumulative distances ``[T] -> [T]``."""
  step, corr = 10.0, 600.0
  n = int(distance_m[-1] // step) + 2
  phi = math.exp(-step / corr)
  g = _ar1([sigma * math.sqrt(1 - phi * phi)], [1.0, -phi],
           rng.standard_normal(n + 200))[200:]
  return np.clip(np.interp(distance_m, step * np.arange(n), g), -0.08, 0.08)


def aux_power_kw(cp: Mapping[str, Any], oat_c: np.ndarray) -> np.ndarray:
  heat = np.minimum(cp["heat_kw_per_c"] * np.maximum(18.0 - oat_c, 0.0),
                    cp["heat_max_kw"])
  cool = np.minimum(cp["cool_kw_per_c"] * np.maximum(oat_c - 24.0, 0.0),
                    cp["cool_max_kw"])
  return cp["aux_base_kw"] + heat + cool
