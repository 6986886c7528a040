"""More of ``fedfrac-sweep``'s input checks (with :mod:`fedfrac.sweep.checks`),
each one line ``error: ...`` with exit status 2 before any point runs, and a
sweep that fails while it runs in one line.

* :func:`check_flags`: a flag that takes one value given twice (``--grid``: the
  first was dropped), a ``--metrics`` name listed twice, an empty ``--seeds=``
  (it meant the config's seeds), ``--claim_timeout`` without ``--shard`` (read
  by nothing);
* :func:`check_data`: every sweep point's data is built for every seed (local
  files read, partitions drawn, client batch sizes checked) as ``fedfrac-run``
  builds its runs' data, so a point whose data cannot be made is named before
  the first batch runs, not in the middle of the sweep (NumPy only: no
  accelerator is touched in this process);
* :func:`one_line_failure`: a worker that died or a batch that raised, in one
  line (the finished points are kept);
* :func:`command_line`: the command a sweep's table quotes.
"""
from __future__ import annotations

import json
import os

from fedfrac._validation import ConfigError
from fedfrac.sweep.checks import UsageError


def check_flags(args) -> None:
  """Refuse flags given twice, empty, or for a mode the sweep does not run in."""
  grids = list(args.grid or [])
  if len(grids) > 1:
    shown = " ".join(f"--grid={g}" for g in grids)
    raise UsageError(f"{shown}: --grid is given {len(grids)} times; a sweep has one grid "
                     f"option: give all its values in one --grid")
  for flag, what in (("out", "a file path for the tables (e.g. --out=sweep.md)"),
                     ("metrics", "metric names (e.g. --metrics=accuracy,loss)")):
    value = getattr(args, flag, None)
    if value is not None and not value.strip():
      raise UsageError(f"--{flag}={value}: empty; give {what}, or leave --{flag} out")
    setattr(args, flag, value or "")
  names = [m.strip() for m in args.metrics.split(",") if m.strip()]
  if args.metrics and not names:
    raise UsageError(f"--metrics={args.metrics}: no metric names; give names separated "
                     f"by commas, or leave --metrics out")
  twice = sorted({m for m in names if names.count(m) > 1})
  if twice:
    raise UsageError(f"--metrics={args.metrics}: {twice[0]} is listed twice; name each "
                     f"column once")
  if args.seeds is not None and not args.seeds.strip():
    raise UsageError("--seeds=: no seeds; give integers >= 0 (e.g. --seeds=0,1,2), or "
                     "leave --seeds out to run the config's seeds")
  if args.claim_timeout is not None and not args.shard:
    raise UsageError(f"--claim_timeout={args.claim_timeout}: only a sharded sweep "
                     f"(--shard) claims batches, so nothing would read it; give --shard "
                     f"or drop --claim_timeout")


def check_data(points, seeds) -> None:
  """Build the data of every sweep point for every seed (each distinct data
  config and data seed once) and check each method's client batch size
  against it (:func:`fedfrac.runner.factories.check_batch_size`); a failure
  is a :class:`ConfigError` (or ``DataError``) naming the sweep point.
  ``points``: ``[(point, config)]``."""
  from fedfrac import config_base
  from fedfrac.runner import chunked, factories
  built = set()
  for point, config in points:
    where = ", ".join(f"{k}={v!r}" for k, v in point.items())
    data_key = json.dumps(config.data.to_dict(), sort_keys=True, default=str)
    for seed in seeds:
      data_seed = chunked.data_seed(config, seed)
      try:
        if (data_key, data_seed) not in built:
          fed = chunked.build_data(config, data_seed)
          built.add((data_key, data_seed))
          for label in config_base.method_labels(config):
            factories.check_batch_size(config, label, fed)
      except ConfigError as e:
        if not where:
          raise
        raise ConfigError(f"sweep point {where}: {e}") from None


def one_line_failure(error: RuntimeError) -> str:
  """A failed sweep in one line: a worker that died, or a batch's exception
  (the last line of its traceback); the finished points are kept either way."""
  lines = [line.strip() for line in str(error).splitlines() if line.strip()]
  head = lines[0] if lines else type(error).__name__
  if len(lines) > 1:
    head = f"{head.rstrip(':')}: {lines[-1]}"
  return (f"{head}; the points finished are kept in the point directory: rerun the "
          f"same command to run the rest")


# Flags that say how a sweep runs, not what it computes: a table does not quote them.
RUN_ONLY_FLAGS = ("--shard", "--table", "--claim_timeout")


def command_line(argv):
  """The command a table quotes (without the flags of :data:`RUN_ONLY_FLAGS`,
  so every shard's table, and ``--table``'s, equals the one-process sweep's)."""
  kept, skip = [], False
  for a in argv:
    if skip:
      skip = False
      continue
    if a.split("=", 1)[0] in RUN_ONLY_FLAGS:
      skip = "=" not in a and a != "--table"   # "--shard 0/2": its value follows
      continue
    kept.append(a)
  return "fedfrac-sweep " + " ".join(a if " " not in a else repr(a) for a in kept)


def shown_path(path: str) -> str:
  """``path`` relative to the working directory when it lies below it (so a
  committed table does not quote one machine's absolute paths)."""
  rel = os.path.relpath(os.path.abspath(path))
  return path if rel.startswith(os.pardir) else rel
