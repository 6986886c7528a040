"""Kept for old command lines: the same as ``python -m fedfrac_lab.reproduce.kuramoto``
(flags: ``--help``). Needs fedfrac installed (``pip install -e .``)."""
from fedfrac_lab.reproduce.kuramoto import main

if __name__ == "__main__":
  main()
