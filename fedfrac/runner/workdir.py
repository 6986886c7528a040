"""A workdir belongs to one experiment (docs/design.md §2.4); :class:`Workdir`
owns everything fedfrac keeps in it and every operation on it.

Layout (the one vocabulary of paths; a method label's folder name is
:func:`fedfrac.runner.written.label_dir`)::

  experiment.json                     the experiment's fingerprint (sealed)
  config.json, written.json           the resolved config; what fedfrac wrote
  runs/<label>/seed_<s>.json          each run's record (sealed, verified when read)
  checkpoints/<label>/seed_<s>/step_<round>/   each run's checkpoint steps
  metrics.csv, metrics.jsonl, rounds.csv, summary.json, summary.md, *.png,
  tensorboard/<label>/seed_<s>/       the outputs, written from every kept record

Both drivers (:func:`fedfrac.runner.loop.run`, :func:`fedfrac.runner.many.run_many`)
and the modules below them take a :class:`Workdir`; none computes a path of its own.

``experiment.json`` in a workdir holds the fingerprint of the config that wrote
it: every resolved setting that changes results, split into the settings shared
by all methods and one entry per method label (its algorithm, options with
defaults filled in). Settings that only shape the output — ``name``,
``progress``, ``eval_every``, ``checkpoint_every``, targets, ``log``, ``only``,
``seeds``, ``on_divergence``, ``engine.cpu_devices``, ``workers`` — are not
part of it, nor
is ``rounds``: finished runs may be extended (resuming from their last
checkpoint), and each run's rows say how far it went.

A rerun whose fingerprint differs stops before any compute with one line naming
the keys that differ, unless ``overwrite`` clears the workdir's results first:
``overwrite=True`` (``--overwrite``) everything fedfrac wrote there, a label or
labels (``--overwrite=fedavg``) only those methods' runs, records, checkpoints
and fingerprint entries (the other methods' results are kept; the settings shared
by all methods must then be unchanged). A label must name a method the command
runs (else nothing would rerun what it deletes). Only files fedfrac wrote are
removed (:mod:`fedfrac.runner.written`); files of one's own in the way are named
and nothing is deleted.

A missing or damaged ``experiment.json`` is rebuilt from the runs kept in the
workdir when every one of them is bound to this command's settings (each record
and checkpoint carries its experiment's settings, :meth:`Workdir.binding`),
saying so in one line; otherwise the runs that differ are named, with
``--overwrite=<method>`` to rerun only those. An intact ``experiment.json`` of
another experiment (copied in) is refused as a different config; when the runs
kept there are all bound to this command's settings the refusal also names the
way out that keeps them: remove that file, and the next run rebuilds it.

A folder where fedfrac writes a file (``runs/<label>/seed_<s>.json``,
``metrics.csv``, ...), or a file where it keeps a folder (``runs/``,
``checkpoints/<label>/seed_<s>``), is refused before compute in one line naming
the path (:meth:`Workdir.check_blocked`); nothing is changed. One made during
the run stops the writing of that record in one line (the run's checkpoint is
kept, and the record is recomputed from it once the path is free).

Methods and seeds not run before are added; every run's record is kept in
``runs/<method>/seed_<s>.json`` (sealed and verified), so metrics and summaries
cover every method and seed ever run in the workdir, not only the last command's.

Records are verified when read: the metrics files, summaries and plots of a
workdir are built from them; one that is truncated, not JSON, or does not match
its checksum is reported in one line on stderr and recomputed from the run's
newest verified checkpoint (whose ``history.json`` holds the same rows), or,
with no checkpoint, left out of the tables until its run is rerun. A run whose
record is missing but whose checkpoint is intact is named and recomputed the
same way. Nothing is recomputed silently.

Each record and checkpoint is bound to its experiment (:meth:`Workdir.binding`):
it carries the settings shared by every method of the workdir's
``experiment.json`` and its method's entry there (algorithm, resolved options,
own sections). One bound to other settings (a record copied in from another
workdir) fails verification like a damaged one, naming the settings that differ.

A run is never reported at a length it was not run for: asking for fewer rounds
than a run of the workdir already ran is refused before compute, in one line.
Its shorter prefix is not a shorter run in general (a cosine learning-rate
schedule, FibFL++'s warm-up and anything else that depends on ``rounds`` differ),
so ``--config.rounds`` must be at least what ran, or ``--overwrite=<method>``
reruns that method at the shorter length. For the same reason a run is
continued at another length (a finished run extended, a partial one finished
or cut at a new ``rounds``) only when its method's program does not depend on
``rounds`` (:mod:`fedfrac.runner.lengths`).
"""
from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Optional

