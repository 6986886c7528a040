"""Command line: ``python -m fedfrac.main --config=configs/<name>.py --workdir=DIR``.

``python -m fedfrac.main --list`` prints every algorithm with its options,
defaults and allowed values, and every data source, partition and model.

Any config field can be overridden with ``--config.<key>=<value>``, e.g.
``--config.rounds=50 --config.data.alpha=0.1 --config.only=fedavg``; so can any
option of a method's algorithm and any key of its ``client`` / ``server`` /
``attack`` sections, whether or not the config file mentions it
(``--config.methods.fofedavg.alpha=0.9``, ``--config.methods.fedavg.client.lr=0.01``).

A workdir belongs to one experiment: a config that differs from the one that
wrote it is refused (one line naming the keys that differ) unless
``--overwrite`` starts afresh (removing only files fedfrac wrote there) or
``--overwrite=fedavg,fedprox`` restarts only those methods' runs. Ctrl-C
(SIGINT) and SIGTERM (job schedulers, ``timeout``, ``kill``) stop after the
current chunk, write a checkpoint and the rows so far, print how to resume and
exit with status 130 or 143; a second signal stops at once. A run that diverges
with ``on_divergence='error'`` exits with status 1, and so does a disk that
fills while writing (one line naming the workdir and the space needed).

Bad input — an invalid config value, an unknown key, an override that does not
parse, a config file that is missing, raises, returns no ConfigDict or sets a key
the base config does not have (:mod:`fedfrac.config_files`), a dataset that is
not available or holds bad data — prints one line ``error: ...`` to stderr and
exits with status 2; ``--debug`` shows the Python traceback instead.

Compiled programs are kept in a persistent cache (``~/.cache/fedfrac/jax``;
``FEDFRAC_COMPILE_CACHE=DIR`` or ``=off``, :mod:`fedfrac.runner.compile_cache`),
so running the same methods again skips compiling them.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shlex
import sys
import traceback

from absl import app, flags, logging
from ml_collections import config_flags

from fedfrac import config_files, config_keys, runner
from fedfrac import _validation
from fedfrac._validation import ConfigError
from fedfrac.data.array_checks import DataError
from fedfrac.runner import compile_cache, log, signals
from fedfrac.runner.checkpoint import DiskFullError

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file.",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Output and checkpoint directory.")
_STOP_AFTER = flags.DEFINE_integer(
    "stop_after_round", None, "Stop after this many rounds (resume later from --workdir).")
_LIST = flags.DEFINE_bool(
    "list", False, "Print every algorithm (options, defaults, allowed values), data "
    "source, partition and model, then exit; no --config needed.")
_DEBUG = flags.DEFINE_bool(
    "debug", False, "On a config or data error show the traceback, not one line.")


class _OverwriteParser(flags.ArgumentParser):
  """``--overwrite`` (every method), ``--nooverwrite``, or ``--overwrite=A,B``
  (only the runs of methods A and B)."""

  def parse(self, argument):
    if isinstance(argument, (bool, tuple)):
      return argument
    text = str(argument).strip()
    if text.lower() in ("true", "1", "all"):
      return True
    if text.lower() in ("false", "0"):
      return False
    labels = tuple(t.strip() for t in text.split(",") if t.strip())
    if not labels:
      raise ValueError("give method labels (--overwrite=fedavg,fedprox) or "
                       "--overwrite alone for every method")
    return labels

  def flag_type(self):
    return "bool or method labels"


_OVERWRITE = flags.DEFINE_flag(flags.Flag(
    _OverwriteParser(), flags.ArgumentSerializer(), "overwrite", False,
    "Remove the workdir's earlier results and checkpoints (only files fedfrac wrote "
    "there) and start afresh; --overwrite=fedavg,fedprox restarts only those methods' "
    "runs and keeps the others'.", boolean=True))

USAGE_ERROR = 2  # exit status for bad input (config, flags, missing data)
DIVERGED = 1     # a run diverged with on_divergence='error' (or the disk filled)
INTERRUPTED = 130  # Ctrl-C (128 + SIGINT); SIGTERM: 143


def _one_line(text: str) -> str:
  return " ".join(str(text).split())


def _exit_with_error(message: str):
  print(f"error: {_one_line(message)}", file=sys.stderr)
  sys.exit(USAGE_ERROR)


def _debug_requested(argv) -> bool:
  """``--debug`` from the raw arguments (flag parsing may have failed before it)."""
  value = False
  for arg in argv[1:]:
    if arg == "--":
      break
    if arg in ("--debug", "--debug=true", "--debug=True", "--debug=1"):
      value = True
    elif arg in ("--nodebug", "--debug=false", "--debug=False", "--debug=0"):
      value = False
  return value


def _config_path(argv) -> str:
  """The ``--config`` file named in ``argv`` ('' if none)."""
  for i, arg in enumerate(argv[1:], start=1):
    if arg.startswith("--config="):
      return arg[len("--config="):]
    if arg == "--config" and i + 1 < len(argv):
      return argv[i + 1]
  return ""


def _config_file(argv) -> str:
  """The file part of ``--config`` (config_flags allows ``file.py:argument``)."""
  path = _config_path(argv)
  return path if os.path.isfile(path) else path.split(":", 1)[0]


_CHECKED: dict = {}   # --config text -> its checked config (before overrides)


def _check_config_file(argv) -> None:
  """Load and check the ``--config`` file (:func:`fedfrac.config_files.load_config_file`):
  a misspelt or deleted key, a ``get_config`` that is missing, returns no
  ConfigDict or raises, a value of the wrong type: one line, exit status 2."""
  spec = _config_path(argv)
  if not spec or spec in _CHECKED:
    return
  try:
    _CHECKED[spec] = config_files.load_config_file(spec)
  except ConfigError as e:
    if _debug_requested(argv):
      raise
    _exit_with_error(str(e))


def _loaded_config(argv):
  """The config the ``--config`` file returns, before overrides (None if it fails)."""
  value = flags.FLAGS["config"].value
  if hasattr(value, "keys"):
    return value
  if _config_path(argv) in _CHECKED:
    return _CHECKED[_config_path(argv)]
  file = _config_file(argv)
  arg = _config_path(argv)[len(file) + 1:]
  try:
    spec = importlib.util.spec_from_file_location("fedfrac_cli_config", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get_config(arg) if arg else module.get_config()
  except Exception:  # only used to list the keys in an error message
    return None


def _raised_in(error: BaseException, path: str) -> bool:
  """Whether a frame of ``error``'s traceback runs code from the file ``path``."""
  if not path:
    return False
  target = os.path.realpath(path)
  return any(os.path.realpath(frame.filename) == target
             for frame in traceback.extract_tb(error.__traceback__))


