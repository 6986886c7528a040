"""``config.workers``: the (method, seed) runs of :func:`fedfrac.runner.loop.run`
spread over worker processes.

Each worker process (:func:`fedfrac.runner.points.work_queue`, spawned, one per
CPU core or accelerator device) runs :func:`fedfrac.runner.chunked.run_one` on
its share of the runs, exactly as one process would, with the same workdir
checkpoints; the parent gathers the records and writes the outputs. What it
buys is parallel compilation: XLA's CPU compiler is single-threaded and
compiling each method's round program is most of a short comparison (the
quickstart).

Your own algorithms and models (:func:`fedfrac.algorithms.register`,
:func:`fedfrac.models.register`, ``ff.run(config, algorithms=..., model=...)``)
are sent to every worker process when it starts
(:func:`fedfrac.runner.extensions.pack_extensions`: by
value with cloudpickle when it is installed, so a class or function defined in
a notebook travels too; else by reference, which needs them importable from a
module file); your own data travels with each run. What cannot be sent makes
the run use this process instead, saying why in one line.
"""
from __future__ import annotations

import signal
import sys

from fedfrac import _validation
from fedfrac.runner import chunked
from fedfrac.runner import local_devices, work_queue
from fedfrac.runner import signals
from fedfrac.runner.checkpoint import DiskFullError
from fedfrac.runner.extensions import (  # noqa: F401  (their old home)
    cannot_ship, extensions_for_workers, install_extensions, pack_extensions, user_extensions,
    workers_problem)
from fedfrac.runner.log import PointProgress
from fedfrac.runner.records import RunFailed
from fedfrac.runner.work_queue import WorkersLost


def _kept_without_workdir(done) -> str:
  """Where the runs that finished are when no workdir was given: nowhere on the
  command line; from Python in the exception's ``results``."""
  if _validation.on_command_line():
    return "nothing was kept (no --workdir was given)"
  n = len(done)
  return (f"the {n} that finished {'is' if n == 1 else 'are'} in e.results; nothing was "
          f"written to disk, as no workdir= was given")


class RunsLost(RuntimeError):
  """Worker processes died with runs left (killed, or out of memory); the runs
  that finished are written first. ``results``: what finished."""

  def __init__(self, message, results):
    super().__init__(message)
    self.results = results


def worker_count(config, num_runs) -> int:
  """Processes for the (method, seed) runs: ``config.workers`` (0: one per local
  device, i.e. per CPU core on a CPU host), at most one per run; 1 (saying why
  on stderr) when the work cannot go to worker processes
  (:func:`fedfrac.runner.extensions.workers_problem`: your own algorithms or
  models cannot be sent, the config cannot be pickled, or the script that calls
  has no ``if __name__ == "__main__":`` guard, which made it wait forever)."""
  workers = int(config.get("workers", 1))
  if workers == 0:
    workers = len(local_devices.local_workers())
  workers = max(1, min(workers, num_runs))
  if workers > 1:
    problem = workers_problem(config)
    if problem:
      print(f"config.workers={config.get('workers', 1)}: running in this process: "
            f"{problem}", file=sys.stderr)
      return 1
  return workers


def finish_if_space(finish, records) -> None:
  """Write the ``records`` that finished (``finish()``) unless the disk is still
  full; with none, nothing is written."""
  if not records:
    return
  try:
    finish()
  except DiskFullError:
    pass


