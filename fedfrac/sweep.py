"""Sweeps: config axes × methods × seeds × one vmapped grid, packed into batches,
run as a work queue over every local device, resumable; one table at the end.

  fedfrac-sweep --config=configs/fofedavg/digits.py \\
      --grid=alpha=0.5,0.6,0.8,0.97,1.0 --grid_methods=fofedavg \\
      --out=results/fractional_digits.md

Flags:
  --config FILE         a configs/*.py file (its get_config()).
  --set KEY=VALUE       a fixed override (repeatable), e.g. --set=rounds=50,
                        --set=methods.fofedavg.delta=1e-4.
  --sweep KEY=V1,V2     a config axis (repeatable); every combination of the
                        axes is one separate point, e.g. --sweep=data.alpha=0.1,1.0.
                        Separate values with ';' when they contain commas:
                        --sweep="model.hidden=(64,);(128,64)".
  --grid OPTION=V1,V2   one continuous algorithm option whose values run as one
                        compiled program with the seeds (``ff.run_many``).
  --grid_methods A,B    method labels the grid applies to (default: every method
                        that has the option).
  --seeds 0,1,2         seeds (default: the config's).
  --metrics M1,M2       final-round metrics to tabulate (default: accuracy, or
                        rmse for regression); any column of metrics.csv works,
                        e.g. server/drift_mean; ``mean:<name>`` is the mean over
                        all rounds of a per-round column (rounds.csv), NaNs skipped.
  --no_batch            run every point alone with ``ff.run`` instead of
                        vmapping a batch's runs with ``ff.run_many``.
  --out FILE.md         markdown table; FILE.csv, FILE.json, FILE.png (the metrics
                        per config point) and the two figures of ``ff.run(...).plot()``,
                        FILE_rounds.png (one panel per method family, FedAvg dashed)
                        and FILE_ranking.png (final values ranked), next to it.
  --dir DIR             where finished points are kept (one JSON each; default
                        FILE.points/ next to --out, else a temporary folder).
  --overwrite           delete DIR's points when they belong to a different sweep
                        (changed config, metrics, axes or grid) instead of refusing.
  --workers N           worker processes (default: one per GPU / TPU chip, or per
                        CPU core on a CPU host; 1 runs in this process).
  --batch_size N        at most N runs vmapped in one batch (default 0: as many
                        as fit the device's memory by a simple bytes model,
                        ``run_bytes``).
  --no_progress         no progress bar.
  --shard I/N           run as shard I of N (0 <= I < N), e.g. one per host of a
                        cluster, all sharing one point directory (--dir, or the
                        FILE.points/ of --out): each batch runs once, on the shard
                        that claims it (its own share first, then any batch not
                        claimed yet); the shard that finishes last writes the
                        table. --shard=auto: I and N from a SLURM job array
                        (SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_COUNT).
  --claim_timeout S     a claim whose heartbeat is older than S seconds (a host
                        that died) is taken over by the next shard that meets it
                        (default 600).
  --table               run nothing: write the table of the finished points (of
                        the shards, once they are all done).

Bad input (a flag, a key, a value at any sweep point, an unwritable --out, a
--metrics name no method writes, a bad data file) is one line ``error: ...``
with exit status 2 before any point runs, as for ``fedfrac-run``
(:mod:`fedfrac.sweep_checks`).

How it runs: every (config point, method, grid value,
seed) is one *point* with an id hashed from its resolved config, seed and grid
value. Points of one config point and method share one compiled program (they
differ only in seed and in the traced grid value), so they are packed into
``ff.run_many`` batches; batches go to a work queue served by one worker
process per device (``fedfrac.runner.points``), each finished point is written
atomically to ``DIR/points/<id>.json``, and a rerun of a killed sweep runs only
the batches that miss a point (a batch cut short runs whole again, so every
point is bit-identical to an uninterrupted sweep's with the same ``--workers``
and ``--batch_size``). The table has one row per (sweep point, method label)
with mean ± std over seeds of each metric's final value; it depends only on
the points, so a resumed sweep's table equals an uninterrupted one's. Each
point file carries its SHA-256: a truncated or edited one is named in one line
and run again. SIGINT (Ctrl-C) and SIGTERM stop the sweep at once, keep the
finished points, stop the workers and exit with status 130 / 143.
Across hosts (``--shard``, :mod:`fedfrac.runner.claims`, docs/scaling.md): claims
are files created with ``O_EXCL`` in DIR/claims, kept alive by a heartbeat, so
two hosts never run the same batch; every shard packs the batches the same way
(the first shard's layout, kept in DIR), so the table equals the one a single
process writes with that layout, bit for bit.
``python -m fedfrac.sweep`` is the same command; from Python,
``points = run(base, axes, seeds, metrics)`` and ``markdown(points, ...)``.
"""
from __future__ import annotations

