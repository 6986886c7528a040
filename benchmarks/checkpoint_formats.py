"""Save + restore time of one run's checkpoint: fedfrac's verified steps
(:mod:`fedfrac.runner.checkpoint`: ``state.npz``, ``history.json`` and a
manifest of SHA-256 sums, fsynced, one rename) against orbax-checkpoint's
``PyTreeCheckpointer`` and ``StandardCheckpointer``, and whether each gives the
state back bit for bit (every leaf's dtype, shape and bytes).

Two states: the quickstart's (``ff.base_config()``: digits, the MLP, FedAvg) and
a larger CNN's (``cnn_cifar``, SCAFFOLD over 100 clients, whose control variates
add a row per client), both as a checkpoint holds them (host arrays).

  PYTHONPATH=. python benchmarks/checkpoint_formats.py --repeats=5

Each repeat writes a new step and restores it (a resumed process verifies and
reads it once); the medians of save, restore and their sum are printed, per
format, in seconds.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

import jax
import ml_collections
import numpy as np

import fedfrac as ff
from fedfrac import config_base
from fedfrac import data as data_lib
from fedfrac.runner import factories
from fedfrac.runner.checkpoint import Checkpointer, named_leaves


def quickstart_state():
  config = ff.base_config()
  return _state(config, None)


def cnn_state():
  config = ff.base_config()
  config.model.name = "cnn_cifar"
  config.data.num_clients = 100
  config.methods = ml_collections.ConfigDict({"scaffold": {"name": "scaffold"}})
  rng = np.random.default_rng(0)
  images = lambda n: rng.random((n, 32, 32, 3), dtype=np.float32)   # noqa: E731
  labels = lambda n: rng.integers(0, 10, n).astype(np.int32)      # noqa: E731
  dataset = data_lib.Dataset("cifar-shaped", images(5000), labels(5000), images(500),
                             labels(500), 10)
  return _state(config, dataset)


def _state(config, dataset):
  fed = data_lib.build(config.data, 0, dataset=dataset)
  sim = factories.build_simulation(config, config_base.method_labels(config)[0], fed)
  return sim.host_state(sim.init(0))


def same_bits(a, b) -> bool:
  la, lb = named_leaves(a), named_leaves(b)
  return set(la) == set(lb) and all(
      np.asarray(la[k]).dtype == np.asarray(lb[k]).dtype
      and np.asarray(la[k]).shape == np.asarray(lb[k]).shape
      and np.asarray(la[k]).tobytes() == np.asarray(lb[k]).tobytes() for k in la)


def time_fedfrac(state, root, repeats, fsync=True):
  """``fsync=False``: the same with ``os.fsync`` a no-op (what flushing the three
  files to the disk costs; orbax leaves that to the file system)."""
  ckpt = Checkpointer(os.path.join(root, "fedfrac"))
  history = {"rows": [{"round": 1, "accuracy": 0.5}], "status": "ok"}
  times, exact = [], True
  real_fsync = os.fsync
  if not fsync:
    os.fsync = lambda fd: None
  try:
    for i in range(repeats):
      t0 = time.perf_counter()
      ckpt.save(i + 1, state, history)
      t1 = time.perf_counter()
      _, restored, _ = ckpt.restore_latest(state)
      restored = jax.block_until_ready(restored)
      times.append((t1 - t0, time.perf_counter() - t1))
      exact &= same_bits(restored, state)
  finally:
    os.fsync = real_fsync
  return times, exact


def time_orbax(kind, state, root, repeats):
  import orbax.checkpoint as ocp
  checkpointer = (ocp.PyTreeCheckpointer() if kind == "PyTreeCheckpointer"
                  else ocp.StandardCheckpointer())
  times, exact = [], True
  for i in range(repeats):
    path = os.path.join(root, kind, f"step_{i + 1}")
    t0 = time.perf_counter()
    checkpointer.save(path, state)
    if kind == "StandardCheckpointer":
      checkpointer.wait_until_finished()
    t1 = time.perf_counter()
    restored = (checkpointer.restore(path, item=state) if kind == "PyTreeCheckpointer"
                else checkpointer.restore(path, state))
    restored = jax.block_until_ready(restored)
    times.append((t1 - t0, time.perf_counter() - t1))
    exact &= same_bits(restored, state)
  return times, exact


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--repeats", type=int, default=5)
  args = parser.parse_args()
  import orbax.checkpoint as ocp
  print(f"jax {jax.__version__}, orbax-checkpoint {ocp.__version__}; median of "
        f"{args.repeats} save + restore, seconds")
  for name, build in (("quickstart (digits MLP, FedAvg)", quickstart_state),
                      ("cnn_cifar, SCAFFOLD, 100 clients", cnn_state)):
    state = build()
    size = sum(np.asarray(x).nbytes for x in jax.tree.leaves(state))
    print(f"{name}: {len(jax.tree.leaves(state))} arrays, {size / 2**20:.2f} MiB")
    for kind in ("fedfrac", "fedfrac without fsync", "PyTreeCheckpointer",
                 "StandardCheckpointer"):
      root = tempfile.mkdtemp(prefix="ckpt_timing_")
      try:
        times, exact = (time_fedfrac(state, root, args.repeats, fsync=kind == "fedfrac")
                        if kind.startswith("fedfrac")
                        else time_orbax(kind, state, root, args.repeats))
      finally:
        shutil.rmtree(root, ignore_errors=True)
      save, restore = (statistics.median(t[i] for t in times) for i in (0, 1))
      total = statistics.median(a + b for a, b in times)
      print(f"  {kind:22s} save + restore {total:.4f} s (save {save:.4f}, restore "
            f"{restore:.4f}); bit-exact: {exact}")


if __name__ == "__main__":
  main()
