"""Kept for old command lines: the same as ``python -m fedfrac.reproduce.firma``
(flags: ``--help``). Needs fedfrac installed (``pip install -e .``)."""
from fedfrac.reproduce.firma import main

if __name__ == "__main__":
  main()
