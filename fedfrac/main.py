"""Command line: ``python -m fedfrac.main --config=configs/<name>.py --workdir=DIR``.

Any config field can be overridden with ``--config.<key>=<value>``, e.g.
``--config.rounds=50 --config.data.alpha=0.1 --config.only=fedavg``.
"""
from __future__ import annotations

from absl import app, flags, logging
from ml_collections import config_flags

from fedfrac import experiment

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file.",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Output and checkpoint directory.")
_STOP_AFTER = flags.DEFINE_integer(
    "stop_after_round", None, "Stop after this many rounds (resume later from --workdir).")
flags.mark_flags_as_required(["config"])


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  results = experiment.run(_CONFIG.value, workdir=_WORKDIR.value,
                           stop_after_round=_STOP_AFTER.value)
  print(results.table())
  if _WORKDIR.value:
    print(f"\nwrote {_WORKDIR.value}/metrics.csv, summary.json, accuracy.png")


if __name__ == "__main__":
  app.run(main)
