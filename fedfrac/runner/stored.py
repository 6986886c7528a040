"""Run records kept in a workdir, verified when read.

Every (method, seed) run's record is ``runs/<method>/seed_<s>.json``, a sealed
JSON record (:mod:`fedfrac.runner.sealed`: its SHA-256 is stored with it). The
metrics files, summaries and plots of a workdir are built from these records;
one that is truncated, not JSON, or does not match its checksum is reported in
one line on stderr and recomputed from the run's newest verified checkpoint
(whose ``history.json`` holds the same rows), or, with no checkpoint, left out of
the tables until its run is rerun. A run whose record is missing but whose
checkpoint is intact is named and recomputed the same way. Nothing is
recomputed silently.

Each record and checkpoint is bound to its experiment (:func:`binding`): it
carries the settings shared by every method of the workdir's
``experiment.json`` and its method's entry there (algorithm, resolved options,
own sections). One bound to other settings (a record copied in from another
workdir) fails verification like a damaged one, naming the settings that differ.
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
BINDING = "experiment"   # a record's or checkpoint history's key of its binding
SHOWN = 3                # differing settings named in a line


def record_path(workdir, label, seed) -> str:
  return os.path.join(workdir, "runs", written.label_dir(label), f"seed_{seed}.json")


def checkpoint_dir(workdir, label, seed) -> str:
  return os.path.join(workdir, "checkpoints", written.label_dir(label), f"seed_{seed}")


def checkpoint_run(label, seed) -> str:
  """``checkpoints/<label>/seed_<s>`` (relative to the workdir; the label's
  folder name as under ``runs/``, :func:`fedfrac.runner.written.label_dir`)."""
  return f"checkpoints/{written.label_dir(label)}/seed_{seed}"


def binding(workdir, label) -> Optional[dict]:
  """``{"shared": ..., "method": ...}``: the settings every method of ``workdir``
  shares and method ``label``'s entry (a grid run ``label[option=value]``: its
  method's), from its ``experiment.json``; None when that cannot be read."""
  try:
    fingerprint = sealed.read(os.path.join(workdir, written.FINGERPRINT), legacy=True)
    shared, methods = fingerprint["shared"], fingerprint["methods"]
  except (OSError, ValueError, KeyError, TypeError):
    return None
  base = label if label in methods else label.split("[", 1)[0]
  return {"shared": shared, "method": methods.get(base)}


def _flat(tree, prefix=""):
  out = {}
  for k, v in (tree or {}).items():
    if isinstance(v, dict):
      out.update(_flat(v, f"{prefix}{k}."))
    else:
      out[f"{prefix}{k}"] = v
  return out


def binding_differences(bound: dict, current: dict, label: str) -> list:
  """``key old -> new`` for every setting in which the binding ``bound`` differs
  from ``current`` (method settings as ``methods.<label>.<key>``)."""
  missing = object()
  show = lambda v: "(absent)" if v is missing else repr(v)   # noqa: E731
  out = []
  for part, prefix in (("shared", ""), ("method", f"methods.{label}.")):
    old, new = _flat((bound or {}).get(part)), _flat((current or {}).get(part))
    for k in sorted(set(old) | set(new)):
      a, b = old.get(k, missing), new.get(k, missing)
      if a != b:
        out.append(f"{prefix}{k} {show(a)} -> {show(b)}")
  return out


def shown_differences(diffs: list) -> str:
  return "; ".join(diffs[:SHOWN]) + ("; ..." if len(diffs) > SHOWN else "")


def _check_binding(data: dict, current: Optional[dict], label: str) -> None:
  """Raise :class:`sealed.Damaged` when the record or history ``data`` is bound
  to settings other than ``current`` (one written before records were bound,
  without a binding, is taken as it is)."""
  if current is None or BINDING not in data:
    return
  diffs = binding_differences(data[BINDING], current, label)
  if diffs:
    raise sealed.Damaged(f"a record of another experiment: {shown_differences(diffs)}")


