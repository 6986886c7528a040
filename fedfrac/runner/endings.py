"""How a run started from the command line (:mod:`fedfrac.main`) ends: the one
line it prints on stderr and its exit status.

* 0: every run finished (or stopped at ``--stop_after_round``);
* 1 (:data:`FAILED`): a run diverged with ``on_divergence='error'``, raised,
  lost its worker process, or the disk filled; what finished is written;
* 2 (:data:`USAGE_ERROR`): bad input (a config value or key, a flag, an override,
  the config file, the data): one line ``error: ...`` before any compute;
* 130 / 143: stopped by SIGINT / SIGTERM after checkpointing (how to resume is
  said), or at once on a second signal.

With ``--debug`` a config, data or disk error and a failed run show their
traceback instead of one line.
"""
from __future__ import annotations

import contextlib
import shlex
import sys

from absl import flags

from fedfrac._validation import ConfigError
from fedfrac.data.array_checks import DataError
from fedfrac.runner import signals
from fedfrac.runner.checkpoint import DiskFullError
from fedfrac.runner.chunked import RunInterrupted
from fedfrac.runner.parallel import RunsLost

USAGE_ERROR = 2  # exit status for bad input (config, flags, missing data)
FAILED = 1       # a run diverged with on_divergence='error', failed, or the disk filled


def one_line(text) -> str:
  return " ".join(str(text).split())


def exit_with_error(message, status: int = USAGE_ERROR):
  """Print ``error: <message>`` (on one line) to stderr and exit with ``status``."""
  print(f"error: {one_line(message)}", file=sys.stderr)
  sys.exit(status)


def debug_requested(argv) -> bool:
  """``--debug`` from the raw arguments (flag parsing may fail before it)."""
  value = False
  for arg in argv[1:argv.index("--") if "--" in argv else None]:
    if arg in ("--debug", "--debug=true", "--debug=True", "--debug=1"):
      value = True
    elif arg in ("--nodebug", "--debug=false", "--debug=False", "--debug=0"):
      value = False
  return value


class OverwriteParser(flags.ArgumentParser):
  """``--overwrite`` (every method), ``--nooverwrite``, or ``--overwrite=A,B``
  (only the runs of methods A and B): the ``overwrite`` of :func:`fedfrac.run`."""

  def parse(self, argument):
    if isinstance(argument, (bool, tuple)):
      return argument
    text = str(argument).strip()
    if text.lower() in ("true", "1", "all", "false", "0"):
      return text.lower() in ("true", "1", "all")
    labels = tuple(t.strip() for t in text.split(",") if t.strip())
    if not labels:
      raise ValueError("give method labels (--overwrite=fedavg,fedprox) or "
                       "--overwrite alone for every method")
    return labels

  def flag_type(self):
    return "bool or method labels"


@contextlib.contextmanager
def one_line_errors(debug: bool):
  """Bad input on the command line (any exception inside: a flag, the config file,
  an override, ...) ends in one line ``error: ...`` and status 2; with ``debug``
  it propagates with its traceback."""
  try:
    yield
  except Exception as e:   # every failure here is bad input
    if debug:
      raise
    message = str(e)
    if isinstance(e, flags.Error) and message.startswith("flag --"):
      message = message[len("flag "):]
    exit_with_error(message)


@contextlib.contextmanager
def run_ending(workdir, debug: bool):
  """Around :func:`fedfrac.run`: each way it can stop early becomes its one
  line and exit status (module docstring)."""
  try:
    yield
  except (ConfigError, DataError, FileNotFoundError) as e:   # bad value or data
    if debug:
      raise
    exit_with_error(e)
  except RunInterrupted as e:
    print(one_line(e.message), file=sys.stderr)
    sys.exit(signals.exit_status(e.signum))
  except signals.Interrupted as e:   # a second signal: stopped at once
    where = (f"rerun the same command with --workdir={shlex.quote(workdir)} to "
             f"resume from the last checkpoint" if workdir else "nothing was kept")
    print(f"interrupted at once ({signals.name(e.signum)}): the chunks running were "
          f"not checkpointed; {where}", file=sys.stderr)
    sys.exit(signals.exit_status(e.signum))
  except RunsLost as e:   # a worker died: what finished is written
    exit_with_error(e, FAILED)
  except DiskFullError as e:   # finished runs are written where space allows
    if debug:
      raise
    exit_with_error(f"--workdir={shlex.quote(workdir or '')}: {e}; free that much "
                    f"space and rerun the same command to resume", FAILED)
  except FloatingPointError as e:   # on_divergence='error'; finished runs are written
    if debug:
      raise
    exit_with_error(f"{e}{f' (finished runs are in {workdir})' if workdir else ''}",
                    FAILED)


def report(results, workdir, debug: bool) -> None:
  """Print the results table and where they were written; a run that failed (the
  others finished and are written, each failure was named) ends with status 1."""
  print(results.table())
  if workdir:
    print(f"\nwrote {workdir}/metrics.csv, summary.json, accuracy.png")
  if results.failed:
    if debug:
      results.raise_failed()
    names = ", ".join(f"{m} seed {s}" for m, s in results.failed)
    exit_with_error(f"{len(results.failed)} run(s) failed ({names}); the others "
                    f"finished{' and are in ' + workdir if workdir else ''} (--debug "
                    f"shows the traceback)", FAILED)
