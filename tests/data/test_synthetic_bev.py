"""Synthetic physics-based BEV fleet."""
from __future__ import annotations

import numpy as np
import pytest

from fedfrac.data import bev
from fedfrac.data import synthetic_bev as sb


@pytest.fixture(scope="module")
def mild_fleet():
  # 2 passenger cars and 2 buses, mild climate (little HVAC load).
  return sb.simulate_fleet(num_vehicles=4, hours_per_vehicle=1.5, seed=0,
                           class_mix=(0.5, 0.0, 0.5), temperature_range_c=(15.0, 22.0))


@pytest.fixture(scope="module")
def small():
  return sb.synthetic_bev(num_vehicles=5, hours_per_vehicle=1.0, seed=3, stride=15)


def wh_per_km(veh):
  e_wh = sum(np.sum(tr["power_w"]) * 1.0 for tr in veh["trips"]) / 3600.0
  km = sum(np.sum(tr["speed"]) * 1.0 for tr in veh["trips"]) / 1000.0
  return e_wh / km


def test_energy_per_km_passenger_and_bus(mild_fleet):
  classes = [v["vehicle_class"] for v in mild_fleet]
  assert classes == ["passenger", "passenger", "bus", "bus"]
  car = [wh_per_km(v) for v in mild_fleet if v["vehicle_class"] == "passenger"]
  bus = [wh_per_km(v) for v in mild_fleet if v["vehicle_class"] == "bus"]
  for e in car:
    assert 100.0 <= e <= 250.0, car
  assert min(bus) >= 3.0 * max(car), (bus, car)
  # The passenger cycle is mixed: stops, urban speeds and highway speeds occur.
  speed = np.concatenate([tr["speed"] for v in mild_fleet[:2] for tr in v["trips"]])
  speed = speed * 3.6
  assert np.mean(speed < 1) > 0.02
  assert np.mean((speed > 20) & (speed < 55)) > 0.1
  assert np.mean(speed > 90) > 0.02
  # Buses stop often: many separate stops per km.
  for v in mild_fleet[2:]:
    speed = np.concatenate([tr["speed"] for tr in v["trips"]])
    stops = np.sum((speed[1:] < 0.1) & (speed[:-1] >= 0.1))
    assert stops / (np.sum(speed) / 1000.0) > 1.0


def test_default_climate_passenger_range():
  fleet = sb.simulate_fleet(num_vehicles=5, hours_per_vehicle=1.0, seed=1,
                            class_mix=(1.0, 0.0, 0.0))
  e = [wh_per_km(v) for v in fleet]
  assert 100.0 <= np.mean(e) <= 250.0, e


def test_battery_equivalent_circuit_reference(mild_fleet):
  veh = mild_fleet[0]
  cp = sb.CLASS_PARAMS[veh["vehicle_class"]]
  tr = veh["trips"][1]
  i, v, soc = tr["current"], tr["voltage"], tr["soc"]
  np.testing.assert_allclose(tr["power_w"], v * i)
  # V_RC from its recursion (exact discretisation, starts relaxed at trip start).
  decay = np.exp(-1.0 / cp["tau_s"])
  vrc = np.zeros_like(i)
  for t in range(1, len(i)):
    vrc[t] = decay * vrc[t - 1] + cp["r1"] * (1 - decay) * i[t - 1]
  ocv = cp["n_series"] * np.interp(soc, sb._OCV_SOC, sb._OCV_CELL)
  np.testing.assert_allclose(v, ocv - i * cp["r0"] - vrc, rtol=1e-9, atol=1e-6)
  # Coulomb counting.
  q_as = cp["capacity_kwh"] * 1e3 / (cp["n_series"] * np.interp(0.5, sb._OCV_SOC,
                                                                 sb._OCV_CELL)) * 3600
  np.testing.assert_allclose(np.diff(soc), -i[:-1] / q_as, rtol=1e-9, atol=1e-12)
  # Discharging in traction lowers the terminal voltage below OCV.
  assert np.all(v[i > 5] < ocv[i > 5])


