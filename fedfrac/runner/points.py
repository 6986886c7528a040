"""Sweep points on disk and a work queue of batches over every local device.

A sweep is a set of *points* (one run: e.g. one method, config point, grid value
and seed). Each point has an id (a hash of what defines it, :func:`point_id`)
and, once finished, one JSON file ``<directory>/points/<id>.json`` written to a
temporary name and renamed (:class:`PointStore`), so a killed sweep loses at
most the batches that were running and a rerun skips every finished point. Each
point file is sealed with its SHA-256 (:mod:`fedfrac.runner.sealed`); one that is
truncated, edited or otherwise damaged is reported in one line and run again.
The directory's ``sweep.json`` holds the sweep's *fingerprint* (what every
point depends on besides its own id: the base config, the metrics, the code
version...); a rerun whose fingerprint differs refuses to mix its points with
the old ones unless ``overwrite=True`` (which deletes the old points).

Points that can share one compiled program travel together as a
:class:`Batch`: ``executor`` names a function (``"package.module:function"``)
that takes ``spec`` and yields ``(point id, record)`` pairs as its runs finish.
:func:`execute` runs the batches, longest first, in-process (one worker) or as
a work queue over worker processes, one per local device (:func:`local_workers`:
one per GPU, one per TPU chip, or one per CPU core on a CPU host, each process
pinned to its device or core), so a sweep fills the machine. Workers write their
points themselves, so finished points survive a killed parent. SIGINT and
SIGTERM stop a sweep at once (:mod:`fedfrac.runner.signals`): the points
finished so far are kept and the workers are stopped.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import os
import queue
import shutil
import sys
import time
import traceback
from typing import Any, Callable, Iterable, Optional

from fedfrac.runner import claims as claims_lib
from fedfrac.runner import sealed, signals
from fedfrac.runner.checkpoint import DiskFullError, atomic_write, json_default
from fedfrac.runner.local_devices import local_workers, worker_memory_bytes  # noqa: F401

MANIFEST = "sweep.json"
POINTS = "points"


def digest(obj, length=16) -> str:
  """Hex SHA-256 (first ``length`` digits) of ``obj`` as canonical JSON."""
  text = json.dumps(obj, sort_keys=True, default=str)
  return hashlib.sha256(text.encode()).hexdigest()[:length]


def point_id(key: dict) -> str:
  """The id of the point defined by ``key`` (a JSON-able dict): its digest."""
  return digest(key)


class SweepMismatch(ValueError):
  """A point directory holds points of a different sweep."""


@dataclasses.dataclass(frozen=True)
class Batch:
  """Points that run together (one compiled program, vmapped over its runs).

  ``executor``: ``"package.module:function"``; ``function(spec)`` yields
  ``(point id, record dict)`` for every id in ``point_ids``. ``spec`` must be
  picklable (it is sent to a worker process). ``cost``: relative run time,
  used to start the longest batches first. ``key``: the batch's identity in
  the sweep's layout (the same on every host; a sharded sweep's claims,
  :mod:`fedfrac.runner.claims`) and ``position`` its place there.
  """
  executor: str
  spec: Any
  point_ids: tuple
  cost: float = 1.0
  key: str = ""
  position: int = 0


class PointStore:
  """One JSON file per finished point under ``directory/points``.

  Args:
    directory: created when missing.
    fingerprint: JSON-able description of everything the points depend on
      besides their ids; stored in ``directory/sweep.json``.
    overwrite: when the stored fingerprint differs, delete the old points
      instead of refusing (:class:`SweepMismatch`).
  """

  def __init__(self, directory: str, fingerprint: dict, overwrite: bool = False):
    self.directory = os.path.abspath(directory)
    self.points_dir = os.path.join(self.directory, POINTS)
    self.fingerprint = fingerprint
    self.hash = digest(fingerprint)
    manifest = os.path.join(self.directory, MANIFEST)
    old = None
    if os.path.exists(manifest):
      try:
        with open(manifest) as f:
          old = json.load(f)
        if not isinstance(old, dict):
          raise ValueError("not a JSON object")
      except (OSError, ValueError) as e:
        why = "truncated or not JSON" if isinstance(e, ValueError) else e.strerror
        if not overwrite:
          raise SweepMismatch(
              f"point directory {self.directory!r}: {MANIFEST} is unreadable ({why}); "
              f"use a new directory, or pass overwrite (--overwrite) to delete its "
              f"points") from None
        old = {}
      if old.get("hash") != self.hash:
        if not overwrite:
          differing = sorted(k for k in set(old.get("fingerprint", {})) | set(fingerprint)
                             if json.dumps(old.get("fingerprint", {}).get(k), sort_keys=True,
                                           default=str)
                             != json.dumps(fingerprint.get(k), sort_keys=True, default=str))
          raise SweepMismatch(
              f"point directory {self.directory!r} holds points of a different sweep "
              f"(differs in: {', '.join(differing) or 'fingerprint'}); use a new "
              f"directory, or pass overwrite (--overwrite) to delete its points")
        shutil.rmtree(self.points_dir, ignore_errors=True)
    os.makedirs(self.points_dir, exist_ok=True)
    text = json.dumps({"hash": self.hash, "fingerprint": fingerprint}, default=json_default)
    if old is None:   # shards starting at once: one creates it, of this sweep
      if not claims_lib.write_new(manifest, text):
        with open(manifest) as f:
          if json.load(f).get("hash") != self.hash:
            raise SweepMismatch(f"point directory {self.directory!r}: another sweep "
                                f"started in it at the same time; use a new directory")
    elif old.get("hash") != self.hash:
      atomic_write(manifest, text)

  def path(self, pid: str) -> str:
    return os.path.join(self.points_dir, f"{pid}.json")

  def _check(self, pid: str) -> dict:
    """The verified saved point ``pid`` (:class:`sealed.Damaged` when it is not)."""
    saved = sealed.read(self.path(pid))
    if saved.get("id") != pid or "record" not in saved:
      raise sealed.Damaged("not this point's file")
    if saved.get("sweep") != self.hash:
      raise sealed.Damaged("a point of a different sweep")
    return saved

  def done(self) -> set:
    """Ids of the finished points whose files verify. Damaged ones (truncated,
    edited, of another sweep) are not done: they are named in one line on
    stderr and run again (their file is replaced when they finish)."""
    ids, damaged = set(), {}
    for name in sorted(os.listdir(self.points_dir)):
      if not name.endswith(".json"):   # e.g. <id>.json.tmp<pid>: a write cut short
        continue
      pid = name[:-5]
      try:
        self._check(pid)
        ids.add(pid)
      except (OSError, sealed.Damaged) as e:
        reason = str(e) if isinstance(e, sealed.Damaged) else (e.strerror or "unreadable")
        damaged.setdefault(reason, []).append(name)
    if damaged:
      n = sum(len(v) for v in damaged.values())
      why = "; ".join(f"{len(v)} {r}: {', '.join(v[:3])}{', ...' if len(v) > 3 else ''}"
                      for r, v in damaged.items())
      print(f"sweep points in {self.points_dir}: {n} failed verification ({why}); "
            f"running {'it' if n == 1 else 'them'} again", file=sys.stderr)
    return ids

  def has(self, pid: str) -> bool:
    """Whether point ``pid`` is finished (its file verifies)."""
    try:
      self._check(pid)
      return True
    except (OSError, sealed.Damaged):
      return False

  def write(self, pid: str, record: dict):
    """Write point ``pid`` sealed and atomically (temporary file, then rename)."""
    sealed.write(self.path(pid), {"id": pid, "sweep": self.hash, "record": record})

  def load(self, pid: str) -> dict:
    """The verified record of point ``pid``; :class:`SweepMismatch` (one line)
    when its file is missing or fails verification."""
    try:
      return self._check(pid)["record"]
    except (OSError, sealed.Damaged) as e:
      reason = str(e) if isinstance(e, sealed.Damaged) else (e.strerror or "unreadable")
      raise SweepMismatch(f"point file {self.path(pid)!r} failed verification "
                          f"({reason}); rerun the same command to run it again") from None


# ---------------------------------------------------------------------- running


def resolve(executor: str) -> Callable:
  """The function named ``"package.module:function"``."""
  module, _, name = executor.partition(":")
  return getattr(importlib.import_module(module), name)


def _run_batch(batch: Batch, store: PointStore, claims=None) -> Iterable[str]:
  """Run ``batch`` and write its points; with ``claims`` (a sharded sweep) only
  after claiming it, and not when another shard holds it or finished it."""
  wanted = set(batch.point_ids)
  with claims_lib.holding(claims, batch.key or digest(sorted(wanted))) as held:
    if not held or (claims is not None and all(store.has(p) for p in wanted)):
      return
    for pid, record in resolve(batch.executor)(batch.spec):
      if pid in wanted:
        store.write(pid, record)
        yield pid


def _pin_to_core():
  core = os.environ.get("FEDFRAC_CPU_CORE")
  if core is not None and hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {int(core)})


def _queue_worker(target, tasks, results, graceful=False, extensions=None):
  """A worker process: pin to its CPU core (if given one), register the parent's
  own algorithms and models (``extensions``), then run
  ``target(item, emit)`` on items until a ``None``; ``emit(payload)`` sends a
  message to the parent. ``graceful``: SIGINT / SIGTERM ask the current item
  to stop at its next safe point (:func:`fedfrac.runner.signals.stop_requested`),
  and no further item is started."""
  if graceful:
    signals.install_in_worker()
  _pin_to_core()
  importlib.import_module("fedfrac.runner.parallel").install_extensions(extensions)
  function = resolve(target)
  while True:
    task = tasks.get()
    if task is None or signals.stop_requested():
      return
    index, item = task
    try:
      function(item, lambda payload, i=index: results.put(("message", i, payload)))
      results.put(("done", index, None))
    except DiskFullError as e:   # one line, raised again by the parent
      results.put(("full", index, str(e)))
      return
    except BaseException:   # reported to the parent, which stops the queue
      results.put(("error", index, traceback.format_exc()))
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
  Raises RuntimeError when an item fails (its traceback in the message) or
  every worker died, :class:`DiskFullError` when an item found the disk full;
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
  from fedfrac.runner.parallel import extensions_for_workers
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
                      args=(target, tasks, results, graceful, extensions),
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
            raise RuntimeError(f"every worker exited with {len(remaining)} tasks left "
                               "(killed, or out of memory?)") from None
          continue
        if kind == "message":
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
    for p in procs:
      if remaining:       # a failure or an interrupt: stop the others
        p.kill() if at_once else p.terminate()
      p.join()            # reaped, so their CPU time counts in RUSAGE_CHILDREN
  return n


def _batch_task(item, emit):
  """:func:`work_queue` target of :func:`execute`: run one batch, write its
  points, emit each point id."""
  store_args, batch, claims = item
  store = PointStore.__new__(PointStore)
  store.__dict__.update(store_args)
  for pid in _run_batch(batch, store, claims):
    emit(pid)


def execute(batches: list, store: PointStore, workers: Optional[int] = None,
            on_point: Optional[Callable] = None, log: Callable = print,
            claims=None, order: Optional[list] = None) -> dict:
  """Run ``batches`` (longest ``cost`` first) and write their points to ``store``.

  Args:
    workers: number of worker processes; ``None``: one per local device
      (:func:`local_workers`); ``0`` or ``1``: run in this process.
    on_point: ``on_point(point id)`` after each point is written (progress).
    claims: a :class:`fedfrac.runner.claims.Claims` (a sharded sweep): each
      batch runs only once claimed; the claims still held are released when
      the sweep stops early.
    order: the indices of ``batches`` in the order to start them (default:
      longest ``cost`` first).
  Returns:
    ``{"workers": n, "wall_s": seconds}``.
  Raises:
    RuntimeError: a batch failed (its traceback in the message); the other
      workers are stopped and their finished points kept.
    fedfrac.runner.signals.Interrupted: SIGINT or SIGTERM; the batches running
      are abandoned, the finished points kept, the workers stopped.
  """
  on_point = on_point or (lambda pid: None)
  if order is None:
    order = sorted(range(len(batches)), key=lambda i: -batches[i].cost)
  envs = local_workers()
  n = len(envs) if workers is None else int(workers)
  n = max(1, min(n, len(batches))) if batches else 1
  if n > 1 and importlib.import_module("fedfrac.runner.parallel").cannot_ship(log):
    n = 1
  t0 = time.perf_counter()
  try:
    if n <= 1 or len(batches) <= 1:
      with signals.Signals(graceful=False):   # SIGTERM stops at once, like Ctrl-C
        for i in order:
          for pid in _run_batch(batches[i], store, claims):
            on_point(pid)
      return {"workers": 1, "wall_s": time.perf_counter() - t0}
    items = [(dict(store.__dict__), b, claims) for b in batches]
    n = work_queue(items, "fedfrac.runner.points:_batch_task", n,
                   lambda index, pid: on_point(pid), order=order, name="fedfrac-sweep")
  except RuntimeError as e:
    raise RuntimeError(str(e).replace("task ", "sweep batch ", 1)) from None
  finally:
    if claims is not None:   # workers stopped at once leave theirs behind
      claims.release_owned()
  return {"workers": n, "wall_s": time.perf_counter() - t0}
