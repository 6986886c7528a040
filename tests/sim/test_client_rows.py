"""``engine.shard_client_state``: client state, client tables and train rows
sharded along the ``clients`` mesh axis give the results of the replicated
engine, and each device holds K'/D client rows (K' = K padded to a multiple of
D). The 2-device runs happen in a subprocess started with
``--xla_force_host_platform_device_count=2`` (JAX fixes its device count at
start-up)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from fedfrac.config import ConfigError
from tests import helpers
from fedfrac.sim import client_rows

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = r"""
import json, tempfile
import jax
import numpy as np
from fedfrac import algorithms
from fedfrac.runner.checkpoint import Checkpointer
from tests import helpers

assert jax.device_count() == 2, jax.devices()
fed = helpers.unequal_digits(sizes=(13, 40, 75, 22, 30))   # K = 5: one dummy row


def leaves(tree):
  return [np.asarray(x, float) for x in jax.tree.leaves(tree)]


def max_diff(a, b):
  return max((float(np.max(np.abs(x - y))) for x, y in zip(a, b) if x.size), default=0.0)


def rows_per_device(tree):
  # Rows of each per-client leaf on each device, from the arrays' own shards.
  return sorted({(x.shape[0], tuple(sorted(s.data.shape[0] for s in x.addressable_shards)))
                 for x in jax.tree.leaves(tree)})