import argparse
import ast
import csv
import dataclasses
import io
import itertools
import json
import os
import sys
import tempfile
import time

import numpy as np

from fedfrac import algorithms
from fedfrac.algorithms import server_optimizer
from fedfrac import config as config_lib
from fedfrac import config_files, config_keys
from fedfrac import metrics as metrics_lib
from fedfrac import runner, sweep_checks, sweep_inputs
from fedfrac.sweep_inputs import RUN_ONLY_FLAGS, _shown_path, command_line  # noqa: F401
from fedfrac._version import __version__
from fedfrac.config import ConfigError
from fedfrac.data.validate import DataError
from fedfrac.runner import claims as claims_lib
from fedfrac.runner import compile_cache
from fedfrac.runner import log as log_lib
from fedfrac.runner import points as points_lib
from fedfrac.runner import signals
from fedfrac.runner.checkpoint import DiskFullError, atomic_write
from fedfrac.runner.factories import CLIENT_LR
from fedfrac.runner.log import PointProgress


def parse_value(text):
  """A Python literal when ``text`` parses as one, else the string itself."""
  try:
    return ast.literal_eval(text)
  except (ValueError, SyntaxError):
    return text


def parse_assignment(text, flag, many=False):
  """``KEY=VALUE`` (or ``KEY=V1,V2`` with ``many``) -> (key, value or [values]);
  raises :class:`fedfrac.sweep_checks.UsageError` when malformed."""
  UsageError = sweep_checks.UsageError
  if "=" not in text:
    raise UsageError(f"{flag}={text}: expected KEY=VALUE")
  key, raw = text.split("=", 1)
  key = key.strip()
  if not key:
    raise UsageError(f"{flag}={text}: empty key")
  if not many:
    return key, parse_value(raw)
  parts = raw.split(";") if ";" in raw else raw.split(",")
  values = [parse_value(p.strip()) for p in parts if p.strip()]
  if not values:
    raise UsageError(f"{flag}={text}: no values")
  return key, values


def load_config(path):
  """The checked ``get_config()`` of the config file ``path`` (``file.py`` or
  ``file.py:arg``): :func:`fedfrac.config_files.load_config_file`, which raises
  :class:`fedfrac.config.ConfigError` in one line for a bad file or key."""
  return config_files.load_config_file(path)


def set_key(config, dotted, value, flag="--set"):
  """Set ``config.<dotted>`` (creating method options that are not there yet);
  unknown keys and values of the wrong type raise ConfigError
  (:func:`fedfrac.sweep_checks.set_key`)."""
  sweep_checks.set_key(config, dotted, value, flag)


# ------------------------------------------------------------------ points


def grid_targets(config, grid, grid_methods):
  """Method labels of ``config`` that the ``grid`` ({option: values}) applies to."""
  if not grid:
    return []
  labels = config_lib.method_labels(config)
  option = next(iter(grid))
  with_option = [l for l in labels if option == CLIENT_LR or option in
                 algorithms.hparams(config.methods[l].name,
                                    config_lib.method_options(config.methods[l]))]
  unknown = [t for t in grid_methods if t not in labels]
  if unknown:
    raise SystemExit(f"--grid_methods: unknown method label {unknown[0]!r}; labels are "
                     f"{', '.join(labels)}")
  return list(grid_methods) or with_option


