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
and checkpoint carries its experiment's settings, :func:`fedfrac.runner.stored.binding`),
saying so in one line; otherwise the runs that differ are named, with
``--overwrite=<method>`` to rerun only those.

Methods and seeds not run before are added; every run's record is kept in
``runs/<method>/seed_<s>.json`` (sealed and verified, :mod:`fedfrac.runner.stored`),
so metrics and summaries cover every method and seed ever run in the workdir,
not only the last command's.

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

from fedfrac import algorithms
from fedfrac.algorithms import server_optimizer
from fedfrac import config_base
from fedfrac._validation import ConfigError, argument, setting
from fedfrac.runner import sealed, stored, written
from fedfrac.runner.checkpoint import atomic_write, json_default
from fedfrac.runner.stored import load_records, save_record  # noqa: F401  (re-exported)

FINGERPRINT_FILE = written.FINGERPRINT
OUTPUT_KEYS = ("name", "progress", "eval_every", "checkpoint_every", "target_accuracy",
               "target_rmse", "stop_at_target", "log", "only", "seeds", "on_divergence", "rounds",
               "methods", "engine.cpu_devices", "workers")
# Everything a run writes into its workdir (``overwrite`` removes what of it
# fedfrac wrote, :mod:`fedfrac.runner.written`).
WORKDIR_ITEMS = written.TOP_FILES + written.TREES


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


def check_name(workdir) -> None:
  """An empty ``--workdir=`` is refused (one line): it would keep nothing."""
  if workdir is not None and not str(workdir).strip():
    raise ConfigError(f"{setting('workdir', workdir)} is empty: give a directory, or "
                      f"leave {argument('workdir')} out to keep nothing")


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
    raise ConfigError(f"{setting('workdir', workdir)}: cannot write there ({reason})") \
        from None


def clear(workdir) -> None:
  """Remove every result and checkpoint fedfrac wrote in ``workdir`` (only
  those; refuses, naming them, when files of one's own are in the way)."""
  written.remove(workdir)


def overwrite_labels(config, workdir, overwrite):
  """``None`` (keep everything), ``"all"``, or the tuple of method labels whose
  runs ``overwrite`` restarts (``True`` / ``"all"``: every method; a label, a
  comma-separated string or a sequence of labels: those)."""
  if overwrite is None or overwrite is False:
    return None
  if overwrite is True or overwrite == "all":
    return "all"
  names = overwrite.split(",") if isinstance(overwrite, str) else list(overwrite)
  labels = tuple(dict.fromkeys(str(n).strip() for n in names if str(n).strip()))
  known = list(dict.fromkeys(list(config.methods) + kept_labels(workdir)))
  unknown = [l for l in labels if l not in known]
  if not labels or unknown:
    shown = unknown[0] if unknown else overwrite
    raise ConfigError(f"{setting('overwrite', shown)}: no such method in the config or "
                      f"the workdir (methods: {', '.join(known)}); give "
                      f"{setting('overwrite')} to start afresh")
  running = config_base.method_labels(config)
  idle = [l for l in labels if l not in running]
  if idle:
    raise ConfigError(
        f"{setting('overwrite', ','.join(labels))}: this command does not run "
        f"{', '.join(idle)} "
        f"(it runs {', '.join(running)}), so its results would be deleted and not "
        f"computed again; add {'it' if len(idle) == 1 else 'them'} to "
        f"{argument('config.only')}, or name only methods the command runs (nothing was deleted)")
  return labels


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


def never_started(workdir) -> bool:
  """Whether ``workdir`` holds the config of a run that never started and
  nothing else of fedfrac's: no run records, result files or checkpoint,
  record or tensorboard folders with anything in them (a run refused by a
  data-dependent check once left ``experiment.json`` and ``config.json``)."""
  if stored.kept_runs(workdir):
    return False
  if any(os.path.exists(os.path.join(workdir, f)) for f in written.RESULT_FILES):
    return False
  return not any(os.path.isdir(os.path.join(workdir, t)) and
                 os.listdir(os.path.join(workdir, t)) for t in written.TREES)


def _rebuilt(config, workdir, new, restart, problem):
  """``((shared, methods, rounds), note)``: a fingerprint rebuilt from the runs
  kept in ``workdir`` (but those of ``restart``) when every one is bound to the
  settings of ``new`` (this command's fingerprint; methods it does not run
  keep their own entry), and the line saying so; ``(None, note)`` when no run
  is kept. Otherwise raises
  :class:`ConfigError` naming the runs that differ. ``problem``: what is wrong
  with the file (``is missing``, ``failed verification (...)``)."""
  kept = [k for k in stored.kept_runs(workdir)
          if k[0] not in restart and k[0].split("[", 1)[0] not in restart]
  head = f"{setting('workdir', workdir)}: {FINGERPRINT_FILE} {problem}"
  if not kept:
    return None, f"{head} and no run is kept there; wrote it afresh for this config"
  methods, unbound, differing = {}, [], {}
  for label, seed, bound, where in kept:
    base = label.split("[", 1)[0]
    if bound is None:
      unbound.append((base, where))
      continue
    entry = new["methods"].get(base, methods.get(base, bound["method"]))
    diffs = stored.binding_differences(bound, {"shared": new["shared"], "method": entry},
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
              f"({stored.shown_differences(diffs)})")
    else:
      what = (f"{unbound[0][1]} does not say which config it belongs to (written by an "
              f"older fedfrac)")
    rerun = [l for l in labels if l in config_base.method_labels(config)]
    fix = (f"{setting('overwrite', ','.join(rerun))} to rerun "
           f"{'that method' if len(rerun) == 1 else 'those methods'} (the others' "
           f"results are kept), " if rerun and len(rerun) == len(labels) else "")
    raise ConfigError(f"{head}, and {what}; give {fix}another {argument('workdir')}, or "
                      f"{setting('overwrite')} to start afresh")
  rounds = max([int(config.rounds)] + [stored.stored_rounds(workdir, l, s)
                                       for l, s, _, _ in kept])
  order = list(dict.fromkeys(l.split("[", 1)[0] for l, _, _, _ in kept))
  note = (f"{head}; rebuilt it from the {len(kept)} runs kept there, whose records and "
          f"checkpoints match this config")
  return (new["shared"], {l: methods[l] for l in order}, rounds), note