def job_task(item, emit):
  """:func:`fedfrac.runner.points.work_queue` target: one (method, seed) run in
  a worker process; emits ``(label, seed, record, divergence message or "")``,
  ``(label, seed, None, ("disk full", message))`` or, when the run raised
  anything else, ``(label, seed, None, (exception type, traceback))`` (the
  parent keeps the other runs). SIGINT / SIGTERM stop the run after its current
  chunk (checkpointed; the record is ``partial``)."""
  config, label, seed, workdir, stop_after_round, user_data, keep_params = item
  try:
    fed_data = chunked.build_data(config, chunked.data_seed(config, seed), user_data)
    rec = chunked.run_one(config, label, seed, fed_data, workdir, stop_after_round,
                          progress=False, stop=signals.stop_requested,
                          keep_params=keep_params)
    emit((label, seed, rec, ""))
  except FloatingPointError as e:   # on_divergence="error": re-raised by the parent
    emit((label, seed, e.record, str(e)))
  except DiskFullError as e:        # raised by the parent in one line
    emit((label, seed, None, ("disk full", str(e))))
  except Exception as e:            # kept by the parent in Results.failed
    import traceback
    emit((label, seed, None, (type(e).__name__, f"{e}\n{traceback.format_exc()}")))


def run_in_workers(config, jobs, workdir, stop_after_round, progress, workers, records,
                   finish, user_data=None, keep_params=True, failed=None):
  """``run`` with the (method, seed) runs spread over ``workers`` processes
  (:func:`fedfrac.runner.points.work_queue`, one per CPU core or device): each
  compiles and runs its own programs, so compilation, which is single-threaded
  and dominates short runs, proceeds in parallel. Each run is the same
  computation as in one process; checkpoints and resumption are per run as
  there. Ctrl-C or SIGTERM stops every worker after its current chunk, each
  writing a checkpoint; the parent then writes the rows so far (a second signal
  stops them at once). A run that raised is named in one line and put in
  ``failed`` (``{(label, seed): RunFailed}``); the others go on."""
  failed = {} if failed is None else failed
  items = [(config, label, seed, workdir, stop_after_round, user_data, keep_params)
           for label, seed in jobs]
  show = config.progress if progress is None else progress
  bar = PointProgress(show, len(jobs), desc=f"runs on {workers} workers")
  done, diverged, full = {}, [], []

  def on_message(index, payload):
    label, seed, rec, error = payload
    if rec is None and error[0] == "disk full":
      full.append(error[1])
      return
    if rec is None:
      failed[(label, seed)] = RunFailed(error[1], kind=error[0])
      print(chunked.failure_line(label, seed, failed[(label, seed)]), file=sys.stderr)
      bar.update(1)
      return
    done[(label, seed)] = rec
    if error:
      diverged.append((rec, error))
    bar.update(1)
  try:
    work_queue.work_queue(items, "fedfrac.runner.parallel:job_task", workers, on_message,
                          name="fedfrac-run", pin=False, graceful=True)
  except WorkersLost as lost_workers:     # what finished is written, then one line
    records.extend(done[j] for j in jobs if j in done)
    lost = [j for j in jobs if j not in done]
    results = finish(quiet=lost)
    where = (f"the {len(done)} that finished {'is' if len(done) == 1 else 'are'} written "
             f"in {workdir} (a lost run's last checkpoint, if any, as partial); rerun the "
             f"same command to run the rest" if workdir else _kept_without_workdir(done))
    raise RunsLost(f"{len(lost)} of {len(jobs)} runs did not finish ({lost[0][0]} seed "
                   f"{lost[0][1]}{', ...' if len(lost) > 1 else ''}): their worker "
                   f"process died ({lost_workers.reason}); {where}", results) from None
  except KeyboardInterrupt as e:
    signum = getattr(e, "signum", signal.SIGINT)
    records.extend(done[j] for j in jobs if j in done)
    results = finish()
    finished = sum(r.status != "partial" for r in done.values())
    stopped = len(done) - finished
    part = f", {stopped} stopped after a chunk and checkpointed" if stopped else ""
    raise chunked.RunInterrupted(
      f"interrupted: {finished} of {len(jobs)} runs finished{part} "
      f"({signals.name(signum)}); {chunked.resume_hint(workdir)}", results, signum) from None
  finally:
    bar.close()
  records.extend(done[j] for j in jobs if j in done)
  if full:
    finish_if_space(finish, records)
    raise DiskFullError(full[0])
  results = finish()
  if diverged:
    rec, message = diverged[0]
    error = FloatingPointError(message)
    error.record = rec
    raise error
  return results
