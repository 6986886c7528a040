"""``data.seed``: -1 (the default) gives each run seed its own partition draw, so n
seeds cover the partition too; a fixed value (the FIRMA ``reference_code`` configs
pin the authors' 42) puts every seed of a run on one partition, so n seeds cover
the initial model and the batch order only. Checked end to end through ``ff.run``,
on the partitions the runs of each seed really used."""
from __future__ import annotations

import numpy as np
import pytest

import fedfrac as ff


def _partitions(data_seed):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(400, 6)).astype(np.float32)
  y = np.argmax(x[:, :4], axis=1)
  config = ff.base_config()
  config.rounds = 1
  config.seeds = (0, 1)
  config.data.num_clients = 4
  config.data.alpha = 0.5
  config.data.seed = data_seed
  config.client.local_epochs = 1
  results = ff.run(config, data=(x, y))
  return [results.federated_data(s) for s in (0, 1)]


def _same(a, b):
  return (np.array_equal(np.asarray(a.client_size), np.asarray(b.client_size))
          and np.array_equal(np.asarray(a.client_index), np.asarray(b.client_index)))


def test_each_seed_draws_its_own_partition_with_data_seed_minus_one():
  first, second = _partitions(-1)
  assert not _same(first, second)
  # the same rows, dealt differently: the data is the same, the partition is not
  assert np.asarray(first.client_size).sum() == np.asarray(second.client_size).sum()


@pytest.mark.parametrize("pinned", [42])
def test_every_seed_shares_the_partition_with_a_pinned_data_seed(pinned):
  first, second = _partitions(pinned)
  assert _same(first, second)
