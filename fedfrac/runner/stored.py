"""Deprecated: run records kept in a workdir are :class:`fedfrac.runner.workdir.Workdir`'s
(``Workdir(workdir).save_record(record)``, ``.read_record(label, seed)``,
``.load_records(labels)``, ``.binding(label)``, ...; the pure helpers
``binding_differences``, ``shown_differences`` and ``history_seed`` and the
constants live in :mod:`fedfrac.runner.workdir`). The names of this module keep
working for one release, with a DeprecationWarning.
"""
from __future__ import annotations

import warnings

MODULE_NAMES = ("RECORD_KEYS", "BINDING", "SHOWN", "binding_differences",
                "shown_differences", "history_seed")
WORKDIR_FIRST = ("record_path", "checkpoint_dir", "binding", "save_record", "read_record",
                 "latest_history", "from_checkpoint", "stored_seeds", "check_records",
                 "load_records", "stored_rounds", "kept_runs")


def __getattr__(name):
  from fedfrac.runner import workdir
  if name in WORKDIR_FIRST:
    return workdir.moved(name, module=__name__)
  if name in MODULE_NAMES or name == "checkpoint_run":
    warnings.warn(f"{__name__}.{name} is deprecated: use fedfrac.runner.workdir."
                  f"{'Workdir(workdir).' if name == 'checkpoint_run' else ''}{name}",
                  DeprecationWarning, stacklevel=2)
    if name == "checkpoint_run":
      return workdir.Workdir("").checkpoint_run
    return getattr(workdir, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
