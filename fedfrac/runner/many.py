"""``run_many``: every seed (and grid value) of a method vmapped as ONE compiled
program, driving the same :func:`fedfrac.runner.chunked.chunk_loop` as ``run``,
checkpointed and resumed as ``run`` is (:class:`BatchCheckpoints`)."""
from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac import algorithms
from fedfrac import _validation, config_base
from fedfrac.runner import factories, signals
from fedfrac.runner.experiment import prepare
from fedfrac.runner.log import Progress, RunLog
from fedfrac.runner.chunked import RunInterrupted, resume_hint, slice_run, to_host, chunk_loop
from fedfrac.runner.records import Results, final_params, stop_target, stopped_entry
from fedfrac.runner.schema import check_seeds
from fedfrac.runner.workdir import BINDING, Workdir, binding_differences, history_seed
from fedfrac.sim.batched import BatchedSimulation


def _check_grid(grid, config) -> None:
  """Refuse (one line, before any compute) a grid that is not one option with a
  list of values, or whose option no selected method has ("did you mean")."""
  if grid is None:
    return
  if not isinstance(grid, dict) or len(grid) != 1:
    raise ValueError(f"grid={grid!r}: give exactly one option and its values")
  key, vals = next(iter(grid.items()))
  if isinstance(vals, (str, bytes)) or not hasattr(vals, "__iter__") or not len(vals):
    raise _validation.ConfigError(f"grid={grid!r}: give a non-empty list of values for "
                                 f"{key!r}")
  if key == factories.CLIENT_LR:
    return
  labels = config_base.method_labels(config)
  options = {o for l in labels for o in algorithms.hparams(
      config.methods[l].name, config_base.method_options(config.methods[l]))}
  if key not in options:
    import difflib
    known = sorted(options) + [factories.CLIENT_LR]
    close = difflib.get_close_matches(str(key), known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise _validation.ConfigError(
        f"grid={{{key!r}: ...}}: no selected method ({', '.join(labels)}) has the option "
        f"{key!r}; {hint}their options are {', '.join(known)}")


def _grid_values(grid, method, options, label):
  """``(option, values)`` of ``grid`` for this method (``(None, [None])`` when the
  method lacks the option; ``"client.lr"``, the client learning rate η0, every
  method has); every value checked up front."""
  if not grid:
    return None, [None]
  key, vals = next(iter(grid.items()))
  if key == factories.CLIENT_LR:
    for v in vals:
      if not (_validation.is_num(v) and v > 0):
        raise _validation.ConfigError(f"grid.{key}={v!r}: must be > 0 (method {label!r})")
    return key, list(vals)
  if key not in algorithms.hparams(method.name, options):
    return None, [None]
  for v in vals:
    try:
      algorithms.hparams(method.name, {**options, key: v}, prefix="grid.")
    except ValueError as e:
      raise _validation.ConfigError(f"{e} (method {label!r})") from None
  return key, list(vals)


# ``run_many(config, *positional)``: run's order; the order before it still works.
ORDER = ("workdir", "stop_after_round", "progress", "overwrite")
OLD_ORDER = ("seeds", "grid", "workdir", "progress", "data_cache", "overwrite")


def _in_old_order(positional) -> bool:
  """Whether positional arguments follow the order ``run_many`` took before it
  took ``run``'s: (seeds, grid, workdir, progress, data_cache, overwrite). A
  workdir is a path, seeds are not; a grid is a dict, a round count is not."""
  if len(positional) > len(ORDER):
    return True
  first, *rest = positional
  if first is not None:
    return not isinstance(first, (str, os.PathLike))
  if rest and rest[0] is not None:
    return isinstance(rest[0], dict)
  return len(rest) > 1 and isinstance(rest[1], (str, os.PathLike))


def _named(positional, given: dict, defaults: dict) -> dict:
  """``given`` (the keyword arguments) with the ``positional`` ones named:
  ``run``'s order, or the old order with a DeprecationWarning."""
  if not positional:
    return given
  names = ORDER
  if _in_old_order(positional):
    names = OLD_ORDER
    warnings.warn("run_many(config, seeds, grid, workdir, progress, data_cache, "
                  "overwrite) with positional arguments in this order is deprecated; "
                  "run_many takes run's order, run_many(config, workdir, "
                  "stop_after_round, progress, overwrite), and seeds=, grid=, "
                  "data_cache= by name", DeprecationWarning, stacklevel=3)
  if len(positional) > len(names):
    raise TypeError(f"run_many() takes at most {len(names) + 1} positional arguments "
                    f"({len(positional) + 1} given)")
  out = dict(given)
  for name, value in zip(names, positional):
    if out[name] is not defaults[name]:
      raise TypeError(f"run_many() got multiple values for argument {name!r}")
    out[name] = value
  return out


class BatchCheckpoints:
  """Checkpoints of a vmapped batch of runs: each run's part of the batched
  state at ``checkpoints/<run label>/seed_<s>/``, written by the same
  :class:`fedfrac.runner.checkpoint.Checkpointer` as a run of :func:`run`
  (verified steps, one commit point each), with the run's own history, so
  its record can be rebuilt from them like any run's
  (:meth:`fedfrac.runner.workdir.Workdir.from_checkpoint`).

  The runs of a batch advance in lockstep and are saved at the same chunk
  boundaries; a batch resumes from the newest step every one of them has
  intact (a kill between two runs' saves leaves the newer step on some: the
  step before it is used). A run that stopped at its target keeps the state
  it stopped with (its final state, as in :func:`run`) and is not saved again;
  its slot in the batch goes on unrecorded, and since the runs of a batch are
  independent (``vmap``) what it holds changes no other run.
  """

  def __init__(self, workdir, runs, config):
    """``runs``: ``[(run label, seed)]`` in batch order."""
    self.workdir, self.runs, self.config = Workdir(workdir), list(runs), config
    self.checkpointers = [self.workdir.checkpointer(label, seed) for label, seed in self.runs]
    self.bound = [self.workdir.binding(label) for label, _ in self.runs]
    self.frozen: set = set()   # runs whose final (stopped-at-target) state is saved

  def _intact(self, i):
    """``{step: history}`` of run ``i``'s intact steps of this experiment and seed
    (a step that fails verification is said in one line and not used)."""
    ckpt, (label, seed) = self.checkpointers[i], self.runs[i]
    out = {}
    for step in ckpt.steps():
      try:
        ckpt.verify(step)
        with open(os.path.join(ckpt.step_dir(step), "history.json")) as f:
          history = json.load(f)
      except (OSError, ValueError) as e:
        print(f"checkpoint {ckpt.step_dir(step)} failed verification ({e}); not used",
              file=sys.stderr)
        continue
      bound = self.bound[i]
      if bound is not None and BINDING in history and binding_differences(
          history[BINDING], bound, label):
        print(f"checkpoints in {ckpt.directory} are of another experiment; restarting "
              f"{label} seed {seed} from round 0", file=sys.stderr)
        return {}
      if history_seed(history) not in (None, seed):
        print(f"checkpoints in {ckpt.directory} are of seed {history_seed(history)}"
              f", not seed {seed}; restarting {label} seed {seed} from round 0",
              file=sys.stderr)
        return {}
      out[step] = history
    return out

  def restore(self, template, target):
    """``(round, batched state, histories, stopped states)`` to resume from, or
    None (no step to resume from: every run of the batch starts at round 0, and
    its earlier steps are removed). ``template``: the batch's initial state
    (shapes, dtypes and which leaves are shared); ``target``: this command's
    :class:`fedfrac.runner.records.Target` (a run kept as stopped at its target
    goes on when it is not reached under this command's)."""
    intact = [self._intact(i) for i in range(len(self.runs))]
    if not any(intact):
      return None
    frozen, lockstep = {}, []
    for i, steps in enumerate(intact):
      if not steps:
        return self._restart()
      history = steps[max(steps)]
      if history.get("status", "ok") == "ok" and stopped_entry(
          target, history.get("rows", [])) is not None:
        frozen[i] = max(steps)
      else:
        lockstep.append(i)
    common = (set.intersection(*(set(intact[i]) for i in lockstep)) if lockstep
              else {max(frozen.values())})
    if not common:
      return self._restart()
    step = max(common)
    chosen = {i: frozen.get(i, step) for i in range(len(self.runs))}
    states, histories = [], []
    for i, ckpt in enumerate(self.checkpointers):
      state, history = ckpt.restore(chosen[i], to_host(slice_run(template, i)))
      states.append(state)
      histories.append(history)
    lead = states[lockstep[0] if lockstep else 0]
    batched = jax.tree.map(
        lambda t, *xs: xs[0] if np.ndim(t) == 0 else jnp.stack(xs), template, *states)
    batched = batched._replace(round=lead.round)
    self.frozen = set(frozen)
    return step, batched, histories, {i: states[i] for i in frozen}

  def _restart(self):
    for ckpt, (label, seed) in zip(self.checkpointers, self.runs):
      if ckpt.steps():
        print(f"{ckpt.directory}: no step that every run of its batch has intact; "
              f"restarting {label} seed {seed} from round 0", file=sys.stderr)
        ckpt.remove_steps()
    return None

  def save(self, r, states, logs, due: bool) -> None:
    """Save every run's part of ``states`` at round ``r`` when ``due``, and a run
    that has just stopped at its target at once (then never again)."""
    for i, (log, ckpt) in enumerate(zip(logs, self.checkpointers)):
      if i in self.frozen:
        continue
      stopped = log.stopped is not None
      if not (due or stopped):
        continue
      label, seed = self.runs[i]
      extra = {"rounds": self.config.rounds, "method": label, "seed": int(seed)}
      if self.bound[i] is not None:
        extra[BINDING] = self.bound[i]
      ckpt.save(r, to_host(slice_run(states, i)), {**log.history(), **extra})
      if stopped:
        self.frozen.add(i)


def run_many(config, *positional, workdir: Optional[str] = None,
             stop_after_round: Optional[int] = None, progress: Optional[bool] = None,
             overwrite=False, seeds=None, grid: Optional[dict] = None,
             data_cache: Optional[dict] = None, data=None,
             algorithms: Optional[dict] = None, model=None,
             keep_params: bool = True, compile_cache: bool = True) -> Results:
  """Every method's runs over ``seeds`` (× a ``grid``) vmapped as ONE compiled program.

  ``run_many(config, workdir, stop_after_round, progress, overwrite)`` takes
  :func:`fedfrac.runner.loop.run`'s arguments in ``run``'s order; the order it
  took before (``config, seeds, grid, workdir, progress, data_cache,
  overwrite``) still works, with a DeprecationWarning.

  Args:
    config: as for :func:`run`.
    workdir: as for :func:`run`: it belongs to one experiment (the fingerprint
      is checked before any compute), and every run kept there (by ``run`` or
      ``run_many``, each grid value under its own label) stays in its outputs.
      Each run's part of the batched state is checkpointed every
      ``config.checkpoint_every`` chunks (:class:`BatchCheckpoints`); the same
      call again resumes the batch from its last checkpoint and gives the same
      numbers, bit for bit, as an uninterrupted call.
    stop_after_round: stop every batch after this many rounds (resume later
      from ``workdir``); such runs are marked ``partial``.
    progress: override ``config.progress``.
    overwrite: clear the workdir's earlier results first (``True``: every
      method's; a label or labels: those methods').
    seeds: seeds to run (default ``config.seeds``); each seed gets its own
      initial model, sampling stream and (with ``data.seed=-1``) partition.
    grid: optional ``{option: [values]}`` for one continuous algorithm option
      (e.g. ``{"alpha": [0.5, 0.8, 1.0]}``) or ``"client.lr"`` (every method's
      client learning rate η0); methods that have the option run every value
      (labelled ``method[option=value]``), the others run once. An option no
      selected method has is refused before any compute.
    data_cache: optional dict reused across calls (sweep scripts): federated
      datasets are memoised in it by (data config, data seed), so a sweep
      generates or loads each dataset once.
    data, algorithms, model, keep_params, compile_cache: as for
      :func:`fedfrac.runner.loop.run`.
  Returns:
    :class:`Results` equal (to float rounding) to separate ``run`` calls.
    With ``config.stop_at_target`` a method's batch stops when every run in it
    has reached its target or diverged (each run's record ends at its own
    stop, as it would alone).
  Raises:
    RunInterrupted: Ctrl-C or SIGTERM; the batch running stops after its chunk,
      its checkpoints and every finished batch's records are written first.
  """
  defaults = dict(workdir=None, stop_after_round=None, progress=None, overwrite=False,
                  seeds=None, grid=None, data_cache=None)
  named = _named(positional, dict(workdir=workdir, stop_after_round=stop_after_round,
                                  progress=progress, overwrite=overwrite, seeds=seeds,
                                  grid=grid, data_cache=data_cache), defaults)
  workdir, stop_after_round, progress = (named["workdir"], named["stop_after_round"],
                                         named["progress"])
  overwrite, seeds, grid = named["overwrite"], named["seeds"], named["grid"]
  data_cache = named["data_cache"]
  batches = []   # (label, grid option, [(seed index, seed, value)], [run label])

  def batch_runs(config):
    """Every batch's runs (seeds and grid checked before the workdir is touched)."""
    nonlocal seeds
    if seeds is not None:
      check_seeds(tuple(seeds) if not isinstance(seeds, int) else seeds,
                  "seeds (run_many)")
    seeds = tuple(config.seeds if seeds is None else
                  ((seeds,) if isinstance(seeds, int) else seeds))
    _check_grid(grid, config)
    for label in config_base.method_labels(config):
      method = config.methods[label]
      grid_key, values = _grid_values(grid, method, config_base.method_options(method),
                                      label)
      one = [(i, seed, v) for i, seed in enumerate(seeds) for v in values]
      batches.append((label, grid_key, one,
                      [label if grid_key is None else f"{label}[{grid_key}={v}]"
                       for _, _, v in one]))
    return [(name, seed) for _, _, one, names in batches
            for name, (_, seed, _) in zip(names, one)]
  experiment = prepare(config, workdir, stop_after_round, overwrite, data=data,
                       algorithms=algorithms, model=model, compile_cache=compile_cache,
                       runs=batch_runs, data_cache=data_cache, rerun_kept=False)
  config = experiment.config
  show = config.progress if progress is None else progress
  end_round = config.rounds if stop_after_round is None else min(config.rounds,
                                                                 stop_after_round)
  records: list = []

  def finish():
    return experiment.finish(records)[0]

  with signals.Signals(graceful=True) as stop:
    for label, grid_key, runs, names in batches:
      records.extend(_run_batch(config, label, grid_key, runs, names,
                                [experiment.data_for_seed(seed) for seed in seeds], workdir,
                                end_round, show, keep_params,
                                stop=lambda: stop.requested is not None))
      if stop.requested is not None:
        results = finish()
        raise RunInterrupted(f"interrupted: {label} x{len(runs)} runs stopped "
                             f"({signals.name(stop.requested)}); "
                             f"{resume_hint(workdir)}", results, stop.requested)
  return finish()


def _run_batch(config, label, grid_key, runs, names, feds, workdir, end_round, show,
               keep_params, stop):
  """The records of method ``label``'s ``runs`` [(seed index, seed, grid value)]
  (named ``names``) vmapped as one program, resumed from and checkpointed to
  ``workdir`` when given."""
  method = config.methods[label]
  all_sizes = np.concatenate([f.client_size for f in feds])
  sim = factories.build_simulation(config, label, feds[0], all_client_sizes=all_sizes,
                                   traced_options=bool(grid_key))
  batch = BatchedSimulation(sim, [feds[i] for i, _, _ in runs],
                            [{grid_key: v} for _, _, v in runs] if grid_key else None)
  states = batch.init([seed for _, seed, _ in runs])
  payload_bytes, message_bytes = sim.communication_bytes(slice_run(states, 0))
  target = stop_target(config)
  ckpts, histories, at_stop = None, [None] * len(runs), {}
  start_round = 0
  if workdir:
    ckpts = BatchCheckpoints(workdir, [(n, seed) for n, (_, seed, _) in zip(names, runs)],
                             config)
    restored = ckpts.restore(states, target)
    if restored is not None:
      start_round, states, histories, at_stop = restored
      at_stop = {i: to_host(s) for i, s in at_stop.items()}
  logs = []
  for (_, seed, v), run_label, history in zip(runs, names, histories):
    # Host-side metrics (e.g. DP ε) from the run's own concrete option values.
    run_algorithm = sim.algorithm if grid_key is None else sim.algorithm_fn({grid_key: v})
    logs.append(RunLog(run_label, method.name, seed, sim.algorithm.comm, payload_bytes,
                       message_bytes, config.on_divergence, history,
                       host_metrics=run_algorithm.host_metrics, target=target))
  done = start_round
  if start_round < end_round and any(log.running for log in logs):
    if start_round:
      print(f"resuming {label} x{len(runs)} runs from round {start_round}",
            file=sys.stderr)
    bar = Progress(show, config.rounds, f"{label} x{len(runs)} runs", start_round)
    # Compile evaluation up front so wall_s counts only running rounds and evals.
    compiled = batch.compile_eval(states)
    for log in logs:
      log.compile_s += compiled / len(logs)

    # A run that stopped at its target goes on in the batch until every run has
    # (nothing of it is recorded): its final state is the one it stopped with.
    def after_chunk(r, chunk_index, states, last):
      for i, log in enumerate(logs):
        if keep_params and log.stopped is not None and i not in at_stop:
          at_stop[i] = to_host(slice_run(states, i))
      if ckpts is not None:
        ckpts.save(r, states, logs, last or (config.checkpoint_every and
                                             chunk_index % config.checkpoint_every == 0))
    try:
      states, _, done = chunk_loop(
          batch, states, logs, start_round=start_round, end_round=end_round,
          rounds=config.rounds, eval_every=config.eval_every, compile_fn=batch.compile,
          split=slice_run, bar=bar, after_chunk=after_chunk, stop=stop)
    finally:
      bar.close()
  records = []
  for i, log in enumerate(logs):
    rec = log.record(partial=done < config.rounds)
    if keep_params:
      run_state = at_stop[i] if i in at_stop else to_host(slice_run(states, i))
      rec.params = final_params(sim.algorithm, run_state.server, run_state.clients,
                                sim.num_clients)
    records.append(rec)
  return records
