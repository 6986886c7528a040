"""``config.workers``: the (method, seed) runs of :func:`fedfrac.runner.loop.run`
spread over worker processes.

Each worker process (:func:`fedfrac.runner.points.work_queue`, spawned, one per
CPU core or accelerator device) runs :func:`fedfrac.runner.loop.run_one` on
its share of the runs, exactly as one process would, with the same workdir
checkpoints; the parent gathers the records and writes the outputs. What it
buys is parallel compilation: XLA's CPU compiler is single-threaded and
compiling each method's round program is most of a short comparison (the
quickstart).
"""
from __future__ import annotations

from fedfrac.runner import points as points_lib
from fedfrac.runner.log import PointProgress


def worker_count(config, num_runs) -> int:
  """Processes for the (method, seed) runs: ``config.workers`` (0: one per local
  device, i.e. per CPU core on a CPU host), at most one per run."""
  workers = int(config.get("workers", 1))
  if workers == 0:
    workers = len(points_lib.local_workers())
  return max(1, min(workers, num_runs))


def job_task(item, emit):
  """:func:`fedfrac.runner.points.work_queue` target: one (method, seed) run in
  a worker process; emits ``(label, seed, record, divergence message or "")``."""
  from fedfrac.runner import loop
  config, label, seed, workdir, stop_after_round = item
  fed_data = loop._build_data(config, loop._data_seed(config, seed))
  try:
    rec = loop.run_one(config, label, seed, fed_data, workdir, stop_after_round,
                       progress=False)
    emit((label, seed, rec, ""))
  except FloatingPointError as e:   # on_divergence="error": re-raised by the parent
    emit((label, seed, e.record, str(e)))


def run_in_workers(config, labels, seeds, workdir, stop_after_round, progress, workers,
                   records, finish):
  """``run`` with the (method, seed) runs spread over ``workers`` processes
  (:func:`fedfrac.runner.points.work_queue`, one per CPU core or device): each
  compiles and runs its own programs, so compilation, which is single-threaded
  and dominates short runs, proceeds in parallel. Each run is the same
  computation as in one process; checkpoints and resumption are per run as
  there. Ctrl-C stops every worker (checkpoints written so far are kept)."""
  from fedfrac.runner import loop
  jobs = [(label, seed) for label in labels for seed in seeds]
  items = [(config, label, seed, workdir, stop_after_round) for label, seed in jobs]
  show = config.progress if progress is None else progress
  bar = PointProgress(show, len(jobs), desc=f"runs on {workers} workers")
  done, diverged = {}, []

  def on_message(index, payload):
    label, seed, rec, error = payload
    done[(label, seed)] = rec
    if error:
      diverged.append((rec, error))
    bar.update(1)
  try:
    points_lib.work_queue(items, "fedfrac.runner.parallel:job_task", workers, on_message,
                          name="fedfrac-run", pin=False)
  except KeyboardInterrupt:
    records.extend(done[j] for j in jobs if j in done)
    results = finish()
    where = (f"rerun the same command with --workdir={workdir} to resume"
             if workdir else "no --workdir was given, so nothing was kept")
    raise loop.RunInterrupted(f"interrupted: {len(done)} of {len(jobs)} runs "
                              f"finished; {where}", results) from None
  finally:
    bar.close()
  records.extend(done[j] for j in jobs)
  results = finish()
  if diverged:
    rec, message = diverged[0]
    error = FloatingPointError(message)
    error.record = rec
    raise error
  return results
