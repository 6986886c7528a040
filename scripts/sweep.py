"""Kept for old command lines: the same as ``python -m fedfrac.sweep``
(flags: ``--help``). Needs fedfrac installed (``pip install -e .``)."""
from fedfrac.sweep import main

if __name__ == "__main__":
  main()
