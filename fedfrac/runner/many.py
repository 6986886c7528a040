"""``run_many``: every seed (and grid value) of a method vmapped as ONE compiled
program, driving the same :func:`fedfrac.runner.chunked.chunk_loop` as ``run``."""
from __future__ import annotations

from typing import Optional

import numpy as np

from fedfrac import algorithms
from fedfrac import config as config_lib
from fedfrac import _validation, config_base
from fedfrac.runner import factories, outputs, stored, user_inputs
from fedfrac.runner import workdir as workdir_lib
from fedfrac.runner.log import Progress, RunLog
from fedfrac.runner.chunked import (build_data, data_seed, slice_run, to_host, chunk_loop,
                                    use_compile_cache)
from fedfrac.runner.records import Results, final_params, stop_target
from fedfrac.runner.validate import check_seeds
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


def run_many(config, seeds=None, grid: Optional[dict] = None,
             workdir: Optional[str] = None, progress: Optional[bool] = None,
             data_cache: Optional[dict] = None, overwrite: bool = False, *, data=None,
             algorithms: Optional[dict] = None, model=None,
             keep_params: bool = True, compile_cache: bool = True) -> Results:
  """Every method's runs over ``seeds`` (× a ``grid``) vmapped as ONE compiled program.

  Args:
    config: as for :func:`run`.
    seeds: seeds to run (default ``config.seeds``); each seed gets its own
      initial model, sampling stream and (with ``data.seed=-1``) partition.
    grid: optional ``{option: [values]}`` for one continuous algorithm option
      (e.g. ``{"alpha": [0.5, 0.8, 1.0]}``) or ``"client.lr"`` (every method's
      client learning rate η0); methods that have the option run every value
      (labelled ``method[option=value]``), the others run once. An option no
      selected method has is refused before any compute.
    data, algorithms, model, keep_params, compile_cache: as for
      :func:`fedfrac.runner.loop.run`.
    data_cache: optional dict reused across calls (sweep scripts): federated
      datasets are memoised in it by (data config, data seed), so a sweep
      generates or loads each dataset once.
    workdir: as for :func:`run`: it belongs to one experiment (the fingerprint
      is checked before any compute), and every run kept there (by ``run`` or
      ``run_many``, each grid value under its own label) stays in its outputs.
    overwrite: clear the workdir's earlier results first (``True``: every
      method's; a label or labels: those methods').
  Returns:
    :class:`Results` equal (to float rounding) to separate ``run`` calls.
    With ``config.stop_at_target`` a method's batch stops when every run in it
    has reached its target or diverged (each run's record ends at its own
    stop, as it would alone).
    No checkpoints are written (a batched job restarts from scratch).
  """
  own = user_inputs.prepare(config, data, algorithms, model, digest=bool(workdir))
  config = own.config
  config_lib.validate(config)
  workdir_lib.check_name(workdir)
  use_compile_cache(compile_cache)
  factories.apply_cpu_devices(config)
  if seeds is not None:
    check_seeds(tuple(seeds) if not isinstance(seeds, int) else seeds, "seeds (run_many)")
  seeds = tuple(config.seeds if seeds is None else
                ((seeds,) if isinstance(seeds, int) else seeds))
  _check_grid(grid, config)
  data_cache = {} if data_cache is None else data_cache
  records = []
  data_key = config.data.to_json_best_effort(sort_keys=True)
  if own.data is not None:   # your own arrays: not cached across calls
    data_cache, data_key = {}, "data="
  show = config.progress if progress is None else progress
  for seed in seeds:   # every split, then every method, before the workdir is written
    ds = (data_key, data_seed(config, seed))
    if ds not in data_cache:
      data_cache[ds] = build_data(config, ds[1], own.data)
  first = (data_key, data_seed(config, seeds[0]))
  factories.check_methods(config, data_cache[first])   # every method, before any runs
  if workdir:
    workdir_lib.prepare(config, workdir, overwrite=overwrite,
                        runs=[(l, s) for l in config_base.method_labels(config) for s in seeds],
                        extra=own.fingerprint)
  for label in config_base.method_labels(config):
    feds = []
    for seed in seeds:
      ds = (data_key, data_seed(config, seed))
      if ds not in data_cache:
        data_cache[ds] = build_data(config, ds[1], own.data)
      feds.append(data_cache[ds])
    method = config.methods[label]
    options = config_base.method_options(method)
    grid_key, values = _grid_values(grid, method, options, label)
    all_sizes = np.concatenate([f.client_size for f in feds])
    sim = factories.build_simulation(config, label, feds[0], all_client_sizes=all_sizes,
                                     traced_options=bool(grid_key))
    runs = [(i, seed, v) for i, seed in enumerate(seeds) for v in values]
    batch = BatchedSimulation(sim, [feds[i] for i, _, _ in runs],
                              [{grid_key: v} for _, _, v in runs] if grid_key else None)
    states = batch.init([seed for _, seed, _ in runs])
    payload_bytes, message_bytes = sim.communication_bytes(slice_run(states, 0))
    logs = []
    for _, seed, v in runs:
      run_label = label if grid_key is None else f"{label}[{grid_key}={v}]"
      # Host-side metrics (e.g. DP ε) from the run's own concrete option values.
      run_algorithm = sim.algorithm if grid_key is None else sim.algorithm_fn({grid_key: v})
      logs.append(RunLog(run_label, method.name, seed, sim.algorithm.comm, payload_bytes,
                         message_bytes, config.on_divergence,
                         host_metrics=run_algorithm.host_metrics,
                         target=stop_target(config)))
    bar = Progress(show, config.rounds, f"{label} x{len(runs)} runs", 0)
    # Compile evaluation up front so wall_s counts only running rounds and evals.
    compile_s = batch.compile_eval(states)
    # A run that stopped at its target goes on in the batch until every run has
    # (nothing of it is recorded): its final state is the one it stopped with.
    at_stop = {}

    def keep_stopped(r, chunk_index, states, last):
      for i, log in enumerate(logs):
        if keep_params and log.stopped is not None and i not in at_stop:
          at_stop[i] = to_host(slice_run(states, i))
    try:
      states, chunks_s, _ = chunk_loop(batch, states, logs, start_round=0, end_round=config.rounds,
                               rounds=config.rounds, eval_every=config.eval_every,
                               compile_fn=batch.compile, split=slice_run, bar=bar,
                               after_chunk=keep_stopped)
      compile_s += chunks_s
    finally:
      bar.close()
    for i, log in enumerate(logs):
      log.compile_s = compile_s / len(logs)
      rec = log.record()
      if keep_params:
        run_state = at_stop[i] if i in at_stop else to_host(slice_run(states, i))
        rec.params = final_params(sim.algorithm, run_state.server, run_state.clients,
                                  sim.num_clients)
      records.append(rec)
  results = Results(config, records, data={
      seed: data_cache[(data_key, data_seed(config, seed))] for seed in seeds})
  if workdir:
    for rec in records:
      stored.save_record(workdir, rec, config.rounds)
    order = list(dict.fromkeys(workdir_lib.kept_labels(workdir)
                               + [r.method for r in records]))
    outputs.write_outputs(Results(config, stored.load_records(workdir, order)), workdir)
  return results
