"""Files of a finished (or interrupted) run: metrics.csv / metrics.jsonl (one
row per evaluated round), rounds.csv (every round), summary.json / summary.md,
accuracy.png and ranking.png (:mod:`fedfrac.runner.overview`) and, optionally,
TensorBoard events (:mod:`fedfrac.runner.tensorboard`).

Every metrics row carries a ``status`` column: ``ok``, ``partial`` for a run
stopped before its last round (``--stop_after_round``, Ctrl-C, SIGTERM), or
``diverged at round r`` for a run whose metrics stopped being finite at round r;
such a run's rows end at its last finite evaluation (one diverged at its first
evaluation writes one row with method, algorithm, seed and round only). No
metrics file holds a NaN: a value that is not a number (e.g. a diagnostic
undefined for an empty cohort) is an empty CSV cell and a JSON ``null``; JSON
files also write ±inf as ``null`` (strict JSON).
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import numpy as np

from fedfrac.runner import written
from fedfrac.runner.checkpoint import atomic_write, disk_full_as_error, json_default
from fedfrac.runner.records import FIRST_COLUMNS, Results

STATUS_COLUMN = "status"


def _csv_cell(v):
  if isinstance(v, float) and math.isnan(v):
    return ""
  return v


def _strict_json(o):
  """``o`` with every non-finite float (also inside dicts/lists) as None."""
  if isinstance(o, float):
    return o if math.isfinite(o) else None
  if isinstance(o, dict):
    return {k: _strict_json(v) for k, v in o.items()}
  if isinstance(o, (list, tuple)):
    return [_strict_json(v) for v in o]
  if isinstance(o, np.ndarray):
    return _strict_json(o.tolist())
  if isinstance(o, np.floating):
    return _strict_json(float(o))
  return o


def _json(o, **kwargs):
  return json.dumps(_strict_json(o), default=json_default, allow_nan=False, **kwargs)


def csv_text(rows):
  """CSV of ``rows`` (dicts): method, algorithm, seed, round first, then every
  other key in order of first appearance; missing keys and NaN are empty."""
  columns = list(FIRST_COLUMNS)
  for row in rows:
    for k in row:
      if k not in columns:
        columns.append(k)
  buf = io.StringIO()
  writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
  writer.writeheader()
  for row in rows:
    writer.writerow({k: _csv_cell(row.get(k, "")) for k in columns})
  return buf.getvalue()


def written_rows(results: Results, rounds: bool = False):
  """The rows written to metrics files: each run's finite rows, with ``status``
  (the column after method, algorithm, seed, round)."""
  out = []
  for rec in results.records:
    status = rec.status      # "diverged at round r" names the round it diverged at
    all_rows = rec.round_rows if rounds else rec.rows
    rows = rec.finite_rows(all_rows)
    if not rows and all_rows:
      # Diverged at its first evaluation: one row naming the run and the round,
      # without metric values, so the divergence shows in every metrics file.
      rows = [{k: all_rows[0][k] for k in FIRST_COLUMNS if k in all_rows[0]}]
    out.extend({STATUS_COLUMN: status, **row} for row in rows)
  return out



def write_outputs(results: Results, workdir: str):
  """metrics.csv/jsonl, rounds.csv, summary.json/md and plots, each written
  atomically; TensorBoard events too with ``config.log.tensorboard``. Each
  is listed in the workdir's ``written.json`` first; a full disk raises
  :class:`fedfrac.runner.checkpoint.DiskFullError` (one line)."""
  log_cfg = results.config.get("log", None)
  tensorboard_on = log_cfg is not None and log_cfg.get("tensorboard", False)
  from fedfrac.runner import tensorboard
  from fedfrac.runner.overview import FIGURE_FILES, results_figures  # loads matplotlib
  written.register(workdir, files=written.RESULT_FILES, runs=[
      f"tensorboard/{written.label_dir(r.method)}/seed_{r.seed}" for r in results.records
      if tensorboard_on])
  rows = written_rows(results)
  atomic_write(os.path.join(workdir, "metrics.csv"), csv_text(rows))
  atomic_write(os.path.join(workdir, "metrics.jsonl"),
               "".join(_json(r) + "\n" for r in rows))
  atomic_write(os.path.join(workdir, "rounds.csv"),
               csv_text(written_rows(results, rounds=True)))
  atomic_write(os.path.join(workdir, "summary.json"), _json(results.summary(), indent=2))
  atomic_write(os.path.join(workdir, "summary.md"), results.table() + "\n")
  for figure, name in zip(results_figures(results), FIGURE_FILES):
    path = os.path.join(workdir, name)     # each well under 1 MiB
    with disk_full_as_error(path, [2**20]):   # save removes its own temporary file
      figure.save(path)
  if tensorboard_on:
    with disk_full_as_error(os.path.join(workdir, "tensorboard"), [2**20]):
      tensorboard.write_events(results, workdir)
