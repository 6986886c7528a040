"""A workdir belongs to one experiment (docs/design.md §2.4).

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
the keys that differ, unless ``overwrite`` clears the workdir's results first.
Methods and seeds not run before are added; every run's record is kept in
``runs/<method>/seed_<s>.json``, so metrics and summaries cover every method and
seed ever run in the workdir, not only the last command's.
"""
from __future__ import annotations

import json
import os
import shutil

from fedfrac import algorithms
from fedfrac import config as config_lib
from fedfrac.config import ConfigError
from fedfrac.runner.checkpoint import atomic_write, json_default
from fedfrac.runner.records import RunRecord

FINGERPRINT_FILE = "experiment.json"
OUTPUT_KEYS = ("name", "progress", "eval_every", "checkpoint_every", "target_accuracy",
               "target_rmse", "log", "only", "seeds", "on_divergence", "rounds",
               "methods", "engine.cpu_devices", "workers")
# Everything a run writes into its workdir (what ``overwrite`` removes).
WORKDIR_ITEMS = (FINGERPRINT_FILE, "config.json", "metrics.csv", "metrics.jsonl",
                 "rounds.csv", "summary.json", "summary.md", "accuracy.png",
                 "ranking.png", "checkpoints", "runs", "tensorboard")


def _plain(value):
  """``value`` as JSON would give it back (tuples -> lists, NumPy -> Python)."""
  return json.loads(json.dumps(value, default=json_default))


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
  options = algorithms.hparams(method.name, config_lib.method_options(method))
  sections = {s: method[s].to_dict() if hasattr(method[s], "to_dict") else dict(method[s])
              for s in config_lib.METHOD_SECTIONS if s in method}
  return _plain({"name": method.name, "options": options, **sections})


def fingerprint(config) -> dict:
  """``{"shared": {dotted key: value}, "methods": {label: ...}, "rounds": int}``
  of the selected methods (``rounds``: informative, the most ever asked for)."""
  shared = {k: v for k, v in _flatten(_plain(config.to_dict())).items()
            if not _is_output_key(k)}
  return {"shared": shared, "rounds": int(config.rounds),
          "methods": {label: method_fingerprint(config, label)
                      for label in config_lib.method_labels(config)}}


def _differences(old: dict, new: dict, prefix=""):
  keys = sorted(set(old) | set(new))
  missing = object()
  out = []
  for k in keys:
    a, b = old.get(k, missing), new.get(k, missing)
    if a != b:
      show = lambda v: "(absent)" if v is missing else repr(v)
      out.append(f"{prefix}{k} {show(a)} -> {show(b)}")
  return out


def check_writable(workdir) -> None:
  """Create ``workdir`` and check a file can be written in it (one-line error)."""
  try:
    os.makedirs(workdir, exist_ok=True)
    probe = os.path.join(workdir, f".write_probe{os.getpid()}")
    with open(probe, "w") as f:
      f.write("")
    os.remove(probe)
  except OSError as e:
    reason = e.strerror or type(e).__name__
    raise ConfigError(f"--workdir={workdir}: cannot write there ({reason})") from None


def clear(workdir) -> None:
  """Remove every result and checkpoint a run wrote in ``workdir`` (only those)."""
  for item in WORKDIR_ITEMS:
    path = os.path.join(workdir, item)
    if os.path.isdir(path) and not os.path.islink(path):
      shutil.rmtree(path)
    elif os.path.lexists(path):
      os.remove(path)


