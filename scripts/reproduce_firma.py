"""Kept for old command lines: the same as ``python -m fedfrac_lab.reproduce.firma``
(flags: ``--help``). Needs fedfrac installed (``pip install -e .``)."""
from fedfrac_lab.reproduce.firma import main

if __name__ == "__main__":
  main()
