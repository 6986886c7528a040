"""A work queue of items over worker processes, one per local device
(:func:`fedfrac.runner.local_devices.local_workers`: one per GPU, one per TPU chip,
or one per CPU core on a CPU host, each process pinned to its device or core).
The sweep's batches (:func:`fedfrac.runner.points.execute`) and the runs of
``config.workers`` (:mod:`fedfrac.runner.parallel`) go through it; every worker
first registers the parent's own algorithms and models
(:mod:`fedfrac.runner.extensions`). A worker whose parent is gone (killed with
``kill -9``) notices within a second and stops: at once, or, for graceful
items, after the current one stops at its next safe point (a checkpoint).
"""
from __future__ import annotations

import importlib
import os
import queue
import threading
import time
import traceback
from typing import Any, Callable, Optional

from fedfrac.runner import signals
from fedfrac.runner.checkpoint import DiskFullError
from fedfrac.runner.extensions import extensions_for_workers, install_extensions
from fedfrac.runner.local_devices import local_workers
from fedfrac.runner.log import one_line_warnings


def resolve(executor: str) -> Callable:
  """The function named ``"package.module:function"``."""
  module, _, name = executor.partition(":")
  return getattr(importlib.import_module(module), name)


def _pin_to_core():
  core = os.environ.get("FEDFRAC_CPU_CORE")
  if core is not None and hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {int(core)})


class WorkersLost(RuntimeError):
  """Every worker process exited with tasks left; ``remaining``: the indices of
  the items that did not finish; ``reason``: why, as far as the parent can
  tell (exit codes, an error at start-up)."""

  def __init__(self, remaining, reason="killed, or out of memory?"):
    self.remaining = sorted(remaining)
    self.reason = reason
    super().__init__(f"every worker exited with {len(self.remaining)} tasks left "
                     f"({reason})")


def lost_reason(procs, started: bool, startup_error: Optional[str]) -> str:
  """Why every worker in ``procs`` is gone: its own error at start-up, an
  exit before taking any task (exit code; its error is on stderr above), or
  killed (a signal: killed, or out of memory?)."""
  codes = sorted({p.exitcode for p in procs if p.exitcode is not None})
  if startup_error:
    return f"a worker process failed at start-up: {startup_error}"
  if not started and codes and all(c > 0 for c in codes):
    return (f"every worker process exited at start-up with exit code "
            f"{', '.join(map(str, codes))} before taking a task; its error is printed "
            f"above")
  return "killed, or out of memory?"


def _last_line(text: str) -> str:
  lines = [l for l in text.strip().splitlines() if l.strip()]
  return lines[-1].strip() if lines else text


_PARENT_GONE = threading.Event()


def _watch_parent(parent: int, graceful: bool, interval_s: float = 1.0) -> None:
  """Stop this worker once its parent process ``parent`` is gone: at once, or
  (``graceful``) by asking the current item to stop at its next safe point."""
  def watch():
    while os.getppid() == parent:
      time.sleep(interval_s)
    _PARENT_GONE.set()
    if graceful:
      signals.request_stop()
    else:
      os._exit(1)
  threading.Thread(target=watch, name="fedfrac-parent-watch", daemon=True).start()


def _queue_worker(target, tasks, results, graceful=False, extensions=None, parent=None):
  """A worker process: pin to its CPU core (if given one), register the parent's
  own algorithms and models (``extensions``), then run
  ``target(item, emit)`` on items until a ``None``; ``emit(payload)`` sends a
  message to the parent. ``graceful``: SIGINT / SIGTERM ask the current item
  to stop at its next safe point (:func:`fedfrac.runner.signals.stop_requested`),
  and no further item is started. ``parent``: the parent's process id, watched
  (:func:`_watch_parent`)."""
  if graceful:
    signals.install_in_worker()
  if parent is not None:
    _watch_parent(parent, graceful)

  def put(message):
    if not _PARENT_GONE.is_set():   # nobody reads them any more
      results.put(message)
  try:
    _pin_to_core()
    one_line_warnings()
    install_extensions(extensions)
    function = resolve(target)
  except BaseException:    # said by the parent at once, in its own words
    put(("startup", None, _last_line(traceback.format_exc())))
    return
  put(("started", None, None))
  while True:
    task = tasks.get()
    if task is None or signals.stop_requested() or _PARENT_GONE.is_set():
      return
    index, item = task
    try:
      function(item, lambda payload, i=index: put(("message", i, payload)))
      put(("done", index, None))
    except DiskFullError as e:   # one line, raised again by the parent
      put(("full", index, str(e)))
      return
    except BaseException:   # reported to the parent, which stops the queue
      put(("error", index, traceback.format_exc()))
      return
    if signals.stop_requested():
      return


