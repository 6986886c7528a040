"""The reliability trials: every item of the reliability review rerun and counted
(one line before compute / completed / fault kept / lost / wrong / traceback /
stall / silent) into results/reliability_trials.md and .json; the trials live in
:mod:`fedfrac_lab.bench.reliability_trials`.

  nice -n 19 python scripts/reliability_trials.py [--only=WORDS --merge]
"""
import sys

from fedfrac_lab.bench import reliability_trials


def main():
  return reliability_trials.main(sys.argv[1:])


if __name__ == "__main__":
  sys.exit(main())
