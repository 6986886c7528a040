"""``python -m fedfrac.sweep``: the ``fedfrac-sweep`` command."""
from fedfrac.sweep.cli import cli

if __name__ == "__main__":
  cli()
