"""Config -> data -> engine -> results: ``run`` (one compiled program per method
and seed, checkpointed) and ``run_many`` (every seed and grid point of a method
vmapped into one program), both driving the same :func:`chunk_loop`.

``run(config, workdir=None)`` runs every method in ``config.methods`` for every
seed in ``config.seeds`` on the same split, the same initial model and the same
client-sampling stream, and returns :class:`Results`. With a ``workdir`` it
writes (atomically, :mod:`fedfrac.runner.outputs`) ``metrics.csv`` /
``metrics.jsonl`` (one row per evaluated round), ``rounds.csv`` (every round's
training-side metrics), ``summary.json``, ``config.json``, plots, and orbax
checkpoints at chunk boundaries; re-running with the same workdir resumes from
the last checkpoint and gives the same numbers as an uninterrupted run.
"""
from __future__ import annotations

import sys
from typing import Optional

from fedfrac import config as config_lib
from fedfrac import _validation, config_base
from fedfrac.runner import (factories, lengths, outputs, parallel, signals, stored,
                            user_inputs, written)
from fedfrac.runner import workdir as workdir_lib
from fedfrac.runner.checkpoint import DiskFullError
from fedfrac.runner.chunked import (RunInterrupted, build_data, data_seed,  # noqa: F401
                                    slice_run, to_host, whole, chunk_loop,
                                    failure_line, resume_hint, run_one,
                                    use_compile_cache)
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
  own = user_inputs.prepare(config, data, algorithms, model, digest=bool(workdir))
  config = own.config
  config_lib.validate(config)
  workdir_lib.check_name(workdir)
  use_compile_cache(compile_cache)
  if stop_after_round is not None:
    if not (_validation.is_int(stop_after_round) and stop_after_round >= 1):
      # An argument of the call (the flag on the command line), not a config key.
      raise _validation.ConfigError(f"{_validation.setting('stop_after_round', stop_after_round)}"
                                    f": must be an integer >= 1")
  factories.apply_cpu_devices(config)
  labels = config_base.method_labels(config)
  seeds = (config.seeds,) if isinstance(config.seeds, int) else tuple(config.seeds)
  jobs = [(label, seed) for label in labels for seed in seeds]
  left_out = set()
  data_cache = {}

  def data_for_seed(seed):
    ds = data_seed(config, seed)
    if ds not in data_cache:
      data_cache[ds] = build_data(config, ds, own.data)
    return data_cache[ds]

  def check_continued(restart):   # a kept run continues only at its own length
    lengths.check_continued(config, workdir, [j for j in jobs if j[0] not in restart],
                            data_for_seed)
  # Every split and every method's data-dependent check before the workdir is
  # written: a refused run leaves no config.json that would make the corrected
  # rerun "a different config" for that workdir.
  for _, seed in jobs:
    data_for_seed(seed)
  factories.check_methods(config, data_cache[data_seed(config, seeds[0])])
  if workdir:
    workdir_lib.prepare(config, workdir, overwrite=overwrite, runs=jobs,
                        extra=own.fingerprint, check=check_continued)
    # Kept records that fail verification and have no checkpoint run again here.
    again, left_out = stored.check_records(
        workdir, workdir_lib.stored_labels(workdir),
        lambda label, seed: workdir_lib.can_rerun(config, workdir, label))
    jobs += [j for j in again if j not in jobs]
    written.register(workdir, runs=[stored.checkpoint_run(l, s) for l, s in jobs])
  for _, seed in jobs:   # kept runs to redo: their splits too, before compute
    data_for_seed(seed)
  records, failed = [], {}

  held = []    # a signal that arrived while the outputs were written

  def finish(quiet=()):
    """Write every record and the outputs (``quiet``: runs lost with their worker,
    rebuilt from their checkpoints without a line each); a signal waits."""
    results = Results(config, records, failed, {
        seed: data_cache[data_seed(config, seed)] for seed in dict.fromkeys(
            s for _, s in jobs)})
    if workdir:
      with signals.deferred() as writing:
        for rec in records:
          stored.save_record(workdir, rec, config.rounds)
        order = list(dict.fromkeys(workdir_lib.stored_labels(workdir) + labels))
        kept = stored.load_records(workdir, order, reported=set(left_out) | set(quiet))
        outputs.write_outputs(Results(config, kept), workdir)
      if writing.requested is not None:
        held.append(writing.requested)
    return results

  workers = parallel.worker_count(config, len(jobs))
  if workers > 1:
    results = parallel.run_in_workers(config, jobs, workdir, stop_after_round, progress,
                                      workers, records, finish, own.data, keep_params,
                                      failed)
    return _outputs_whole(results, held, workdir)
  with signals.Signals(graceful=True) as stop:
    for label, seed in jobs:
      try:
        rec = run_one(config, label, seed, data_cache[data_seed(config, seed)], workdir,
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
