"""The regime-based non-IID BEV partition (``data.bev.regime_skew`` = α_D;
FO-RI-FedAvg paper §IV-P) on tiny hand-made fleets."""
from __future__ import annotations

import numpy as np
import pytest

from fedfrac import config as config_lib
from fedfrac.data import bev
from fedfrac_lab.reproduce import common

WINDOW, STRIDE, T_LEN = 6, 3, 9   # 2 windows per trip


def fleet(num_vehicles=6, trips_per_vehicle=40, seed=0, classes=None):
  """Trips with a per-trip constant speed (so a trip's regime is known) and noise
  elsewhere; every trip gives 2 windows."""
  rng = np.random.default_rng(seed)
  trips = []
  for k in range(num_vehicles):
    for _ in range(trips_per_vehicle):
      sig = rng.normal(size=(T_LEN, len(bev.FEATURE_NAMES)))
      sig[:, 0] = rng.uniform(0.0, 30.0)
      trips.append(bev.Trip(k, sig, rng.uniform(0, 1e4, T_LEN), 1.0))
  classes = classes or ["passenger"] * num_vehicles
  return trips, np.arange(num_vehicles), classes


def build(trips, ids, classes, **kw):
  return bev.assemble_bev_data(trips, ids, classes, window=WINDOW, stride=STRIDE,
                               seed=kw.pop("seed", 0), **kw)


def trip_owner(d):
  """trip index -> (client, split) over all windows, checking each trip has one."""
  owner = {}
  for code, s in enumerate(bev.SPLITS):
    for t, c in zip(getattr(d, f"trip_{s}").tolist(), getattr(d, f"client_{s}").tolist()):
      assert owner.setdefault(t, (c, code)) == (c, code)   # one client, one split
  return owner


def mixtures(d):
  """π̂ [K, R]: each client's share of trips per regime."""
  owner = trip_owner(d)
  mix = np.zeros((d.num_clients, d.meta["num_regimes"]))
  for t, (c, _) in owner.items():
    mix[c, d.meta["trip_regime"][t]] += 1
  return mix / mix.sum(1, keepdims=True)


def test_default_is_the_natural_per_vehicle_partition():
  trips, ids, cls = fleet(num_vehicles=4, trips_per_vehicle=10)
  ref = build(trips, ids, cls)
  for skew in (None, 0, 0.0):
    d = build(trips, ids, cls, regime_skew=skew)
    for s in bev.SPLITS:
      for a in ("x", "y", "client", "trip"):
        np.testing.assert_array_equal(getattr(d, f"{a}_{s}"), getattr(ref, f"{a}_{s}"))
    assert "regime_mixture" not in d.meta
  # Natural: each window's client is the vehicle that drove its trip.
  for t, (c, _) in trip_owner(ref).items():
    assert c == trips[t].client


@pytest.mark.parametrize("alpha", [0.05, 0.3, 100.0])
def test_regime_partition_deals_whole_trips_without_leakage(alpha):
  trips, ids, cls = fleet()
  nat = build(trips, ids, cls)
  d = build(trips, ids, cls, regime_skew=alpha)
  owner = trip_owner(d)   # asserts: every trip in one client and one split
  assert sorted(owner) == list(range(len(trips)))
  assert d.num_clients == 6
  assert np.all(np.bincount(d.client_train, minlength=6) > 0)   # nobody empty
  assert (sum(len(getattr(d, f"y_{s}")) for s in bev.SPLITS)
          == sum(len(getattr(nat, f"y_{s}")) for s in bev.SPLITS))
  np.testing.assert_array_equal(
      np.sort(np.concatenate([d.y_train, d.y_val, d.y_test])),
      np.sort(np.concatenate([nat.y_train, nat.y_val, nat.y_test])))
  tc = d.meta["trip_client"]
  assert all(owner[t][0] == tc[t] for t in owner)
  assert d.meta["regime_mixture"].shape == (6, 4)
  np.testing.assert_allclose(d.meta["regime_mixture"].sum(1), 1.0)


def test_regime_mix_is_concentrated_at_small_alpha_and_uniform_at_large():
  trips, ids, cls = fleet()
  peak = {a: [mixtures(build(trips, ids, cls, regime_skew=a, seed=s)).max(1).mean()
              for s in range(4)] for a in (0.1, 100.0, 1e4)}
  assert np.mean(peak[0.1]) > np.mean(peak[100.0]) + 0.3
  assert np.mean(peak[0.1]) > 0.7
  # Large α_D: π_k ≈ uniform and 60 trips per regime leave each client ~10 a regime.
  assert max(peak[1e4]) < 0.3 and max(peak[100.0]) < 0.35


def test_regimes_are_equal_count_mean_speed_bands_per_class():
  speed = np.array([5.0, 1.0, 3.0, 2.0, 30.0, 10.0, 20.0, 40.0])
  group = np.array(["a"] * 4 + ["b"] * 4)
  np.testing.assert_array_equal(bev.trip_regimes(speed, group, 2),
                                [1, 0, 1, 0, 1, 0, 0, 1])
  trips, ids, cls = fleet()
  d = build(trips, ids, cls, regime_skew=1.0, num_regimes=3)
  reg = d.meta["trip_regime"]
  assert np.bincount(reg).tolist() == [80, 80, 80]
  speed = np.array([tr.signals[0, 0] for tr in trips])
  assert speed[reg == 0].max() <= speed[reg == 1].min()
  assert speed[reg == 1].max() <= speed[reg == 2].min()


