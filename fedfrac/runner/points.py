"""Sweep points on disk and a work queue of batches over every local device.

A sweep is a set of *points* (one run: e.g. one method, config point, grid value
and seed). Each point has an id (a hash of what defines it, :func:`point_id`)
and, once finished, one JSON file ``<directory>/points/<id>.json`` written to a
temporary name and renamed (:class:`PointStore`), so a killed sweep loses at
most the batches that were running and a rerun skips every finished point.
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
points themselves, so finished points survive a killed parent.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import os
import queue
import shutil
import subprocess
import time
import traceback
from typing import Any, Callable, Iterable, Optional

from fedfrac.runner.checkpoint import json_default

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
  used to start the longest batches first.
  """
  executor: str
  spec: Any
  point_ids: tuple
  cost: float = 1.0


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
    if os.path.exists(manifest):
      with open(manifest) as f:
        old = json.load(f)
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
    self._write(manifest, {"hash": self.hash, "fingerprint": fingerprint})

  @staticmethod
  def _write(path, obj):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
      json.dump(obj, f, default=json_default)
    os.replace(tmp, path)

  def path(self, pid: str) -> str:
    return os.path.join(self.points_dir, f"{pid}.json")

  def done(self) -> set:
    """Ids of the finished points."""
    return {name[:-5] for name in os.listdir(self.points_dir) if name.endswith(".json")}

  def write(self, pid: str, record: dict):
    """Write point ``pid`` atomically (temporary file, then rename)."""
    self._write(self.path(pid), {"id": pid, "sweep": self.hash, "record": record})

  def load(self, pid: str) -> dict:
    with open(self.path(pid)) as f:
      saved = json.load(f)
    if saved.get("sweep") != self.hash:
      raise SweepMismatch(f"point file {self.path(pid)!r} belongs to a different sweep")
    return saved["record"]


# --------------------------------------------------------------------- devices


def _gpu_count() -> int:
  if os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
    return len([d for d in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()])
  if shutil.which("nvidia-smi") is None:
    return 0
  try:
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
  except (OSError, subprocess.SubprocessError):
    return 0
  return sum(line.startswith("GPU ") for line in out.stdout.splitlines())


def _tpu_count() -> int:
  return len([d for d in os.listdir("/dev") if d.startswith("accel")]) if os.path.isdir(
      "/dev") else 0


def _cpu_cores() -> list:
  try:
    return sorted(os.sched_getaffinity(0))
  except AttributeError:
    return list(range(os.cpu_count() or 1))


def local_workers(platform: Optional[str] = None) -> list:
  """One environment per worker process: ``[(kind, env updates)]``.

  Found without initialising JAX in this process (so a GPU parent does not
  reserve device memory its workers need): ``JAX_PLATFORMS=cpu`` or no
  accelerator -> one worker per usable CPU core (``cpu``, pinned with
  ``sched_setaffinity``, one XLA CPU device each); NVIDIA GPUs (``nvidia-smi``)
  -> one per GPU (``CUDA_VISIBLE_DEVICES``); TPU chips (``/dev/accel*``) -> one
  per chip (``TPU_VISIBLE_CHIPS``, one-chip process bounds).
  """
  platform = platform or os.environ.get("JAX_PLATFORMS", "").split(",")[0].strip()
  if platform in ("", "cuda", "gpu"):
    n = _gpu_count()
    if n:
      return [("gpu", {"CUDA_VISIBLE_DEVICES": str(i)}) for i in range(n)]
  if platform in ("", "tpu"):
    n = _tpu_count()
    if n:
      return [("tpu", {"TPU_VISIBLE_CHIPS": str(i), "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
                       "TPU_PROCESS_BOUNDS": "1,1,1"}) for i in range(n)]
  flags = " ".join(f for f in os.environ.get("XLA_FLAGS", "").split()
                   if not f.startswith("--xla_force_host_platform_device_count"))
  return [("cpu", {"JAX_PLATFORMS": "cpu", "FEDFRAC_CPU_CORE": str(core),
                   "XLA_FLAGS": (flags + " --xla_force_host_platform_device_count=1").strip()})
          for core in _cpu_cores()]


def worker_memory_bytes(num_workers: int = 1) -> int:
  """Memory one worker may fill: its accelerator's ``bytes_limit``, or on a CPU
  host the physical memory divided among ``num_workers`` workers."""
  import jax
  stats = None
  try:
    stats = jax.local_devices()[0].memory_stats()
  except Exception:   # backends without memory statistics
    stats = None
  if stats and stats.get("bytes_limit"):
    return int(stats["bytes_limit"])
  total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  return int(total // max(1, num_workers))


# ---------------------------------------------------------------------- running


def resolve(executor: str) -> Callable:
  """The function named ``"package.module:function"``."""
  module, _, name = executor.partition(":")
  return getattr(importlib.import_module(module), name)


def _run_batch(batch: Batch, store: PointStore) -> Iterable[str]:
  wanted = set(batch.point_ids)
  for pid, record in resolve(batch.executor)(batch.spec):
    if pid in wanted:
      store.write(pid, record)
      yield pid


def _pin_to_core():
  core = os.environ.get("FEDFRAC_CPU_CORE")
  if core is not None and hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {int(core)})


