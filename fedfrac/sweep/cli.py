"""``fedfrac-sweep`` (``python -m fedfrac.sweep``): the command line, its checks
before any point runs, and its exit statuses."""
from __future__ import annotations

import argparse
import os
import signal
import sys

from fedfrac._validation import ConfigError
from fedfrac.data.array_checks import DataError
from fedfrac.runner import claims as claims_lib
from fedfrac.runner import compile_cache, signals
from fedfrac.runner import log as log_lib
from fedfrac.runner import local_devices
from fedfrac.runner.checkpoint import DiskFullError
from fedfrac.sweep import checks as sweep_checks
from fedfrac.sweep import inputs as sweep_inputs
from fedfrac.sweep.grid import (
  expand,
  header,
  load_config,
  parse_assignment,
  set_key,
  sweep_points,
)
from fedfrac.sweep.run import run_sweep
from fedfrac.sweep.tables import markdown, write_tables
from fedfrac.sweep.inputs import shown_path, command_line

USAGE_ERROR = 2   # exit status for bad input, as fedfrac-run


def exit_with_error(message):
  print(f"error: {' '.join(str(message).split())}", file=sys.stderr)
  sys.exit(USAGE_ERROR)


class Parser(argparse.ArgumentParser):
  """argparse with its errors as one ``error:`` line (exit status 2)."""

  def error(self, message):
    exit_with_error(f"{message} (fedfrac-sweep --help lists the flags)")


def checked_inputs(args):
  """``(base, axes, grid, grid_methods, seeds, metric_names, directory)`` from
  the parsed flags, every one checked before any point runs
  (:mod:`fedfrac.sweep.checks`); raises UsageError, ConfigError or DataError."""
  UsageError = sweep_checks.UsageError
  sweep_inputs.check_flags(args)
  if args.claim_timeout is None:
    args.claim_timeout = claims_lib.TIMEOUT_S
  if args.workers is not None and args.workers < 1:
    raise UsageError(f"--workers={args.workers}: need at least 1")
  if args.batch_size < 0:
    raise UsageError(f"--batch_size={args.batch_size}: need 0 (auto) or more")
  if args.out:
    sweep_checks.check_output("--out", args.out)
  if args.dir:
    sweep_checks.check_output("--dir", args.dir, directory=True)
  if args.shard or args.table:
    sweep_checks.check_sharding(args)
  args.shard_index = sweep_checks.parse_shard(args.shard) if args.shard else None
  sets = [parse_assignment(t, "--set") for t in args.sets]
  axes = [parse_assignment(t, "--sweep", many=True) for t in args.sweep]
  sweep_checks.check_axes(sets, axes)
  base = load_config(args.config)
  base.progress = False
  for key, value in sets:
    set_key(base, key, value, "--set")
  grid = None
  if args.grid:
    key, values = parse_assignment(args.grid[0], "--grid", many=True)
    grid = {key: values}
  grid_methods = [m for m in args.grid_methods.split(",") if m]
  seeds = (sweep_checks.parse_seeds(args.seeds) if args.seeds is not None else
           ([base.seeds] if isinstance(base.seeds, int) else list(base.seeds)))
  metric_names = [m.strip() for m in args.metrics.split(",") if m.strip()] or (
      ["accuracy"] if base.task.loss == "cross_entropy" else ["rmse"])
  points = list(sweep_points(base, axes))    # each validated
  configs = [config for _, config in points]
  if args.no_batch and grid:
    raise UsageError("--grid needs batched runs; drop --no_batch")
  for config in configs:
    sweep_checks.check_grid(config, grid, grid_methods)
  expand(base, axes, seeds, grid, grid_methods)
  sweep_inputs.check_data(points, seeds)   # every point's data, before any runs
  always = set(sweep_checks.ROW_COLUMNS) | (
      {"accuracy", "loss"} if base.task.loss == "cross_entropy" else {"rmse"})
  workers = args.workers or len(local_devices.local_workers())
  sweep_checks.check_metrics(configs, metric_names, always, in_process=workers == 1)
  directory = args.dir or (os.path.splitext(args.out)[0] + ".points" if args.out else None)
  if directory:
    sweep_checks.check_point_directory(f"--dir={directory}" if args.dir else
                                       f"--out={args.out} (its points in {directory})",
                                       directory)
  return base, axes, grid, grid_methods, seeds, metric_names, directory


