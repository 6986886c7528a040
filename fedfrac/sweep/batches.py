"""A sweep's points packed into batches and run: the bytes model that sizes a
batch to the device's memory, the executor of one batch (``ff.run_many`` over
its seeds and grid values) and the record of one finished point."""
from __future__ import annotations

import numpy as np
from fedfrac import config_base
from fedfrac import (
  runner,
)
from fedfrac.runner import points as points_lib
from fedfrac.runner import local_devices
from fedfrac.sweep.grid import grid_targets


def pack(points, done, metric_names, batch=True, batch_size=0, workers=1,
         memory_bytes=None):
  """The batches (:class:`fedfrac.runner.points.Batch`) that hold a missing point.

  Points of one (config point, method) share a compiled program; their seeds
  are grouped by the set of grid values they have, and each group is one batch
  (``ff.run_many`` over its seeds × values). ``batch_size`` > 0 caps the runs
  per batch; batches are then split by seeds until there are at least
  ``workers`` of them (when the seeds allow), so every device gets work.
  Without ``batch`` every point is its own batch.

  The batches are those of the whole sweep, whatever is ``done``: a batch with
  every point done is skipped, and one with some points done runs whole and
  writes only its missing points (``point_ids``). A vmapped run's last float
  bits can depend on how many runs share its program, so this keeps a resumed
  sweep's points bit-identical to an uninterrupted sweep's (same ``workers``
  and ``batch_size``), at the cost of rerunning the finished runs of a batch
  that was cut short. Each batch's ``key`` (a digest of all its point ids)
  and ``position`` name it in this layout, the same on every host (a sharded
  sweep's claims); ``memory_bytes`` (a sharded sweep's agreed memory of one
  worker) replaces this host's in sizing a batch's vmapped chunks.
  """
  groups = {}
  for p in points:
    groups.setdefault((p["axes_index"], p["label"]), []).append(p)
  pieces = []
  for group in groups.values():
    by_seed = {}
    for p in group:
      by_seed.setdefault(p["seed"], []).append(p)
    by_values = {}
    for seed, ps in by_seed.items():
      by_values.setdefault(tuple(p["grid"] for p in ps), []).append(seed)
    for values, seeds in by_values.items():
      ids = {(p["seed"], p["grid"]): p["id"] for p in group if p["seed"] in seeds}
      per_batch = len(seeds) if batch else 1
      if batch_size:
        per_batch = max(1, min(per_batch, batch_size // len(values)))
      for start in range(0, len(seeds), per_batch):
        pieces.append((group[0], list(values), seeds[start:start + per_batch], ids))
  while batch and len(pieces) < workers:
    largest = max(range(len(pieces)), key=lambda i: len(pieces[i][2]), default=None)
    if largest is None or len(pieces[largest][2]) < 2:
      break
    first, values, seeds, ids = pieces.pop(largest)
    half = len(seeds) // 2
    pieces += [(first, values, seeds[:half], ids), (first, values, seeds[half:], ids)]
  batches = []
  for position, (first, values, seeds, ids) in enumerate(pieces):
    spec = {"config": first["config"], "label": first["label"], "axes": first["axes"],
            "option": first["option"] if values != [None] else None, "values": values,
            "seeds": seeds, "ids": {k: v for k, v in ids.items() if k[0] in seeds},
            "metrics": list(metric_names), "batch": batch, "batch_size": batch_size,
            "workers": workers, "memory_bytes": memory_bytes}
    missing = tuple(pid for pid in spec["ids"].values() if pid not in done)
    if missing:
      batches.append(points_lib.Batch(
          "fedfrac.sweep:run_batch", spec, missing,
          cost=len(seeds) * len(values) * first["config"].rounds,
          key=points_lib.digest(sorted(spec["ids"].values())), position=position))
  return batches


# ----------------------------------------------------------------- running


def tree_bytes(tree):
  import jax
  return sum(int(np.prod(np.shape(x))) * np.dtype(getattr(x, "dtype", np.float32)).itemsize
             for x in jax.tree.leaves(tree))


def run_bytes(config, label, seed, data_cache=None):
  """Bytes one run of ``config``'s method ``label`` needs on its device: a
  simple bytes model, not the compiler's memory analysis (which would cost a
  compile per batch size): its data arrays, plus 4 copies of its state (input,
  output, and the round's temporaries), plus 4 copies of the server state per
  sampled client (the cohort's local models, gradients, optimiser states and
  updates). Builds the run's data (kept in ``data_cache``) and initial state."""
  from fedfrac import data as data_lib
  from fedfrac.runner import factories
  from fedfrac.sim import state as state_lib
  data_cache = {} if data_cache is None else data_cache
  ds = (config.data.to_json_best_effort(sort_keys=True),
        seed if config.data.seed < 0 else config.data.seed)
  if ds not in data_cache:
    data_cache[ds] = data_lib.build(config.data, ds[1])
  fed = data_cache[ds]
  sim = factories.build_simulation(config, label, fed)
  state = sim.init(seed)
  data_bytes = sum(np.asarray(v).nbytes
                   for v in state_lib.data_arrays(fed, sim.training).values())
  return int(data_bytes + 4 * tree_bytes(state) + 4 * sim.cohort * tree_bytes(state.server))


def runs_that_fit(config, label, seed, workers=1, data_cache=None, fraction=0.5,
                  memory_bytes=None):
  """How many runs of one batch fit in ``fraction`` of one worker's memory
  (``memory_bytes``, default this host's share for ``workers``)."""
  memory = memory_bytes or local_devices.worker_memory_bytes(workers)
  budget = fraction * memory
  return max(1, int(budget // max(1, run_bytes(config, label, seed, data_cache))))


def point_record(rec, metric_names, spec, value):
  """The JSON record of one finished run (``rec``: a RunRecord); one that stopped
  at its target (``config.stop_at_target``) also has ``stopped``
  (:attr:`fedfrac.runner.records.RunRecord.stopped`)."""
  out = {"axes": spec["axes"], "label": spec["label"], "run_label": rec.method,
         "algorithm": rec.algorithm, "grid": value, "seed": int(rec.seed),
         "status": rec.status, "wall_s": float(rec.wall_s),
         "compile_s": float(rec.compile_s), "metrics": {},
         "final": rec.rows[-1] if rec.rows else {}, "curves": {}}
  if rec.stopped is not None:
    out["stopped"] = rec.stopped
  for name in metric_names:
    if not name.startswith("mean:") and rec.rows:
      rounds, values = rec.curve(name, default=np.nan)   # a metric of other methods
      out["curves"][name] = {"round": rounds.tolist(),
                             "value": [None if not np.isfinite(v) else float(v)
                                       for v in values]}
    v = run_value(rec, name)
    out["metrics"][name] = None if v is None or not np.isfinite(v) else float(v)
    if name == "accuracy":
      curve = rec.curve(name, default=np.nan)[1] if rec.rows else np.asarray([])
      out["metrics"]["best_accuracy"] = float(np.nanmax(curve)) if curve.size else None
  return out


def run_batch(spec):
  """Executor of one sweep batch (see :func:`pack`): yields ``(point id,
  record)`` as each vmapped chunk of runs finishes. A batch larger than fits
  in memory (``runs_that_fit``) runs as several chunks of seeds."""
  config, values, seeds = spec["config"], spec["values"], spec["seeds"]
  option = spec["option"]
  grid = {option: values} if option else None
  cache = {}
  limit = spec["batch_size"] or (
      runs_that_fit(config, spec["label"], seeds[0], spec["workers"], cache,
                    memory_bytes=spec.get("memory_bytes"))
      if len(seeds) * len(values) > 1 else 1)
  per_chunk = max(1, limit // len(values)) if spec["batch"] else 1
  for start in range(0, len(seeds), per_chunk):
    chunk = seeds[start:start + per_chunk]
    if spec["batch"]:
      records = runner.run_many(config, seeds=chunk, grid=grid, progress=False,
                                data_cache=cache).records
    else:
      single = config.copy_and_resolve_references()
      single.seeds = tuple(chunk)
      res = runner.run(single, progress=False)
      res.raise_failed()   # a batch whose run failed fails whole (no point is written)
      records = res.records
    runs = [(seed, v) for seed in chunk for v in values]
    for (seed, v), rec in zip(runs, records):
      yield spec["ids"][(seed, v)], point_record(rec, spec["metrics"], spec, v)


def run_point(config, seeds, grid, grid_methods, batch):
  """Records of every method at one sweep point (grid applied to grid_methods),
  in this process without a point directory."""
  targets = grid_targets(config, grid, grid_methods)
  records = []
  for label in config_base.method_labels(config):
    single = config.copy_and_resolve_references()
    single.only = label
    g = grid if label in targets else None
    if batch:
      res = runner.run_many(single, seeds=seeds, grid=g)
    else:
      if g:
        raise SystemExit("--grid needs batched runs; drop --no_batch")
      single.seeds = tuple(seeds)
      res = runner.run(single)
      res.raise_failed()
    records.extend(res.records)
  return records


def run_value(rec, name):
  """Final-round value of ``name``; ``mean:<name>`` averages it over all rounds."""
  if name.startswith("mean:"):
    values = np.asarray([r.get(name[5:], np.nan) for r in rec.round_rows], np.float64)
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else None
  return rec.rows[-1].get(name) if rec.rows else None


# ------------------------------------------------------------------ tables
