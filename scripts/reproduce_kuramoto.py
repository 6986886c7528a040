"""Kept for old command lines: the same as ``python -m fedfrac.reproduce.kuramoto``
(flags: ``--help``). Needs fedfrac installed (``pip install -e .``)."""
from fedfrac.reproduce.kuramoto import main

if __name__ == "__main__":
  main()
