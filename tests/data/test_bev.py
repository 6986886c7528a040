"""Shared BEV pieces: windowing, window energy, trip splits, BEVData normalisation."""
from __future__ import annotations

import numpy as np
import pytest

from fedfrac.data import bev


def test_make_windows_energy_and_shapes():
  t_len, f = 10, 3
  sig = np.arange(t_len * f, dtype=np.float32).reshape(t_len, f)
  p = np.arange(1.0, t_len + 1) * 100.0  # W
  x, y = bev.make_windows(sig, p, dt_s=2.0, window=4, stride=3)
  assert x.shape == (3, 4, 3) and y.shape == (3,)
  for i, s in enumerate((0, 3, 6)):
    np.testing.assert_array_equal(x[i], sig[s:s + 4])
    # Left rectangle rule: sum of P_j * dt over the window's 4 samples, in Wh.
    assert np.isclose(y[i], sum(p[s:s + 4]) * 2.0 / 3600.0, rtol=1e-6)
  # Non-overlapping windows add up to the energy of the covered samples.
  _, y1 = bev.make_windows(sig, p, 1.0, window=5, stride=5)
  assert np.isclose(y1.sum(), p.sum() / 3600.0, rtol=1e-6)
  # Per-sample durations.
  dt = np.linspace(0.5, 1.5, t_len)
  _, y2 = bev.make_windows(sig, p, dt, window=t_len)
  assert np.isclose(y2[0], np.dot(p, dt) / 3600.0, rtol=1e-6)
  # Too short a trip gives no windows.
  x3, y3 = bev.make_windows(sig[:3], p[:3], 1.0, window=4)
  assert x3.shape == (0, 4, 3) and y3.shape == (0,)


def test_make_windows_rejects_bad_input():
  sig = np.zeros((10, 2))
  with pytest.raises(ValueError, match="window"):
    bev.make_windows(sig, np.zeros(10), 1.0, window=0)
  with pytest.raises(ValueError, match="stride"):
    bev.make_windows(sig, np.zeros(10), 1.0, stride=1.5)
  with pytest.raises(ValueError, match="power_w"):
    bev.make_windows(sig, np.zeros(9), 1.0, window=3)
  with pytest.raises(ValueError, match="dt_s"):
    bev.make_windows(sig, np.zeros(10), 0.0, window=3)


def test_acceleration_from_speed():
  v = np.array([0.0, 1.0, 3.0, 3.0])
  np.testing.assert_allclose(bev.acceleration_from_speed(v, 0.5), [0, 2, 4, 0])


@pytest.mark.parametrize("n,expected", [
    (0, (0, 0, 0)), (1, (1, 0, 0)), (2, (1, 0, 1)), (3, (1, 1, 1)),
    (4, (2, 1, 1)), (10, (7, 1, 2)), (20, (14, 2, 4))])
def test_split_counts(n, expected):
  assert bev.split_counts(n) == expected
  assert sum(bev.split_counts(n)) == n


def test_split_counts_validation_and_other_fractions():
  assert bev.split_counts(2, (0.5, 0.5, 0.0)) == (1, 1, 0)
  assert bev.split_counts(5, (0.0, 0.0, 1.0)) == (0, 0, 5)
  with pytest.raises(ValueError, match="fractions"):
    bev.split_counts(3, (0.5, 0.2, 0.2))


def test_split_trips_seeded_and_holdout():
  clients = np.repeat(np.arange(4), [1, 2, 3, 10])
  a = bev.split_trips(clients, seed=3)
  b = bev.split_trips(clients, seed=3)
  np.testing.assert_array_equal(a, b)
  for k, n in enumerate([1, 2, 3, 10]):
    codes = a[clients == k]
    assert tuple(np.bincount(codes, minlength=3)) == bev.split_counts(n)
  differs = any(not np.array_equal(bev.split_trips(clients, seed=s), a)
                for s in range(4, 10))
  assert differs
  h = bev.split_trips(clients, seed=3, holdout_clients=[3])
  assert np.all(h[clients == 3] == 2)


def _toy_trips(rng, k=3, trips=4, length=30, f=2):
  out = []
  for c in range(k):
    for _ in range(trips):
      sig = rng.normal(c, 1.0 + c, size=(length, f))
      out.append(bev.Trip(c, sig, rng.normal(1000.0 * (c + 1), 100.0, length), 1.0))
  return out


def test_assemble_and_normalisation_roundtrip():
  rng = np.random.default_rng(0)
  trips = _toy_trips(rng)
  d = bev.assemble_bev_data(trips, np.array([7, 8, 9]), ["ev", "bus", "truck"],
                            ("a", "b"), window=10, stride=5, seed=0)
  assert d.num_clients == 3 and d.num_features == 2
  total = sum(len(getattr(d, f"y_{s}")) for s in bev.SPLITS)
  assert total == 3 * 4 * ((30 - 10) // 5 + 1)
  n = d.normalized()
  # Train split of each client is centred (median 0) after normalisation.
  for k in range(3):
    yk = n.y_train[n.client_train == k]
    assert abs(np.median(yk)) < 1e-5
    xk = n.x_train[n.client_train == k].reshape(-1, 2)
    np.testing.assert_allclose(np.median(xk, 0), 0.0, atol=1e-5)
    q = np.percentile(xk, [75, 25], axis=0)
    np.testing.assert_allclose(q[0] - q[1], 1.0, rtol=1e-4)
  np.testing.assert_allclose(n.denormalize_y(n.y_val, n.client_val), d.y_val,
                             rtol=1e-5)
  with pytest.raises(ValueError, match="client_ids"):
    d.denormalize_y(np.zeros(3), np.array([0, 1, 5]))
  with pytest.raises(ValueError, match="vehicle_class"):
    bev.assemble_bev_data(trips, np.array([7, 8, 9]), ["ev", "car", "bus"], ("a", "b"),
                          window=10)
  with pytest.raises(ValueError, match="min_windows"):
    bev.assemble_bev_data(trips, np.array([7, 8, 9]), ["ev"] * 3, ("a", "b"),
                          window=10, min_windows=10_000)


def test_robust_stats_fallbacks():
  v = np.array([[1.0, 5.0]] * 5 + [[1.0, 9.0]])
  med, scale = bev.robust_stats(v)
  np.testing.assert_allclose(med, [1.0, 5.0])
  assert scale[0] == 1.0                              # constant: fallback to 1
  np.testing.assert_allclose(scale[1], np.std(v[:, 1]))  # IQR 0: fallback to std
