"""Kept for old command lines: the same as ``python -m fedfrac_lab.bench.fractional``
(flags: ``--help``). Needs fedfrac installed (``pip install -e .``)."""
from fedfrac_lab.bench.fractional import main

if __name__ == "__main__":
  main()
