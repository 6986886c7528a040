"""Running experiments: config -> simulations -> records -> files.

* :mod:`~fedfrac.runner.factories`: config sections -> task, training, engine
  settings, :class:`fedfrac.sim.Simulation`.
* :mod:`~fedfrac.runner.experiment`: one experiment prepared once (config, data,
  methods, workdir) and finished once (records and outputs), whatever executes it:
  :mod:`~fedfrac.runner.loop`: :func:`run` and its :func:`chunk_loop`;
  :mod:`~fedfrac.runner.many`: :func:`run_many` (vmapped seeds and grids).
* :mod:`~fedfrac.runner.log`: per-run rows, traffic and divergence between chunks.
* :mod:`~fedfrac.runner.records`: :class:`RunRecord`, :class:`Results`, summaries, tables.
* :mod:`~fedfrac.runner.checkpoint`: verified checkpoints, atomic writes, full disks.
* :mod:`~fedfrac.runner.workdir`: :class:`~fedfrac.runner.workdir.Workdir`, one
  experiment per workdir: its layout, fingerprint and overwrite, its run records
  (verified when read) and its runs' checkpoints;
  :mod:`~fedfrac.runner.lengths`: a kept run continued only at its own length.
* :mod:`~fedfrac.runner.sealed`: JSON records sealed with their SHA-256;
  :mod:`~fedfrac.runner.written`: the files fedfrac wrote in a workdir.
* :mod:`~fedfrac.runner.signals`: SIGINT and SIGTERM handled alike.
* :mod:`~fedfrac.runner.points`, :mod:`~fedfrac.runner.local_devices`,
  :mod:`~fedfrac.runner.parallel`: sweep points and the worker-process queue.
* :mod:`~fedfrac.runner.outputs`: metrics.csv / jsonl, rounds.csv, summary, plots.
* :mod:`~fedfrac.runner.overview`: the two figures of a run (one panel per method
  family; final values ranked), loaded with matplotlib when first used;
  :mod:`~fedfrac.runner.finals`: the same as data; :mod:`~fedfrac.runner.summary_table`:
  its table.
* :mod:`~fedfrac.runner.tensorboard`: optional TensorBoard event files.
"""
from fedfrac.runner.checkpoint import Checkpointer
from fedfrac.runner.factories import (build_simulation, churn_rates, default_unroll,
                                   engine_attack, engine_config, make_task,
                                   make_training)
from fedfrac.runner.log import RunLog, round_communication
from fedfrac.runner.loop import run
from fedfrac.runner.chunked import RunInterrupted, chunk_loop, run_one
from fedfrac.runner.many import run_many
from fedfrac.runner.outputs import write_outputs
from fedfrac.runner.parallel import RunsLost
from fedfrac.runner.records import FIRST_COLUMNS, Results, RunRecord, summarize
from fedfrac.runner.summary_table import format_table


def __getattr__(name):
  # The figures load matplotlib (about half a second), so only when asked for.
  if name in ("ResultFigures", "results_figures"):
    from fedfrac.runner import overview
    return getattr(overview, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