def main(argv=None):
  parser = Parser(prog="fedfrac-sweep", description=sys.modules[__package__].__doc__,
                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--config", required=True)
  parser.add_argument("--set", action="append", default=[], dest="sets")
  parser.add_argument("--sweep", action="append", default=[])
  parser.add_argument("--grid", action="append", default=None)
  parser.add_argument("--grid_methods", default="")
  parser.add_argument("--seeds", default=None)
  parser.add_argument("--metrics", default=None)   # None: not given; "" is refused
  parser.add_argument("--no_batch", action="store_true")
  parser.add_argument("--title", default="")
  parser.add_argument("--out", default=None)   # None: not given; "" is refused
  parser.add_argument("--dir", default="")
  parser.add_argument("--overwrite", action="store_true")
  parser.add_argument("--workers", type=int, default=None)
  parser.add_argument("--batch_size", type=int, default=0)
  parser.add_argument("--no_progress", action="store_true")
  parser.add_argument("--shard", default="")
  parser.add_argument("--claim_timeout", type=float, default=None)
  parser.add_argument("--table", action="store_true")
  argv = sys.argv[1:] if argv is None else list(argv)
  args = parser.parse_args(argv)
  # A signal while the inputs are checked stops at once, even one raised inside a
  # garbage-collection callback (the block raises it again on leaving).
  with signals.Signals(graceful=False):
    try:
      base, axes, grid, grid_methods, seeds, metric_names, directory = checked_inputs(args)
    except (ConfigError, DataError, sweep_checks.UsageError) as e:
      exit_with_error(e)
    compile_cache.enable()   # FEDFRAC_COMPILE_CACHE (fedfrac.runner.compile_cache)
    log_lib.one_line_warnings()

  try:
    outcome = run_sweep(base, axes, seeds, metric_names, grid, grid_methods,
                        not args.no_batch, directory=directory, overwrite=args.overwrite,
                        workers=args.workers, batch_size=args.batch_size,
                        progress=not args.no_progress, shard=args.shard_index,
                        claim_timeout=args.claim_timeout, run_points=not args.table)
  except SystemExit as e:   # a point directory of another sweep: refused before compute
    if isinstance(e.code, str):
      exit_with_error(e.code)
    raise
  shard = f"shard {args.shard_index[0]}/{args.shard_index[1]}: " if args.shard_index else ""
  if args.table and outcome.missing:
    print(f"error: --table: {outcome.missing} of {outcome.total} points are not finished "
          f"in {outcome.directory} (shards still running, or stopped: rerun any shard "
          f"to run them)", file=sys.stderr)
    sys.exit(1)
  if not args.table:
    print(f"sweep: {shard}ran {outcome.ran} of {outcome.total} points ({outcome.skipped} "
          f"already done) with {outcome.workers} workers in {outcome.wall_s:.0f} s",
          flush=True)
  if outcome.missing:
    print(f"sweep: {shard}{outcome.missing} points are not finished yet (other shards' "
          f"batches); the shard that finishes last writes the table, or run the same "
          f"command with --table once every shard is done", flush=True)
    return []
  notes = [f"Config: {base.name}; seeds {tuple(seeds)}; {base.rounds} rounds. "
           f"Mean ± sample std over seeds of each metric's final-round value. "
           f"Points are kept in `{shown_path(outcome.directory)}`.", ""]
  shown = base.copy_and_resolve_references()   # the title states the seeds run
  shown.seeds = tuple(seeds)
  title = args.title or header(shown, getattr(args, "sets", None) or ())
  if args.out:
    with signals.deferred() as writing:   # a signal waits for the tables
      text = write_tables(args.out, outcome.points, [k for k, _ in axes], metric_names,
                          title, command_line(argv), notes, outcome.records)
    if writing.requested is not None:
      held = writing.requested
      raise signals.Interrupted(held, f"interrupted ({signals.name(held)}) while writing "
                                f"the table: every point had finished, and {args.out} and "
                                f"its files are written in full")
    print(text)
    print(f"wrote {args.out} (+ .csv, .json, .png, _rounds.png, _ranking.png)")
  else:
    print(markdown(outcome.points, [k for k, _ in axes], metric_names, title,
                   command_line(argv), notes))
  return outcome.points


def cli():
  """Console entry point ``fedfrac-sweep`` (exit status 0 when every point ran;
  130 / 143 after SIGINT / SIGTERM, the finished points kept, one line whenever
  it came; 1 on a full disk)."""
  try:
    main()
  except signals.Interrupted as e:
    print(e.message or f"interrupted ({signals.name(e.signum)})", file=sys.stderr)
    sys.exit(signals.exit_status(e.signum))
  except KeyboardInterrupt:   # Ctrl-C before the sweep's own handler (starting up)
    print("interrupted (SIGINT); the points finished are kept in the point directory: "
          "rerun the same command to run the rest", file=sys.stderr)
    sys.exit(signals.exit_status(signal.SIGINT))
  except DiskFullError as e:
    print(f"error: {e}; free that much space and rerun the same command to run the "
          f"points left", file=sys.stderr)
    sys.exit(1)
  except RuntimeError as e:   # a worker died, or a batch failed: the points kept
    print(f"error: {sweep_inputs.one_line_failure(e)}", file=sys.stderr)
    sys.exit(1)
  return 0
