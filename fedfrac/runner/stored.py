"""Run records kept in a workdir, verified when read.

Every (method, seed) run's record is ``runs/<method>/seed_<s>.json``, a sealed
JSON record (:mod:`fedfrac.runner.sealed`: its SHA-256 is stored with it). The
metrics files, summaries and plots of a workdir are built from these records;
one that is truncated, not JSON, or does not match its checksum is reported in
one line on stderr and recomputed from the run's newest verified checkpoint
(whose ``history.json`` holds the same rows), or, with no checkpoint, left out of
the tables until its run is rerun. Nothing is recomputed silently.
"""
from __future__ import annotations

import os
import sys
from typing import Optional

from fedfrac.runner import sealed, written
from fedfrac.runner.checkpoint import Checkpointer
from fedfrac.runner.records import RunRecord

RECORD_KEYS = ("method", "algorithm", "seed", "rows", "round_rows", "status", "compile_s",
               "wall_s", "nonfinite_allowed")


def record_path(workdir, label, seed) -> str:
  return os.path.join(workdir, "runs", written.label_dir(label), f"seed_{seed}.json")


def checkpoint_dir(workdir, label, seed) -> str:
  return os.path.join(workdir, "checkpoints", label, f"seed_{seed}")


def checkpoint_run(label, seed) -> str:
  """``checkpoints/<label>/seed_<s>`` (relative to the workdir)."""
  return f"checkpoints/{label}/seed_{seed}"


def save_record(workdir, record: RunRecord) -> None:
  """Keep ``record`` (without per-client arrays), sealed, as the workdir's result
  of its method and seed."""
  path = record_path(workdir, record.method, record.seed)
  written.register(workdir, files=[os.path.relpath(path, workdir).replace(os.sep, "/")])
  os.makedirs(os.path.dirname(path), exist_ok=True)
  data = {"method": record.method, "algorithm": record.algorithm, "seed": record.seed,
          "rows": record.rows, "round_rows": record.round_rows, "status": record.status,
          "compile_s": record.compile_s, "wall_s": record.wall_s,
          "nonfinite_allowed": list(record.nonfinite_allowed)}
  sealed.write(path, data)


def _record(data) -> RunRecord:
  return RunRecord(data["method"], data["algorithm"], data["seed"], data["rows"],
                   data["round_rows"], data["status"], data["compile_s"], data["wall_s"],
                   {}, tuple(data["nonfinite_allowed"]))


def read_record(workdir, label, seed) -> RunRecord:
  """The verified record of one run; :class:`fedfrac.runner.sealed.Damaged` (or
  ``OSError``) when it cannot be used."""
  data = sealed.read(record_path(workdir, label, seed))
  if not all(k in data for k in RECORD_KEYS):
    raise sealed.Damaged("fields missing")
  return _record(data)


def from_checkpoint(workdir, label, seed) -> Optional[RunRecord]:
  """The run's record rebuilt from its newest verified checkpoint's history
  (``None`` without one). A run stopped before the rounds it was asked for is
  ``partial``; the compile time is not kept in checkpoints (0)."""
  directory = checkpoint_dir(workdir, label, seed)
  if not os.path.isdir(directory):
    return None
  found = Checkpointer(directory, label=label).latest_history()
  if found is None:
    return None
  step, h = found
  rows = h.get("rows", [])
  status = h.get("status", "ok")
  if status == "ok" and step < int(h.get("rounds", step)):
    status = "partial"
  algorithm = h.get("algorithm") or (rows[0].get("algorithm", label) if rows else label)
  return RunRecord(label, algorithm, int(seed), rows, h.get("round_rows", []), status,
                   0.0, float(h.get("wall_s", 0.0)), {},
                   tuple(h.get("nonfinite_allowed", ())))


def stored_seeds(workdir, label) -> list:
  d = os.path.dirname(record_path(workdir, label, 0))
  if not os.path.isdir(d):
    return []
  seeds = []
  for n in os.listdir(d):
    if n.startswith("seed_") and n.endswith(".json"):
      try:
        seeds.append(int(n[len("seed_"):-len(".json")]))
      except ValueError:
        continue
  return sorted(seeds)


def _stderr(line):
  print(line, file=sys.stderr)


def _verified(workdir, label, seed, log, rerun=None):
  """``(record or None, state)`` of one kept run: ``"ok"``, ``"rebuilt"`` (from
  its checkpoint, written again), ``"rerun"`` (damaged, no checkpoint,
  ``rerun(label, seed)`` says this command runs it again) or ``"left out"``."""
  try:
    return read_record(workdir, label, seed), "ok"
  except (OSError, sealed.Damaged) as e:
    reason = str(e) if isinstance(e, sealed.Damaged) else (e.strerror or "unreadable")
  where = f"{workdir}: {os.path.relpath(record_path(workdir, label, seed), workdir)}"
  rec = from_checkpoint(workdir, label, seed)
  if rec is not None:
    done = rec.round_rows[-1]["round"] if rec.round_rows else 0
    log(f"{where} failed verification ({reason}); recomputed it from its checkpoint "
        f"at round {done}")
    save_record(workdir, rec)
    return rec, "rebuilt"
  if rerun is not None and rerun(label, seed):
    log(f"{where} failed verification ({reason}); no intact checkpoint, so {label} "
        f"seed {seed} runs again from round 0")
    return None, "rerun"
  log(f"{where} failed verification ({reason}); left out of the tables (no intact "
      f"checkpoint to recompute it from): rerun {label} seed {seed} to recompute it")
  return None, "left out"


def check_records(workdir, labels, rerun, log=None):
  """Before compute: verify every kept record of the method ``labels``; a
  damaged one is recomputed from its checkpoint, or queued to run again when
  ``rerun(label, seed)`` allows it, or left out of the tables; each says so in
  one line. Returns ``(runs to run again, runs left out)`` as (label, seed)."""
  log = log or _stderr
  again, left_out = [], set()
  for label in labels:
    for seed in stored_seeds(workdir, label):
      _, state = _verified(workdir, label, seed, log, rerun)
      if state == "rerun":
        again.append((label, seed))
      elif state == "left out":
        left_out.add((label, seed))
  return again, left_out


def load_records(workdir, labels, log=None, reported=()) -> list:
  """Every kept record of the method ``labels`` (in that order, then by seed),
  each verified; a damaged one is recomputed from its checkpoint (and written
  again) or left out, saying so in one line (``log``, default stderr; not
  again for the runs in ``reported``)."""
  log = log or _stderr
  records = []
  for label in labels:
    for seed in stored_seeds(workdir, label):
      quiet = (label, seed) in reported
      rec, _ = _verified(workdir, label, seed, (lambda line: None) if quiet else log)
      if rec is not None:
        records.append(rec)
  return records


def stored_rounds(workdir, label, seed) -> int:
  """Rounds run so far by one run of ``workdir``: its newest checkpoint step or
  its verified record's last round, whichever is larger (0: none)."""
  done = 0
  directory = checkpoint_dir(workdir, label, seed)
  if os.path.isdir(directory):
    done = Checkpointer(directory).latest() or 0
  try:
    rec = read_record(workdir, label, seed)
    if rec.round_rows:
      done = max(done, int(rec.round_rows[-1]["round"]))
  except (OSError, sealed.Damaged):
    pass
  return done