def _queue_worker(target, tasks, results):
  """A worker process: pin to its CPU core (if given one), then run
  ``target(item, emit)`` on items until a ``None``; ``emit(payload)`` sends a
  message to the parent."""
  _pin_to_core()
  function = resolve(target)
  while True:
    task = tasks.get()
    if task is None:
      return
    index, item = task
    try:
      function(item, lambda payload, i=index: results.put(("message", i, payload)))
      results.put(("done", index, None))
    except BaseException:   # reported to the parent, which stops the queue
      results.put(("error", index, traceback.format_exc()))
      return


def work_queue(items: list, target: str, workers: int,
               on_message: Callable[[int, Any], None], order: Optional[list] = None,
               name: str = "fedfrac-worker", pin: bool = True) -> int:
  """Run ``resolve(target)(item, emit)`` for every item in ``workers`` spawned
  processes, one per local device (:func:`local_workers`; more workers than
  devices share them), items taken from one queue in ``order``. ``pin=False``
  leaves CPU workers unpinned (the OS spreads them over the cores, which is
  kinder to a machine other jobs share).

  ``emit(payload)`` in a worker calls ``on_message(item index, payload)`` in
  this process (payloads must be picklable). Returns the number of workers.
  Raises RuntimeError when an item fails (its traceback in the message) or
  every worker died; the other workers are then stopped. Their own side
  effects (files written) are kept.
  """
  import multiprocessing as mp
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
      p = ctx.Process(target=_queue_worker, args=(target, tasks, results), daemon=True,
                      name=f"{name}-{kind}{w}")
      p.start()
    finally:
      for k, v in saved.items():
        if v is None:
          os.environ.pop(k, None)
        else:
          os.environ[k] = v
    procs.append(p)
  remaining = set(order)
  try:
    while remaining:
      try:
        kind, index, payload = results.get(timeout=5.0)
      except queue.Empty:
        if not any(p.is_alive() for p in procs):
          raise RuntimeError(f"every worker exited with {len(remaining)} tasks left "
                             "(killed, or out of memory?)") from None
        continue
      if kind == "message":
        on_message(index, payload)
      elif kind == "done":
        remaining.discard(index)
      else:
        raise RuntimeError(f"task {index} failed in a worker:\n{payload}")
  finally:
    for p in procs:
      if remaining:       # a failure or an interrupt: stop the others
        p.terminate()
      p.join()            # reaped, so their CPU time counts in RUSAGE_CHILDREN
  return n


def _batch_task(item, emit):
  """:func:`work_queue` target of :func:`execute`: run one batch, write its
  points, emit each point id."""
  store_args, batch = item
  store = PointStore.__new__(PointStore)
  store.__dict__.update(store_args)
  for pid in _run_batch(batch, store):
    emit(pid)


def execute(batches: list, store: PointStore, workers: Optional[int] = None,
            on_point: Optional[Callable] = None, log: Callable = print) -> dict:
  """Run ``batches`` (longest ``cost`` first) and write their points to ``store``.

  Args:
    workers: number of worker processes; ``None``: one per local device
      (:func:`local_workers`); ``0`` or ``1``: run in this process.
    on_point: ``on_point(point id)`` after each point is written (progress).
  Returns:
    ``{"workers": n, "wall_s": seconds}``.
  Raises:
    RuntimeError: a batch failed (its traceback in the message); the other
      workers are stopped and their finished points kept.
  """
  on_point = on_point or (lambda pid: None)
  order = sorted(range(len(batches)), key=lambda i: -batches[i].cost)
  envs = local_workers()
  n = len(envs) if workers is None else int(workers)
  n = max(1, min(n, len(batches))) if batches else 1
  t0 = time.perf_counter()
  if n <= 1 or len(batches) <= 1:
    for i in order:
      for pid in _run_batch(batches[i], store):
        on_point(pid)
    return {"workers": 1, "wall_s": time.perf_counter() - t0}
  items = [(dict(store.__dict__), b) for b in batches]
  try:
    n = work_queue(items, "fedfrac.runner.points:_batch_task", n,
                   lambda index, pid: on_point(pid), order=order, name="fedfrac-sweep")
  except RuntimeError as e:
    raise RuntimeError(str(e).replace("task ", "sweep batch ", 1)) from None
  return {"workers": n, "wall_s": time.perf_counter() - t0}
