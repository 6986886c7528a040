"""A reproduction's ``ff.run_many`` calls, run as ``fedfrac.sweep`` points.

A *job* (:class:`Job`) is one ``ff.run_many(config, seeds=..., grid=...)``
call of a reproduction (a κ0 grid of one Kuramoto setting, one straggler
policy, one BEV study configuration...). :func:`run_jobs` runs a list of them
through the sweep machinery (:mod:`fedfrac.runner.points`) and returns one
:class:`fedfrac.Results` per job, as ``run_many`` would have returned it, so a
table writer does not know how its runs were scheduled:

* every (job, method label, grid value, seed) is one *point*; its id is the
  digest of what defines the run: the job's resolved config as JSON (less its
  name, seeds, ``only``, progress switch, ``workers`` and other methods, which do not
  change a run), the label, the seed and the grid value. Two jobs that define the same run (two
  studies sharing a configuration) share its point and run it once;
* the missing points of one (job, method label) form one
  :class:`~fedfrac.runner.points.Batch`: one compiled program vmapped over its
  seeds × grid values, the program ``run_many`` compiles for that method
  (executor :func:`run_batch`; the spec holds the config as a picklable
  ``ConfigDict`` with ``only`` = the label);
* batches run as a work queue over ``workers`` processes (one per CPU core or
  device; 1: in this process) and every finished point is one JSON file of a
  :class:`~fedfrac.runner.points.PointStore` whose fingerprint holds the
  digest of the code (``fedfrac/`` and ``configs/``) and of the jobs, so a
  rerun after an interruption runs only the missing points and a changed
  config or code refuses to mix with old points unless ``overwrite``.

A point holds the whole :class:`~fedfrac.runner.records.RunRecord` (rows,
per-round rows, status, times, per-client arrays with their dtype and shape);
JSON keeps Python floats exactly (``repr``), so a record read back equals the
one written.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from typing import Any, Callable, Optional

import numpy as np

from fedfrac import algorithms, runner
from fedfrac import config as config_lib
from fedfrac import config_base
from fedfrac._version import __version__
from fedfrac_lab.reproduce import common
from fedfrac.runner import points as points_lib
from fedfrac.runner.records import RunRecord

EXECUTOR = "fedfrac_lab.reproduce.jobs:run_batch"
# Keys of a config that do not change a run (the point names its seed itself).
NOT_IN_KEY = ("name", "seeds", "only", "progress", "workers")
# Datasets built by the batches of this process (a worker keeps them between
# batches: the jobs of one reproduction share a few datasets).
_DATA_CACHE: dict = {}


@dataclasses.dataclass(frozen=True)
class Job:
  """One ``ff.run_many(config, seeds=seeds, grid=grid)`` call.

  ``seeds``: None = ``config.seeds``; ``grid``: None or ``{option: [values]}``
  (one option, as ``run_many`` takes it)."""
  config: Any
  seeds: Optional[tuple] = None
  grid: Optional[dict] = None

  def run_seeds(self) -> tuple:
    return tuple(int(s) for s in (self.config.seeds if self.seeds is None else self.seeds))


@dataclasses.dataclass
class JobsOutcome:
  """What :func:`run_jobs` did: one ``Results`` per job (in job order), the
  number of points, how many ran now and how many an earlier run had already
  finished, the workers, the wall time, the CPU time of this process and its
  workers, and the point directory (None when it was a temporary one)."""
  results: list
  total: int
  ran: int
  skipped: int
  workers: int
  wall_s: float
  cpu_s: float
  directory: Optional[str]


def add_point_flags(parser, name, batches="(setting, method) batches",
                    things="runs", resume=True) -> None:
  """The point runner's flags of reproduction ``name``: ``--workers`` (processes
  running ``batches`` in parallel), ``--dir`` and ``--overwrite``, and with
  ``resume`` ``--resume`` (keep ``things`` under ``$TMPDIR/fedfrac_points/<name>``)."""
  parser.add_argument("--workers", type=common.worker_count, default=None,
                      help=f"worker processes running {batches} in parallel "
                      "(default: one per CPU core or device; 1: in this process)")
  if resume:
    parser.add_argument("--resume", action="store_true",
                        help=f"keep each finished {things[:-1]} under "
                        f"$TMPDIR/fedfrac_points/{name} and reuse it when the same "
                        "code runs the same grid again")
  parser.add_argument("--dir", type=common.output_path("--dir", directory=True),
                      default=None,
                      help=f"keep finished {things} here (one JSON each) and skip them "
                      f"on a rerun; refuses {things} of different code or arguments")
  parser.add_argument("--overwrite", action="store_true",
                      help=f"delete --dir's {things} when they are of different code "
                      "or arguments instead of refusing")


def config_key(config) -> dict:
  """``config`` as a JSON dict without the keys that do not change a run."""
  out = json.loads(config.to_json_best_effort(sort_keys=True))
  for k in NOT_IN_KEY:
    out.pop(k, None)
  return out


def grid_values(config, label, grid) -> list:
  """The grid values method ``label`` runs: all of ``grid``'s when the method
  has the option (as ``run_many`` decides), else ``[None]`` (it runs once)."""
  if not grid:
    return [None]
  option, values = next(iter(grid.items()))
  method = config.methods[label]
  if option not in algorithms.hparams(method.name, config_base.method_options(method)):
    return [None]
  return list(values)


def run_label(label, grid, value) -> str:
  """The record label ``run_many`` gives a grid run: ``label[option=value]``."""
  return label if value is None else f"{label}[{next(iter(grid))}={value}]"


def method_key(config, label) -> dict:
  """What defines the runs of method ``label`` of ``config``: :func:`config_key`
  with ``methods`` cut to that method (the other methods do not change them)."""
  key = config_key(config)
  key["methods"] = {label: key["methods"][label]}
  return key


def job_points(name, job) -> list:
  """``[(label, value, seed, point id)]`` of one job, in ``run_many``'s record
  order (method labels, then seeds, then grid values)."""
  out = []
  for label in config_base.method_labels(job.config):
    key = method_key(job.config, label)
    values = grid_values(job.config, label, job.grid)
    for seed in job.run_seeds():
      for v in values:
        grid = None if v is None else [next(iter(job.grid)), v]
        pid = points_lib.point_id({"reproduce": name, "config": key, "label": label,
                                   "seed": seed, "grid": grid})
        out.append((label, v, seed, pid))
  return out


def code_digest(folders=None) -> str:
  """Hash of the code that produces the numbers: every ``.py`` file under
  ``fedfrac/`` and the checkout's ``configs/`` (when there is one)."""
  if folders is None:
    folders = [common.PACKAGE_DIR, os.path.join(common.CHECKOUT_DIR, "configs")]
  h = hashlib.sha256()
  for folder in folders:
    for dirpath, dirs, files in os.walk(folder):
      dirs.sort()
      for fname in sorted(files):
        if fname.endswith(".py"):
          path = os.path.join(dirpath, fname)
          h.update(os.path.relpath(path, folder).encode())
          with open(path, "rb") as f:
            h.update(f.read())
  return h.hexdigest()[:16]