from fedfrac import algorithms
from fedfrac.algorithms import server_optimizer
from fedfrac import config_base
from fedfrac._validation import ConfigError, argument, run_again, setting
from fedfrac.runner import sealed, written
from fedfrac.runner.checkpoint import Checkpointer, atomic_write, json_default
from fedfrac.runner.records import RunRecord

FINGERPRINT_FILE = written.FINGERPRINT
OUTPUT_KEYS = ("name", "progress", "eval_every", "checkpoint_every", "target_accuracy",
               "target_rmse", "stop_at_target", "log", "only", "seeds", "on_divergence", "rounds",
               "methods", "engine.cpu_devices", "workers")
# Everything a run writes into its workdir (``overwrite`` removes what of it
# fedfrac wrote, :mod:`fedfrac.runner.written`).
WORKDIR_ITEMS = written.TOP_FILES + written.TREES
RECORD_KEYS = ("method", "algorithm", "seed", "rows", "round_rows", "status", "compile_s",
               "wall_s", "nonfinite_allowed")
BINDING = "experiment"   # a record's or checkpoint history's key of its binding
SHOWN = 3                # differing settings named in a line


def _plain(value):
  """``value`` as JSON would give it back (tuples -> lists, NumPy -> Python; an
  optax server optimizer as the text of its settings,
  :func:`fedfrac.algorithms.server_optimizer.describe`)."""
  return json.loads(json.dumps(server_optimizer.plain(value), default=json_default))


def _flatten(tree, prefix=""):
  out = {}
  for k, v in tree.items():
    key = f"{prefix}{k}"
    if isinstance(v, dict):
      out.update(_flatten(v, key + "."))
    else:
      out[key] = v
  return out


def _is_output_key(key):
  return any(key == k or key.startswith(k + ".") for k in OUTPUT_KEYS)


def method_fingerprint(config, label) -> dict:
  """A method's algorithm, its options with defaults filled in, and its own
  ``client`` / ``server`` / ``attack`` overrides."""
  method = config.methods[label]
  options = algorithms.hparams(method.name, config_base.method_options(method))
  sections = {s: method[s].to_dict() if hasattr(method[s], "to_dict") else dict(method[s])
              for s in config_base.METHOD_SECTIONS if s in method}
  return _plain({"name": method.name, "options": options, **sections})


def fingerprint(config, extra=None) -> dict:
  """``{"shared": {dotted key: value}, "methods": {label: ...}, "rounds": int}``
  of the selected methods (``rounds``: informative, the most ever asked for);
  ``extra`` adds shared entries (a run's own data digest and model,
  :mod:`fedfrac.runner.user_inputs`)."""
  shared = {k: v for k, v in _flatten(_plain(config.to_dict())).items()
            if not _is_output_key(k)}
  shared.update(_plain(dict(extra or {})))
  return {"shared": shared, "rounds": int(config.rounds),
          "methods": {label: method_fingerprint(config, label)
                      for label in config_base.method_labels(config)}}


_MISSING = object()


def _show(value):
  return "(absent)" if value is _MISSING else repr(value)


_SHARED_DEFAULTS = []


def shared_default(key):
  """The default of the shared setting ``key`` (dotted), as a fingerprint holds
  it; ``_MISSING`` for a key the schema does not declare (a data digest)."""
  if not _SHARED_DEFAULTS:
    _SHARED_DEFAULTS.append(_flatten(_plain(config_base.base_config().to_dict())))
  return _SHARED_DEFAULTS[0].get(key, _MISSING)


def method_default(name, key):
  """The default of a method's setting ``key`` (``options.<option>``) for
  algorithm ``name``; ``_MISSING`` for any other key."""
  section, _, option = key.partition(".")
  if section != "options" or not option:
    return _MISSING
  try:
    defaults = _plain(algorithms.hparams(name, {}))
  except (KeyError, ValueError, TypeError):
    return _MISSING
  return defaults.get(option, _MISSING)


def _differences(old: dict, new: dict, prefix="", default=shared_default):
  """``key old -> new`` for each key whose value differs. A key absent from
  ``old`` whose new value is its ``default(key)`` is no difference: a setting
  fedfrac added later defaults to the behaviour from before it (docs/design.md
  §2.4), so results kept before it existed are results of that default."""
  out = []
  for k in sorted(set(old) | set(new)):
    a, b = old.get(k, _MISSING), new.get(k, _MISSING)
    if a == b or (a is _MISSING and b is not _MISSING and default(k) == b):
      continue
    out.append(f"{prefix}{k} {_show(a)} -> {_show(b)}")
  return out


def check_name(workdir) -> None:
  """An empty ``--workdir=`` is refused (one line): it would keep nothing."""
  if workdir is not None and not str(workdir).strip():
    raise ConfigError(f"{setting('workdir', workdir)} is empty: give a directory, or "
                      f"leave {argument('workdir')} out to keep nothing")


