"""Sweeps: config axes × methods × seeds × one vmapped grid, packed into batches,
run as a work queue over every local device, resumable; one table at the end.

  fedfrac-sweep --config=configs/fofedavg/digits.py \\
      --grid=alpha=0.5,0.6,0.8,0.97,1.0 --grid_methods=fofedavg \
      --out=results/fractional_digits.md

Flags:
  --config FILE         a configs/*.py file (its get_config()).
  --set KEY=VALUE       a fixed override (repeatable), e.g. --set=rounds=50,
                        --set=methods.fofedavg.delta=1e-4.
  --sweep KEY=V1,V2     a config axis (repeatable); every combination of the
                        axes is one separate point, e.g. --sweep=data.alpha=0.1,1.0.
                        Separate values with ';' when they contain commas:
                        --sweep="model.hidden=(64,);(128,64)".
  --grid OPTION=V1,V2   one continuous algorithm option whose values run as one
                        compiled program with the seeds (``ff.run_many``).
  --grid_methods A,B    method labels the grid applies to (default: every method
                        that has the option).
  --seeds 0,1,2         seeds (default: the config's).
  --metrics M1,M2       final-round metrics to tabulate (default: accuracy, or
                        rmse for regression); any column of metrics.csv works,
                        e.g. server/drift_mean; ``mean:<name>`` is the mean over
                        all rounds of a per-round column (rounds.csv), NaNs skipped.
  --no_batch            run every point alone with ``ff.run`` instead of
                        vmapping a batch's runs with ``ff.run_many``.
  --out FILE.md         markdown table; FILE.csv, FILE.json, FILE.png (the metrics
                        per config point) and the two figures of ``ff.run(...).plot()``,
                        FILE_rounds.png (one panel per method family, FedAvg dashed)
                        and FILE_ranking.png (final values ranked), next to it.
  --dir DIR             where finished points are kept (one JSON each; default
                        FILE.points/ next to --out, else a temporary folder).
  --overwrite           delete DIR's points when they belong to a different sweep
                        (changed config, metrics, axes or grid) instead of refusing.
  --workers N           worker processes (default: one per GPU / TPU chip, or per
                        CPU core on a CPU host; 1 runs in this process).
  --batch_size N        at most N runs vmapped in one batch (default 0: as many
                        as fit the device's memory by a simple bytes model,
                        ``run_bytes``).
  --no_progress         no progress bar.
  --shard I/N           run as shard I of N (0 <= I < N), e.g. one per host of a
                        cluster, all sharing one point directory (--dir, or the
                        FILE.points/ of --out): each batch runs once, on the shard
                        that claims it (its own share first, then any batch not
                        claimed yet); the shard that finishes last writes the
                        table. --shard=auto: I and N from a SLURM job array
                        (SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_COUNT).
  --claim_timeout S     a claim whose heartbeat is older than S seconds (a host
                        that died) is taken over by the next shard that meets it
                        (default 600).
  --table               run nothing: write the table of the finished points (of
                        the shards, once they are all done).

Bad input (a flag, a key, a value at any sweep point, an unwritable --out, a
--metrics name no method writes, a bad data file) is one line ``error: ...``
with exit status 2 before any point runs, as for ``fedfrac-run``
(:mod:`fedfrac.sweep.checks`).

How it runs: every (config point, method, grid value,
seed) is one *point* with an id hashed from its resolved config, seed and grid
value. Points of one config point and method share one compiled program (they
differ only in seed and in the traced grid value), so they are packed into
``ff.run_many`` batches; batches go to a work queue served by one worker
process per device (``fedfrac.runner.points``), each finished point is written
atomically to ``DIR/points/<id>.json``, and a rerun of a killed sweep runs only
the batches that miss a point (a batch cut short runs whole again, so every
point is bit-identical to an uninterrupted sweep's with the same ``--workers``
and ``--batch_size``). The table has one row per (sweep point, method label)
with mean ± std over seeds of each metric's final value; it depends only on
the points, so a resumed sweep's table equals an uninterrupted one's. Each
point file carries its SHA-256: a truncated or edited one is named in one line
and run again. SIGINT (Ctrl-C) and SIGTERM stop the sweep at once, keep the
finished points, stop the workers and exit with status 130 / 143.
Across hosts (``--shard``, :mod:`fedfrac.runner.claims`, docs/scaling.md): claims
are files created with ``O_EXCL`` in DIR/claims, kept alive by a heartbeat, so
two hosts never run the same batch; every shard packs the batches the same way
(the first shard's layout, kept in DIR), so the table equals the one a single
process writes with that layout, bit for bit.
``python -m fedfrac.sweep`` is the same command; from Python,
``points = run(base, axes, seeds, metrics)`` and ``markdown(points, ...)``.


The package: :mod:`~fedfrac.sweep.grid` (the points and their ids),
:mod:`~fedfrac.sweep.batches` (batches, their bytes model and executor),
:mod:`~fedfrac.sweep.run` (the work queue, shards, resuming),
:mod:`~fedfrac.sweep.tables` (the table and figures) and
:mod:`~fedfrac.sweep.cli` (the command line); their names are re-exported here.
"""
from __future__ import annotations

from fedfrac.startup import interrupt_exits

with interrupt_exits("fedfrac-sweep was starting (importing its modules)"):
  from fedfrac.sweep.inputs import RUN_ONLY_FLAGS, command_line  # noqa: F401
  from fedfrac.sweep.grid import (  # noqa: F401
      config_key, expand, fingerprint, grid_targets, header, load_config, parse_assignment,
      parse_value, set_key, sweep_points)
  from fedfrac.sweep.batches import (  # noqa: F401
      pack, point_record, run_batch, run_bytes, run_point,
      runs_that_fit)
  from fedfrac.sweep.tables import (  # noqa: F401
      csv_table, fmt, markdown, plot, summarize, summarize_points,
      write_tables)
  from fedfrac.sweep.run import SweepOutcome, progress_bar, run, run_sweep, shard_order  # noqa: F401
  from fedfrac.sweep.cli import (  # noqa: F401
      USAGE_ERROR, checked_inputs, cli, main)
del interrupt_exits