def check_lengths(config, workdir, runs, skip=()) -> None:
  """Refuse (one line) when a run of ``runs`` [(label, seed)] already ran more
  rounds than ``config.rounds`` (grid runs ``label[option=value]`` included)."""
  for label, seed in runs:
    if label in skip:
      continue
    names = [label] + [n for n in kept_labels(workdir) if n.startswith(label + "[")]
    for name in names:
      done = stored.stored_rounds(workdir, name, seed)
      if done > config.rounds:
        raise ConfigError(
            f"{setting('workdir', workdir)}: {name} seed {seed} already ran {done} "
            f"rounds, more than config.rounds={config.rounds} (its first {config.rounds} "
            f"are not a {config.rounds}-round run when anything depends on the length); "
            f"give {setting('config.rounds', done)} to report it, another "
            f"{argument('workdir')}, or {setting('overwrite', label)} to run it again for "
            f"{config.rounds} rounds")


def prepare(config, workdir, overwrite=False, runs=(), extra=None, check=None) -> None:
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
  check_name(workdir)
  check_writable(workdir)
  mode = overwrite_labels(config, workdir, overwrite)
  if mode == "all":
    written.remove(workdir)
  restart = () if mode in (None, "all") else mode
  new = fingerprint(config, extra)
  path = os.path.join(workdir, FINGERPRINT_FILE)
  old, problem, note = None, None, None
  if os.path.exists(path):
    try:
      old = _read_fingerprint(path)
    except ValueError as e:
      problem = str(e)
  elif stored.kept_runs(workdir):
    problem = "is missing"
  elif any(os.path.exists(os.path.join(workdir, item)) for item in written.RESULT_FILES):
    raise ConfigError(f"{setting('workdir', workdir)} holds results without "
                      f"{FINGERPRINT_FILE} (an unknown config); use another "
                      f"{argument('workdir')}, or {setting('overwrite')} to start afresh")
  if problem is not None:
    old, note = _rebuilt(config, workdir, new, restart, problem)
  if old is not None and (old[0], old[1]) != (new["shared"], new["methods"]) \
      and never_started(workdir):
    # Only the config of a run that never started: nothing to keep, not another
    # experiment's results.
    old, note = None, (f"{setting('workdir', workdir)}: it held only the config of a run that "
                       f"never started; this run's config replaces it")
  if old is not None:
    old_shared, all_old, old_rounds = old
    old_methods = {k: v for k, v in all_old.items() if k not in restart}
    new["rounds"] = max(old_rounds, new["rounds"])
    diffs = _differences(old_shared, new["shared"])
    shared_differs = bool(diffs)
    differing = []
    for label, entry in new["methods"].items():
      if label in old_methods and old_methods[label] != entry:
        differing.append(label)
        diffs += _differences(_flatten(old_methods[label]), _flatten(entry),
                              f"methods.{label}.")
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
      raise ConfigError(f"{setting('workdir', workdir)} holds results of a different "
                        f"config ({shown}); use another {argument('workdir')}, or {fix}")
    # Methods keep the order they were first run in (a restarted one its place).
    merged = {**old_methods, **new["methods"]}
    new["methods"] = {k: merged[k] for k in list(all_old) + list(merged) if k in merged}
  check_lengths(config, workdir, runs, skip=restart)
  if check is not None:
    check(restart)
  if restart:
    written.remove(workdir, restart)
  written.register(workdir, files=[FINGERPRINT_FILE, "config.json"])
  if note:
    print(note, file=sys.stderr)
  sealed.write(path, new, indent=2)
  atomic_write(os.path.join(workdir, "config.json"), config.to_json_best_effort(indent=2))


def can_rerun(config, workdir, label) -> bool:
  """Whether ``config`` can run ``label`` again as the workdir ran it: the method
  is in the config with the options the workdir's fingerprint stores."""
  if label not in config.methods:
    return False
  try:
    entry = sealed.read(os.path.join(workdir, FINGERPRINT_FILE))["methods"].get(label)
  except (OSError, ValueError, KeyError, TypeError):
    return False
  return entry == method_fingerprint(config, label)


def stored_labels(workdir) -> list:
  """Method labels in the workdir's fingerprint, in the order first run."""
  try:
    return list(sealed.read(os.path.join(workdir, FINGERPRINT_FILE), legacy=True)["methods"])
  except (OSError, ValueError, KeyError, TypeError):
    return []


def kept_labels(workdir) -> list:
  """Labels of every run kept in ``workdir``: the fingerprint's methods in the
  order first run, then any other kept label (e.g. ``run_many`` grid values,
  ``fofedavg[alpha=0.5]``) in name order."""
  labels = stored_labels(workdir)
  runs = os.path.join(workdir, "runs")
  extra = sorted(os.listdir(runs)) if os.path.isdir(runs) else []
  return list(dict.fromkeys(labels + extra))