def _read_fingerprint(path):
  """``(shared, methods, rounds)`` of the fingerprint file ``path``; raises
  ``ValueError`` saying why it cannot be used."""
  try:
    old = sealed.read(path, legacy=True)
    return dict(old["shared"]), dict(old["methods"]), int(old["rounds"])
  except sealed.Damaged as e:
    raise ValueError(f"failed verification ({e})") from None
  except (OSError, KeyError, TypeError, ValueError) as e:
    raise ValueError(f"is unreadable ({type(e).__name__})") from None


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
  name = ((current or {}).get("method") or {}).get("name")
  out = _differences(_flat((bound or {}).get("shared")), _flat((current or {}).get("shared")))
  out += _differences(_flat((bound or {}).get("method")), _flat((current or {}).get("method")),
                      f"methods.{label}.", default=lambda k: method_default(name, k))
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


def _record(data) -> RunRecord:
  return RunRecord(data["method"], data["algorithm"], data["seed"], data["rows"],
                   data["round_rows"], data["status"], data["compile_s"], data["wall_s"],
                   {}, tuple(data["nonfinite_allowed"]), stopped=data.get("stopped"))


def history_seed(history: dict) -> Optional[int]:
  """The seed a checkpoint's history was written by (its own ``seed``, else its
  rows'; None when it says neither)."""
  if "seed" in history:
    return int(history["seed"])
  rows = history.get("rows") or []
  return int(rows[0]["seed"]) if rows and "seed" in rows[0] else None


def _seed_of(name, suffix=""):
  if not (name.startswith("seed_") and name.endswith(suffix)):
    return None
  try:
    return int(name[len("seed_"):len(name) - len(suffix)])
  except ValueError:
    return None


def _stderr(line):
  print(line, file=sys.stderr)