def fingerprint(name, jobs) -> dict:
  """What the points of a reproduction depend on besides their ids: the code and
  the jobs (each job's config digest, seeds and grid), so a changed config is
  refused by a directory that holds the points of the old one."""
  return {"reproduce": name, "code": code_digest(), "fedfrac": __version__,
          "jobs": [{"config": points_lib.digest(config_key(j.config)),
                    "seeds": list(j.run_seeds()), "grid": j.grid} for j in jobs]}


def points_directory(name, fp) -> str:
  """Where ``--resume`` keeps a reproduction's points: under
  ``$TMPDIR/fedfrac_points/<name>/``, keyed by the fingerprint."""
  return os.path.join(tempfile.gettempdir(), "fedfrac_points", name,
                      points_lib.digest(fp))


# ------------------------------------------------------------------- records


def encode_record(rec: RunRecord) -> dict:
  """A :class:`RunRecord` as a JSON-able dict (per-client arrays as
  ``{"dtype", "shape", "values"}``; ``stopped`` only for a run that stopped at
  its target)."""
  out = {"method": rec.method, "algorithm": rec.algorithm, "seed": int(rec.seed),
         "rows": rec.rows, "round_rows": rec.round_rows, "status": rec.status,
         "compile_s": float(rec.compile_s), "wall_s": float(rec.wall_s),
         "nonfinite_allowed": list(rec.nonfinite_allowed),
         "client_arrays": {k: {"dtype": str(np.asarray(a).dtype),
                               "shape": list(np.shape(a)),
                               "values": np.asarray(a).ravel().tolist()}
                           for k, a in rec.client_arrays.items()}}
  if rec.stopped is not None:
    out["stopped"] = rec.stopped
  return out


def decode_record(d: dict) -> RunRecord:
  """Inverse of :func:`encode_record`."""
  arrays = {k: np.asarray(a["values"], dtype=a["dtype"]).reshape(a["shape"])
            for k, a in d["client_arrays"].items()}
  return RunRecord(d["method"], d["algorithm"], d["seed"], d["rows"], d["round_rows"],
                   d["status"], d["compile_s"], d["wall_s"], arrays,
                   tuple(d["nonfinite_allowed"]), stopped=d.get("stopped"))


# ------------------------------------------------------------------- running


def run_batch(spec):
  """Executor of one batch: ``ff.run_many`` of one method (``spec["config"]``
  with ``only`` = its label) over ``spec["seeds"]`` × its grid values; yields
  ``(point id, encoded record)`` per run, in ``run_many``'s order."""
  # The cache is the command's (fedfrac-reproduce turns it on; the GPU campaign
  # keeps its stages apart): run_many leaves it as it is.
  records = runner.run_many(spec["config"], seeds=tuple(spec["seeds"]), grid=spec["grid"],
                            progress=False, data_cache=_DATA_CACHE,
                            compile_cache=False).records
  ids = {(seed, v): pid for seed, v, pid in spec["ids"]}
  expected = [(seed, v) for seed in spec["seeds"] for v in spec["values"]]
  if len(records) != len(expected):
    raise RuntimeError(f"run_many returned {len(records)} runs for {spec['label']!r}, "
                       f"expected {len(expected)}")
  for (seed, v), rec in zip(expected, records):
    want = run_label(spec["label"], spec["grid"], v)
    if rec.method != want or int(rec.seed) != seed:
      raise RuntimeError(f"run_many returned run ({rec.method!r}, seed {rec.seed}) "
                         f"where ({want!r}, seed {seed}) was expected")
    yield ids[(seed, v)], encode_record(rec)


