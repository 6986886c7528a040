"""``config.workers``: the (method, seed) runs of :func:`fedfrac.runner.loop.run`
spread over worker processes.

Each worker process (:func:`fedfrac.runner.points.work_queue`, spawned, one per
CPU core or accelerator device) runs :func:`fedfrac.runner.loop.run_one` on
its share of the runs, exactly as one process would, with the same workdir
checkpoints; the parent gathers the records and writes the outputs. What it
buys is parallel compilation: XLA's CPU compiler is single-threaded and
compiling each method's round program is most of a short comparison (the
quickstart).

Your own algorithms and models (:func:`fedfrac.algorithms.register`,
:func:`fedfrac.models.register`, ``ff.run(config, algorithms=..., model=...)``)
are sent to every worker process when it starts (:func:`pack_extensions`: by
value with cloudpickle when it is installed, so a class or function defined in
a notebook travels too; else by reference, which needs them importable from a
module file); your own data travels with each run. What cannot be sent makes
the run use this process instead, saying why in one line.
"""
from __future__ import annotations

import os
import pickle
import signal
import sys

from fedfrac.runner import points as points_lib
from fedfrac.runner import signals
from fedfrac.runner.checkpoint import DiskFullError
from fedfrac.runner.log import PointProgress


def user_extensions() -> dict:
  """What this process registered itself: ``{"algorithms": {name: entry},
  "models": {name: adapter}}`` (empty dicts when nothing)."""
  from fedfrac import algorithms, models
  return {"algorithms": algorithms.user_entries(), "models": dict(models.USER_MODELS)}


def _main_is_a_file(main) -> bool:
  """Whether worker processes can import ``__main__`` (a script file; not a
  notebook, an interactive interpreter or ``python -``)."""
  path = getattr(main, "__file__", None)
  return bool(path) and os.path.isfile(path)


def _names(names) -> str:
  return f"{', '.join(repr(n) for n in names)} {'is' if len(names) == 1 else 'are'}"


def pack_extensions() -> tuple:
  """``(blob, problem)``: :func:`user_extensions` pickled for worker processes
  (``blob`` None when there is nothing to send), or why they cannot be sent."""
  ext = user_extensions()
  if not any(ext.values()):
    return None, None
  try:
    import cloudpickle
    return cloudpickle.dumps(ext), None
  except ImportError:
    pass
  except Exception as e:   # an object cloudpickle cannot serialise (a lock, a file...)
    return None, f"{_names([n for p in ext.values() for n in p])} cannot be pickled " \
                 f"({type(e).__name__}: {e})"
  main = sys.modules.get("__main__")
  unpicklable, in_main = [], []
  for part in ext.values():
    for name, obj in part.items():
      try:
        blob = pickle.dumps(obj)
      except Exception:
        unpicklable.append(name)
        continue
      if b"__main__" in blob and not _main_is_a_file(main):
        in_main.append(name)
  if unpicklable:
    return None, (f"{_names(unpicklable)} cannot be pickled by reference; install "
                  f"cloudpickle or define them in a module file")
  if in_main:
    return None, (f"{_names(in_main)} defined in this process's __main__ (a notebook), "
                  f"which worker processes cannot import; install cloudpickle or define "
                  f"them in a module file")
  return pickle.dumps(ext), None


def extensions_for_workers():
  """:func:`pack_extensions`'s blob; RuntimeError (one line) when they cannot be sent."""
  blob, problem = pack_extensions()
  if problem:
    raise RuntimeError(f"worker processes cannot run: {problem}")
  return blob


def cannot_ship(log=print) -> bool:
  """Whether your own algorithms or models cannot be sent to worker processes
  (then ``log`` says so in one line: the sweep runs in this process)."""
  problem = pack_extensions()[1]
  if problem:
    log(f"running in this process: {problem}")
  return bool(problem)


def install_extensions(blob) -> None:
  """In a worker process: register what :func:`pack_extensions` packed."""
  if blob is None:
    return
  from fedfrac import algorithms, models
  ext = pickle.loads(blob)
  for name, entry in ext["algorithms"].items():
    algorithms.register(entry, name=name, replace=True)
  for name, adapter in ext["models"].items():
    models.register(name, adapter)


def worker_count(config, num_runs) -> int:
  """Processes for the (method, seed) runs: ``config.workers`` (0: one per local
  device, i.e. per CPU core on a CPU host), at most one per run; 1 (saying why
  on stderr) when your own algorithms or models cannot be sent to workers."""
  workers = int(config.get("workers", 1))
  if workers == 0:
    workers = len(points_lib.local_workers())
  workers = max(1, min(workers, num_runs))
  if workers > 1:
    _, problem = pack_extensions()
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
  or ``(label, seed, None, disk-full message)``. SIGINT / SIGTERM stop the run
  after its current chunk (checkpointed; the record is ``partial``)."""
  from fedfrac.runner import loop
  config, label, seed, workdir, stop_after_round, user_data, keep_params = item
  fed_data = loop._build_data(config, loop._data_seed(config, seed), user_data)
  try:
    rec = loop.run_one(config, label, seed, fed_data, workdir, stop_after_round,
                       progress=False, stop=signals.stop_requested,
                       keep_params=keep_params)
    emit((label, seed, rec, ""))
  except FloatingPointError as e:   # on_divergence="error": re-raised by the parent
    emit((label, seed, e.record, str(e)))
  except DiskFullError as e:        # raised by the parent in one line
    emit((label, seed, None, str(e)))


def run_in_workers(config, jobs, workdir, stop_after_round, progress, workers, records,
                   finish, user_data=None, keep_params=True):
  """``run`` with the (method, seed) runs spread over ``workers`` processes
  (:func:`fedfrac.runner.points.work_queue`, one per CPU core or device): each
  compiles and runs its own programs, so compilation, which is single-threaded
  and dominates short runs, proceeds in parallel. Each run is the same
  computation as in one process; checkpoints and resumption are per run as
  there. Ctrl-C or SIGTERM stops every worker after its current chunk, each
  writing a checkpoint; the parent then writes the rows so far (a second signal
  stops them at once)."""
  from fedfrac.runner import loop
  items = [(config, label, seed, workdir, stop_after_round, user_data, keep_params)
           for label, seed in jobs]
  show = config.progress if progress is None else progress
  bar = PointProgress(show, len(jobs), desc=f"runs on {workers} workers")
  done, diverged, full = {}, [], []

  def on_message(index, payload):
    label, seed, rec, error = payload
    if rec is None:
      full.append(error)
      return
    done[(label, seed)] = rec
    if error:
      diverged.append((rec, error))
    bar.update(1)
  try:
    points_lib.work_queue(items, "fedfrac.runner.parallel:job_task", workers, on_message,
                          name="fedfrac-run", pin=False, graceful=True)
  except KeyboardInterrupt as e:
    signum = getattr(e, "signum", signal.SIGINT)
    records.extend(done[j] for j in jobs if j in done)
    results = finish()
    finished = sum(r.status != "partial" for r in done.values())
    stopped = len(done) - finished
    part = f", {stopped} stopped after a chunk and checkpointed" if stopped else ""
    raise loop.RunInterrupted(f"interrupted: {finished} of {len(jobs)} runs finished{part} "
                              f"({signals.name(signum)}); {loop.resume_hint(workdir)}",
                              results, signum) from None
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
