"""The million-client bench's pieces on a small population: data built for all
clients at once, bytes per client from shapes, a SCAFFOLD round that trains."""
from __future__ import annotations

import numpy as np

from fedfrac_lab.bench import million


def test_synthetic_population_layout():
  fed = million.synthetic_population(50, per_client=4, dim=6, classes=3, seed=1)
  assert fed.num_clients == 50
  assert fed.x_train.shape == (200, 6) and fed.y_train.shape == (200,)
  # client k owns rows 4k .. 4k+3
  np.testing.assert_array_equal(fed.client_index[7], [28, 29, 30, 31])
  assert set(np.unique(fed.y_train)) <= {0, 1, 2}
  assert len(np.unique(fed.y_train)) > 1
  np.testing.assert_array_equal(fed.class_counts.sum(axis=1), 4)
  # Clients differ (their own u_k, v_k): per-client feature means spread out.
  means = fed.x_train.reshape(50, 4, 6).mean(axis=1)
  assert means[:, 0].std() > 0.5


def test_bytes_per_client_and_training():
  row = million.measure(400, cohort=40, repeats=1, rounds_per_call=3)
  per = row["bytes_per_client"]
  dim, classes, n = 20, 5, 8
  # SCAFFOLD: one control variate (W, b) per client, float32, + availability flag
  assert per["state"] == (dim * classes + classes) * 4 + 1
  assert per["data"] == n * (dim * 4 + 4)
  assert per["total"] == per["state"] + per["index"] + per["data"]
  assert row["devices"] == 1 and row["s_per_round"] > 0
  assert row["device0_bytes"] >= per["total"] * 400
  assert million.largest_population(per["total"], 20e9) == int(20e9 // per["total"])


def test_sharded_state_row_on_one_device():
  """``--shard-client-state`` on one device: the arrays are placed as the sharded
  engine places them (all on device 0), the run trains, and the bytes held are
  read from the arrays' shards."""
  row = million.measure(400, cohort=40, repeats=1, rounds_per_call=2, shard_state=True)
  per = row["bytes_per_client"]
  assert row["shard_client_state"] and row["devices"] == 1
  assert row["device_bytes"] == [row["device0_bytes"]]
  assert row["device_bytes_after_rounds"] == row["device_bytes"]
  assert row["device0_bytes"] >= per["total"] * 400
  assert row["chunk_argument_bytes"] is None or row["chunk_argument_bytes"] > 0
