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
the old ones unless ``overwrite=True``, which deletes the old points: only the
files fedfrac wrote there (each point file says so itself: a sealed record of
the point its name gives, or a write of one cut short); files of one's own in
``points/`` are named and nothing is deleted.

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
import json
import os
import re
import sys
import time
from typing import Any, Callable, Iterable, Optional

from fedfrac.runner import claims as claims_lib
from fedfrac.runner import extensions, sealed, signals
from fedfrac.runner.checkpoint import atomic_write, json_default
from fedfrac.runner.local_devices import local_workers, worker_memory_bytes  # noqa: F401
from fedfrac.runner.work_queue import resolve, work_queue  # noqa: F401  (their old home)

MANIFEST = "sweep.json"
POINTS = "points"
_CUT_SHORT = re.compile(r"^[0-9a-f]+\.json\.tmp\d+$")   # a point write cut short
_POINT_FILE = re.compile(r"^[0-9a-f]+\.json$")   # <point id>.json; other names are not points
SHOWN = 5   # files of one's own named in a refusal


def digest(obj, length=16) -> str:
  """Hex SHA-256 (first ``length`` digits) of ``obj`` as canonical JSON."""
  text = json.dumps(obj, sort_keys=True, default=str)
  return hashlib.sha256(text.encode()).hexdigest()[:length]


def point_id(key: dict) -> str:
  """The id of the point defined by ``key`` (a JSON-able dict): its digest."""
  return digest(key)


class SweepMismatch(ValueError):
  """A point directory holds points of a different sweep."""


def _fedfracs(points_dir, name) -> bool:
  """Whether ``points_dir/name`` is a file fedfrac wrote: the sealed record of
  the point its name gives, or a write of one cut short."""
  path = os.path.join(points_dir, name)
  if not os.path.isfile(path) or os.path.islink(path):
    return False
  if _CUT_SHORT.match(name):
    return True
  try:
    return name.endswith(".json") and sealed.read(path).get("id") == name[:-5]
  except (OSError, sealed.Damaged):
    return False


def remove_points(points_dir) -> None:
  """Delete the point files fedfrac wrote in ``points_dir``; refuse
  (:class:`SweepMismatch`, one line naming them) when it holds files of one's
  own, and delete nothing then."""
  if not os.path.isdir(points_dir):
    return
  names = sorted(os.listdir(points_dir))
  foreign = [n + ("/" if os.path.isdir(os.path.join(points_dir, n)) else "")
             for n in names if not _fedfracs(points_dir, n)]
  if foreign:
    shown = ", ".join(foreign[:SHOWN]) + (f" and {len(foreign) - SHOWN} more"
                                          if len(foreign) > SHOWN else "")
    raise SweepMismatch(f"--overwrite: {points_dir} holds files fedfrac did not write "
                        f"({shown}); move them out of the way (nothing was deleted)")
  for name in names:
    os.remove(os.path.join(points_dir, name))


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
              f"remove {manifest} to write it again for this sweep (its points are "
              f"kept where they verify as this sweep's, the others run again), use a "
              f"new directory, or pass overwrite (--overwrite) to delete its "
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
        remove_points(self.points_dir)
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
    stderr and run again (their file is replaced when they finish). A file whose
    name is not a point id's (a user's ``notes.json``) is no point: left alone."""
    ids, damaged = set(), {}
    for name in sorted(os.listdir(self.points_dir)):
      if not _POINT_FILE.match(name):   # e.g. <id>.json.tmp<pid>: a write cut short
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
  if n > 1 and extensions.cannot_ship(log, [b.spec for b in batches]):
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
