"""A seeded, physics-based synthetic BEV fleet at 1 Hz (offline stand-in for VED/eVED).

Data made here are SYNTHETIC: ``BEVData.meta["source"] == "synthetic_bev"``. They
reproduce the structure of the FO-RI-FedAvg BEV experiments (clients = vehicles,
windows of driving signals → window energy in Wh) — not the paper's numbers.

Pipeline per vehicle (all seeded from ``seed``):

1. Drive cycle. A trip is a sequence of segments — urban, suburban, highway, or a
   bus route — drawn from the class's duty cycle. A segment is a chain of legs; a
   leg accelerates from the current speed to a cruise speed (rate limited by the
   driver's aggressiveness; above a knee speed at constant power, the motor
   limit), cruises, and, with the segment's stop probability,
   brakes to a stop and dwells. The piecewise-linear speed is sampled at 1 Hz,
   given ±4 % AR(1) cruise fluctuations and smoothed by a 5 s moving average
   (limits jerk). Trips always start and end at rest.
2. Road grade: an Ornstein–Uhlenbeck random walk in distance (correlation length
   600 m, per-vehicle hilliness σ), clipped to ±8 %.
3. Road load on the interval ``[k, k+1)`` with mid speed ``v̄`` and ``a = Δv/Δt``:
   ``P_wheel = (m a + ½ ρ C_dA v̄² + C_rr m g cos θ + m g sin θ) · v̄``. (Rotational
   inertia is neglected.) This form conserves kinetic energy over each interval.
4. Battery power demand: ``P_wheel / η_drive`` in traction,
   ``max(P_wheel · η_regen · min(v̄ / 3 m/s, 1), −P_regen,max)`` in braking
   (regeneration fades at low speed where friction brakes take over), plus the
   auxiliary load ``P_aux = P_base + heating/cooling(OAT)``.
5. One-RC equivalent circuit (BEV paper, Eqs. 29–31): ``V = OCV(SoC) − I R0 − V_RC``,
   ``dV_RC/dt = −V_RC/(R1 C1) + I/C1`` (exact zero-order-hold update),
   ``dSoC/dt = −I / (3600 Q)``. Given ``P`` the current solves ``R0 I² −
   (OCV − V_RC) I + P = 0`` (smaller root; the discriminant is floored at 0, i.e.
   the demand is capped at the pack's maximum power). Pack power ``V·I`` is the
   label source; ``V_RC`` relaxes to 0 during parking between trips; SoC is reset
   to a random charge level at the start of each day.
6. Features as in the VED loader (``bev.FEATURE_NAMES``): speed (m/s), acceleration
   (backward difference), grade (the simulated road grade, tan θ), OAT (°C), SoC
   (%), auxiliary load (kW). Labels: :func:`fedfrac.data.bev.make_windows`.
   Splits: :func:`fedfrac.data.bev.split_trips` (70/10/20 by trip).

Constants (typical textbook values; "assumed" marks modelling choices of this
module, sized to give realistic consumption):

============================== ==================== ====================================
constant                       value                source
============================== ==================== ====================================
air density ρ                  1.225 kg/m³          ISA sea-level standard atmosphere
gravity g                      9.81 m/s²            standard gravity (9.80665)
passenger C_d·A                0.65 m² (±10 %)      C_d ≈ 0.28–0.30, A ≈ 2.3 m²; Hucho,
                                                    *Aerodynamics of Road Vehicles*
truck (medium duty) C_d·A      5.0 m² (±10 %)       C_d ≈ 0.6, A ≈ 8 m²; Hucho
bus (12 m) C_d·A               5.6 m² (±10 %)       C_d ≈ 0.7, A ≈ 8 m²; Hucho
C_rr passenger                 0.010 (−10/+15 %)    0.008–0.012, Wong, *Theory of Ground
                                                    Vehicles*; Gillespie, *Fundamentals
                                                    of Vehicle Dynamics*
C_rr truck / bus               0.007 / 0.008        0.006–0.009 for truck tyres, Wong
curb mass passenger/truck/bus  1750 / 8000 / 13000  typical BEV car, class-6 e-truck,
                               kg (±5 %)            12 m e-bus curb masses
payload                        0–400 / 0–4000 /     assumed (people, cargo, passengers)
                               0–5000 kg
η_drive (battery → wheel)      0.90                 inverter ≈ 0.97 × motor ≈ 0.94 ×
                                                    gear ≈ 0.98; Larminie & Lowry,
                                                    *Electric Vehicle Technology
                                                    Explained*
η_regen (wheel → battery)      0.65                 0.6–0.7 reported for EV energy
                                                    models, e.g. Fiori, Ahn & Rakha,
                                                    Applied Energy 168 (2016)
regen fade speed               3 m/s                assumed
P_regen,max                    60 / 150 / 150 kW    assumed (order of motor ratings)
acceleration power / mass      100 / 180 / 160 kW   assumed (≈ 0.7 × peak motor power;
                               ÷ m                  above the knee speed the ramp runs
                                                    at constant power)
pack                           96s / 180s / 180s    NMC cells, ≈ 355 V / 665 V nominal
capacity (energy)              60 / 300 / 350 kWh   typical car / e-truck / e-bus packs
cell OCV(SoC)                  3.0 V @ 0 % … 3.68 V representative NMC/graphite shape
                               @ 40 % … 4.2 V       (steep < 10 %, plateau mid-range);
                               @ 100 %              cf. Plett, *Battery Management
                                                    Systems* Vol. I, ch. 2
R0, R1 (pack)                  0.08, 0.04 Ω (car);  assumed: ≈ 1–3 % ohmic loss at
                               0.12, 0.06 Ω         typical loads (1-RC fits, e.g.
                               (truck, bus)         Hu, Li & Peng, J. Power Sources
                                                    198 (2012))
τ = R1·C1                      40 s                 assumed, tens of seconds typical
base aux load                  0.3 / 1.0 / 4.0 kW   assumed (12/24 V loads, pumps, air
                                                    compressor for buses)
heating below 18 °C            0.20 / 0.4 / 1.2     assumed; PTC heaters ≈ 5 kW (cars),
                               kW/°C, capped at     e-bus HVAC up to ≈ 20 kW
                               3.5 / 6 / 18 kW
cooling above 24 °C            0.15 / 0.3 / 1.0     assumed; car A/C ≈ 1–3 kW
                               kW/°C, capped at
                               2.5 / 4 / 12 kW
driver accel / decel           1.5 / 1.8 m/s² (car) ≈ 1–2.5 m/s² observed for cars,
                               0.7 / 1.2 (truck),   lower for heavy vehicles, e.g.
                               0.9 / 1.2 (bus),     Bokare & Maurya, Transp. Res.
                               × aggressiveness     Procedia 25 (2017)
                               U(0.7, 1.3)
grade OU process               σ U(0.5, 3) %,       assumed
                               600 m, clip ±8 %
day start SoC                  U(75, 95) %          assumed (overnight charging);
                                                    a trip starting below 10 % is
                                                    first recharged to 90 %
============================== ==================== ====================================


The drive cycles (speed, grade and auxiliary load of a vehicle class's trips)
are :mod:`fedfrac.data.drive_cycle`; this module adds the battery and the fleet.
"""
from __future__ import annotations