def rows_on_owner(sim):
  # Every client's train rows lie in the row block of the device holding its state.
  index = np.asarray(sim.arrays["client_index"])[:sim.num_clients]
  size = np.asarray(sim.arrays["client_size"])[:sim.num_clients]
  per_row_block = sim.arrays["x"].shape[0] // 2
  per_client_block = sim.client_rows.padded_clients // 2
  return all(bool(np.all(index[k, :size[k]] // per_row_block == k // per_client_block))
             for k in range(sim.num_clients))


out = {}
for name, parallelism in (("fedavg", "vmap"), ("scaffold", "map")):
  sims = {shard: helpers.simulation(fed, lambda ctx: algorithms.make(name, ctx),
                                    {"batch_size": 16, "lr": 0.05}, rounds=3,
                                    participation=0.6, parallelism=parallelism,
                                    shard_clients=True, shard_client_state=shard)
          for shard in (False, True)}
  a, b = sims[False], sims[True]
  assert a.client_rows is None and b.client_rows is not None
  # Chunks of one round (one compiled program per simulation).
  sa, ma0 = a.run_chunk(a.init(2), 1)
  sb, mb0 = b.run_chunk(b.init(2), 1)
  sa, ma = a.run_chunk(sa, 1)
  sb, mb = b.run_chunk(sb, 1)
  ma = {k: np.concatenate([ma0[k], ma[k]]) for k in ma}
  mb = {k: np.concatenate([mb0[k], mb[k]]) for k in mb}
  ea, eb = a.evaluate(sa), b.evaluate(sb)
  keys = sorted(set(ma) - {"executed_steps"})
  ha, hb = a.host_state(sa), b.host_state(sb)
  # Checkpoint round trip: K rows on disk, placed back sharded, one more round.
  with tempfile.TemporaryDirectory() as d:
    ck = Checkpointer(d)
    ck.save(2, hb, {})
    restored, _ = ck.restore(2, b.host_state(b.init(2)))
  rb = b.place_state(restored)
  sa4, ma4 = a.run_chunk(sa, 1)
  sb4, mb4 = b.run_chunk(rb, 1)
  out[name] = {
      "metric_keys_equal": keys == sorted(set(mb) - {"executed_steps"}),
      "same_ids": bool(np.array_equal(ma["clients/ids"], mb["clients/ids"])),
      "metric_diff": max_diff([np.asarray(ma[k], float) for k in keys],
                              [np.asarray(mb[k], float) for k in keys]),
      "eval_diff": max_diff([np.asarray(ea[k], float) for k in sorted(ea)],
                            [np.asarray(eb[k], float) for k in sorted(ea)]),
      "server_diff": max_diff(leaves(ha.server), leaves(hb.server)),
      "clients_diff": max_diff(leaves(ha.clients), leaves(hb.clients)),
      "host_shapes_equal": [x.shape for x in jax.tree.leaves(ha)]
                           == [x.shape for x in jax.tree.leaves(hb)],
      "after_restore_diff": max_diff(leaves(a.host_state(sa4)), leaves(b.host_state(sb4))),
      "num_client_leaves": len(jax.tree.leaves(sb.clients)),
      "client_scale": max((float(np.max(np.abs(x))) for x in leaves(hb.clients)),
                          default=0.0),
      "rows_after_round": rows_per_device((sb.clients, sb.available)),
      "rows_after_restore": rows_per_device((rb.clients, rb.available)),
      "rows_after_restore_round": rows_per_device((sb4.clients, sb4.available)),
      "table_rows": rows_per_device([b.arrays[k] for k in ("client_index", "client_size",
                                                           "num_steps")]),
      "data_rows": rows_per_device([b.arrays["x"], b.arrays["y"]]),
      "rows_on_owner": rows_on_owner(b),
      "replicated_rows": rows_per_device((sa.clients, sa.available)),
      "train_loss": np.asarray(ma["train_loss"], float).tolist(),
  }
print("RESULT " + json.dumps(out))
"""


def test_sharded_client_state_equals_replicated_on_two_devices():
  result = helpers.run_on_two_cpu_devices(SCRIPT)
  for name, r in result.items():
    assert r["metric_keys_equal"] and r["same_ids"] and r["host_shapes_equal"], (name, r)
    # Same per-client programs; only cross-device sums (the gathered cohort's
    # all-reduce adds zeros; evaluation means over clients) may round differently.
    for key in ("metric_diff", "eval_diff", "server_diff", "clients_diff",
                "after_restore_diff"):
      assert r[key] <= 1e-6, (name, key, r)
    assert r["train_loss"][-1] < r["train_loss"][0], (name, r["train_loss"])
    # K = 5 padded to 6: 3 client rows on each of the 2 devices, after a round,
    # after a checkpoint restore and after a round from the restored state.
    for key in ("rows_after_round", "rows_after_restore", "rows_after_restore_round",
                "table_rows"):
      assert r[key] and all(full == 6 and shards == [3, 3] for full, shards in r[key]), \
          (name, key, r[key])
    # Clients 0-2 (13 + 40 + 75 rows) on device 0, clients 3-4 (22 + 30) on
    # device 1: 2 x 128 rows, each client's rows on its own device.
    assert r["data_rows"] == [[256, [128, 128]]], r["data_rows"]
    assert r["rows_on_owner"], r
    # The replicated engine holds all 5 rows on each device.
    assert all(shards == [5, 5] for _, shards in r["replicated_rows"]), r
  assert result["scaffold"]["num_client_leaves"] > 0
  assert result["scaffold"]["client_scale"] > 1e-4      # control variates moved


def test_rows_by_client_keeps_every_lookup():
  rng = np.random.default_rng(0)
  n, k, n_max = 25, 4, 7
  x = rng.normal(size=(n, 3)).astype(np.float32)
  y = np.arange(n, dtype=np.int32)
  rows = rng.permutation(n)
  size = np.array([3, 5, 6, 7], np.int32)           # 21 of 25 rows owned
  index = np.zeros((k, n_max), np.int32)
  start = 0
  for c in range(k):
    index[c, :size[c]] = rows[start:start + size[c]]
    index[c, size[c]:] = rows[start]                 # padding repeats a row
    start += size[c]
  arrays = {"x": x, "y": y, "client_index": index, "client_size": size}
  # 1 device: 21 rows, client by client. 2 devices: clients 0-1 (8 rows) and
  # 2-3 (13 rows), each device's block padded to 13 rows.
  for devices, total, offsets in ((1, 21, (0, 3, 8, 14)), (2, 26, (0, 3, 13, 19))):
    out = client_rows.rows_by_client(arrays, devices)
    assert out["x"].shape == (total, 3), (devices, out["x"].shape)
    np.testing.assert_array_equal(out["x"][out["client_index"]], x[index])
    np.testing.assert_array_equal(out["y"][out["client_index"]], y[index])
    for c in range(k):
      got = sorted(out["client_index"][c, :size[c]])
      assert got == list(range(offsets[c], offsets[c] + size[c])), (devices, c, got)
  ordered = {"x": x[:8], "y": y[:8], "client_index": np.arange(8).reshape(4, 2),
             "client_size": np.full(4, 2)}
  assert client_rows.rows_by_client(ordered, 2) is ordered


def test_shard_client_state_rules():
  client_rows.check_shard_client_state(True, "auto")
  client_rows.check_shard_client_state(False, False)
  with pytest.raises(ValueError, match=r"engine.shard_client_state='yes': allowed "
                                       r"values are True, False"):
    client_rows.check_shard_client_state("yes", True)
  with pytest.raises(ValueError, match=r"engine.shard_client_state=True: needs "
                                       r"engine.shard_clients=True or 'auto'"):
    client_rows.check_shard_client_state(True, False)
  from fedfrac.config import validate
  from tests import helpers
  import ml_collections
  c = helpers.tiny_config()
  # shard_clients is typed str ("auto") in the base config: rebuild the section.
  c.engine = ml_collections.ConfigDict({**c.engine.to_dict(), "shard_clients": False,
                                        "shard_client_state": True})
  with pytest.raises(ConfigError, match=r"config.engine.shard_client_state=True"):
    validate(c)