def save_record(workdir, record: RunRecord, rounds: Optional[int] = None) -> None:
  """Keep ``record`` (without per-client arrays), sealed and bound to the
  workdir's experiment, as its result of its method and seed (``rounds``: the
  length its run was asked for)."""
  path = record_path(workdir, record.method, record.seed)
  written.register(workdir, files=[os.path.relpath(path, workdir).replace(os.sep, "/")])
  os.makedirs(os.path.dirname(path), exist_ok=True)
  data = {"method": record.method, "algorithm": record.algorithm, "seed": record.seed,
          "rows": record.rows, "round_rows": record.round_rows, "status": record.status,
          "compile_s": record.compile_s, "wall_s": record.wall_s,
          "nonfinite_allowed": list(record.nonfinite_allowed)}
  if record.stopped is not None:
    data["stopped"] = record.stopped
  if rounds is not None:
    data["rounds"] = int(rounds)
  bound = binding(workdir, record.method)
  if bound is not None:
    data[BINDING] = bound
  sealed.write(path, data)


def _record(data) -> RunRecord:
  return RunRecord(data["method"], data["algorithm"], data["seed"], data["rows"],
                   data["round_rows"], data["status"], data["compile_s"], data["wall_s"],
                   {}, tuple(data["nonfinite_allowed"]), stopped=data.get("stopped"))


def read_record(workdir, label, seed, current=None) -> RunRecord:
  """The verified record of one run (``current``: the binding it must carry,
  :func:`binding`); :class:`fedfrac.runner.sealed.Damaged` (or ``OSError``)
  when it cannot be used."""
  data = sealed.read(record_path(workdir, label, seed))
  if not all(k in data for k in RECORD_KEYS):
    raise sealed.Damaged("fields missing")
  if data["method"] != label or data["seed"] != seed:
    raise sealed.Damaged(f"the record of {data['method']} seed {data['seed']}")
  _check_binding(data, current, label)
  return _record(data)


def history_seed(history: dict) -> Optional[int]:
  """The seed a checkpoint's history was written by (its own ``seed``, else its
  rows'; None when it says neither)."""
  if "seed" in history:
    return int(history["seed"])
  rows = history.get("rows") or []
  return int(rows[0]["seed"]) if rows and "seed" in rows[0] else None


def latest_history(workdir, label, seed, current=None):
  """``(step, history)`` of the run's newest verified checkpoint bound to
  ``current`` (None: no such step)."""
  directory = checkpoint_dir(workdir, label, seed)
  if not os.path.isdir(directory):
    return None
  found = Checkpointer(directory, label=label).latest_history()
  if found is None:
    return None
  try:
    _check_binding(found[1], current, label)
  except sealed.Damaged:
    return None
  if history_seed(found[1]) not in (None, int(seed)):
    return None   # another seed's steps, copied in: not this run's result
  return found


def from_checkpoint(workdir, label, seed, current=None) -> Optional[RunRecord]:
  """The run's record rebuilt from its newest verified checkpoint's history
  (``None`` without one, or when it is bound to other settings than
  ``current``). A run stopped before the rounds it was asked for is
  ``partial``, one that stopped at its target is not; the compile time is not
  kept in checkpoints (0)."""
  found = latest_history(workdir, label, seed, current)
  if found is None:
    return None
  step, h = found
  rows = h.get("rows", [])
  status = h.get("status", "ok")
  stopped = h.get("stopped")
  if status == "ok" and stopped is None and step < int(h.get("rounds", step)):
    status = "partial"
  algorithm = h.get("algorithm") or (rows[0].get("algorithm", label) if rows else label)
  return RunRecord(label, algorithm, int(seed), rows, h.get("round_rows", []), status,
                   0.0, float(h.get("wall_s", 0.0)), {},
                   tuple(h.get("nonfinite_allowed", ())), stopped=stopped)


def _seed_of(name, suffix=""):
  if not (name.startswith("seed_") and name.endswith(suffix)):
    return None
  try:
    return int(name[len("seed_"):len(name) - len(suffix)])
  except ValueError:
    return None


def stored_seeds(workdir, label) -> list:
  """Seeds of ``label`` kept in ``workdir``: those with a record, and those
  with a checkpoint step (a record deleted, or never written)."""
  seeds = set()
  d = os.path.dirname(record_path(workdir, label, 0))
  for n in os.listdir(d) if os.path.isdir(d) else ():
    seed = _seed_of(n, ".json")
    if seed is not None:
      seeds.add(seed)
  d = os.path.dirname(checkpoint_dir(workdir, label, 0))
  for n in os.listdir(d) if os.path.isdir(d) else ():
    seed = _seed_of(n)
    if seed is not None and seed not in seeds and Checkpointer(os.path.join(d, n)).steps():
      seeds.add(seed)
  return sorted(seeds)