def _unknown_key_message(argv, missing: str) -> str:
  """``config.<path>: unknown key ...`` for the override naming ``missing``."""
  loaded = _loaded_config(argv)
  for arg in argv[1:]:
    if not arg.startswith("--config."):
      continue
    path = arg[len("--config."):].split("=", 1)[0]
    parts = path.split(".")
    if missing not in parts:
      continue
    parent = parts[:parts.index(missing)]
    node = loaded
    try:
      for p in parent:
        node = node[p]
      known = list(node.keys())
    except Exception:  # the loaded config is unavailable or not a mapping here
      known = []
    where = "config" + "".join(f".{p}" for p in parent)
    if known:
      return config_keys.unknown_key_message(path, missing, None, known, where)
    return f"config.{path}: unknown key {missing!r}"
  return f"unknown config key {missing!r}"


def _has_path(config, path) -> bool:
  node = config
  for part in path.split("."):
    try:
      if part not in node:
        return False
      node = node[part]
    except TypeError:   # not a mapping
      return False
  return True


def _split_method_overrides(argv):
  """``(argv without them, [(path, text)])``: the ``--config.methods.<...>=v``
  overrides whose key the config file does not have (config_flags can only set
  existing keys; these are applied by :func:`fedfrac.config_keys.set_method_option`)."""
  loaded = None
  kept, extra = [argv[0]], []
  for i, arg in enumerate(argv[1:], start=1):
    if arg == "--":
      kept.extend(argv[i:])
      break
    if arg.startswith("--config.methods.") and "=" in arg:
      path, text = arg[len("--config."):].split("=", 1)
      if loaded is None:
        loaded = _loaded_config(argv) or {}
      if hasattr(loaded, "keys") and "methods" in loaded and not _has_path(loaded, path):
        extra.append((path, text))
        continue
    kept.append(arg)
  return kept, extra


