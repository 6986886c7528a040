"""``fedfrac-reproduce <paper> [flags]`` (= ``python -m fedfrac_lab.reproduce``): run
one paper's reproduction; ``fedfrac-reproduce <paper> --help`` lists its flags."""
from __future__ import annotations

import sys


def main(argv=None):
  """Dispatch ``argv`` = [paper, flags...] to ``fedfrac_lab.reproduce.<paper>.main``."""
  from fedfrac_lab.reproduce import PAPERS
  argv = sys.argv[1:] if argv is None else list(argv)
  names = ", ".join(PAPERS)
  if not argv or argv[0] in ("-h", "--help"):
    print(f"usage: fedfrac-reproduce <paper> [flags]\n  paper: one of {names}")
    return 0 if argv else 2
  paper, flags = argv[0], argv[1:]
  if paper not in PAPERS:
    print(f"error: paper={paper!r}: unknown; allowed: {names}", file=sys.stderr)
    return 2
  from fedfrac._validation import ConfigError
  from fedfrac.data.array_checks import DataError
  from fedfrac.runner import compile_cache, log, signals
  compile_cache.enable()   # FEDFRAC_COMPILE_CACHE (fedfrac.runner.compile_cache)
  log.one_line_warnings()
  try:
    status = PAPERS[paper].main(flags)
  except (ConfigError, DataError) as e:   # a bad config file or value, bad data
    print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
    return 2
  except SystemExit as e:   # a refusal before compute (e.g. --dir of other runs)
    if not isinstance(e.code, str):
      raise
    print(f"error: {' '.join(e.code.split())}", file=sys.stderr)
    return 2
  except signals.Interrupted as e:   # Ctrl-C / SIGTERM: the points run are kept
    print(e.message or f"interrupted ({signals.name(e.signum)}): the points finished so "
          f"far are kept; rerun the same command to run the rest", file=sys.stderr)
    return signals.exit_status(e.signum)
  return status if isinstance(status, int) else 0


if __name__ == "__main__":
  sys.exit(main())
