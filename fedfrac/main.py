"""Command line: ``python -m fedfrac.main --config=configs/<name>.py --workdir=DIR``.

``python -m fedfrac.main --list`` prints every algorithm with its options,
defaults and allowed values, and every data source, partition and model.

Any config field can be overridden with ``--config.<key>=<value>``, e.g.
``--config.rounds=50 --config.data.alpha=0.1 --config.only=fedavg``; so can any
option of a method's algorithm and any key of its ``client`` / ``server`` /
``attack`` sections, whether or not the config file mentions it
(``--config.methods.fofedavg.alpha=0.9``, ``--config.methods.fedavg.client.lr=0.01``).
The config file is read once, then the overrides are applied
(:func:`fedfrac.config_files.load_config_file`).

A workdir belongs to one experiment: a config that differs from the one that
wrote it is refused (one line naming the keys that differ) unless
``--overwrite`` starts afresh (removing only files fedfrac wrote there) or
``--overwrite=fedavg,fedprox`` restarts only those methods' runs. Ctrl-C
(SIGINT) and SIGTERM (job schedulers, ``timeout``, ``kill``) stop after the
current chunk, write a checkpoint and the rows so far, print how to resume and
exit with status 130 or 143; a second signal stops at once. A run that diverges
with ``on_divergence='error'`` exits with status 1, and so does a disk that
fills while writing (one line naming the workdir and the space needed)
(:mod:`fedfrac.runner.endings`).

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

from absl import app, flags, logging

from fedfrac import _validation, config_files, runner
from fedfrac.runner import compile_cache, endings, log

_CONFIG = flags.DEFINE_string(
    "config", None, "Experiment config file (file.py or file.py:argument); "
    "--config.<key>=<value> overrides any key.")
_WORKDIR = flags.DEFINE_string("workdir", None, "Output and checkpoint directory.")
_STOP_AFTER = flags.DEFINE_integer(
    "stop_after_round", None, "Stop after this many rounds (resume later from --workdir).")
_LIST = flags.DEFINE_bool(
    "list", False, "Print every algorithm (options, defaults, allowed values), data "
    "source, partition and model, then exit; no --config needed.")
_DEBUG = flags.DEFINE_bool(
    "debug", False, "On a config or data error show the traceback, not one line.")
_OVERWRITE = flags.DEFINE_flag(flags.Flag(
    endings.OverwriteParser(), flags.ArgumentSerializer(), "overwrite", False,
    "Remove the workdir's earlier results and checkpoints (only files fedfrac wrote "
    "there) and start afresh; --overwrite=fedavg,fedprox restarts only those methods' "
    "runs and keeps the others'.", boolean=True))

_LOADED: dict = {}   # the config, read once by parse_flags


def parse_flags(argv):
  """Parse ``argv`` like absl does, read the ``--config`` file once and apply the
  ``--config.<key>`` overrides; any failure is one line ``error: ...`` and exit
  status 2 (with ``--debug``, the exception with its traceback). From here on
  messages name arguments as flags (``--workdir``), not as ``ff.run``'s keywords.
  Each call starts from the flags' defaults: absl keeps what an earlier parse in
  the same process set (a second call without ``--config`` would still read the
  first one's file)."""
  _validation.name_flags()   # from here on, messages name flags (--workdir)
  argv, overrides = config_files.split_overrides(argv)
  with endings.one_line_errors(endings.debug_requested(argv)):
    flags.FLAGS.unparse_flags()
    args = flags.FLAGS(argv)
    _LOADED.clear()
    if _CONFIG.value is not None:
      _LOADED["config"] = config_files.load_config_file(_CONFIG.value, overrides=overrides)
  return args


def main(argv):
  del argv
  if _LIST.value:
    from fedfrac import catalog
    print(catalog.catalog_text())
    return
  if "config" not in _LOADED:
    endings.exit_with_error("--config=None: a config file is required (or give --list)")
  logging.set_verbosity(logging.WARNING)
  compile_cache.enable()   # FEDFRAC_COMPILE_CACHE (fedfrac.runner.compile_cache)
  log.one_line_warnings()
  # Several processes (FEDFRAC_COORDINATOR/NUM_PROCESSES/PROCESS_ID, docs/scaling.md):
  # join them before JAX runs anything; only process 0 writes the workdir.
  from fedfrac.sim import distributed
  with endings.one_line_errors(_DEBUG.value):
    distributed.initialize_from_env()
  workdir = _WORKDIR.value
  with endings.run_ending(workdir, _DEBUG.value):
    results = runner.run(_LOADED["config"], workdir=workdir if distributed.is_writer()
                         else None, stop_after_round=_STOP_AFTER.value,
                         overwrite=_OVERWRITE.value)
  if distributed.is_writer():
    endings.report(results, workdir, _DEBUG.value)


def cli():
  """Console entry point ``fedfrac-run`` (same flags as ``python -m fedfrac.main``)."""
  app.run(main, flags_parser=parse_flags)


if __name__ == "__main__":
  cli()