def parse_flags(argv):
  """Parse ``argv`` like absl does, but report bad flags and configs in one line.

  Loading the config file and applying ``--config.<key>`` overrides happen here,
  before ``main``; any failure becomes ``error: ...`` on stderr and exit status 2
  (with ``--debug``, the exception propagates with its traceback). From here on
  messages name arguments as flags (``--workdir``), not as ``ff.run``'s keywords.
  """
  _validation.name_flags()
  _check_config_file(argv)
  try:
    argv, method_overrides = _split_method_overrides(argv)
    sys.argv[:] = argv    # config_flags reads its overrides from sys.argv
    args = flags.FLAGS(argv)
    # A config file that cannot be read is reported lazily by config_flags, on
    # the first attribute access: force it here.
    getattr(_CONFIG.value, "rounds", None)
  except Exception as e:  # every failure here is bad input on the command line
    if _debug_requested(argv):
      raise
    if isinstance(e, flags.UnrecognizedFlagError) and e.flagname.startswith("config."):
      message = _unknown_key_message(argv, e.flagname.split(".")[-1])
    elif isinstance(e, flags.Error):
      message = str(e)
      if message.startswith("flag --"):
        message = message[len("flag "):]
    elif isinstance(e, OSError) or not os.path.isfile(_config_file(argv)):
      path = _config_path(argv)
      message = (f"--config={path}: no such file" if not os.path.isfile(_config_file(argv))
                 else f"--config={path}: cannot load the config file ({e})")
    elif (isinstance(e, (AttributeError, KeyError))
          and not _raised_in(e, _config_file(argv))):
      # Not raised by the config file itself: an override named a missing key.
      text = str(e.args[0]) if e.args else str(e)
      missing = re.search(r"[A-Za-z_][A-Za-z0-9_]*", text)
      message = _unknown_key_message(argv, missing.group(0) if missing else text)
    else:
      message = (f"--config={_config_path(argv)}: the config file raised "
                 f"{type(e).__name__}: {e}")
    _exit_with_error(message)
  try:
    for path, text in method_overrides:
      config_keys.set_method_option(_CONFIG.value, path, text)
  except ConfigError as e:
    if _debug_requested(argv):
      raise
    _exit_with_error(str(e))
  return args


def main(argv):
  del argv
  if _LIST.value:
    from fedfrac import catalog
    print(catalog.catalog_text())
    return
  if _CONFIG.value is None:
    _exit_with_error("--config=None: a config file is required (or give --list)")
  logging.set_verbosity(logging.WARNING)
  compile_cache.enable()   # FEDFRAC_COMPILE_CACHE (fedfrac.runner.compile_cache)
  log.one_line_warnings()
  # Several processes (FEDFRAC_COORDINATOR/NUM_PROCESSES/PROCESS_ID, docs/scaling.md):
  # join them before JAX runs anything; only process 0 writes the workdir.
  from fedfrac.sim import distributed
  try:
    distributed.initialize_from_env()
  except ValueError as e:
    _exit_with_error(str(e))
  workdir = _WORKDIR.value if distributed.is_writer() else None
  try:
    results = runner.run(_CONFIG.value, workdir=workdir,
                         stop_after_round=_STOP_AFTER.value,
                         overwrite=_OVERWRITE.value)
  except (ConfigError, DataError, FileNotFoundError) as e:  # bad value or data
    if _DEBUG.value:
      raise
    _exit_with_error(str(e))
  except runner.RunInterrupted as e:
    print(_one_line(e.message), file=sys.stderr)
    sys.exit(signals.exit_status(e.signum))
  except signals.Interrupted as e:  # a second signal: stopped at once
    where = (f"rerun the same command with --workdir={shlex.quote(_WORKDIR.value)} to "
             f"resume from the last checkpoint" if _WORKDIR.value else "nothing was kept")
    print(f"interrupted at once ({signals.name(e.signum)}): the chunks running were "
          f"not checkpointed; {where}", file=sys.stderr)
    sys.exit(signals.exit_status(e.signum))
  except runner.RunsLost as e:      # a worker died: what finished is written
    print(f"error: {_one_line(str(e))}", file=sys.stderr)
    sys.exit(DIVERGED)
  except DiskFullError as e:        # finished runs are written where space allows
    if _DEBUG.value:
      raise
    print(f"error: --workdir={shlex.quote(_WORKDIR.value or '')}: {_one_line(str(e))}; "
          f"free that much space and rerun the same command to resume", file=sys.stderr)
    sys.exit(DIVERGED)
  except FloatingPointError as e:   # on_divergence='error'; finished runs are written
    if _DEBUG.value:
      raise
    where = f" (finished runs are in {_WORKDIR.value})" if _WORKDIR.value else ""
    print(f"error: {_one_line(str(e))}{where}", file=sys.stderr)
    sys.exit(DIVERGED)
  if not distributed.is_writer():
    return
  print(results.table())
  if _WORKDIR.value:
    print(f"\nwrote {_WORKDIR.value}/metrics.csv, summary.json, accuracy.png")
  if results.failed:   # the other runs finished and are written; each was named
    if _DEBUG.value:
      results.raise_failed()
    names = ", ".join(f"{m} seed {s}" for m, s in results.failed)
    print(f"error: {len(results.failed)} run(s) failed ({names}); the others finished"
          f"{' and are in ' + _WORKDIR.value if _WORKDIR.value else ''} (--debug shows "
          f"the traceback)", file=sys.stderr)
    sys.exit(DIVERGED)


def cli():
  """Console entry point ``fedfrac-run`` (same flags as ``python -m fedfrac.main``)."""
  app.run(main, flags_parser=parse_flags)


if __name__ == "__main__":
  cli()