def work_queue(items: list, target: str, workers: int,
               on_message: Callable[[int, Any], None], order: Optional[list] = None,
               name: str = "fedfrac-worker", pin: bool = True,
               graceful: bool = False) -> int:
  """Run ``resolve(target)(item, emit)`` for every item in ``workers`` spawned
  processes, one per local device (:func:`local_workers`; more workers than
  devices share them), items taken from one queue in ``order``. ``pin=False``
  leaves CPU workers unpinned (the OS spreads them over the cores, which is
  kinder to a machine other jobs share).

  ``emit(payload)`` in a worker calls ``on_message(item index, payload)`` in
  this process (payloads must be picklable). Returns the number of workers.
  Raises RuntimeError when an item fails (its traceback in the message),
  :class:`WorkersLost` when every worker died with items left,
  :class:`DiskFullError` when an item found the disk full;
  the other workers are then stopped. Their own side effects (files written)
  are kept.

  SIGINT / SIGTERM (:mod:`fedfrac.runner.signals`) raise
  :class:`~fedfrac.runner.signals.Interrupted`. ``graceful=False``: at once,
  the workers are stopped. ``graceful=True``: each worker is asked to stop its
  item at the next safe point (``target`` passes
  :func:`~fedfrac.runner.signals.stop_requested` on, e.g. to stop after a
  chunk), its messages are taken, then it is raised; a second signal stops the
  workers at once.
  """
  import multiprocessing as mp
  extensions = extensions_for_workers()   # your own algorithms and models, pickled
  order = list(range(len(items))) if order is None else list(order)
  envs = local_workers()
  n = max(1, min(int(workers), len(items)))
  ctx = mp.get_context("spawn")
  tasks, results = ctx.Queue(), ctx.Queue()
  for i in order:
    tasks.put((i, items[i]))
  procs = []
  for w in range(n):
    tasks.put(None)
    kind, env = envs[w % len(envs)]
    if w >= len(envs) or not pin:   # more workers than devices: share them
      env = {k: v for k, v in env.items() if k != "FEDFRAC_CPU_CORE"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)    # a spawned child starts with this environment
    try:
      p = ctx.Process(target=_queue_worker,
                      args=(target, tasks, results, graceful, extensions, os.getpid()),
                      daemon=True, name=f"{name}-{kind}{w}")
      p.start()
    finally:
      for k, v in saved.items():
        if v is None:
          os.environ.pop(k, None)
        else:
          os.environ[k] = v
    procs.append(p)
  remaining = set(order)
  at_once = False
  started = False
  try:
    with signals.Signals(graceful=graceful) as stop:
      asked = False
      while remaining:
        if stop.requested is not None and not asked:
          for p in procs:      # SIGTERM: each stops its item at the next safe point
            if p.is_alive():
              p.terminate()
          asked = True
        try:
          kind, index, payload = results.get(timeout=0.5 if asked else 5.0)
        except queue.Empty:
          if not any(p.is_alive() for p in procs):
            if asked:
              break
            raise WorkersLost(remaining, lost_reason(procs, started, None)) from None
          continue
        if kind == "started":
          started = True
        elif kind == "startup":   # the same for every worker: said at once
          raise WorkersLost(remaining, lost_reason(procs, started, payload))
        elif kind == "message":
          on_message(index, payload)
        elif kind == "done":
          remaining.discard(index)
        elif kind == "full":
          raise DiskFullError(payload)
        else:
          raise RuntimeError(f"task {index} failed in a worker:\n{payload}")
      if stop.requested is not None:   # even if the last items finished meanwhile
        raise signals.Interrupted(stop.requested)
  except signals.Interrupted:
    at_once = graceful   # a second signal: graceful workers ignore SIGTERM now
    raise
  finally:
    if remaining:         # nobody takes the tasks left: exiting must not wait on them
      tasks.cancel_join_thread()
    for p in procs:
      if remaining:       # a failure or an interrupt: stop the others
        p.kill() if at_once else p.terminate()
      p.join()            # reaped, so their CPU time counts in RUSAGE_CHILDREN
  return n