class Workdir:
  """One experiment's directory (``path``): the paths of its records,
  checkpoints and outputs (the layout above) and the operations on them, the
  experiment's fingerprint (:meth:`prepare`), its kept records (verified when
  read, :meth:`load_records`) and its runs' checkpoints (:meth:`checkpointer`).
  ``Workdir(path)`` takes a path or a Workdir; it is a path-like object
  (``os.fspath``, ``str``), so file functions take it as they take a path."""

  def __init__(self, path):
    self.path = path.path if isinstance(path, Workdir) else os.fspath(path)

  def __fspath__(self) -> str:
    return self.path

  def __str__(self) -> str:
    return self.path

  def __repr__(self) -> str:
    return f"Workdir({self.path!r})"

  def __eq__(self, other) -> bool:
    return isinstance(other, Workdir) and other.path == self.path

  def __hash__(self) -> int:
    return hash(self.path)

  def file(self, name) -> str:
    """A top-level file of the workdir (``experiment.json``, ``metrics.csv``...)."""
    return os.path.join(self.path, name)

  def checkpointer(self, label, seed, keep: int = 2) -> Checkpointer:
    """The verified checkpoints of run (``label``, ``seed``) (a grid run
    ``label[option=value]``: its method named in what an error advises)."""
    return Checkpointer(self.checkpoint_dir(label, seed), keep=keep,
                        label=label.split("[", 1)[0])

  def record_path(self, label, seed) -> str:
    return os.path.join(self.path, "runs", written.label_dir(label), f"seed_{seed}.json")

  def checkpoint_dir(self, label, seed) -> str:
    return os.path.join(self.path, "checkpoints", written.label_dir(label), f"seed_{seed}")

  def checkpoint_run(self, label, seed) -> str:
    """``checkpoints/<label>/seed_<s>`` (relative to the workdir; the label's
    folder name as under ``runs/``, :func:`fedfrac.runner.written.label_dir`)."""
    return f"checkpoints/{written.label_dir(label)}/seed_{seed}"

  def binding(self, label) -> Optional[dict]:
    """``{"shared": ..., "method": ...}``: the settings every method of ``workdir``
    shares and method ``label``'s entry (a grid run ``label[option=value]``: its
    method's), from its ``experiment.json``; None when that cannot be read."""
    try:
      fingerprint = sealed.read(os.path.join(self.path, written.FINGERPRINT), legacy=True)
      shared, methods = fingerprint["shared"], fingerprint["methods"]
    except (OSError, ValueError, KeyError, TypeError):
      return None
    base = label if label in methods else label.split("[", 1)[0]
    return {"shared": shared, "method": methods.get(base)}

  def save_record(self, record: RunRecord, rounds: Optional[int] = None) -> None:
    """Keep ``record`` (without per-client arrays), sealed and bound to the
    workdir's experiment, as its result of its method and seed (``rounds``: the
    length its run was asked for)."""
    path = self.record_path(record.method, record.seed)
    if os.path.isdir(path):   # made after :meth:`check_blocked` looked, before compute
      raise self.blocked_error(path, "file", after_compute=True)
    written.register(self.path, files=[os.path.relpath(path, self.path).replace(os.sep, "/")])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = {"method": record.method, "algorithm": record.algorithm, "seed": record.seed,
            "rows": record.rows, "round_rows": record.round_rows, "status": record.status,
            "compile_s": record.compile_s, "wall_s": record.wall_s,
            "nonfinite_allowed": list(record.nonfinite_allowed)}
    if record.stopped is not None:
      data["stopped"] = record.stopped
    if rounds is not None:
      data["rounds"] = int(rounds)
    bound = self.binding(record.method)
    if bound is not None:
      data[BINDING] = bound
    sealed.write(path, data)

  def read_record(self, label, seed, current=None) -> RunRecord:
    """The verified record of one run (``current``: the binding it must carry,
    :func:`binding`); :class:`fedfrac.runner.sealed.Damaged` (or ``OSError``)
    when it cannot be used."""
    data = sealed.read(self.record_path(label, seed))
    if not all(k in data for k in RECORD_KEYS):
      raise sealed.Damaged("fields missing")
    if data["method"] != label or data["seed"] != seed:
      raise sealed.Damaged(f"the record of {data['method']} seed {data['seed']}")
    _check_binding(data, current, label)
    return _record(data)

  def latest_history(self, label, seed, current=None):
    """``(step, history)`` of the run's newest verified checkpoint bound to
    ``current`` (None: no such step)."""
    directory = self.checkpoint_dir(label, seed)
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

  def from_checkpoint(self, label, seed, current=None) -> Optional[RunRecord]:
    """The run's record rebuilt from its newest verified checkpoint's history
    (``None`` without one, or when it is bound to other settings than
    ``current``). A run stopped before the rounds it was asked for is
    ``partial``, one that stopped at its target is not; the compile time is the
    history's (0 in checkpoints written before it was kept there)."""
    found = self.latest_history(label, seed, current)
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
                     float(h.get("compile_s", 0.0)), float(h.get("wall_s", 0.0)), {},
                     tuple(h.get("nonfinite_allowed", ())), stopped=stopped)

  def stored_seeds(self, label) -> list:
    """Seeds of ``label`` kept in ``workdir``: those with a record, and those
    with a checkpoint step (a record deleted, or never written)."""
    seeds = set()
    d = os.path.dirname(self.record_path(label, 0))
    for n in os.listdir(d) if os.path.isdir(d) else ():
      seed = _seed_of(n, ".json")
      if seed is not None:
        seeds.add(seed)
    d = os.path.dirname(self.checkpoint_dir(label, 0))
    for n in os.listdir(d) if os.path.isdir(d) else ():
      seed = _seed_of(n)
      if seed is not None and seed not in seeds and Checkpointer(os.path.join(d, n)).steps():
        seeds.add(seed)
    return sorted(seeds)

  def _verified(self, label, seed, log, rerun=None):
    """``(record or None, state)`` of one kept run: ``"ok"``, ``"rebuilt"`` (from
    its checkpoint, written again), ``"rerun"`` (damaged or missing, no
    checkpoint, ``rerun(label, seed)`` says this command runs it again) or
    ``"left out"``."""
    current = self.binding(label)
    try:
      return self.read_record(label, seed, current), "ok"
    except FileNotFoundError:
      problem = "is missing"
    except (OSError, sealed.Damaged) as e:
      reason = str(e) if isinstance(e, sealed.Damaged) else (e.strerror or "unreadable")
      problem = f"failed verification ({reason})"
    where = f"{self.path}: {os.path.relpath(self.record_path(label, seed), self.path)}"
    found = self.latest_history(label, seed, current)
    rec = self.from_checkpoint(label, seed, current) if found is not None else None
    if rec is not None:
      done = rec.round_rows[-1]["round"] if rec.round_rows else 0
      log(f"{where} {problem}; recomputed it from its checkpoint at round {done}")
      self.save_record(rec, found[1].get("rounds"))
      return rec, "rebuilt"
    if rerun is not None and rerun(label, seed):
      log(f"{where} {problem}; no intact checkpoint, so {label} seed {seed} runs again "
          f"from round 0")
      return None, "rerun"
    log(f"{where} {problem}; left out of the tables (no intact checkpoint to recompute "
        f"it from): rerun {label} seed {seed} to recompute it")
    return None, "left out"

  def check_records(self, labels, rerun, log=None):
    """Before compute: verify every kept record of the method ``labels``; a
    damaged one is recomputed from its checkpoint, or queued to run again when
    ``rerun(label, seed)`` allows it, or left out of the tables; each says so in
    one line. Returns ``(runs to run again, runs left out)`` as (label, seed)."""
    log = log or _stderr
    again, left_out = [], set()
    for label in labels:
      for seed in self.stored_seeds(label):
        _, state = self._verified(label, seed, log, rerun)
        if state == "rerun":
          again.append((label, seed))
        elif state == "left out":
          left_out.add((label, seed))
    return again, left_out

  def load_records(self, labels, log=None, reported=()) -> list:
    """Every kept record of the method ``labels`` (in that order, then by seed),
    each verified; a damaged one is recomputed from its checkpoint (and written
    again) or left out, saying so in one line (``log``, default stderr; not
    again for the runs in ``reported``)."""
    log = log or _stderr
    records = []
    for label in labels:
      for seed in self.stored_seeds(label):
        quiet = (label, seed) in reported
        rec, _ = self._verified(label, seed, (lambda line: None) if quiet else log)
        if rec is not None:
          records.append(rec)
    return records

  def stored_rounds(self, label, seed) -> int:
    """Rounds run so far by one run of ``workdir``: its newest verified
    checkpoint step or its verified record's last round, whichever is larger (0:
    none; a stray or damaged ``step_<round>`` folder does not count)."""
    current = self.binding(label)
    found = self.latest_history(label, seed, current)
    done = found[0] if found is not None else 0
    try:
      rec = self.read_record(label, seed, current)
      if rec.round_rows:
        done = max(done, int(rec.round_rows[-1]["round"]))
    except (OSError, sealed.Damaged):
      pass
    return done

  def kept_runs(self) -> list:
    """``[(label, seed, bound, where)]`` of every run kept in ``workdir`` (a record,
    or a checkpoint step): the binding its verified record (else its newest
    verified checkpoint) carries (None: neither can be read, or it was written
    before records were bound) and the file that says so. Labels from the
    records themselves (a checkpoint-only run: its folder name)."""
    out, seen = [], set()
    runs = os.path.join(self.path, "runs")
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
          found = self.latest_history(label, seed)
          if found is not None and BINDING in found[1]:
            bound, rel = found[1][BINDING], self.checkpoint_run(label, seed) + f"/step_{found[0]}"
        out.append((label, seed, bound, rel))
    checkpoints = os.path.join(self.path, "checkpoints")
    for folder in sorted(os.listdir(checkpoints)) if os.path.isdir(checkpoints) else ():
      for name in sorted(os.listdir(os.path.join(checkpoints, folder))):
        seed = _seed_of(name)
        if seed is None or (folder, seed) in seen:
          continue
        found = self.latest_history(folder, seed)
        history = found[1] if found is not None else {}
        out.append((str(history.get("method", folder)), seed, history.get(BINDING),
                    f"checkpoints/{folder}/{name}"))
    return out

  def never_started(self) -> bool:
    """Whether the workdir holds the config of a run that never started and
    nothing else of fedfrac's: no run records, result files or checkpoint,
    record or tensorboard folders with anything in them (a run refused by a
    data-dependent check once left ``experiment.json`` and ``config.json``)."""
    if self.kept_runs():
      return False
    if any(os.path.exists(self.file(f)) for f in written.RESULT_FILES):
      return False
    return not any(os.path.isdir(self.file(t)) and os.listdir(self.file(t))
                   for t in written.TREES)

  def check_writable(self) -> None:
    """Create ``workdir`` and check a file can be written in it (one-line error)."""
    try:
      os.makedirs(self.path, exist_ok=True)
      probe = os.path.join(self.path, f".write_probe{os.getpid()}")
      with open(probe, "w") as f:
        f.write("")
      os.remove(probe)
    except OSError as e:
      reason = e.strerror or type(e).__name__
      raise ConfigError(f"{setting('workdir', self.path)}: cannot write there "
                        f"({reason})") from None

  def blocked(self, runs=()) -> list:
    """``[(path, kind)]``: the places where fedfrac writes in ``workdir`` that hold
    the other kind of thing (``kind`` is what it writes there, ``"file"`` or
    ``"folder"``): a folder at a top-level file (``experiment.json``, ``metrics.csv``,
    ...), at a kept record (any ``runs/<label>/seed_<s>.json``) or at the record of
    a run of ``runs`` [(label, seed)]; a file at ``runs/``, ``checkpoints/``,
    ``tensorboard/`` or at a run's own folder in them."""
    files = [self.file(name) for name in written.TOP_FILES]
    folders = [self.file(tree) for tree in written.TREES]
    records = self.file("runs")
    for folder in sorted(os.listdir(records)) if os.path.isdir(records) else ():
      inside = os.path.join(records, folder)
      if os.path.isdir(inside):
        files += [os.path.join(inside, n) for n in sorted(os.listdir(inside))
                  if _seed_of(n, ".json") is not None]
    for label, seed in runs:
      record, steps = self.record_path(label, seed), self.checkpoint_dir(label, seed)
      files.append(record)
      folders += [os.path.dirname(record), os.path.dirname(steps), steps]
    return ([(p, "file") for p in dict.fromkeys(files) if os.path.isdir(p)]
            + [(p, "folder") for p in dict.fromkeys(folders)
               if os.path.lexists(p) and not os.path.isdir(p)])

  def blocked_error(self, path, kind, after_compute=False) -> ConfigError:
    """The one line saying that ``path`` holds a folder where fedfrac writes a
    file (or the reverse, ``kind``: what fedfrac writes there), and what was kept."""
    other = "a folder" if kind == "file" else "a file"
    kept = ("its run's checkpoint and the other runs' results are kept; move it away "
            f"and {run_again()} to recompute the record from the checkpoint"
            if after_compute else
            f"move it away (or remove it) and {run_again()} (nothing was computed or "
            f"changed; the results kept there stay as they are)")
    return ConfigError(f"{setting('workdir', self.path)}: {path} is {other}, where "
                       f"fedfrac writes a {kind}; {kept}")

  def check_blocked(self, runs=()) -> None:
    """Refuse (one line, before compute) when :meth:`blocked` finds anything."""
    found = self.blocked(runs)
    if found:
      raise self.blocked_error(*found[0])

  def clear(self) -> None:
    """Remove every result and checkpoint fedfrac wrote in ``workdir`` (only
    those; refuses, naming them, when files of one's own are in the way)."""
    written.remove(self.path)

  def overwrite_labels(self, config, overwrite):
    """``None`` (keep everything), ``"all"``, or the tuple of method labels whose
    runs ``overwrite`` restarts (``True`` / ``"all"``: every method; a label, a
    comma-separated string or a sequence of labels: those)."""
    if overwrite is None or overwrite is False:
      return None
    if overwrite is True or overwrite == "all":
      return "all"
    names = overwrite.split(",") if isinstance(overwrite, str) else list(overwrite)
    labels = tuple(dict.fromkeys(str(n).strip() for n in names if str(n).strip()))
    known = list(dict.fromkeys(list(config.methods) + self.kept_labels()))
    unknown = [l for l in labels if l not in known]
    if not labels or unknown:
      shown = unknown[0] if unknown else overwrite
      raise ConfigError(f"{setting('overwrite', shown)}: no such method in the config "
                        f"or the workdir (methods: {', '.join(known)}); give "
                        f"{setting('overwrite')} to start afresh")
    running = config_base.method_labels(config)
    idle = [l for l in labels if l not in running]
    if idle:
      raise ConfigError(
          f"{setting('overwrite', ','.join(labels))}: this command does not run "
          f"{', '.join(idle)} (it runs {', '.join(running)}), so its results would be "
          f"deleted and not computed again; add {'it' if len(idle) == 1 else 'them'} to "
          f"{argument('config.only')}, or name only methods the command runs (nothing "
          f"was deleted)")
    return labels

  def _rebuilt(self, config, new, restart, problem):
    """``((shared, methods, rounds), note)``: a fingerprint rebuilt from the runs
    kept in ``workdir`` (but those of ``restart``) when every one is bound to the
    settings of ``new`` (this command's fingerprint; methods it does not run
    keep their own entry), and the line saying so; ``(None, note)`` when no run
    is kept. Otherwise raises
    :class:`ConfigError` naming the runs that differ. ``problem``: what is wrong
    with the file (``is missing``, ``failed verification (...)``)."""
    kept = [k for k in self.kept_runs()
            if k[0] not in restart and k[0].split("[", 1)[0] not in restart]
    head = f"{setting('workdir', self.path)}: {FINGERPRINT_FILE} {problem}"
    if not kept:
      return None, f"{head} and no run is kept there; wrote it afresh for this config"
    methods, unbound, differing = {}, [], {}
    for label, seed, bound, where in kept:
      base = label.split("[", 1)[0]
      if bound is None:
        unbound.append((base, where))
        continue
      entry = new["methods"].get(base, methods.get(base, bound["method"]))
      diffs = binding_differences(bound, {"shared": new["shared"], "method": entry},
                                         base)
      if diffs:
        differing.setdefault(base, diffs)
      else:
        methods.setdefault(base, entry)
    if unbound or differing:
      labels = list(dict.fromkeys([b for b, _ in unbound] + list(differing)))
      if differing:
        diffs = next(iter(differing.values()))
        what = (f"the runs of {', '.join(differing)} kept there are of another config "
                f"({shown_differences(diffs)})")
      else:
        what = (f"{unbound[0][1]} does not say which config it belongs to (written by an "
                f"older fedfrac)")
      rerun = [l for l in labels if l in config_base.method_labels(config)]
      fix = (f"{setting('overwrite', ','.join(rerun))} to rerun "
             f"{'that method' if len(rerun) == 1 else 'those methods'} (the others' "
             f"results are kept), " if rerun and len(rerun) == len(labels) else "")
      raise ConfigError(f"{head}, and {what}; give {fix}another {argument('workdir')}, "
                        f"or {setting('overwrite')} to start afresh")
    rounds = max([int(config.rounds)] + [self.stored_rounds(l, s)
                                         for l, s, _, _ in kept])
    order = list(dict.fromkeys(l.split("[", 1)[0] for l, _, _, _ in kept))
    note = (f"{head}; rebuilt it from the {len(kept)} runs kept there, whose records and "
            f"checkpoints match this config")
    return (new["shared"], {l: methods[l] for l in order}, rounds), note

  def _not_theirs(self, config, new, restart) -> str:
    """When ``experiment.json`` differs from ``new`` (this command's fingerprint)
    but every run kept in the workdir is bound to ``new``'s settings (the file is
    another experiment's, copied in), the way out that keeps those runs: remove
    the file, and the next run rebuilds it from them (:meth:`_rebuilt`);
    else ``""``."""
    try:
      rebuilt, _ = self._rebuilt(config, new, restart, "differs")
    except ConfigError:
      return ""
    if rebuilt is None:
      return ""
    count = len([k for k in self.kept_runs() if k[0].split("[", 1)[0] not in restart])
    return (f"but the {count} run{'s' if count != 1 else ''} kept there "
            f"{'are' if count != 1 else 'is'} bound to this config's settings, so that "
            f"file is not theirs: remove {self.file(FINGERPRINT_FILE)} and {run_again()} "
            f"to rebuild it from them (their results are kept), or ")

  def check_lengths(self, config, runs, skip=()) -> None:
    """Refuse (one line) when a run of ``runs`` [(label, seed)] already ran more
    rounds than ``config.rounds`` (grid runs ``label[option=value]`` included)."""
    for label, seed in runs:
      if label in skip:
        continue
      names = [label] + [n for n in self.kept_labels() if n.startswith(label + "[")]
      for name in names:
        done = self.stored_rounds(name, seed)
        if done > config.rounds:
          raise ConfigError(
              f"{setting('workdir', self.path)}: {name} seed {seed} already ran {done} "
              f"rounds, more than config.rounds={config.rounds} (its first "
              f"{config.rounds} are not a {config.rounds}-round run when anything "
              f"depends on the length); give {setting('config.rounds', done)} to report "
              f"it, another {argument('workdir')}, or {setting('overwrite', label)} to "
              f"run it again for {config.rounds} rounds")

  def prepare(self, config, overwrite=False, runs=(), extra=None, check=None) -> None:
    """Make ``workdir`` ready for ``config``, before any compute.

    Checks it is writable; with ``overwrite`` (see :func:`overwrite_labels`)
    clears earlier results of every method or of the named ones; otherwise
    compares the stored fingerprint and raises :class:`ConfigError` (one line
    naming the keys that differ) on a mismatch; refuses a run of ``runs``
    [(label, seed)] that already ran more than ``config.rounds``, and calls
    ``check(restarted labels)`` (more checks that may refuse). Only then does it
    delete the restarted methods' files and store the merged fingerprint and the
    resolved ``config.json``. ``extra``: see :func:`fingerprint`.
    """
    check_name(self.path)
    self.check_writable()
    self.check_blocked(runs)
    mode = self.overwrite_labels(config, overwrite)
    if mode == "all":
      written.remove(self.path)
    restart = () if mode in (None, "all") else mode
    new = fingerprint(config, extra)
    path = os.path.join(self.path, FINGERPRINT_FILE)
    old, problem, note = None, None, None
    if os.path.exists(path):
      try:
        old = _read_fingerprint(path)
      except ValueError as e:
        problem = str(e)
    elif self.kept_runs():
      problem = "is missing"
    elif any(os.path.exists(os.path.join(self.path, item)) for item in written.RESULT_FILES):
      raise ConfigError(f"{setting('workdir', self.path)} holds results without "
                        f"{FINGERPRINT_FILE} (an unknown config); use another "
                        f"{argument('workdir')}, or {setting('overwrite')} to start afresh")
    if problem is not None:
      old, note = self._rebuilt(config, new, restart, problem)
    if old is not None and (old[0], old[1]) != (new["shared"], new["methods"]) \
        and self.never_started():
      # Only the config of a run that never started: nothing to keep, not another
      # experiment's results.
      old, note = None, (f"{setting('workdir', self.path)}: it held only the config of "
                         f"a run that never started; this run's config replaces it")
    if old is not None:
      old_shared, all_old, old_rounds = old
      old_methods = {k: v for k, v in all_old.items() if k not in restart}
      new["rounds"] = max(old_rounds, new["rounds"])
      diffs = _differences(old_shared, new["shared"])
      shared_differs = bool(diffs)
      differing = []
      for label, entry in new["methods"].items():
        if label in old_methods and old_methods[label] != entry:
          more = _differences(_flatten(old_methods[label]), _flatten(entry),
                              f"methods.{label}.",
                              default=lambda k, n=entry.get("name"): method_default(n, k))
          if more:
            differing.append(label)
            diffs += more
      if diffs:
        shown = "; ".join(diffs[:6]) + ("; ..." if len(diffs) > 6 else "")
        if restart:
          fix = (f"{setting('overwrite')} to start afresh "
                 f"({setting('overwrite', ','.join(restart))} keeps the "
                 f"other methods' results, so what they share must not change)")
        elif shared_differs:
          fix = f"{setting('overwrite')} to start afresh"
        else:
          fix = (f"{setting('overwrite', ','.join(differing))} to restart only "
                 f"{'that method' if len(differing) == 1 else 'those methods'}")
        raise ConfigError(f"{setting('workdir', self.path)} holds results of a "
                          f"different config ({shown}); {self._not_theirs(config, new, restart)}"
                          f"use another {argument('workdir')}, or {fix}")
      # Methods keep the order they were first run in (a restarted one its place).
      merged = {**old_methods, **new["methods"]}
      new["methods"] = {k: merged[k] for k in list(all_old) + list(merged) if k in merged}
    self.check_lengths(config, runs, skip=restart)
    if check is not None:
      check(restart)
    if restart:
      written.remove(self.path, restart)
    written.register(self.path, files=[FINGERPRINT_FILE, "config.json"])
    if note:
      print(note, file=sys.stderr)
    sealed.write(path, new, indent=2)
    atomic_write(os.path.join(self.path, "config.json"),
                 json.dumps(server_optimizer.plain_config(config), indent=2))

  def can_rerun(self, config, label) -> bool:
    """Whether ``config`` can run ``label`` again as the workdir ran it: the method
    is in the config with the options the workdir's fingerprint stores."""
    if label not in config.methods:
      return False
    try:
      entry = sealed.read(os.path.join(self.path, FINGERPRINT_FILE))["methods"].get(label)
    except (OSError, ValueError, KeyError, TypeError):
      return False
    return entry == method_fingerprint(config, label)

  def stored_labels(self) -> list:
    """Method labels in the workdir's fingerprint, in the order first run."""
    try:
      return list(sealed.read(os.path.join(self.path, FINGERPRINT_FILE), legacy=True)["methods"])
    except (OSError, ValueError, KeyError, TypeError):
      return []

  def kept_labels(self) -> list:
    """Labels of every run kept in ``workdir``: the fingerprint's methods in the
    order first run, then any other kept label (e.g. ``run_many`` grid values,
    ``fofedavg[alpha=0.5]``) in name order."""
    labels = self.stored_labels()
    runs = os.path.join(self.path, "runs")
    extra = sorted(os.listdir(runs)) if os.path.isdir(runs) else []
    return list(dict.fromkeys(labels + extra))


