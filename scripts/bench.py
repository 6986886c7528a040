"""Kept for old command lines: the same as ``python -m fedfrac.bench.rounds``
(flags: ``--help``). Needs fedfrac installed (``pip install -e .``)."""
from fedfrac.bench.rounds import main

if __name__ == "__main__":
  main()
