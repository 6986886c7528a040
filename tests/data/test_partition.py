"""Partitioners: sizes, disjointness, coverage, skew, and clear errors."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

from fedfrac import data as data_lib

# The module itself (``fedfrac.data.partition`` is also the public function).
P = importlib.import_module("fedfrac.data.partition")


def labels(n=1000, classes=10, seed=0):
  return np.random.default_rng(seed).integers(0, classes, n)


def _check_disjoint(parts, n):
  allidx = np.concatenate(parts)
  assert len(allidx) == len(set(allidx.tolist()))
  assert allidx.min() >= 0 and allidx.max() < n


@pytest.mark.parametrize("scheme,kw", [("iid", {}), ("dirichlet", {"alpha": 0.3}),
                                       ("shards", {"shards_per_client": 2}),
                                       ("label_skew", {"classes_per_client": 3}),
                                       ("pathological", {"level": "mild"}),
                                       ("pathological", {"level": "moderate"}),
                                       ("pathological", {"level": "severe"})])
def test_disjoint_cover_and_deterministic(scheme, kw):
  y = labels()
  parts = data_lib.partition(y, 10, scheme, seed=3, **kw)
  assert len(parts) == 10
  _check_disjoint(parts, len(y))
  again = data_lib.partition(y, 10, scheme, seed=3, **kw)
  assert all(np.array_equal(a, b) for a, b in zip(parts, again))
  other = data_lib.partition(y, 10, scheme, seed=4, **kw)
  assert not all(np.array_equal(a, b) for a, b in zip(parts, other))
  if scheme in ("iid", "dirichlet", "label_skew") or kw.get("level") == "mild":
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


def test_label_skew_reference_code_follows_the_authors_greedy_rule():
  y = np.repeat(np.arange(10), 200)   # 2000 samples, 200 per class
  parts = data_lib.partition(y, 5, "label_skew", seed=0, classes_per_client=2,
                             rule="reference_code")
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
  with pytest.raises(ValueError, match="rule='bogus'"):
    data_lib.partition(y, 5, "label_skew", seed=0, rule="bogus")


def digits_like_labels():
  """1,437 labels, about 144 per class (the size of the 80 % digits train split)."""
  counts = [142, 146, 142, 146, 145, 145, 145, 143, 139, 144]
  return np.random.default_rng(0).permutation(np.repeat(np.arange(10), counts))


@pytest.mark.parametrize("k", [1, 2, 3])
def test_label_skew_paper_gives_every_one_of_five_clients_data(k):
  """FIRMA §3.5 with N = 5 on the 1,437 MNIST-1797 train samples: five
  non-empty clients (the authors' greedy rule leaves K = 3 with 0 and ~22)."""
  y = digits_like_labels()
  parts = data_lib.partition(y, 5, "label_skew", seed=0, classes_per_client=k)
  assert len(parts) == 5 and min(len(p) for p in parts) >= 64
  assert sum(len(p) for p in parts) == len(y)
  _check_disjoint(parts, len(y))
  if k == 3:
    greedy = P.label_skew_parts(y, 5, 0, 3)
    assert min(len(p) for p in greedy) < 64
    with pytest.warns(UserWarning, match="dropping"):
      kept = data_lib.partition(y, 5, "label_skew", seed=0, classes_per_client=3,
                                rule="reference_code", on_small="drop")
    assert len(kept) < 5


def test_label_skew_paper_target_mix_and_realised_roles():
  mix = P.label_skew_target_mix(5, 10, 3)
  roles = P.label_skew_roles(5, 10, 3)
  np.testing.assert_allclose(mix.sum(1), 1.0)
  assert ((roles == 2).sum(1) == 3).all() and ((roles == 1).sum(1) == 4).all()
  np.testing.assert_allclose(mix[roles == 0], 0.03)                 # §3.5: 3 % minority
  np.testing.assert_allclose(mix[roles == 2] / mix[roles == 1][0], 0.55 / 0.20)
  y = np.repeat(np.arange(10), 300)
  parts = data_lib.partition(y, 5, "label_skew", seed=1, classes_per_client=3)
  counts = P.class_counts(y, parts, 10)
  for i in range(5):   # each client's primary classes are its largest ones
    top = set(np.argsort(-counts[i], kind="stable")[:3].tolist())
    assert top == set(np.flatnonzero(roles[i] == 2).tolist())
  with pytest.raises(ValueError, match="minority_share"):
    P.label_skew_target_mix(2, 40, 1)


def test_pathological_levels_follow_the_fofedavg_appendix():
  y = np.repeat(np.arange(10), 200)   # 2000 samples, 200 per class
  mild = data_lib.partition(y, 10, "pathological", seed=0, level="mild")
  moderate = data_lib.partition(y, 10, "pathological", seed=0, level="moderate")
  severe = data_lib.partition(y, 10, "pathological", seed=0, level="severe")
  for p in mild:       # 2 class-balanced shards: every class, 20 of each
    np.testing.assert_array_equal(np.bincount(y[p], minlength=10), 20)
  for p in moderate:   # 2 shards x 4 label-sorted pieces of 25: at most 8 classes
    assert len(p) == 200 and len(np.unique(y[p])) <= 8
  for p in severe:     # 1 label-sorted shard: 1-2 classes
    assert len(p) == 200 and len(np.unique(y[p])) <= 2
  coverage = [np.mean([len(np.unique(y[p])) for p in parts])
              for parts in (severe, moderate, mild)]
  assert coverage[0] < coverage[1] < coverage[2] == 10
  with pytest.raises(ValueError, match="level='extreme'"):
    data_lib.partition(y, 10, "pathological", seed=0, level="extreme")
  assert "pathological" in P.SCHEME_DESCRIPTIONS


def test_label_skew_small_clients_drop_or_error():
  y = np.repeat(np.arange(4), 30)
  with pytest.raises(ValueError, match="min_client_size"):
    data_lib.partition(y, 6, "label_skew", seed=0, classes_per_client=1,
                       rule="reference_code",
                       min_client_size=40)
  with pytest.warns(UserWarning, match="dropping"):
    parts = data_lib.partition(y, 6, "label_skew", seed=0, classes_per_client=1,
                       rule="reference_code",
                               min_client_size=17, on_small="drop")
  assert 0 < len(parts) < 6 and min(len(p) for p in parts) >= 17
  with pytest.raises(ValueError, match="every client"):
    data_lib.partition(y, 6, "label_skew", seed=0, classes_per_client=1,
                       rule="reference_code",
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


def test_partition_is_a_function_and_its_module_is_reachable_by_its_name():
  # ``fedfrac.data.partition`` is an ordinary function; the module of the schemes
  # is imported by its name, as an ordinary module (no callable module).
  import inspect
  import sys
  from fedfrac.data import partition
  from fedfrac.data.partition import SCHEME_DESCRIPTIONS, dirichlet
  module = sys.modules["fedfrac.data.partition"]
  assert inspect.isfunction(partition) and partition is module.partition
  assert type(module) is type(sys) and not callable(module)
  assert module.dirichlet is dirichlet and SCHEME_DESCRIPTIONS
  y = labels(200)
  assert [p.tolist() for p in partition(y, 4, "iid", seed=0)] == \
      [p.tolist() for p in module.partition(y, 4, "iid", seed=0)]


@pytest.mark.parametrize("scheme,kw", [("dirichlet", {"alpha": 0.5}),
                                       ("label_skew", {"min_client_size": 1}),
                                       ("shards", {})])
def test_labels_must_be_non_negative_integers(scheme, kw):
  # Row 9: -1 labels were silently dropped; float labels gave a misleading error.
  y = labels(600)
  y[5] = -1
  with pytest.raises(ValueError, match="non-negative integers; got -1"):
    data_lib.partition(y, 4, scheme, seed=0, **kw)
  with pytest.raises(ValueError, match=r"non-negative integers; got float64 values such "
                                       r"as \d+\.5$"):
    data_lib.partition(labels(600) + 0.5, 4, scheme, seed=0, **kw)


def test_bad_seed_and_alpha_are_one_line():
  with pytest.raises(ValueError, match="seed=-5: must be an integer >= 0"):
    data_lib.partition(labels(100), 4, "iid", seed=-5)
  with pytest.raises(ValueError, match="alpha='0.5': Dirichlet concentration must be a "
                                       "number > 0"):
    data_lib.partition(labels(100), 4, "dirichlet", seed=0, alpha="0.5")


@pytest.mark.parametrize("labels,match", [
    ([0, 1, 5], r"^class_counts: labels span 0\.\.5; expected class labels in 0\.\.2 "
                r"\(num_classes=3\)$"),
    ([0, -1, 2], r"^class_counts: labels span -1\.\.2; expected class labels in 0\.\.2"),
    ([0.0, 1.0, 2.0], r"^class_counts: labels have dtype float64; expected integer"),
])
def test_class_counts_refuses_labels_outside_the_classes(labels, match):
  """Labels past C-1 gave extra columns (a [K, 6] table for 3 classes), then a
  NumPy shape error further on."""
  with pytest.raises(ValueError, match=match):
    data_lib.class_counts(np.asarray(labels), [np.arange(2), np.arange(1, 3)], 3)
  counts = data_lib.class_counts(np.asarray([0, 1, 2]), [np.arange(2), np.arange(1, 3)], 3)
  assert counts.tolist() == [[1, 1, 0], [0, 1, 1]]
