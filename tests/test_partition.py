"""Partitioners: sizes, disjointness, coverage, skew, and clear errors."""
from __future__ import annotations

import numpy as np
import pytest

from fedfrac import data as data_lib
from fedfrac.data import partition as P


def labels(n=1000, classes=10, seed=0):
  return np.random.default_rng(seed).integers(0, classes, n)


def _check_disjoint(parts, n):
  allidx = np.concatenate(parts)
  assert len(allidx) == len(set(allidx.tolist()))
  assert allidx.min() >= 0 and allidx.max() < n


@pytest.mark.parametrize("scheme,kw", [("iid", {}), ("dirichlet", {"alpha": 0.3}),
                                       ("shards", {"shards_per_client": 2})])
def test_disjoint_cover_and_deterministic(scheme, kw):
  y = labels()
  parts = data_lib.partition(y, 10, scheme, seed=3, **kw)
  assert len(parts) == 10
  _check_disjoint(parts, len(y))
  again = data_lib.partition(y, 10, scheme, seed=3, **kw)
  assert all(np.array_equal(a, b) for a, b in zip(parts, again))
  other = data_lib.partition(y, 10, scheme, seed=4, **kw)
  assert not all(np.array_equal(a, b) for a, b in zip(parts, other))
  if scheme in ("iid", "dirichlet"):
    assert sum(len(p) for p in parts) == len(y)   # full coverage


def test_iid_sizes_near_equal():
  parts = data_lib.partition(labels(1003), 10, "iid", seed=0)
  sizes = [len(p) for p in parts]
  assert max(sizes) - min(sizes) <= 1 and sum(sizes) == 1003


def _mean_max_class_share(y, parts):
  shares = []
  for p in parts:
    counts = np.bincount(y[p], minlength=10)
    shares.append(counts.max() / max(counts.sum(), 1))
  return float(np.mean(shares))


def test_dirichlet_skew_grows_as_alpha_falls():
  y = labels(3000)
  skew = [np.mean([_mean_max_class_share(y, data_lib.partition(y, 10, "dirichlet",
                                                                seed=s, alpha=a))
                   for s in range(3)]) for a in (100.0, 1.0, 0.1)]
  assert skew[0] < skew[1] < skew[2]
  assert skew[0] < 0.2 and skew[2] > 0.5


def test_dirichlet_min_size_guarantee_and_impossible_request():
  y = labels(500)
  parts = data_lib.partition(y, 20, "dirichlet", seed=0, alpha=0.1, min_size=5)
  assert min(len(p) for p in parts) >= 5
  with pytest.raises(ValueError, match="num_clients=600"):
    data_lib.partition(y, 600, "dirichlet", seed=0, alpha=0.5)
  with pytest.raises(ValueError, match="alpha"):
    data_lib.partition(y, 5, "dirichlet", seed=0, alpha=0.0)


def test_shards_each_client_gets_at_most_s_labels():
  y = np.repeat(np.arange(10), 100)
  parts = data_lib.partition(y, 10, "shards", seed=1, shards_per_client=2)
  for p in parts:
    assert len(p) == 100
    assert len(np.unique(y[p])) <= 2
  with pytest.raises(ValueError, match="shards"):
    data_lib.partition(y[:10], 10, "shards", seed=0, shards_per_client=3)


def test_label_skew_follows_the_firma_rule():
  y = np.repeat(np.arange(10), 200)   # 2000 samples, 200 per class
  parts = data_lib.partition(y, 5, "label_skew", seed=0, classes_per_client=2)
  budget = max(20, 2000 // 5)
  for i, p in enumerate(parts):
    counts = np.bincount(y[p], minlength=10)
    cyc = [(i * 2 + j) % 10 for j in range(5)]
    primary, secondary = cyc[:2], cyc[2:]
    for c in range(10):
      want = (int(0.55 * budget) if c in primary else int(0.20 * budget)
              if c in secondary else int(0.03 * budget))
      # Greedy pools: a client never gets more than the rule's quota.
      assert counts[c] <= want
      if i == 0:   # the first client draws from full pools: exactly its quota
        assert counts[c] == min(want, 200)
  _check_disjoint(parts, len(y))
  with pytest.raises(ValueError, match="classes_per_client"):
    data_lib.partition(y, 5, "label_skew", seed=0, classes_per_client=11)


def test_label_skew_small_clients_drop_or_error():
  y = np.repeat(np.arange(4), 30)
  with pytest.raises(ValueError, match="min_client_size"):
    data_lib.partition(y, 6, "label_skew", seed=0, classes_per_client=1,
                       min_client_size=40)
  with pytest.warns(UserWarning, match="dropping"):
    parts = data_lib.partition(y, 6, "label_skew", seed=0, classes_per_client=1,
                               min_client_size=17, on_small="drop")
  assert 0 < len(parts) < 6 and min(len(p) for p in parts) >= 17
  with pytest.raises(ValueError, match="every client"):
    data_lib.partition(y, 6, "label_skew", seed=0, classes_per_client=1,
                       min_client_size=40, on_small="drop")


def test_natural_and_unknown_scheme():
  y = labels(60)
  groups = np.repeat(np.arange(3), 20)
  parts = data_lib.partition(y, 3, "natural", seed=0, group_ids=groups)
  assert [len(p) for p in parts] == [20, 20, 20]
  with pytest.raises(ValueError, match="scheme='bogus'"):
    data_lib.partition(y, 3, "bogus", seed=0)
  with pytest.raises(ValueError, match="num_clients=0"):
    data_lib.partition(y, 0, "iid", seed=0)


def test_test_split_follows_train_class_mix():
  y = np.repeat(np.arange(10), 100)
  parts = data_lib.partition(y, 5, "dirichlet", seed=0, alpha=0.3)
  counts = data_lib.class_counts(y, parts, 10)
  y_test = np.repeat(np.arange(10), 50)
  test_parts = data_lib.split_test_like_train(y_test, counts, seed=1)
  _check_disjoint(test_parts, len(y_test))
  assert sum(len(p) for p in test_parts) == len(y_test)
  for k in range(5):
    test_counts = np.bincount(y_test[test_parts[k]], minlength=10)
    # A client never gets test samples of a class it has no train samples of.
    assert np.all(test_counts[counts[k] == 0] == 0)
    expected = 50 * counts[k] / counts.sum(0)
    assert np.all(np.abs(test_counts - expected) <= 1.0 + 1e-9)


def test_index_table_padding():
  table, sizes = data_lib.index_table([np.array([3, 5]), np.array([7]), np.array([1, 2, 4])])
  assert table.shape == (3, 3) and sizes.tolist() == [2, 1, 3]
  assert table[1].tolist() == [7, 7, 7] and table[0].tolist() == [3, 5, 3]
