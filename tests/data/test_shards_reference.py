"""Partition ``shards_reference``: the Kuramoto-FedAvg authors' shard dealing,
against a transcription of their ``sharding_partition`` (datasetter.py) drawn from
the global generators exactly as their ``main.py`` seeds them."""
from __future__ import annotations

import importlib
import random
import re

import numpy as np
import pytest

from fedfrac import data as data_lib
from fedfrac.data import shards_reference as SR

P = importlib.import_module("fedfrac.data.partition")


def their_sharding(all_targets, n_clients, shard_per_user, seed=19940817):
  """A transcription of the authors' train-label dealing: ``np.random.seed`` and
  ``random.seed`` as in ``_get_setups``, then ``sharding_partition``'s steps on
  the global generators. Returns ``({client: indices}, rand_set_all)``."""
  np_state, py_state = np.random.get_state(), random.getstate()
  try:
    np.random.seed(seed)
    random.seed(seed)
    idxs_dict = {}
    for i in range(len(all_targets)):
      idxs_dict.setdefault(int(all_targets[i]), []).append(i)
    num_classes = len(np.unique(all_targets))
    shard_per_class = int(shard_per_user * n_clients / num_classes)
    for label in idxs_dict.keys():
      x = idxs_dict[label]
      num_leftover = len(x) % shard_per_class
      leftover = x[-num_leftover:] if num_leftover > 0 else []
      x = np.array(x[:-num_leftover]) if num_leftover > 0 else np.array(x)
      x = list(x.reshape((shard_per_class, -1)))
      for i, idx in enumerate(leftover):
        x[i] = np.concatenate([x[i], [idx]])
      idxs_dict[label] = x
    rand_set_all = list(range(num_classes)) * shard_per_class
    random.shuffle(rand_set_all)
    rand_set_all = np.array(rand_set_all).reshape((n_clients, -1))
    net_dataidx_map = {}
    for i in range(n_clients):
      rand_set = []
      for label in rand_set_all[i]:
        idx = np.random.choice(len(idxs_dict[label]), replace=False)
        rand_set.append(idxs_dict[label].pop(idx))
      net_dataidx_map[i] = np.concatenate(rand_set).astype("int")
    return net_dataidx_map, rand_set_all
  finally:
    np.random.set_state(np_state)
    random.setstate(py_state)


def uneven_labels(n=997, classes=10, seed=0):
  """Classes of different sizes, in mixed order (leftovers in every class)."""
  return np.random.default_rng(seed).integers(0, classes, n)


@pytest.mark.parametrize("k,s", [(10, 3), (20, 5), (10, 5), (20, 3), (10, 10), (5, 2)])
def test_same_clients_and_order_as_their_code(k, s):
  y = uneven_labels()
  theirs, their_rows = their_sharding(y, k, s)
  parts, rows = SR.deal(y, k, SR.AUTHORS_SEED, s)
  np.testing.assert_array_equal(rows, their_rows)
  assert len(parts) == len(theirs) == k
  for i in range(k):
    np.testing.assert_array_equal(parts[i], theirs[i])   # same indices, same order
  # the scheme: the same clients, sorted; every index dealt once
  sorted_parts = data_lib.partition(y, k, "shards_reference", SR.AUTHORS_SEED,
                                    shards_per_client=s)
  for i in range(k):
    np.testing.assert_array_equal(sorted_parts[i], np.sort(theirs[i]))
  np.testing.assert_array_equal(np.sort(np.concatenate(sorted_parts)), np.arange(y.size))


def test_another_seed_and_a_sorted_label_array_match_too():
  y = np.repeat(np.arange(10), 30)   # sorted, equal classes: no leftovers
  theirs, _ = their_sharding(y, 10, 3, seed=7)
  parts, _ = SR.deal(y, 10, 7, 3)
  assert all(np.array_equal(parts[i], theirs[i]) for i in range(10))
  other, _ = SR.deal(y, 10, 8, 3)
  assert not all(np.array_equal(a, b) for a, b in zip(parts, other))


def test_a_client_can_hold_two_shards_of_one_class():
  """The departure from ``shards``: some client's label row repeats a class
  (found among a few seeds at K=10, s=3), and shard sizes follow the class sizes."""
  repeats = [seed for seed in range(20)
             if any(len(set(r)) < len(r) for r in SR.deal(uneven_labels(), 10, seed, 3)[1])]
  assert repeats
  y = uneven_labels()
  parts, rows = SR.deal(y, 10, SR.AUTHORS_SEED, 3)
  counts = np.bincount(y, minlength=10)
  for part, row in zip(parts, rows):
    whole = sum(counts[c] // 3 for c in row)      # spc = floor(3 * 10 / 10) = 3
    assert whole <= part.size <= whole + len(row)  # + at most one leftover a shard


def test_fewer_shards_than_s_when_their_reshape_allows_it():
  y = uneven_labels()
  with pytest.warns(UserWarning, match="gives 4 shards per client, not 5"):
    parts, rows = SR.deal(y, 5, 1, 5)       # floor(25/10) = 2 per class, 20 / 5 = 4
  theirs, _ = their_sharding(y, 5, 5, seed=1)
  assert rows.shape == (5, 4)
  assert all(np.array_equal(parts[i], theirs[i]) for i in range(5))


@pytest.mark.parametrize("labels,k,s,message", [
    (np.repeat(np.arange(10), 5), 3, 4, "do not deal evenly to 3 clients"),
    (np.repeat(np.arange(10), 5), 2, 2, "gives floor(s*K/C) = 0 shards per class"),
    (np.repeat([0, 1, 3], 10), 3, 1, "needs every class 0..C-1 present"),
    (np.repeat(np.arange(10), 2), 10, 3, "class 0 has 2 samples, fewer than the 3"),
    (np.repeat(np.arange(10), 5), 0, 3, "data.num_clients=0: must be an integer >= 1"),
    (np.repeat(np.arange(10), 5).reshape(10, 5), 10, 3, "1-D label array"),
])
def test_impossible_requests_are_one_clear_error(labels, k, s, message):
  with pytest.raises(ValueError, match=re.escape(message)):
    data_lib.partition(labels, k, "shards_reference", 0, shards_per_client=s)


def test_registered_with_the_schemes_and_the_data_options():
  from fedfrac.data import federated
  assert "shards_reference" in P.SCHEMES
  assert federated.PARTITION_OPTIONS["shards_reference"] == ("shards_per_client",)