def prepare(config, workdir, overwrite=False) -> None:
  """Make ``workdir`` ready for ``config``, before any compute.

  Checks it is writable; with ``overwrite`` clears earlier results; otherwise
  compares the stored fingerprint and raises :class:`ConfigError` (one line
  naming the keys that differ) on a mismatch. Then stores the merged fingerprint
  and the resolved ``config.json``.
  """
  check_writable(workdir)
  if overwrite:
    clear(workdir)
  new = fingerprint(config)
  path = os.path.join(workdir, FINGERPRINT_FILE)
  if os.path.exists(path):
    try:
      with open(path) as f:
        old = json.load(f)
      old_shared, old_methods = old["shared"], old["methods"]
      new["rounds"] = max(int(old["rounds"]), new["rounds"])
    except (OSError, ValueError, KeyError, TypeError):
      raise ConfigError(f"--workdir={workdir}: {FINGERPRINT_FILE} is unreadable; "
                        f"give --overwrite to start afresh") from None
    diffs = _differences(old_shared, new["shared"])
    for label, entry in new["methods"].items():
      if label in old_methods and old_methods[label] != entry:
        diffs += _differences(_flatten(old_methods[label]), _flatten(entry),
                              f"methods.{label}.")
    if diffs:
      shown = "; ".join(diffs[:6]) + ("; ..." if len(diffs) > 6 else "")
      raise ConfigError(f"--workdir={workdir} holds results of a different config "
                        f"({shown}); use another --workdir, or --overwrite to start "
                        f"afresh")
    new["methods"] = {**old_methods, **new["methods"]}
  elif any(os.path.exists(os.path.join(workdir, item))
           for item in ("checkpoints", "metrics.csv", "runs")):
    raise ConfigError(f"--workdir={workdir} holds results without {FINGERPRINT_FILE} "
                      f"(an unknown config); use another --workdir, or --overwrite to "
                      f"start afresh")
  atomic_write(path, json.dumps(new, indent=2, default=json_default))
  atomic_write(os.path.join(workdir, "config.json"), config.to_json_best_effort(indent=2))


def _record_path(workdir, label, seed):
  return os.path.join(workdir, "runs", label.replace(os.sep, "_"), f"seed_{seed}.json")


def save_record(workdir, record: RunRecord) -> None:
  """Keep ``record`` (without per-client arrays) as the workdir's result of its
  method and seed."""
  path = _record_path(workdir, record.method, record.seed)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  data = {"method": record.method, "algorithm": record.algorithm, "seed": record.seed,
          "rows": record.rows, "round_rows": record.round_rows, "status": record.status,
          "compile_s": record.compile_s, "wall_s": record.wall_s,
          "nonfinite_allowed": list(record.nonfinite_allowed)}
  atomic_write(path, json.dumps(data, default=json_default))


def load_records(workdir, labels) -> list:
  """Every kept record of the method ``labels`` (in that order, then by seed)."""
  records = []
  for label in labels:
    d = os.path.dirname(_record_path(workdir, label, 0))
    if not os.path.isdir(d):
      continue
    seeds = sorted(int(n[len("seed_"):-len(".json")]) for n in os.listdir(d)
                   if n.startswith("seed_") and n.endswith(".json"))
    for seed in seeds:
      with open(_record_path(workdir, label, seed)) as f:
        data = json.load(f)
      records.append(RunRecord(data["method"], data["algorithm"], data["seed"],
                               data["rows"], data["round_rows"], data["status"],
                               data["compile_s"], data["wall_s"], {},
                               tuple(data["nonfinite_allowed"])))
  return records


def stored_labels(workdir) -> list:
  """Method labels in the workdir's fingerprint, in the order first run."""
  try:
    with open(os.path.join(workdir, FINGERPRINT_FILE)) as f:
      return list(json.load(f)["methods"])
  except (OSError, ValueError, KeyError):
    return []


def kept_labels(workdir) -> list:
  """Labels of every run kept in ``workdir``: the fingerprint's methods in the
  order first run, then any other kept label (e.g. ``run_many`` grid values,
  ``fofedavg[alpha=0.5]``) in name order."""
  labels = stored_labels(workdir)
  runs = os.path.join(workdir, "runs")
  extra = sorted(os.listdir(runs)) if os.path.isdir(runs) else []
  return list(dict.fromkeys(labels + extra))