def test_regeneration_gives_negative_windows(small):
  y = np.concatenate([small.y_train, small.y_val, small.y_test])
  assert np.any(y < 0)
  assert np.mean(y > 0) > 0.8


def test_shapes_and_no_nan(small):
  d = small
  k = d.num_clients
  assert k == 5 and d.vehicle_class.shape == (5,) and d.vehicle_ids.shape == (5,)
  assert set(d.vehicle_class) <= {"passenger", "truck", "bus"}
  assert d.feature_names == bev.FEATURE_NAMES
  assert d.meta["source"] == "synthetic_bev"
  total = 0
  for s in bev.SPLITS:
    x, y, c = d.split(s)
    assert x.shape == (len(y), 60, 6) and c.shape == y.shape == getattr(
        d, f"trip_{s}").shape
    assert np.all(np.isfinite(x)) and np.all(np.isfinite(y))
    assert c.min() >= 0 and c.max() < k
    total += len(y)
  assert d.x_norm_stats.center.shape == (k, 6) and d.y_norm_stats.scale.shape == (k,)
  assert np.all(d.x_norm_stats.scale > 0) and np.all(d.y_norm_stats.scale > 0)
  # Windows per trip: floor((T - L) / stride) + 1, never crossing trips.
  fleet = sb.simulate_fleet(5, 1.0, seed=3)
  expected = sum((tr["speed"].size - 60) // 15 + 1 for v in fleet for tr in v["trips"]
                 if tr["speed"].size >= 60)
  assert total == expected
  # Features: speed in m/s, SoC in %, the speed channel matches a trip's slice.
  x0 = d.x_train[0]
  assert 0 <= x0[:, 0].min() and x0[:, 0].max() < 60
  assert np.all((d.x_train[:, :, 4] > 0) & (d.x_train[:, :, 4] <= 100))
  np.testing.assert_allclose(x0[1:, 1], np.diff(x0[:, 0]), atol=1e-5)
  n = d.normalized()
  assert np.all(np.isfinite(n.x_train)) and np.all(np.isfinite(n.y_test))


def test_splits_are_trip_disjoint(small):
  d = small
  sets = [set(getattr(d, f"trip_{s}").tolist()) for s in bev.SPLITS]
  assert not (sets[0] & sets[1] or sets[0] & sets[2] or sets[1] & sets[2])
  for s in bev.SPLITS:
    assert len(getattr(d, f"y_{s}")) > 0
  # Each vehicle has trips in train.
  assert set(np.unique(d.client_train)) == set(range(d.num_clients))


def test_seeded():
  a = sb.synthetic_bev(num_vehicles=3, hours_per_vehicle=0.5, seed=7, stride=30)
  b = sb.synthetic_bev(num_vehicles=3, hours_per_vehicle=0.5, seed=7, stride=30)
  c = sb.synthetic_bev(num_vehicles=3, hours_per_vehicle=0.5, seed=8, stride=30)
  for s in bev.SPLITS:
    np.testing.assert_array_equal(getattr(a, f"x_{s}"), getattr(b, f"x_{s}"))
    np.testing.assert_array_equal(getattr(a, f"y_{s}"), getattr(b, f"y_{s}"))
  assert (a.x_train.shape != c.x_train.shape
          or not np.array_equal(a.x_train, c.x_train))


def test_holdout_and_validation():
  d = sb.synthetic_bev(num_vehicles=3, hours_per_vehicle=0.5, seed=2, stride=30,
                       holdout_vehicles=[1])
  assert list(d.holdout) == [False, True, False]
  assert not np.any(d.client_train == 1) and np.any(d.client_test == 1)
  with pytest.raises(ValueError, match="num_vehicles"):
    sb.synthetic_bev(num_vehicles=0)
  with pytest.raises(ValueError, match="class_mix"):
    sb.synthetic_bev(num_vehicles=2, class_mix=(1.0, -1.0, 0.0))
  with pytest.raises(ValueError, match="class_mix"):
    sb.synthetic_bev(num_vehicles=2, class_mix={"car": 1.0})
  with pytest.raises(ValueError, match="hours_per_vehicle"):
    sb.synthetic_bev(num_vehicles=2, hours_per_vehicle=0)
