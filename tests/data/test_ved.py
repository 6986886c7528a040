"""VED CSV loader: small files in the VED schema written to tmp_path."""
from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from fedfrac.data import ved

HEADER = [
    "DayNum", "VehId", "Trip", "Timestamp(ms)", "Latitude[deg]", "Longitude[deg]",
    "Vehicle Speed[km/h]", "MAF[g/sec]", "Engine RPM[RPM]", "Absolute Load[%]",
    "OAT[DegC]", "Fuel Rate[L/hr]", "Air Conditioning Power[kW]",
    "Air Conditioning Power[Watts]", "Heater Power[Watts]", "HV Battery Current[A]",
    "HV Battery SOC[%]", "HV Battery Voltage[V]", "Short Term Fuel Trim Bank 1[%]",
    "Short Term Fuel Trim Bank 2[%]", "Long Term Fuel Trim Bank 1[%]",
    "Long Term Fuel Trim Bank 2[%]"]


def speed_kmh(t, phase):
  return 30.0 + 20.0 * np.sin(2 * np.pi * t / 40.0 + phase) + 0.05 * t


def volt(t):
  return 350.0 + 5.0 * np.cos(t / 15.0)


def amps(t, phase):
  return 20.0 + 10.0 * np.sin(t / 10.0 + phase)


def trip_rows(veh, trip, times, oat, sign, phase, *, even_current=False, oat_after=None,
              gap_start=None, heater_w=None, ac_kw=None, rpm=None, glitches=(),
              speed_scale=1.0):
  """Rows of one trip; ``sign`` = how this vehicle logs discharge current."""
  rows = []
  for i, t in enumerate(times):
    r = {"DayNum": f"{1 + t / 86400:.6f}", "VehId": veh, "Trip": trip,
         "Timestamp(ms)": int(round(t * 1000)),
         "Vehicle Speed[km/h]": speed_kmh(t, phase) * (
             speed_scale(t) if callable(speed_scale) else speed_scale),
         "HV Battery Voltage[V]": volt(t)}
    if not even_current or int(t) % 2 == 0:
      r["HV Battery Current[A]"] = sign * amps(t, phase)
    if int(t) % 5 == 0:
      r["HV Battery SOC[%]"] = 80.0 - 0.01 * t
    if i == 0 or int(t) % 10 == 0:  # slow signal, sparse cells
      use_after = gap_start is not None and t >= gap_start
      r["OAT[DegC]"] = oat_after if use_after else oat
    if heater_w is not None and i == 0:
      r["Heater Power[Watts]"] = heater_w
    if ac_kw is not None and i == 0:
      r["Air Conditioning Power[kW]"] = ac_kw
    if rpm is not None and i % 7 == 0:
      r["Engine RPM[RPM]"] = rpm
    for (gt, col, val) in glitches:
      if t == gt:
        r[col] = val
    rows.append(r)
  return rows


def ice_rows(veh, trip, n):
  return [{"DayNum": 1.0, "VehId": veh, "Trip": trip, "Timestamp(ms)": 1000 * t,
           "Vehicle Speed[km/h]": 40.0, "Engine RPM[RPM]": 1500, "MAF[g/sec]": 5.0,
           "Fuel Rate[L/hr]": 2.0, "OAT[DegC]": 9.0} for t in range(n)]