def config_key(config) -> dict:
  """``config`` as a JSON dict without the keys a point does not depend on
  (its seeds, which each point names itself, and the progress switch). An
  optax server optimizer given as an object is the text of its settings
  (:func:`fedfrac.algorithms.server_optimizer.describe`), not just its type."""
  out = json.loads(config.to_json_best_effort(sort_keys=True))
  for label, method in config.methods.items():
    value = method.get("server_optimizer", None) if hasattr(method, "get") else None
    if server_optimizer.is_transformation(value):
      out["methods"][label]["server_optimizer"] = server_optimizer.plain(value)
  out.pop("seeds", None)
  out.pop("progress", None)
  return out


def expand(base, axes, seeds, grid=None, grid_methods=()):
  """Every point of the sweep, in table order: config point × method label ×
  grid value × seed. Each is a dict with ``id``, ``axes`` (the config point),
  ``axes_index``, ``label`` (method label), ``run_label`` (with the grid value),
  ``grid`` (value or None), ``seed`` and ``config`` (the point's config with
  ``only`` = its method). Every key of ``base`` is checked first, as the
  command line checks a config file's (:func:`fedfrac.config_keys.check_keys`)."""
  config_keys.check_keys(base)
  if grid is not None and len(grid) != 1:
    raise sweep_checks.UsageError(f"--grid: give exactly one option, got {sorted(grid)}")
  option = next(iter(grid)) if grid else None
  points = []
  for axes_index, (point, config) in enumerate(sweep_points(base, axes)):
    targets = grid_targets(config, grid, list(grid_methods))
    for label in config_lib.method_labels(config):
      single = config.copy_and_resolve_references()
      single.only = label
      key = config_key(single)
      values = list(grid[option]) if label in targets else [None]
      for value in values:
        for seed in seeds:
          points.append({
              "id": points_lib.point_id({"config": key, "seed": int(seed),
                                         "grid": None if value is None else [option, value]}),
              "axes": point, "axes_index": axes_index, "label": label,
              "run_label": label if value is None else f"{label}[{option}={value}]",
              "grid": value, "seed": int(seed), "config": single, "option": option})
  ids = [p["id"] for p in points]
  if len(set(ids)) != len(ids):
    raise sweep_checks.UsageError("the sweep names the same point twice (a value "
                                  "repeated in --sweep or --grid, or a seed in --seeds)")
  return points


def fingerprint(base, axes, grid, grid_methods, metric_names, batch):
  """What every point of this sweep depends on besides its own id; a point
  directory refuses points of a sweep whose fingerprint differs."""
  return {"config": config_key(base), "axes": [k for k, _ in axes],
          "grid": sorted(grid) if grid else None, "grid_methods": sorted(grid_methods),
          "metrics": list(metric_names), "batch": bool(batch),
          "fedfrac": __version__}


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


def _tree_bytes(tree):
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
  return int(data_bytes + 4 * _tree_bytes(state) + 4 * sim.cohort * _tree_bytes(state.server))