# Module functions of a workdir (and those of ``fedfrac.runner.stored``) became
# Workdir methods: the old names keep working for one release, with a warning.
MOVED = ("check_writable", "clear", "overwrite_labels", "check_lengths", "prepare",
         "can_rerun", "stored_labels", "kept_labels", "load_records", "save_record")
CONFIG_FIRST = ("overwrite_labels", "check_lengths", "prepare", "can_rerun")


def moved(name, module="fedfrac.runner.workdir"):
  """The old module function ``name(workdir, ...)`` (``name(config, workdir, ...)``)
  as a call of :class:`Workdir`'s method, with a DeprecationWarning."""
  shown = ("(config, workdir, ...)" if name in CONFIG_FIRST else "(workdir, ...)")
  new = ("(config, ...)" if name in CONFIG_FIRST else "(...)")

  def call(*args, **kwargs):
    warnings.warn(f"{module}.{name}{shown} is deprecated: use "
                  f"fedfrac.runner.workdir.Workdir(workdir).{name}{new}",
                  DeprecationWarning, stacklevel=2)
    if name in CONFIG_FIRST:
      config, workdir, *rest = args
      return getattr(Workdir(workdir), name)(config, *rest, **kwargs)
    workdir, *rest = args
    return getattr(Workdir(workdir), name)(*rest, **kwargs)
  call.__name__ = name
  return call


def __getattr__(name):
  if name in MOVED:
    return moved(name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