def test_clients_keep_their_vehicle_class():
  cls = ["passenger"] * 3 + ["bus"] * 3
  trips, ids, _ = fleet(classes=cls)
  d = build(trips, ids, cls, regime_skew=0.2)
  veh = d.meta["trip_vehicle"]
  for t, (c, _) in trip_owner(d).items():
    assert cls[veh[t]] == cls[c]
  # Clients hold trips of several vehicles of their class.
  assert max(len(set(veh[d.meta["trip_client"] == k])) for k in range(6)) > 1


def test_deterministic_for_a_seed():
  trips, ids, cls = fleet()
  a = build(trips, ids, cls, regime_skew=0.3, seed=5)
  b = build(trips, ids, cls, regime_skew=0.3, seed=5)
  c = build(trips, ids, cls, regime_skew=0.3, seed=6)
  np.testing.assert_array_equal(a.meta["trip_client"], b.meta["trip_client"])
  np.testing.assert_array_equal(a.client_train, b.client_train)
  np.testing.assert_array_equal(a.x_train, b.x_train)
  assert not np.array_equal(a.meta["trip_client"], c.meta["trip_client"])


def test_every_client_gets_a_trip_and_too_few_trips_is_one_error():
  # 5 trips, 5 clients, one regime holding all: α_D tiny would leave clients empty.
  reg = np.zeros(5, np.int64)
  tc, _ = bev.regime_partition(reg, ["p"] * 5, ["p"] * 5, 4, 0.01, seed=0)
  assert sorted(tc.tolist()) == [0, 1, 2, 3, 4]
  with pytest.raises(ValueError, match=r"data\.bev\.regime_skew=0\.3.*4 trips"):
    bev.regime_partition(reg[:4], ["p"] * 4, ["p"] * 5, 4, 0.3, seed=0)


@pytest.mark.parametrize("kw,key", [
    (dict(regime_skew=-0.1), "data.bev.regime_skew=-0.1"),
    (dict(regime_skew="0.3"), "data.bev.regime_skew='0.3'"),
    (dict(regime_skew=float("nan")), "data.bev.regime_skew=nan"),
    (dict(regime_skew=True), "data.bev.regime_skew=True"),
    (dict(regime_skew=0.3, num_regimes=1), "data.bev.num_regimes=1"),
    (dict(regime_skew=0.3, num_regimes=2.5), "data.bev.num_regimes=2.5"),
    (dict(regime_skew=0.3, holdout_clients=[1]), "data.bev.holdout_vehicles"),
])
def test_bad_values_are_rejected(kw, key):
  trips, ids, cls = fleet(num_vehicles=3, trips_per_vehicle=4)
  with pytest.raises(ValueError, match=key.replace(".", r"\.").replace("(", r"\(")):
    build(trips, ids, cls, **kw)


@pytest.mark.parametrize("key,value", [
    ("regime_skew", -1.0), ("regime_skew", float("inf")), ("num_regimes", 1),
    ("num_regimes", -2)])
def test_config_validation_names_the_key(key, value):
  c = config_lib.base_config()
  c.data.source = "synthetic_bev"
  c.data.partition = "natural"
  c.task.loss = "mse"
  c.data.bev[key] = value
  with pytest.raises(config_lib.ConfigError, match=rf"data\.bev\.{key}"):
    config_lib.validate(c)
  c.data.bev[key] = {"regime_skew": 0.3, "num_regimes": 4}[key]
  config_lib.validate(c)
  c.data.bev.regime_skew = 0.3
  c.data.bev.holdout_vehicles = (2,)
  with pytest.raises(config_lib.ConfigError, match=r"data\.bev\.holdout_vehicles"):
    config_lib.validate(c)


def test_paper_config_uses_moderate_regime_skew_and_validates():
  mod = common.config_module("bev/paper.py")
  c = mod.get_config()
  assert c.data.bev.regime_skew == mod.REGIME_SKEW_ALPHA == 0.3
  assert c.data.bev.num_regimes == 4
  config_lib.validate(c)


def test_config_reaches_the_synthetic_fleet():
  from fedfrac.data import sources
  c = config_lib.base_config()
  c.data.source, c.data.partition, c.task.loss = "synthetic_bev", "natural", "mse"
  c.data.num_clients = 4
  c.data.bev.class_mix = (1.0, 0.0, 0.0)
  c.data.bev.hours_per_vehicle = 0.5
  c.data.bev.stride = 60
  c.data.bev.regime_skew = 0.3
  c.data.bev.num_regimes = 2
  d = sources.load_bev(c.data, 1)
  assert d.meta["regime_skew"] == 0.3 and d.meta["regime_mixture"].shape == (4, 2)
  assert np.all(np.bincount(d.client_train, minlength=4) > 0)
  trip_owner(d)
  c.data.bev.regime_skew = 0.0
  assert "regime_skew" not in sources.load_bev(c.data, 1).meta


def test_counts_follow_the_mixture_quotas():
  reg = np.repeat(np.arange(4), [30, 17, 9, 44])
  tc, pi = bev.regime_partition(reg, ["p"] * reg.size, ["p"] * 5, 4, 5.0, seed=2)
  counts = np.zeros((5, 4))
  np.add.at(counts, (tc, reg), 1)
  quota = pi / pi.sum(0) * np.bincount(reg)   # n_r · π_k[r] / Σ_j π_j[r]
  assert np.all(np.abs(counts - quota) < 1)
  np.testing.assert_array_equal(counts.sum(0), np.bincount(reg))
