"""data.compat='reference_code': the FIRMA authors' digits split, partitions and
independent test split, against literal re-statements of their procedure."""
from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest

from fedfrac import data as data_lib
from fedfrac.config import base_config

partition = importlib.import_module("fedfrac.data.partition")
federated = importlib.import_module("fedfrac.data.federated")


def literal_dirichlet(labels, n, alpha, num_classes, seed):
  """The authors' loop, written out with Python lists."""
  rng = np.random.default_rng(seed)
  by_class = [np.where(labels == c)[0] for c in range(num_classes)]
  clients = [[] for _ in range(n)]
  for c in range(num_classes):
    idx = rng.permutation(by_class[c])
    props = rng.dirichlet(np.ones(n) * alpha)
    sizes = (props * len(idx)).astype(int)
    sizes[-1] = len(idx) - sizes[:-1].sum()
    start = 0
    for i, size in enumerate(sizes):
      clients[i].extend(idx[start:start + size].tolist())
      start += size
  return clients


def literal_label_skew(labels, n, k, num_classes, seed):
  rng = np.random.default_rng(seed)
  pools = [list(np.where(labels == c)[0]) for c in range(num_classes)]
  for pool in pools:
    rng.shuffle(pool)
  cyc = list(range(num_classes)) * (n * (2 * k + 1) // num_classes + 2)
  clients = [[] for _ in range(n)]
  for i in range(n):
    budget = max(20, len(labels) // n)
    primary, secondary = cyc[i * k:i * k + k], cyc[i * k + k:i * k + 2 * k + 1]
    groups = [(primary, 0.55), (secondary, 0.20),
              ([c for c in range(num_classes) if c not in primary + secondary], 0.03)]
    for classes, share in groups:
      want = max(1, int(share * budget))
      for c in classes:
        clients[i] += pools[c][:want]
        pools[c] = pools[c][want:]
  return clients


@pytest.mark.parametrize("alpha", [0.1, 0.8])
def test_dirichlet_reference_equals_the_authors_loop(alpha):
  labels = np.random.default_rng(3).integers(0, 10, 700)
  got = partition.dirichlet_reference(labels, 5, 42, alpha, 10)
  want = literal_dirichlet(labels, 5, alpha, 10, 42)
  assert [p.tolist() for p in got] == want


@pytest.mark.parametrize("k", [1, 2, 3])
def test_label_skew_parts_equal_the_authors_loop(k):
  labels = np.random.default_rng(4).integers(0, 10, 900)
  got = partition.label_skew_parts(labels, 5, 42, k, min_take=1)
  want = literal_label_skew(labels, 5, k, 10, 42)
  assert [sorted(p.tolist()) for p in got] == [sorted(w) for w in want]


def test_digits_permutation_split_is_the_authors():
  ds = data_lib.sklearn_digits(0.2, 42, split="permutation")
  from sklearn.datasets import load_digits
  raw = load_digits()
  perm = np.random.default_rng(42).permutation(len(raw.target))
  assert ds.x_train.shape[0] == int(0.8 * 1797) == 1437
  np.testing.assert_array_equal(ds.y_train, raw.target[perm[:1437]])
  np.testing.assert_allclose(ds.x_train.reshape(1437, 64), raw.data[perm[:1437]] / 16.0)
  with pytest.raises(ValueError, match="split"):
    data_lib.sklearn_digits(0.2, 42, split="random")


def reference_data_cfg(**kw):
  c = base_config().data
  c.compat, c.seed, c.split_seed, c.num_clients = "reference_code", 42, 42, 5
  for k, v in kw.items():
    c[k] = v
  return c


def test_reference_pipeline_splits_test_independently_and_drops_small_clients():
  c = reference_data_cfg(partition="dirichlet", alpha=0.1)
  fed = data_lib.build(c, seed=7)           # data.seed = 42 fixes the partition
  ds = data_lib.sklearn_digits(0.2, 42, split="permutation")
  want_tr = literal_dirichlet(ds.y_train, 5, 0.1, 10, 42)
  want_te = literal_dirichlet(ds.y_test, 5, 0.1, 10, 42)
  for k in range(5):
    assert sorted(fed.client_index[k, :fed.client_size[k]].tolist()) == sorted(want_tr[k])
    assert sorted(fed.client_test_index[k, :fed.client_test_size[k]].tolist()) == \
        sorted(want_te[k])
  # Independent test split: some client's test classes differ from its train classes.
  mismatch = [set(ds.y_test[want_te[k]]) - set(ds.y_train[want_tr[k]]) for k in range(5)]
  assert any(mismatch)
  c = reference_data_cfg(partition="label_skew", classes_per_client=3)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    fed = data_lib.build(c, seed=0)
  assert fed.num_clients == 3 and fed.client_size.min() >= 64
  assert any("dropping clients [3, 4]" in str(w.message) for w in caught)


def test_positional_test_pairing_after_a_middle_client_is_dropped(monkeypatch):
  ds = data_lib.Dataset("toy", np.zeros((6, 1), np.float32), np.zeros(6, np.int32),
                        np.zeros((3, 1), np.float32), np.zeros(3, np.int32), 1)
  train = [np.array([0, 1]), np.array([2]), np.array([3, 4, 5])]
  test = [np.array([0]), np.array([1]), np.array([2])]
  monkeypatch.setattr(federated.partition_lib, "label_skew_parts",
                      lambda labels, *a, **k: train if len(labels) == 6 else test)
  c = reference_data_cfg(partition="label_skew", num_clients=3, min_client_size=2)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    tr, te = federated.reference_code_parts(ds, c, 42)
  # Client 1 is dropped; as in the authors' code the survivors take test splits 0, 1.
  assert [p.tolist() for p in tr] == [[0, 1], [3, 4, 5]]
  assert [p.tolist() for p in te] == [[0], [1]]
  assert any("paired with another client" in str(w.message) for w in caught)


def test_pad_tables_keeps_rows_valid():
  fed = data_lib.build(reference_data_cfg(partition="iid"), seed=0)
  padded = federated.pad_tables(fed, fed.client_index.shape[1] + 7,
                                fed.client_test_index.shape[1] + 3)
  assert padded.client_index.shape[1] == fed.client_index.shape[1] + 7
  np.testing.assert_array_equal(padded.client_index[:, :fed.client_index.shape[1]],
                                fed.client_index)
  np.testing.assert_array_equal(padded.client_index[:, -1], fed.client_index[:, 0])
  with pytest.raises(ValueError, match="smaller"):
    federated.pad_tables(fed, 1, 1)