def write_csv(path, rows, header=HEADER):
  with open(path, "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(header)
    for r in rows:
      w.writerow(["" if r.get(h) is None else r.get(h) for h in header])


GAP_TIMES = np.concatenate([np.arange(0, 100), np.arange(140, 260)]).astype(float)


def fleet_rows(test_speed_scale=None):
  """(week1 rows, week2 rows). OAT is a per-trip tag: 1,2/2.5,3,4 | 11,12,13 | 9."""
  s = test_speed_scale or {}
  g = lambda o: s.get(o, 1.0)
  week1 = (
      trip_rows(10, 101, np.arange(150.0), 1.0, -1, 0.0, even_current=True,
                speed_scale=g(1.0))
      + trip_rows(10, 102, GAP_TIMES, 2.0, -1, 0.5, oat_after=2.5, gap_start=140,
                  speed_scale=lambda t: g(2.5) if t >= 140 else g(2.0))
      + ice_rows(30, 301, 120)
      + trip_rows(20, 201, np.arange(130.0), 11.0, +1, 1.0, rpm=1200,
                  glitches=[(70.0, "HV Battery Voltage[V]", 0.0),
                            (80.0, "HV Battery Current[A]", 5000.0)],
                  speed_scale=g(11.0)))
  week2 = (
      trip_rows(10, 103, np.arange(120.0), 3.0, -1, 1.5, speed_scale=g(3.0))
      + trip_rows(10, 104, np.arange(100.0)[::-1], 4.0, -1, 2.0, heater_w=1500.0,
                  speed_scale=g(4.0))  # rows in reverse time order
      + trip_rows(20, 202, np.arange(100.0), 12.0, +1, 2.5, speed_scale=g(12.0))
      + trip_rows(20, 203, np.arange(110.0), 13.0, +1, 3.0, ac_kw=0.8,
                  speed_scale=g(13.0))
      + ice_rows(30, 302, 90))
  return week1, week2


@pytest.fixture
def ved_dir(tmp_path):
  w1, w2 = fleet_rows()
  write_csv(tmp_path / "VED_171101_week.csv", w1)
  write_csv(tmp_path / "VED_171108_week.csv", w2)
  return tmp_path


def all_windows(d):
  x = np.concatenate([d.x_train, d.x_val, d.x_test])
  y = np.concatenate([d.y_train, d.y_val, d.y_test])
  c = np.concatenate([d.client_train, d.client_val, d.client_test])
  return x, y, c


def find_window(d, client, oat, speed_mps):
  x, y, c = all_windows(d)
  hit = [i for i in range(len(y)) if c[i] == client and x[i, 0, 3] == oat
         and np.allclose(x[i, :, 0], speed_mps, atol=1e-4)]
  assert len(hit) == 1, hit
  return x[hit[0]], y[hit[0]]


def test_ice_dropped_classes_and_shapes(ved_dir):
  d = ved.load_ved_csv(ved_dir, window=60, max_gap_s=10.0)
  assert list(d.vehicle_ids) == [10, 20]
  assert list(d.vehicle_class) == ["ev", "phev"]
  assert d.feature_names == ("speed_mps", "accel_mps2", "grade", "oat_c", "soc_pct",
                             "aux_kw")
  for s in ("train", "val", "test"):
    x, y, c = d.split(s)
    assert x.shape[1:] == (60, 6) and x.dtype == np.float32
    assert y.shape == c.shape == (len(x),) and y.dtype == np.float32
    assert c.dtype == np.int32 and len(y) > 0
    assert np.all(np.isfinite(x)) and np.all(np.isfinite(y))
  assert d.meta["source"] == "ved_csv"
  # Vehicle 10 logs discharge as negative current, vehicle 20 as positive.
  assert d.meta["current_sign"] == {10: -1, 20: 1}
  x, y, c = all_windows(d)
  assert np.all(y > 0)  # every window draws traction power in these trips
  # Window counts: segments of T samples give T - 59 windows each. Trip 101 ends
  # at its last current sample (t = 148 s): 149 samples on the grid.
  seg_len = {10: [149, 100, 120, 120, 100], 20: [130, 100, 110]}
  for k, veh in enumerate((10, 20)):
    assert np.sum(c == k) == sum(t - 59 for t in seg_len[veh])


def test_windows_never_cross_trips_or_gaps(ved_dir):
  d = ved.load_ved_csv(ved_dir, window=60, max_gap_s=10.0)
  x, _, _ = all_windows(d)
  # OAT is a constant tag per trip (and per side of the gap in trip 102).
  assert np.all(x[:, :, 3] == x[:, :1, 3])
  oats = set(np.unique(x[:, 0, 3]).tolist())
  assert oats == {1.0, 2.0, 2.5, 3.0, 4.0, 11.0, 12.0, 13.0}
  # Inside a window, speed follows the 1 Hz profile of one segment: the backward
  # difference feature equals the speed difference at every step after the first.
  np.testing.assert_allclose(x[:, 1:, 1], np.diff(x[:, :, 0], axis=1), atol=1e-4)
  # With a long max_gap_s the gap trip is one segment (interpolated across).
  d2 = ved.load_ved_csv(ved_dir, window=60, max_gap_s=100.0)
  x2, _, c2 = all_windows(d2)
  assert np.sum(c2 == 0) == (149 - 59) + (260 - 59) + (120 - 59) + (100 - 59)


def test_splits_are_trip_disjoint(ved_dir):
  for seed in range(4):
    d = ved.load_ved_csv(ved_dir, window=60, stride=3, seed=seed)
    tags = {s: set(np.unique(getattr(d, f"x_{s}")[:, 0, 3]).tolist())
            for s in ("train", "val", "test")}
    assert not (tags["train"] & tags["val"] or tags["train"] & tags["test"]
                or tags["val"] & tags["test"])
    trips = {s: set(getattr(d, f"trip_{s}").tolist()) for s in ("train", "val", "test")}
    assert not (trips["train"] & trips["test"] or trips["train"] & trips["val"]
                or trips["val"] & trips["test"])
    # 5 segments (vehicle 10) and 3 trips (vehicle 20): each split non-empty.
    for s in ("train", "val", "test"):
      assert set(np.unique(getattr(d, f"client_{s}"))) == {0, 1}


def test_label_equals_hand_computed_energy(ved_dir):
  d = ved.load_ved_csv(ved_dir, window=60)
  # Trip 101 (vehicle 10, OAT 1): current logged only at even seconds, as
  # -(discharge current). Window starting at t = 0 covers t = 0..59 s.
  t = np.arange(60.0)
  i_log = -amps(t, 0.0)
  i_odd = 0.5 * (-amps(t - 1, 0.0) + -amps(t + 1, 0.0))
  cur = np.where(t % 2 == 0, i_log, i_odd)
  p = -1.0 * volt(t) * cur  # vehicle 10 sign: discharge current is negative
  e_hand = sum(p) * 1.0 / 3600.0
  x, y = find_window(d, 0, 1.0, speed_kmh(t, 0.0) / 3.6)
  np.testing.assert_allclose(y, e_hand, rtol=1e-5)
  # Features of that window by hand.
  v = speed_kmh(t, 0.0) / 3.6
  np.testing.assert_allclose(x[1:, 1], v[1:] - v[:-1], atol=1e-5)
  assert x[0, 1] == 0.0
  np.testing.assert_allclose(x[:, 2], 0.0)  # no elevation column in VED: grade 0
  soc = 80.0 - 0.01 * (5 * np.floor(t / 5))  # SoC logged every 5 s, forward-filled
  np.testing.assert_allclose(x[:, 4], soc, atol=1e-4)
  np.testing.assert_allclose(x[:, 5], 0.0)

  # Trip 201 (vehicle 20): voltage glitch (0 V) at 70 s, current glitch (5000 A)
  # at 80 s; both samples are dropped and interpolated from their neighbours.
  t = np.arange(50.0, 110.0)
  vv = volt(t)
  vv[t == 70] = 0.5 * (volt(69.0) + volt(71.0))
  ii = amps(t, 1.0)
  ii[t == 80] = 0.5 * (amps(79.0, 1.0) + amps(81.0, 1.0))
  e_hand = np.sum(vv * ii) / 3600.0
  _, y = find_window(d, 1, 11.0, speed_kmh(t, 1.0) / 3.6)
  np.testing.assert_allclose(y, e_hand, rtol=1e-5)

  # Trip 104 (rows written in reverse time order), heater 1500 W -> aux 1.5 kW.
  t = np.arange(0.0, 60.0)
  x, y = find_window(d, 0, 4.0, speed_kmh(t, 2.0) / 3.6)
  np.testing.assert_allclose(y, np.sum(volt(t) * amps(t, 2.0)) / 3600, rtol=1e-5)
  np.testing.assert_allclose(x[:, 5], 1.5)
  x, _ = find_window(d, 1, 13.0, speed_kmh(t, 3.0) / 3.6)
  np.testing.assert_allclose(x[:, 5], 0.8, rtol=1e-6)  # AC power [kW]


def test_forced_sign_and_stride(ved_dir):
  d = ved.load_ved_csv(ved_dir, window=60, current_sign=1)
  _, y, c = all_windows(d)
  assert np.all(y[c == 0] < 0) and np.all(y[c == 1] > 0)
  ds = ved.load_ved_csv(ved_dir, window=30, stride=10, resample_dt_s=2.0)
  assert ds.x_train.shape[1:] == (30, 6)
  # Trip 103 at dt = 2 s: 60 grid points, windows of 30 start every 10 -> 4.
  x, _, _ = all_windows(ds)
  assert np.sum(x[:, 0, 3] == 3.0) == 4


def test_normalisation_uses_train_statistics_only(tmp_path, ved_dir):
  d = ved.load_ved_csv(ved_dir, window=60, seed=1)
  # Statistics equal NumPy median / IQR of each client's train windows.
  for k in range(2):
    xk = d.x_train[d.client_train == k].reshape(-1, 6).astype(np.float64)
    yk = d.y_train[d.client_train == k].astype(np.float64)
    np.testing.assert_allclose(d.x_norm_stats.center[k], np.median(xk, 0), rtol=1e-5)
    q = np.percentile(xk, [75, 25], axis=0)
    iqr = q[0] - q[1]
    for f in range(6):
      if iqr[f] > 1e-6:
        np.testing.assert_allclose(d.x_norm_stats.scale[k, f], iqr[f], rtol=1e-5)
      else:  # constant features (grade, OAT tag, aux) fall back to std, then 1
        assert d.x_norm_stats.scale[k, f] > 0
    np.testing.assert_allclose(d.y_norm_stats.center[k], np.median(yk), rtol=1e-5)
    q = np.percentile(yk, [75, 25])
    np.testing.assert_allclose(d.y_norm_stats.scale[k], q[0] - q[1], rtol=1e-5)
  # Rewrite the test trips with doubled speeds: test data change, stats do not.
  test_tags = set(np.unique(d.x_test[:, 0, 3]).tolist())
  w1, w2 = fleet_rows({o: 2.0 for o in test_tags})
  other = tmp_path / "changed"
  other.mkdir()
  write_csv(other / "a.csv", w1)
  write_csv(other / "b.csv", w2)
  d2 = ved.load_ved_csv(other, window=60, seed=1)
  assert not np.allclose(d2.x_test[:, :, 0], d.x_test[:, :, 0])
  np.testing.assert_array_equal(d2.x_train, d.x_train)
  for a, b in zip(d.x_norm_stats + d.y_norm_stats, d2.x_norm_stats + d2.y_norm_stats):
    np.testing.assert_array_equal(a, b)
  # normalized() applies those statistics and denormalize_y inverts.
  n = d.normalized()
  c = d.client_test
  np.testing.assert_allclose(
      n.x_test, (d.x_test - d.x_norm_stats.center[c][:, None]) /
      d.x_norm_stats.scale[c][:, None], rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(n.denormalize_y(n.y_test, c), d.y_test, rtol=1e-5,
                             atol=1e-3)
  with pytest.raises(ValueError, match="already normalised"):
    n.normalized()


def test_holdout_vehicle_and_vehicle_filter(ved_dir):
  d = ved.load_ved_csv(ved_dir, window=60, holdout_vehicles=[20])
  assert list(d.holdout) == [False, True]
  assert not np.any(d.client_train == 1) and not np.any(d.client_val == 1)
  assert np.sum(d.client_test == 1) == (130 - 59) + (100 - 59) + (110 - 59)
  # A vehicle without train windows is normalised with the pooled train stats.
  np.testing.assert_allclose(d.y_norm_stats.center[1], np.median(d.y_train), rtol=1e-5)
  only = ved.load_ved_csv(ved_dir, window=60, vehicles=[20])
  assert list(only.vehicle_ids) == [20]
  assert set(np.unique(only.client_train)) == {0}
  with pytest.raises(ValueError, match=r"\[30\]"):
    ved.load_ved_csv(ved_dir, vehicles=[20, 30])
  with pytest.raises(ValueError, match="holdout_vehicles"):
    ved.load_ved_csv(ved_dir, holdout_vehicles=[99])
  big = ved.load_ved_csv(ved_dir, window=60, min_windows=200)
  assert list(big.vehicle_ids) == [10]


def test_errors(tmp_path, ved_dir):
  missing = tmp_path / "nope" / "VED_x.csv"
  with pytest.raises(FileNotFoundError, match="nope"):
    ved.load_ved_csv(missing)
  empty_dir = tmp_path / "empty"
  empty_dir.mkdir()
  with pytest.raises(FileNotFoundError, match="empty"):
    ved.load_ved_csv(empty_dir)
  bad = tmp_path / "bad.csv"
  w1, _ = fleet_rows()
  header = [h for h in HEADER if h not in ("HV Battery Voltage[V]", "Trip")]
  write_csv(bad, w1, header=header)
  with pytest.raises(ValueError, match=r"bad\.csv.*HV Battery Voltage") as e:
    ved.load_ved_csv(bad)
  assert "Trip" in str(e.value)
  ice = tmp_path / "ice.csv"
  write_csv(ice, ice_rows(30, 301, 100))
  with pytest.raises(ValueError, match="no EV/PHEV trips"):
    ved.load_ved_csv(ice)
  with pytest.raises(ValueError, match="current_sign"):
    ved.load_ved_csv(ved_dir, current_sign=2)
  with pytest.raises(ValueError, match="resample_dt_s"):
    ved.load_ved_csv(ved_dir, resample_dt_s=0)
  assert math.isfinite(ved.load_ved_csv([ved_dir / "VED_171101_week.csv"]).y_train[0])
