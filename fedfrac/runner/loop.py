"""Config -> data -> engine -> results: ``run`` (one compiled program per method
and seed) and ``run_many`` (every seed and grid point of a method vmapped into
one program), both checkpointed and driving the same :func:`chunk_loop`.

``run(config, workdir=None)`` runs every method in ``config.methods`` for every
seed in ``config.seeds`` on the same split, the same initial model and the same
client-sampling stream, and returns :class:`Results`. With a ``workdir`` it
writes (atomically, :mod:`fedfrac.runner.outputs`) ``metrics.csv`` /
``metrics.jsonl`` (one row per evaluated round), ``rounds.csv`` (every round's
training-side metrics), ``summary.json``, ``config.json``, plots, and verified
checkpoints at chunk boundaries (:mod:`fedfrac.runner.checkpoint`); re-running
with the same workdir resumes from the last checkpoint and gives the same
numbers as an uninterrupted run.
"""
from __future__ import annotations

import sys
from typing import Optional

from fedfrac.runner import parallel, signals
from fedfrac.runner.checkpoint import DiskFullError
from fedfrac.runner.chunked import (RunInterrupted, build_data, data_seed,  # noqa: F401
                                    slice_run, to_host, whole, chunk_loop,
                                    failure_line, resume_hint, run_one,
                                    use_compile_cache)
from fedfrac.runner.experiment import prepare
from fedfrac.runner.records import Results


def run(config, workdir: Optional[str] = None, stop_after_round: Optional[int] = None,
        progress: Optional[bool] = None, overwrite: bool = False, *, data=None,
        algorithms: Optional[dict] = None, model=None, keep_params: bool = True,
        compile_cache: bool = True) -> Results:
  """Run every method × seed of ``config`` (validated first); see module docstring.

  Args:
    config: a ConfigDict from ``fedfrac.config.base_config()`` / ``configs/*.py``.
    workdir: output and checkpoint directory (None: keep results in memory). It
      belongs to one experiment (:mod:`fedfrac.runner.workdir`): a config that
      differs from the one that wrote it is refused before any compute.
    stop_after_round: stop every run after this many rounds (resume later from
      ``workdir``); such runs are marked ``partial``. None runs all rounds.
    progress: override ``config.progress``.
    overwrite: clear the workdir's earlier results and checkpoints first:
      ``True`` every method's, a label or labels (``"fedavg"``,
      ``"fedavg,fedprox"``) only those methods' (the others' are kept).
    data: your own data instead of ``config.data.source``: arrays (a dict
      ``{"x_train", "y_train"[, "x_test", "y_test"]}`` or a tuple), a
      :class:`fedfrac.data.Dataset` (split over clients by ``config.data``, per
      seed) or a :class:`fedfrac.data.FederatedData` (used as it is); checked
      before any compute (:mod:`fedfrac.data.arrays`).
    algorithms: ``{name: entry}`` of your own algorithms
      (:func:`fedfrac.algorithms.register`), usable as
      ``config.methods.<label>.name``.
    model: your own flax module (or :func:`fedfrac.models.flax_model` with its
      head named) instead of ``config.model`` (:mod:`fedfrac.models.adapter`).
    keep_params: keep every run's final parameters
      (:meth:`Results.final_params`).
    compile_cache: use JAX's persistent compilation cache as the command lines
      do, so running a cell again loads its programs from disk
      (:func:`fedfrac.runner.chunked.use_compile_cache`); the switch is
      ``FEDFRAC_COMPILE_CACHE`` (``=off``, or ``=DIR``). False leaves the
      process's cache setting as it is (tools that time compilation).
  With ``config.workers`` > 1 (0: one per CPU core or local device) the (method,
  seed) runs are spread over that many worker processes
  (:func:`fedfrac.runner.parallel.run_in_workers`);
  the results are the same as in one process.
  Raises:
    RunInterrupted: Ctrl-C or SIGTERM; checkpoints and the rows so far are
      written first.
    DiskFullError: a write found the disk full; the runs that finished are
      written first where space allows.
    FloatingPointError: a run diverged with ``on_divergence="error"``; every run
      that finished before it (and its own rows) is written first (with workers,
      every other run finishes first).
  A run that raises anything else (a method that fails while compiling or
  running) does not stop the others: one line on stderr names it, the others
  run and are returned and written, and ``Results.failed`` holds its error
  (``results.raise_failed()`` raises it again).
  """
  experiment = prepare(config, workdir, stop_after_round, overwrite, data=data,
                       algorithms=algorithms, model=model, compile_cache=compile_cache)
  config, jobs = experiment.config, experiment.runs
  records, failed = [], {}

  held = []    # a signal that arrived while the outputs were written

  def finish(quiet=()):
    """Write every record and the outputs (``quiet``: runs lost with their worker,
    rebuilt from their checkpoints without a line each); a signal waits."""
    results, requested = experiment.finish(records, failed, quiet)
    if requested is not None:
      held.append(requested)
    return results

  workers = parallel.worker_count(config, len(jobs))
  if workers > 1:
    results = parallel.run_in_workers(config, jobs, workdir, stop_after_round, progress,
                                      workers, records, finish, experiment.own.data,
                                      keep_params, failed)
    return _outputs_whole(results, held, workdir)
  with signals.Signals(graceful=True) as stop:
    for label, seed in jobs:
      try:
        rec = run_one(config, label, seed, experiment.data_for_seed(seed), workdir,
                      stop_after_round, progress, stop=lambda: stop.requested is not None,
                      keep_params=keep_params)
      except FloatingPointError as e:
        records.append(e.record)
        finish()
        raise
      except DiskFullError:
        parallel.finish_if_space(finish, records)
        raise
      except Exception as e:   # this method failed: the others run on and are kept
        failed[(label, seed)] = e
        print(failure_line(label, seed, e), file=sys.stderr)
        continue
      records.append(rec)
      if stop.requested is not None:
        results = finish()
        done = rec.round_rows[-1]["round"] if rec.round_rows else 0
        raise RunInterrupted(f"interrupted: {label} seed {seed} stopped after round "
                             f"{done} of {config.rounds} ({signals.name(stop.requested)}); "
                             f"{resume_hint(workdir)}", results, stop.requested)
  return _outputs_whole(finish(), held, workdir)


def _outputs_whole(results, held, workdir):
  """``results``, unless a signal arrived while the outputs were written: then
  :class:`RunInterrupted` (they were finished first)."""
  if not held:
    return results
  where = f" in {workdir}" if workdir else ""
  raise RunInterrupted(f"interrupted ({signals.name(held[0])}) while writing the "
                       f"outputs: every run had finished, and the outputs are written in "
                       f"full{where}", results, held[0])


from fedfrac.runner.many import run_many  # noqa: E402,F401  (after what it uses)