def _stderr(line):
  print(line, file=sys.stderr)


def _verified(workdir, label, seed, log, rerun=None):
  """``(record or None, state)`` of one kept run: ``"ok"``, ``"rebuilt"`` (from
  its checkpoint, written again), ``"rerun"`` (damaged or missing, no
  checkpoint, ``rerun(label, seed)`` says this command runs it again) or
  ``"left out"``."""
  current = binding(workdir, label)
  try:
    return read_record(workdir, label, seed, current), "ok"
  except FileNotFoundError:
    problem = "is missing"
  except (OSError, sealed.Damaged) as e:
    reason = str(e) if isinstance(e, sealed.Damaged) else (e.strerror or "unreadable")
    problem = f"failed verification ({reason})"
  where = f"{workdir}: {os.path.relpath(record_path(workdir, label, seed), workdir)}"
  found = latest_history(workdir, label, seed, current)
  rec = from_checkpoint(workdir, label, seed, current) if found is not None else None
  if rec is not None:
    done = rec.round_rows[-1]["round"] if rec.round_rows else 0
    log(f"{where} {problem}; recomputed it from its checkpoint at round {done}")
    save_record(workdir, rec, found[1].get("rounds"))
    return rec, "rebuilt"
  if rerun is not None and rerun(label, seed):
    log(f"{where} {problem}; no intact checkpoint, so {label} seed {seed} runs again "
        f"from round 0")
    return None, "rerun"
  log(f"{where} {problem}; left out of the tables (no intact checkpoint to recompute "
      f"it from): rerun {label} seed {seed} to recompute it")
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
  """Rounds run so far by one run of ``workdir``: its newest verified
  checkpoint step or its verified record's last round, whichever is larger (0:
  none; a stray or damaged ``step_<round>`` folder does not count)."""
  current = binding(workdir, label)
  found = latest_history(workdir, label, seed, current)
  done = found[0] if found is not None else 0
  try:
    rec = read_record(workdir, label, seed, current)
    if rec.round_rows:
      done = max(done, int(rec.round_rows[-1]["round"]))
  except (OSError, sealed.Damaged):
    pass
  return done


def kept_runs(workdir) -> list:
  """``[(label, seed, bound, where)]`` of every run kept in ``workdir`` (a record,
  or a checkpoint step): the binding its verified record (else its newest
  verified checkpoint) carries (None: neither can be read, or it was written
  before records were bound) and the file that says so. Labels from the
  records themselves (a checkpoint-only run: its folder name)."""
  out, seen = [], set()
  runs = os.path.join(workdir, "runs")
  for folder in sorted(os.listdir(runs)) if os.path.isdir(runs) else ():
    for name in sorted(os.listdir(os.path.join(runs, folder))):
      seed = _seed_of(name, ".json")
      if seed is None:
        continue
      rel = f"runs/{folder}/{name}"
      try:
        data = sealed.read(os.path.join(runs, folder, name))
        label = str(data["method"])
      except (OSError, sealed.Damaged, KeyError):
        label, data = folder, {}
      seen.add((written.label_dir(label), seed))
      bound = data.get(BINDING)
      if bound is None:
        found = latest_history(workdir, label, seed)
        if found is not None and BINDING in found[1]:
          bound, rel = found[1][BINDING], checkpoint_run(label, seed) + f"/step_{found[0]}"
      out.append((label, seed, bound, rel))
  checkpoints = os.path.join(workdir, "checkpoints")
  for folder in sorted(os.listdir(checkpoints)) if os.path.isdir(checkpoints) else ():
    for name in sorted(os.listdir(os.path.join(checkpoints, folder))):
      seed = _seed_of(name)
      if seed is None or (folder, seed) in seen:
        continue
      found = latest_history(workdir, folder, seed)
      history = found[1] if found is not None else {}
      out.append((str(history.get("method", folder)), seed, history.get(BINDING),
                  f"checkpoints/{folder}/{name}"))
  return out
