"""One experiment, prepared once and handed to an executor.

``ff.run`` (its runs one after another, or spread over worker processes,
:mod:`fedfrac.runner.parallel`) and ``ff.run_many`` (every seed and grid value
of a method vmapped as one program, :mod:`fedfrac.runner.many`) differ only in
how they execute the runs. Before any compute both take the same steps
(:func:`prepare`): your own data, algorithms and model
(:mod:`fedfrac.runner.user_inputs`), the validated config, the compilation
cache, the data of every seed (memoised), the workdir made ready for the
experiment (its fingerprint checked, kept runs continued only at their own
length, kept records verified) and every method built once; the data and the
methods' checks come before the workdir is written, so a run they refuse leaves
nothing there. After the runs both take the same step too
(:meth:`Experiment.finish`): every record kept in the workdir, and the outputs
written from all of them, while a signal waits.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

from fedfrac import config as config_lib
from fedfrac import _validation, config_base
from fedfrac.runner import factories, lengths, outputs, signals, user_inputs, written
from fedfrac.runner.workdir import Workdir, check_name
from fedfrac.runner.chunked import build_data, data_seed, use_compile_cache
from fedfrac.runner.records import Results


@dataclasses.dataclass
class Experiment:
  """A validated config and what its runs need: ``own`` (your own inputs,
  :class:`fedfrac.runner.user_inputs.UserInputs`), the ``workdir`` (None: keep
  nothing), the ``runs`` [(label, seed)] to execute (a grid run labelled
  ``label[option=value]``), the ``left_out`` kept runs whose records failed
  verification and cannot be recomputed, and the data cache, keyed by the data
  config and data seed (a sweep passes one dict to many experiments)."""
  config: object
  own: user_inputs.UserInputs
  workdir: Optional[Workdir]
  runs: list
  left_out: set
  data_cache: dict
  data_key: str

  def data_for_seed(self, seed):
    """The federated data of ``seed`` (built once per data seed)."""
    key = (self.data_key, data_seed(self.config, seed))
    if key not in self.data_cache:
      self.data_cache[key] = build_data(self.config, key[1], self.own.data)
    return self.data_cache[key]

  def results(self, records, failed=None) -> Results:
    """:class:`Results` of ``records`` with every run's data."""
    seeds = dict.fromkeys(seed for _, seed in self.runs)
    return Results(self.config, records, failed or {},
                   {seed: self.data_for_seed(seed) for seed in seeds})

  def finish(self, records, failed=None, quiet=()) -> tuple:
    """``(results, signal or None)``: keep every record in the workdir and write
    the outputs from every run kept there (``quiet``: runs not to name again
    when their record fails verification); a signal that arrives meanwhile
    waits until the files are whole and is returned."""
    results = self.results(records, failed)
    if not self.workdir:
      return results, None
    with signals.deferred() as writing:
      for rec in records:
        self.workdir.save_record(rec, self.config.rounds)
      # The fingerprint's methods in the order first run, kept grid runs
      # (``label[option=value]``) by name, then this command's.
      grid = [l for l in self.workdir.kept_labels() if "[" in l]
      order = list(dict.fromkeys(self.workdir.stored_labels() + grid
                                 + [r.method for r in records]
                                 + config_base.method_labels(self.config)))
      kept = self.workdir.load_records(order, reported=set(self.left_out) | set(quiet))
      outputs.write_outputs(Results(self.config, kept), self.workdir)
    return results, writing.requested


def prepare(config, workdir=None, stop_after_round=None, overwrite=False, *, data=None,
            algorithms: Optional[dict] = None, model=None, compile_cache: bool = True,
            runs: Optional[Callable] = None, data_cache: Optional[dict] = None,
            rerun_kept: bool = True) -> Experiment:
  """Everything before the first round, every check before any compute.

  Args:
    config, workdir, stop_after_round, overwrite, data, algorithms, model,
      compile_cache: as for :func:`fedfrac.runner.loop.run`.
    runs: ``runs(config) -> [(label, seed)]``, the runs of the executor (after
      the config is validated, before the workdir is touched; it checks its own
      arguments there). Default: every method × ``config.seeds``.
    data_cache: a dict to memoise federated data in across experiments (None:
      this experiment's own; with your own ``data`` never shared).
    rerun_kept: a kept run of one of the config's methods (any seed) whose
      record fails verification and has no checkpoint runs again (appended to
      ``runs``); False: only the executor's own ``runs`` do (the others are
      left out of the tables, saying so).
  """
  own = user_inputs.prepare(config, data, algorithms, model, digest=bool(workdir))
  config = own.config
  config_lib.validate(config)
  check_name(workdir)
  use_compile_cache(compile_cache)
  if stop_after_round is not None:
    if not (_validation.is_int(stop_after_round) and stop_after_round >= 1):
      # An argument of the call (the flag on the command line), not a config key.
      raise _validation.ConfigError(
          f"{_validation.setting('stop_after_round', stop_after_round)}: must be an "
          f"integer >= 1")
  factories.apply_cpu_devices(config)
  labels = config_base.method_labels(config)
  if runs is None:
    seeds = (config.seeds,) if isinstance(config.seeds, int) else tuple(config.seeds)
    jobs = [(label, seed) for label in labels for seed in seeds]
  else:
    jobs = list(runs(config))
  data_key = config.data.to_json_best_effort(sort_keys=True)
  if data_cache is None or own.data is not None:   # your own arrays: not shared
    data_cache = {}
  if own.data is not None:
    data_key = "data="
  wd = Workdir(workdir) if workdir else None
  experiment = Experiment(config, own, wd, jobs, set(), data_cache, data_key)

  def check_continued(restart):   # a kept run continues only at its own length
    lengths.check_continued(config, wd, [
        j for j in jobs if j[0].split("[", 1)[0] not in restart],
        experiment.data_for_seed)
  # Every split and every method's data-dependent check before the workdir is
  # written: a refused run leaves no config.json that would make the corrected
  # rerun "a different config" for that workdir.
  for _, seed in jobs:
    experiment.data_for_seed(seed)
  factories.check_methods(config, experiment.data_for_seed(jobs[0][1]))
  if wd is not None:
    base = list(dict.fromkeys((label.split("[", 1)[0], seed) for label, seed in jobs))
    wd.prepare(config, overwrite=overwrite, runs=base, extra=own.fingerprint,
               check=check_continued)
    # Kept records that fail verification and have no checkpoint run again here.
    again, experiment.left_out = wd.check_records(
        wd.stored_labels(), lambda label, seed: (label, seed) in jobs or (
            rerun_kept and wd.can_rerun(config, label)))
    jobs += [j for j in again if j not in jobs]
    written.register(wd, runs=[wd.checkpoint_run(l, s) for l, s in jobs])
  for _, seed in jobs:   # kept runs to redo: their splits too, before compute
    experiment.data_for_seed(seed)
  return experiment
