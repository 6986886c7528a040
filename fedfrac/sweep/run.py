"""Running a sweep: its batches on the work queue, shards claiming batches
across hosts, resuming from the point directory, the outcome."""
from __future__ import annotations

import dataclasses
import os
import tempfile
import time

from fedfrac.runner import claims as claims_lib
from fedfrac.runner import points as points_lib
from fedfrac.runner import local_devices
from fedfrac.runner import signals
from fedfrac.runner.log import PointProgress
from fedfrac.sweep.batches import pack
from fedfrac.sweep.grid import expand, fingerprint
from fedfrac.sweep.tables import fmt, summarize_points


def progress_bar(enabled, total, done):
  """The sweep's progress bar over points (with an ETA)."""
  return PointProgress(enabled, total, done, desc="sweep")


@dataclasses.dataclass
class SweepOutcome:
  """What :func:`run_sweep` did: the table rows, how many points it ran and
  how many an earlier (interrupted) sweep or other shards had already
  finished; ``missing``: points not finished yet (a shard that is not the last:
  no table rows then)."""
  points: list
  total: int
  ran: int
  skipped: int
  workers: int
  wall_s: float
  directory: str
  records: list = dataclasses.field(default_factory=list)   # point records, in order
  missing: int = 0


def shard_order(batches, index, count) -> list:
  """Indices of ``batches`` in the order shard ``index`` of ``count`` starts
  them: its own share first (every ``count``-th batch of the sweep's layout,
  from ``index``), then the next shards' shares (batches their shards have not
  claimed yet, or left behind); each share longest first."""
  return sorted(range(len(batches)),
                key=lambda i: ((batches[i].position - index) % count, -batches[i].cost,
                               batches[i].position))


def run_sweep(base, axes, seeds, metric_names, grid=None, grid_methods=(), batch=True,
              directory=None, overwrite=False, workers=None, batch_size=0,
              progress=True, log=print, shard=None, claim_timeout=claims_lib.TIMEOUT_S,
              run_points=True) -> SweepOutcome:
  """Run every missing point of the sweep and tabulate all of them.

  Args:
    base: the config (after fixed overrides); ``axes``: [(key, values)].
    seeds: seeds of every point; ``grid``: {option: values} or None.
    directory: point directory (None: a fresh temporary one, no resume).
    overwrite: replace the points of a different sweep in ``directory``.
    workers: worker processes (None: one per local device or CPU core).
    batch_size: most runs per vmapped batch (0: sized by ``run_bytes``).
    shard: ``(I, N)``: run as shard I of N hosts sharing ``directory``: the
      batch layout is the first shard's (``layout-<sweep>.json``: it packs for
      N × its workers, and sizes chunks by its memory), each batch runs once
      claimed (:mod:`fedfrac.runner.claims`; stale after ``claim_timeout``
      seconds without a heartbeat), own share first, then the others' batches
      not claimed yet. The table rows come back only when every point is
      finished (the last shard), else ``missing`` says how many are not.
    run_points: False: run nothing, tabulate the finished points (``--table``).
  """
  if not batch and grid:
    raise SystemExit("--grid needs batched runs; drop --no_batch")
  t0 = time.perf_counter()
  points = expand(base, axes, seeds, grid, grid_methods)
  directory = directory or tempfile.mkdtemp(prefix="fedfrac_sweep_")
  try:
    store = points_lib.PointStore(directory, fingerprint(base, axes, grid, grid_methods,
                                                         metric_names, batch), overwrite)
  except points_lib.SweepMismatch as e:
    raise SystemExit(str(e)) from None
  ids = [p["id"] for p in points]
  done = store.done() & set(ids)
  n_workers = len(local_devices.local_workers()) if workers is None else max(1, int(workers))
  layout = {"workers": n_workers, "memory_bytes": None}
  claims, order, where = None, None, ""
  if shard is not None and run_points:
    index, count = shard
    layout = claims_lib.agree(
        os.path.join(store.directory, f"layout-{store.hash}.json"),
        {"workers": n_workers * count,
         "memory_bytes": local_devices.worker_memory_bytes(n_workers)})
    claims = claims_lib.Claims(store.directory, f"{index}/{count}", claim_timeout)
    where = f"shard {index}/{count}: "
  batches = pack(points, done, metric_names, batch, batch_size, layout["workers"],
                 layout["memory_bytes"]) if run_points else []
  if claims is not None:
    order = shard_order(batches, *shard)
    own = sum(b.position % shard[1] == shard[0] for b in batches)
    log(f"sweep: {where}{len(points)} points, {len(done)} already done in "
        f"{store.directory}, {len(points) - len(done)} to run in {len(batches)} batches "
        f"({own} of them this shard's share, then any other not claimed yet)", flush=True)
  elif run_points:
    log(f"sweep: {len(points)} points, {len(done)} already done in {store.directory}, "
        f"{len(points) - len(done)} to run in {len(batches)} batches", flush=True)
  bar = progress_bar(progress and run_points, len(points), len(done))
  written = []

  def on_point(pid):
    written.append(pid)
    bar.update(1)
  try:
    stats = points_lib.execute(batches, store, workers=n_workers, on_point=on_point,
                               log=log, claims=claims, order=order)
  except signals.Interrupted as e:   # SIGINT / SIGTERM: finished points are kept
    bar.close()
    kept = len(store.done() & set(ids))
    e.message = (f"interrupted ({signals.name(e.signum)}): {where}{kept} of {len(points)} "
                 f"points finished and kept in {store.directory}; rerun the same command "
                 f"to run the rest")
    raise
  finally:
    bar.close()
  missing = [pid for pid in ids if pid not in done and pid not in written
             and not store.has(pid)] if (claims is not None or not run_points) else []
  if missing:
    return SweepOutcome([], len(points), len(written), len(done), stats["workers"],
                        time.perf_counter() - t0, store.directory, missing=len(missing))
  try:
    records = {pid: store.load(pid) for pid in ids}
  except points_lib.SweepMismatch as e:
    raise SystemExit(str(e)) from None
  table = summarize_points(points, records, metric_names)
  for point, summary in table:
    for label, entry in summary.items():
      log(" ".join(f"{k}={v}" for k, v in point.items()), label,
          " ".join(f"{m}={fmt(entry[m])}" for m in metric_names), flush=True)
  return SweepOutcome(table, len(points), len(written), len(done), stats["workers"],
                      time.perf_counter() - t0, store.directory,
                      [{**records[pid], "axes_index": p["axes_index"]}
                       for pid, p in zip(ids, points)])


def run(base, axes, seeds, metric_names, grid=None, grid_methods=(), batch=True,
        **kwargs):
  """[(point, summary)] over every sweep point, in order (see
  ``summarize_points``); keyword arguments as for :func:`run_sweep`."""
  return run_sweep(base, axes, seeds, metric_names, grid, grid_methods, batch,
                   **kwargs).points
