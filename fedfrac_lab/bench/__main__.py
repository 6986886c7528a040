"""``fedfrac-bench [flags]`` (round benchmarks), ``fedfrac-bench fractional
[flags]`` (fractional-method overhead), ``fedfrac-bench sweep [flags]`` (sweep
throughput: the runner vs one process per point), ``fedfrac-bench convs
[flags]`` (convolution forms under vmap) or ``fedfrac-bench device_invariant
[flags]`` (the cost of ``engine.device_invariant``); ``--help`` after any lists its flags."""
from __future__ import annotations

import sys


def main(argv=None):
  """Dispatch ``argv`` to ``fedfrac_lab.bench.fractional.main`` when it starts with
  ``fractional``, to ``fedfrac_lab.bench.sweep.main`` when it starts with ``sweep``,
  else to ``fedfrac_lab.bench.rounds.main``."""
  argv = sys.argv[1:] if argv is None else list(argv)
  if argv and argv[0] == "sweep":
    from fedfrac_lab.bench import sweep
    sweep.main(argv[1:])
    return 0
  if argv and argv[0] == "million":
    from fedfrac_lab.bench import million
    return million.main(argv[1:])
  if argv and argv[0] == "device_invariant":
    from fedfrac_lab.bench import device_invariant
    return device_invariant.main(argv[1:])
  if argv and argv[0] == "convs":
    from fedfrac_lab.bench import convs
    return convs.main(argv[1:])
  if argv and argv[0] == "fractional":
    from fedfrac_lab.bench import fractional
    return fractional.main(argv[1:])
  from fedfrac_lab.bench import rounds
  rounds.main(argv)
  return 0


if __name__ == "__main__":
  sys.exit(main())
