"""Kept for old command lines: the same as ``python -m fedfrac.reproduce.robust``
(flags: ``--help``). Needs fedfrac installed (``pip install -e .``)."""
from fedfrac.reproduce.robust import main

if __name__ == "__main__":
  main()