from typing import Mapping, Sequence, Union

import numpy as np
from numpy.typing import ArrayLike

from fedfrac.data import bev
from fedfrac.data.drive_cycle import (  # noqa: F401  (re-exported)
    CLASS_PARAMS, CLASSES, DT, G, RHO_AIR, SEGMENTS, aux_power_kw, grade_along, trip_speed)

# Weights of (passenger, truck, bus): a 3-sequence or a mapping class -> weight.
ClassMix = Union[Sequence[float], Mapping[str, float]]


_OCV_SOC = np.array([0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
_OCV_CELL = np.array([3.00, 3.40, 3.50, 3.58, 3.63, 3.68, 3.74, 3.82, 3.91, 4.00,
                      4.09, 4.20])
_REGEN_FADE_MPS = 3.0

def ocv_pack(soc: ArrayLike, n_series: int) -> np.ndarray:
  """Pack open-circuit voltage (V) from SoC in [0, 1] (clipped): ``[...] -> [...]``."""
  return n_series * np.interp(np.clip(soc, 0.0, 1.0), _OCV_SOC, _OCV_CELL)


def _class_counts(num_vehicles, class_mix):
  if isinstance(class_mix, Mapping):
    unknown = set(class_mix) - set(CLASSES)
    if unknown:
      raise ValueError(f"class_mix keys must be in {CLASSES}, got {sorted(unknown)}")
    mix = np.array([float(class_mix.get(c, 0.0)) for c in CLASSES])
  else:
    mix = np.asarray(class_mix, np.float64)
  if mix.shape != (3,) or np.any(mix < 0) or mix.sum() <= 0:
    raise ValueError(f"class_mix must give 3 non-negative weights for {CLASSES} "
                     f"(a tuple or a dict), got {class_mix!r}")
  ideal = num_vehicles * mix / mix.sum()
  counts = np.floor(ideal).astype(int)
  order = np.argsort(-(ideal - counts), kind="stable")
  counts[order[:num_vehicles - counts.sum()]] += 1
  return counts


def _simulate_vehicle(rng, cls, hours, temperature_range_c):
  """Drive cycles and battery demand of one vehicle (battery solved fleet-wide)."""
  cp = CLASS_PARAMS[cls]
  veh = dict(
      vehicle_class=cls,
      mass_kg=cp["curb_kg"] * rng.uniform(0.95, 1.05) + rng.uniform(*cp["payload_kg"]),
      cda=cp["cda"] * rng.uniform(0.9, 1.1),
      crr=cp["crr"] * rng.uniform(0.9, 1.15),
      aggressiveness=rng.uniform(0.7, 1.3),
      climate_c=rng.uniform(*temperature_range_c),
      hilliness=rng.uniform(0.005, 0.03))
  speed_factor = 1.0 + 0.1 * (veh["aggressiveness"] - 1.0)
  m = veh["mass_kg"]
  trips, total, day, day_left = [], 0.0, 0, 0
  while total < hours * 3600.0:
    if day_left == 0:
      day += 1
      day_left = int(rng.integers(cp["trips_per_day"][0], cp["trips_per_day"][1] + 1))
      day_temp = veh["climate_c"] + rng.normal(0.0, 3.0)
      day_soc = rng.uniform(0.75, 0.95)
      first_of_day = True
    v = trip_speed(rng, cp, veh["aggressiveness"], speed_factor, m)
    n = v.size
    v_next = np.append(v[1:], 0.0)
    v_mid = 0.5 * (v + v_next)
    acc = (v_next - v) / DT
    dist = np.concatenate([[0.0], np.cumsum(v_mid * DT)])[:n]
    grade = grade_along(rng, dist + 0.5 * v_mid * DT, veh["hilliness"])
    theta = np.arctan(grade)
    oat = day_temp + rng.normal(0.0, 1.0) + np.linspace(0, rng.normal(0, 0.5), n)
    aux_kw = aux_power_kw(cp, oat)
    # Road load power on [k, k+1) at mid speed (paper's longitudinal model).
    f_trac = (m * acc + 0.5 * RHO_AIR * veh["cda"] * v_mid ** 2
              + veh["crr"] * m * G * np.cos(theta) + m * G * np.sin(theta))
    p_wheel = f_trac * v_mid
    regen = np.maximum(p_wheel * cp["eta_regen"]
                       * np.minimum(v_mid / _REGEN_FADE_MPS, 1.0), -cp["p_regen_max_w"])
    p_demand = np.where(p_wheel >= 0, p_wheel / cp["eta_drive"], regen) + 1e3 * aux_kw
    trips.append(dict(speed=v, grade=grade, oat=oat, aux_kw=aux_kw, p_demand=p_demand,
                      distance_m=float(np.sum(v_mid * DT)), day=day,
                      soc0=day_soc if first_of_day else np.nan))
    first_of_day = False
    day_left -= 1
    total += n * DT
  return veh, trips


def _solve_battery(fleet):
  """One-RC pack model over time, vectorised across vehicles (Eqs. 29–31)."""
  k = len(fleet)
  lengths = [sum(t["speed"].size for t in trips) for _, trips in fleet]
  t_max = max(lengths)
  p = np.zeros((k, t_max))
  trip_start = np.zeros((k, t_max), bool)
  soc_reset = np.full((k, t_max), np.nan)
  for i, (_, trips) in enumerate(fleet):
    pos = 0
    for tr in trips:
      n = tr["speed"].size
      p[i, pos:pos + n] = tr["p_demand"]
      trip_start[i, pos] = True
      soc_reset[i, pos] = tr["soc0"]
      pos += n
  cps = [CLASS_PARAMS[v["vehicle_class"]] for v, _ in fleet]
  n_s = np.array([c["n_series"] for c in cps], np.float64)
  r0 = np.array([c["r0"] for c in cps])
  r1 = np.array([c["r1"] for c in cps])
  decay = np.exp(-DT / np.array([c["tau_s"] for c in cps]))
  nominal_v = n_s * ocv_pack(0.5, 1)
  q_as = np.array([c["capacity_kwh"] for c in cps]) * 1e3 / nominal_v * 3600.0
  soc = np.full(k, 0.9)
  vrc = np.zeros(k)
  cur = np.zeros((k, t_max))
  volt = np.zeros((k, t_max))
  socs = np.zeros((k, t_max))
  for t in range(t_max):
    soc = np.where(np.isnan(soc_reset[:, t]), soc, soc_reset[:, t])
    soc = np.where(trip_start[:, t] & (soc < 0.1), 0.9, soc)  # opportunity charge
    vrc = np.where(trip_start[:, t], 0.0, vrc)  # relaxed after parking
    ocv = n_s * np.interp(np.clip(soc, 0.0, 1.0), _OCV_SOC, _OCV_CELL)
    e = ocv - vrc
    disc = np.maximum(e * e - 4.0 * r0 * p[:, t], 0.0)
    i_t = (e - np.sqrt(disc)) / (2.0 * r0)      # P = (OCV − V_RC − I R0) I
    volt[:, t] = ocv - i_t * r0 - vrc           # Eqs. 29–31: terminal voltage
    cur[:, t] = i_t
    socs[:, t] = soc
    vrc = decay * vrc + r1 * (1.0 - decay) * i_t  # Eqs. 29–31: RC branch, exact ZOH
    soc = soc - i_t * DT / q_as                   # Eqs. 29–31: Coulomb counting
  return cur, volt, socs


def simulate_fleet(num_vehicles: int = 10, hours_per_vehicle: float = 3.0,
                   seed: int = 0, class_mix: ClassMix = (0.6, 0.2, 0.2),
                   temperature_range_c: tuple[float, float] = (-5.0, 30.0)) -> list[dict]:
  """Raw 1 Hz time series of a synthetic fleet.

  Args:
    num_vehicles: K.
    hours_per_vehicle: driving time per vehicle (trips are added until reached).
    seed: seeds everything.
    class_mix: weights of (passenger, truck, bus), a 3-tuple or a dict; counts are
      rounded by largest remainder and vehicles are ordered by class.
    temperature_range_c: per-vehicle climate mean temperature range (°C).
  Returns:
    One dict per vehicle: its parameters (``vehicle_class``, ``mass_kg``, ``cda``,
    ``crr``, ``aggressiveness``, ``climate_c``, ``hilliness``) and ``trips``, a list
    of dicts of ``[T]`` arrays ``speed`` (m/s), ``grade``, ``oat`` (°C), ``aux_kw``,
    ``soc`` (0–1), ``current`` (A, discharge positive), ``voltage`` (V), ``power_w``
    (= V·I), plus ``distance_m`` and ``day``.
  """
  if int(num_vehicles) != num_vehicles or num_vehicles < 1:
    raise ValueError(f"num_vehicles must be a positive integer, got {num_vehicles!r}")
  if not hours_per_vehicle > 0:
    raise ValueError(f"hours_per_vehicle must be > 0, got {hours_per_vehicle!r}")
  lo, hi = temperature_range_c
  if not lo <= hi:
    raise ValueError(f"temperature_range_c must be (low, high) with low <= high, got "
                     f"{temperature_range_c!r}")
  counts = _class_counts(int(num_vehicles), class_mix)
  classes = [c for c, n in zip(CLASSES, counts) for _ in range(n)]
  seqs = np.random.SeedSequence(seed).spawn(len(classes))
  fleet = [_simulate_vehicle(np.random.default_rng(s), c, hours_per_vehicle,
                             (lo, hi)) for s, c in zip(seqs, classes)]
  cur, volt, socs = _solve_battery(fleet)
  out = []
  for i, (veh, trips) in enumerate(fleet):
    pos = 0
    for tr in trips:
      n = tr["speed"].size
      tr["current"] = cur[i, pos:pos + n]
      tr["voltage"] = volt[i, pos:pos + n]
      tr["soc"] = socs[i, pos:pos + n]
      tr["power_w"] = tr["voltage"] * tr["current"]  # Eqs. 25–27: pack power V·I
      del tr["p_demand"], tr["soc0"]
      pos += n
    out.append(dict(veh, trips=trips))
  return out


def synthetic_bev(num_vehicles: int = 10, hours_per_vehicle: float = 3.0,
                  seed: int = 0, class_mix: ClassMix = (0.6, 0.2, 0.2), window: int = 60,
                  stride: int = 10, temperature_range_c: tuple[float, float] = (-5.0, 30.0),
                  holdout_vehicles: Sequence[int] | None = None,
                  min_windows: int = 1,
                  fractions: Sequence[float] = (0.7, 0.1, 0.2),
                  regime_skew: float | None = None,
                  num_regimes: int = 4) -> bev.BEVData:
  """Synthetic BEV fleet as windowed energy data (one client per vehicle).

  Args:
    num_vehicles, hours_per_vehicle, seed, class_mix, temperature_range_c: see
      :func:`simulate_fleet`.
    window, stride: window length ``L`` (samples at 1 Hz) and stride.
    holdout_vehicles: vehicle indices ``0..K-1`` whose windows all go to test.
    min_windows, fractions: see :func:`fedfrac.data.bev.assemble_bev_data`.
    regime_skew, num_regimes: 0/None (default) = one client per vehicle; α_D > 0 =
      the regime-based partition of :mod:`fedfrac.data.bev` over ``num_regimes``
      mean-speed regimes.
  Returns:
    :class:`fedfrac.data.bev.BEVData` with ``x [N, L, 6]``, ``y [N]`` in Wh;
    ``vehicle_class`` in {'passenger', 'truck', 'bus'}; ``meta["source"] ==
    "synthetic_bev"`` and ``meta["vehicles"]`` the per-vehicle parameters.
  """
  fleet = simulate_fleet(num_vehicles, hours_per_vehicle, seed, class_mix,
                         temperature_range_c)
  trips = []
  for k, veh in enumerate(fleet):
    for tr in veh["trips"]:
      feats = np.stack([tr["speed"], bev.acceleration_from_speed(tr["speed"], DT),
                        tr["grade"], tr["oat"], 100.0 * tr["soc"], tr["aux_kw"]],
                       axis=1)
      trips.append(bev.Trip(k, feats, tr["power_w"], DT))
  ids = np.arange(len(fleet))
  hold = bev.resolve_holdout(holdout_vehicles, ids)
  params = [{k: v for k, v in veh.items() if k != "trips"} for veh in fleet]
  meta = dict(source="synthetic_bev", seed=seed, vehicles=params,
              hours_per_vehicle=hours_per_vehicle)
  return bev.assemble_bev_data(trips, ids, [p["vehicle_class"] for p in params],
                               bev.FEATURE_NAMES, window, stride, seed, fractions,
                               hold, min_windows, meta=meta, regime_skew=regime_skew,
                               num_regimes=num_regimes)