def pack(name, jobs, done) -> list:
  """Batches of the points not in ``done``: one per (job, method label) with a
  missing point. A batch runs all the seeds and grid values of its method, as
  ``run_many`` does (a vmapped batch of another size can differ in the last
  bits of a float), and writes only the missing points, so a resumed
  reproduction equals an uninterrupted one. A point that two jobs define (same
  id) is packed once."""
  batches, seen = [], set()
  for job in jobs:
    pts = job_points(name, job)
    for label in config_base.method_labels(job.config):
      mine = [p for p in pts if p[0] == label]
      missing = [p for p in mine if p[3] not in done and p[3] not in seen]
      if not missing:
        continue
      seen.update(p[3] for p in missing)
      config = job.config.copy_and_resolve_references()
      config.only = label
      config.progress = False
      values = grid_values(job.config, label, job.grid)
      spec = {"config": config, "label": label, "seeds": list(job.run_seeds()),
              "values": values, "grid": job.grid if values != [None] else None,
              "ids": [(seed, v, pid) for _, v, seed, pid in mine]}
      batches.append(points_lib.Batch(EXECUTOR, spec, tuple(p[3] for p in missing),
                                      cost=float(len(mine) * config.rounds)))
  return batches


def run_seconds(results) -> float:
  """Seconds the runs of ``results`` took (compile + rounds): per method, its
  vmapped batch's wall time (every run of a batch records the batch's) plus
  its compile time (shared out over the batch's runs)."""
  total: dict = {}
  for rec in results.records:
    label = rec.method.split("[")[0]
    wall, comp = total.get(label, (0.0, 0.0))
    total[label] = (max(wall, rec.wall_s), comp + rec.compile_s)
  return float(sum(w + c for w, c in total.values()))


def log_stderr(msg):
  print(msg, file=sys.stderr, flush=True)


def cpu_seconds() -> float:
  """CPU seconds of this process and its finished worker processes."""
  me = resource.getrusage(resource.RUSAGE_SELF)
  children = resource.getrusage(resource.RUSAGE_CHILDREN)
  return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def run_jobs(name: str, jobs: list, workers: Optional[int] = 1,
             directory: Optional[str] = None, resume: bool = False,
             overwrite: bool = False, log: Callable = log_stderr) -> JobsOutcome:
  """Run ``jobs`` as sweep points; one ``Results`` per job in the outcome.

  Args:
    name: the reproduction (``"kuramoto"``...), part of every point id.
    jobs: :class:`Job` s; each one's config is validated first.
    workers: worker processes (None: one per CPU core or device; 1: here).
    directory: keep the points here; a rerun skips the finished ones and a
      directory holding the points of other code or jobs is refused
      (:class:`fedfrac.runner.points.SweepMismatch`) unless ``overwrite``.
      None: with ``resume``, :func:`points_directory`; else a temporary
      directory, deleted at the end.
  Returns:
    :class:`JobsOutcome`; ``results[i]`` holds the records ``ff.run_many``
    returns for ``jobs[i]``, in its order, and ``jobs[i].config``.
  """
  t0, c0 = time.perf_counter(), cpu_seconds()
  for job in jobs:
    config_lib.validate(job.config)
  fp = fingerprint(name, jobs)
  temporary = directory is None and not resume
  if directory is None:
    directory = (points_directory(name, fp) if resume else
                 tempfile.mkdtemp(prefix=f"fedfrac_{name}_points_"))
  store = points_lib.PointStore(directory, fp, overwrite)
  try:
    all_points = [job_points(name, job) for job in jobs]
    ids = {p[3] for pts in all_points for p in pts}
    done = store.done() & ids
    batches = pack(name, jobs, done)
    n_run = sum(len(b.point_ids) for b in batches)
    log(f"{name}: {len(ids)} points, {len(done)} already done in {store.directory}, "
        f"{n_run} to run in {len(batches)} batches")
    stats = points_lib.execute(batches, store, workers=workers, log=log)
    results = [runner.Results(job.config, [decode_record(store.load(p[3])) for p in pts])
               for job, pts in zip(jobs, all_points)]
  finally:
    _DATA_CACHE.clear()
    if temporary:
      shutil.rmtree(store.directory, ignore_errors=True)
  return JobsOutcome(results, len(ids), n_run, len(done),
                     stats["workers"] if batches else 0, time.perf_counter() - t0,
                     cpu_seconds() - c0, None if temporary else store.directory)