def runs_that_fit(config, label, seed, workers=1, data_cache=None, fraction=0.5,
                  memory_bytes=None):
  """How many runs of one batch fit in ``fraction`` of one worker's memory
  (``memory_bytes``, default this host's share for ``workers``)."""
  memory = memory_bytes or points_lib.worker_memory_bytes(workers)
  budget = fraction * memory
  return max(1, int(budget // max(1, run_bytes(config, label, seed, data_cache))))


def point_record(rec, metric_names, spec, value):
  """The JSON record of one finished run (``rec``: a RunRecord)."""
  out = {"axes": spec["axes"], "label": spec["label"], "run_label": rec.method,
         "algorithm": rec.algorithm, "grid": value, "seed": int(rec.seed),
         "status": rec.status, "wall_s": float(rec.wall_s),
         "compile_s": float(rec.compile_s), "metrics": {},
         "final": rec.rows[-1] if rec.rows else {}, "curves": {}}
  for name in metric_names:
    if not name.startswith("mean:") and rec.rows:
      rounds, values = rec.curve(name, default=np.nan)   # a metric of other methods
      out["curves"][name] = {"round": rounds.tolist(),
                             "value": [None if not np.isfinite(v) else float(v)
                                       for v in values]}
    v = _run_value(rec, name)
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
  for label in config_lib.method_labels(config):
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


def _run_value(rec, name):
  """Final-round value of ``name``; ``mean:<name>`` averages it over all rounds."""
  if name.startswith("mean:"):
    values = np.asarray([r.get(name[5:], np.nan) for r in rec.round_rows], np.float64)
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else None
  return rec.rows[-1].get(name) if rec.rows else None


# ------------------------------------------------------------------ tables


def summarize_points(points, records, metric_names):
  """[(config point, summary)] in table order; a summary maps each run label to
  ``{metric: seed_stats, "best_accuracy": ..., "n", "statuses"}`` over seeds."""
  out = {}
  for p in points:
    rec = records[p["id"]]
    axes_entry = out.setdefault(p["axes_index"], (p["axes"], {}))
    axes_entry[1].setdefault(p["run_label"], []).append(rec)
  table = []
  for _, (point, by_label) in sorted(out.items()):
    summary = {}
    for label, recs in by_label.items():
      entry = {"n": len(recs), "statuses": sorted({r["status"] for r in recs})}
      names = list(metric_names) + (["best_accuracy"] if "accuracy" in metric_names else [])
      for name in names:
        entry[name] = metrics_lib.seed_stats([r["metrics"].get(name) for r in recs
                                              if r["metrics"].get(name) is not None])
      summary[label] = entry
    table.append((point, summary))
  return table


def summarize(records, metric_names):
  """Ordered rows of RunRecords: method label -> {metric: seed_stats, status}."""
  spec = {"axes": {}, "label": None}
  recs = [point_record(r, metric_names, spec, None) for r in records]
  points = [{"id": i, "axes": {}, "axes_index": 0, "run_label": r.method}
            for i, r in enumerate(records)]
  return summarize_points(points, dict(enumerate(recs)), metric_names)[0][1]


def fmt(stats, digits=4):
  if not stats or stats["mean"] is None:
    return "n/a"
  if stats["n"] > 1:
    return f"{stats['mean']:.{digits}f} ± {stats['std']:.{digits}f}"
  return f"{stats['mean']:.{digits}f}"


def _cell(value):
  return value if isinstance(value, str) else repr(value)


def _columns(metric_names):
  out = []
  for name in metric_names:
    out.append(name.replace("mean:", "mean over rounds of ") if name.startswith("mean:")
               else f"final {name}")
    if name == "accuracy":
      out.append("best accuracy")
  return out


def markdown(points, sweep_keys, metric_names, title, command, notes):
  """The sweep's markdown table: one row per (config point, method label)."""
  columns = list(sweep_keys) + ["method"] + _columns(metric_names) + ["seeds", "status"]
  lines = [f"# {title}", "", f"Command: `{command}`", ""] + notes + [
      "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
  for point, summary in points:
    for label, entry in summary.items():
      cells = [_cell(point[k]) for k in sweep_keys] + [label]
      for name in metric_names:
        cells.append(fmt(entry[name]))
        if name == "accuracy":
          cells.append(fmt(entry["best_accuracy"]))
      cells += [str(entry["n"]), ", ".join(entry["statuses"])]
      lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def csv_table(points, sweep_keys, metric_names):
  """The same rows as CSV: mean and std of each metric (full precision)."""
  names = list(metric_names) + (["best_accuracy"] if "accuracy" in metric_names else [])
  header = list(sweep_keys) + ["method"] + [f"{n} {s}" for n in names
                                            for s in ("mean", "std")] + ["seeds", "status"]
  buf = io.StringIO()
  writer = csv.writer(buf, lineterminator="\n")
  writer.writerow(header)
  for point, summary in points:
    for label, entry in summary.items():
      row = [_cell(point[k]) for k in sweep_keys] + [label]
      for n in names:
        row += ["" if entry[n]["mean"] is None else repr(entry[n][s]) for s in ("mean", "std")]
      writer.writerow(row + [entry["n"], "; ".join(entry["statuses"])])
  return buf.getvalue()


def plot(points, sweep_keys, metric_names, path):
  """One panel per metric: mean ± std over seeds of every (config point,
  method) row, one series per method label."""
  from fedfrac.runner.plots import Figure   # own Agg canvas: the backend is untouched
  names = [n for n in metric_names]
  xlabels = [", ".join(f"{k}={_cell(p[k])}" for k in sweep_keys) or "all"
             for p, _ in points]
  fig = Figure(figsize=(max(5, 1.2 * len(points) + 2), 3 * len(names)))
  axs = fig.subplots(len(names), 1, squeeze=False)
  labels = list(dict.fromkeys(l for _, s in points for l in s))
  for ax, name in zip(axs[:, 0], names):
    for j, label in enumerate(labels):
      xs, ms, ss = [], [], []
      for i, (_, summary) in enumerate(points):
        stats = summary.get(label, {}).get(name)
        if stats and stats["mean"] is not None:
          xs.append(i + 0.06 * (j - (len(labels) - 1) / 2))
          ms.append(stats["mean"])
          ss.append(stats["std"])
      ax.errorbar(xs, ms, yerr=ss, fmt="o-" if len(xs) > 1 else "o", capsize=3,
                  label=label)
    ax.set_xticks(range(len(points)), xlabels, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(name)
    ax.grid(alpha=0.3)
  axs[0, 0].legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=110)


def write_tables(out, points, sweep_keys, metric_names, title, command, notes,
                 records=()):
  """``out`` (markdown), and the CSV, JSON and PNG next to it, and with the
  point ``records`` the two figures of a run, ``_rounds.png`` and ``_ranking.png``
  (:func:`fedfrac.runner.overview.save_sweep_figures`); returns the markdown."""
  text = markdown(points, sweep_keys, metric_names, title, command, notes)
  os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
  stem = os.path.splitext(out)[0]
  for path, body in ((out, text), (stem + ".csv", csv_table(points, sweep_keys,
                                                            metric_names)),
                     (stem + ".json", json.dumps([{"point": p, "summary": s}
                                                  for p, s in points], indent=2,
                                                 default=str) + "\n")):
    atomic_write(path, body)
  plot(points, sweep_keys, metric_names, stem + ".png")
  if records:
    from fedfrac.runner import overview
    overview.save_sweep_figures(points, list(records), sweep_keys, metric_names[0], title,
                                stem)
  return text


# ------------------------------------------------------------------- sweeps


def sweep_points(base, axes):
  """(point, config) for every combination of the ``axes`` [(key, values)]: the
  config is a copy of ``base`` with the point's keys set, validated."""
  for combo in itertools.product(*[values for _, values in axes]):
    config = base.copy_and_resolve_references()
    point = {}
    for (key, _), value in zip(axes, combo):
      set_key(config, key, value, "--sweep")
      point[key] = value
    try:
      config_lib.validate(config)
    except ConfigError as e:
      if not point:
        raise
      where = ", ".join(f"{k}={v!r}" for k, v in point.items())
      raise ConfigError(f"sweep point {where}: {e}") from None
    yield point, config


def header(config, sets=()) -> str:
  """Title of a sweep's table from the resolved config (after ``--set``): dataset,
  partition and its parameter, clients, participation, rounds, seeds, and the
  ``--set`` overrides."""
  from fedfrac.runner.plots import describe_config
  text = f"Sweep: {describe_config(config)}"
  return text + (f" (set {', '.join(sets)})" if sets else "")


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
  n_workers = len(points_lib.local_workers()) if workers is None else max(1, int(workers))
  layout = {"workers": n_workers, "memory_bytes": None}
  claims, order, where = None, None, ""
  if shard is not None and run_points:
    index, count = shard
    layout = claims_lib.agree(
        os.path.join(store.directory, f"layout-{store.hash}.json"),
        {"workers": n_workers * count,
         "memory_bytes": points_lib.worker_memory_bytes(n_workers)})
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


USAGE_ERROR = 2   # exit status for bad input, as fedfrac-run


def _exit_with_error(message):
  print(f"error: {' '.join(str(message).split())}", file=sys.stderr)
  sys.exit(USAGE_ERROR)


class _Parser(argparse.ArgumentParser):
  """argparse with its errors as one ``error:`` line (exit status 2)."""

  def error(self, message):
    _exit_with_error(f"{message} (fedfrac-sweep --help lists the flags)")


def checked_inputs(args):
  """``(base, axes, grid, grid_methods, seeds, metric_names, directory)`` from
  the parsed flags, every one checked before any point runs
  (:mod:`fedfrac.sweep_checks`); raises UsageError, ConfigError or DataError."""
  UsageError = sweep_checks.UsageError
  sweep_inputs.check_flags(args)
  if args.claim_timeout is None:
    args.claim_timeout = claims_lib.TIMEOUT_S
  if args.workers is not None and args.workers < 1:
    raise UsageError(f"--workers={args.workers}: need at least 1")
  if args.batch_size < 0:
    raise UsageError(f"--batch_size={args.batch_size}: need 0 (auto) or more")
  if args.out:
    sweep_checks.check_output("--out", args.out)
  if args.dir:
    sweep_checks.check_output("--dir", args.dir, directory=True)
  if args.shard or args.table:
    sweep_checks.check_sharding(args)
  args.shard_index = sweep_checks.parse_shard(args.shard) if args.shard else None
  sets = [parse_assignment(t, "--set") for t in args.sets]
  axes = [parse_assignment(t, "--sweep", many=True) for t in args.sweep]
  sweep_checks.check_axes(sets, axes)
  base = load_config(args.config)
  base.progress = False
  for key, value in sets:
    set_key(base, key, value, "--set")
  grid = None
  if args.grid:
    key, values = parse_assignment(args.grid[0], "--grid", many=True)
    grid = {key: values}
  grid_methods = [m for m in args.grid_methods.split(",") if m]
  seeds = (sweep_checks.parse_seeds(args.seeds) if args.seeds is not None else
           ([base.seeds] if isinstance(base.seeds, int) else list(base.seeds)))
  metric_names = [m.strip() for m in args.metrics.split(",") if m.strip()] or (
      ["accuracy"] if base.task.loss == "cross_entropy" else ["rmse"])
  points = list(sweep_points(base, axes))    # each validated
  configs = [config for _, config in points]
  if args.no_batch and grid:
    raise UsageError("--grid needs batched runs; drop --no_batch")
  for config in configs:
    sweep_checks.check_grid(config, grid, grid_methods)
  expand(base, axes, seeds, grid, grid_methods)
  sweep_inputs.check_data(points, seeds)   # every point's data, before any runs
  always = set(sweep_checks.ROW_COLUMNS) | (
      {"accuracy", "loss"} if base.task.loss == "cross_entropy" else {"rmse"})
  workers = args.workers or len(points_lib.local_workers())
  sweep_checks.check_metrics(configs, metric_names, always, in_process=workers == 1)
  directory = args.dir or (os.path.splitext(args.out)[0] + ".points" if args.out else None)
  return base, axes, grid, grid_methods, seeds, metric_names, directory


def main(argv=None):
  parser = _Parser(prog="fedfrac-sweep", description=__doc__,
                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--config", required=True)
  parser.add_argument("--set", action="append", default=[], dest="sets")
  parser.add_argument("--sweep", action="append", default=[])
  parser.add_argument("--grid", action="append", default=None)
  parser.add_argument("--grid_methods", default="")
  parser.add_argument("--seeds", default=None)
  parser.add_argument("--metrics", default="")
  parser.add_argument("--no_batch", action="store_true")
  parser.add_argument("--title", default="")
  parser.add_argument("--out", default="")
  parser.add_argument("--dir", default="")
  parser.add_argument("--overwrite", action="store_true")
  parser.add_argument("--workers", type=int, default=None)
  parser.add_argument("--batch_size", type=int, default=0)
  parser.add_argument("--no_progress", action="store_true")
  parser.add_argument("--shard", default="")
  parser.add_argument("--claim_timeout", type=float, default=None)
  parser.add_argument("--table", action="store_true")
  argv = sys.argv[1:] if argv is None else list(argv)
  args = parser.parse_args(argv)
  try:
    base, axes, grid, grid_methods, seeds, metric_names, directory = checked_inputs(args)
  except (ConfigError, DataError, sweep_checks.UsageError) as e:
    _exit_with_error(e)
  compile_cache.enable()   # FEDFRAC_COMPILE_CACHE (fedfrac.runner.compile_cache)
  log_lib.one_line_warnings()

  try:
    outcome = run_sweep(base, axes, seeds, metric_names, grid, grid_methods,
                        not args.no_batch, directory=directory, overwrite=args.overwrite,
                        workers=args.workers, batch_size=args.batch_size,
                        progress=not args.no_progress, shard=args.shard_index,
                        claim_timeout=args.claim_timeout, run_points=not args.table)
  except SystemExit as e:   # a point directory of another sweep: refused before compute
    if isinstance(e.code, str):
      _exit_with_error(e.code)
    raise
  shard = f"shard {args.shard_index[0]}/{args.shard_index[1]}: " if args.shard_index else ""
  if args.table and outcome.missing:
    print(f"error: --table: {outcome.missing} of {outcome.total} points are not finished "
          f"in {outcome.directory} (shards still running, or stopped: rerun any shard "
          f"to run them)", file=sys.stderr)
    sys.exit(1)
  if not args.table:
    print(f"sweep: {shard}ran {outcome.ran} of {outcome.total} points ({outcome.skipped} "
          f"already done) with {outcome.workers} workers in {outcome.wall_s:.0f} s",
          flush=True)
  if outcome.missing:
    print(f"sweep: {shard}{outcome.missing} points are not finished yet (other shards' "
          f"batches); the shard that finishes last writes the table, or run the same "
          f"command with --table once every shard is done", flush=True)
    return []
  notes = [f"Config: {base.name}; seeds {tuple(seeds)}; {base.rounds} rounds. "
           f"Mean ± sample std over seeds of each metric's final-round value. "
           f"Points are kept in `{_shown_path(outcome.directory)}`.", ""]
  shown = base.copy_and_resolve_references()   # the title states the seeds run
  shown.seeds = tuple(seeds)
  title = args.title or header(shown, getattr(args, "sets", None) or ())
  if args.out:
    with signals.deferred() as writing:   # a signal waits for the tables
      text = write_tables(args.out, outcome.points, [k for k, _ in axes], metric_names,
                          title, command_line(argv), notes, outcome.records)
    if writing.requested is not None:
      held = writing.requested
      raise signals.Interrupted(held, f"interrupted ({signals.name(held)}) while writing "
                                f"the table: every point had finished, and {args.out} and "
                                f"its files are written in full")
    print(text)
    print(f"wrote {args.out} (+ .csv, .json, .png, _rounds.png, _ranking.png)")
  else:
    print(markdown(outcome.points, [k for k, _ in axes], metric_names, title,
                   command_line(argv), notes))
  return outcome.points


def cli():
  """Console entry point ``fedfrac-sweep`` (exit status 0 when every point ran;
  130 / 143 after SIGINT / SIGTERM, the finished points kept; 1 on a full disk)."""
  try:
    main()
  except signals.Interrupted as e:
    print(e.message or f"interrupted ({signals.name(e.signum)})", file=sys.stderr)
    sys.exit(signals.exit_status(e.signum))
  except DiskFullError as e:
    print(f"error: {e}; free that much space and rerun the same command to run the "
          f"points left", file=sys.stderr)
    sys.exit(1)
  except RuntimeError as e:   # a worker died, or a batch failed: the points kept
    print(f"error: {sweep_inputs.one_line_failure(e)}", file=sys.stderr)
    sys.exit(1)
  return 0


if __name__ == "__main__":
  cli()
