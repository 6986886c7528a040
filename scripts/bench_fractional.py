"""Kept for old command lines: the same as ``python -m fedfrac.bench.fractional``
(flags: ``--help``). Needs fedfrac installed (``pip install -e .``)."""
from fedfrac.bench.fractional import main

if __name__ == "__main__":
  main()
