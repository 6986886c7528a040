"""Config -> data, model, algorithm -> engine -> results; checkpoints and outputs.

``run(config, workdir=None)`` runs every method in ``config.methods`` for every
seed in ``config.seeds`` on the same split, the same initial model and the same
client-sampling stream, and returns :class:`Results`. With a ``workdir`` it
writes (atomically) ``metrics.csv`` / ``metrics.jsonl`` (one row per evaluated
round), ``rounds.csv`` (every round's training-side metrics), ``summary.json``,
``config.json``, plots, and orbax checkpoints at chunk boundaries; re-running
with the same workdir resumes from the last checkpoint and gives the same
numbers as an uninterrupted run.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
import sys
import time
import warnings
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac import algorithms
from fedfrac import config as config_lib
from fedfrac import data as data_lib
from fedfrac import engine as engine_lib
from fedfrac import metrics as metrics_lib
from fedfrac import models
from fedfrac.algorithms import base
from fedfrac.optim import schedules

FIRST_COLUMNS = ("method", "algorithm", "seed", "round")


# ----------------------------------------------------------------------------- setup


def make_task(config):
  if config.task.loss == "cross_entropy":
    return base.classification_task()
  return base.regression_task(config.task.loss, config.task.huber_delta,
                              config.task.get("mape_eps", 1.0))


def default_unroll(max_steps, dynamic_steps=False):
  """Local steps per loop iteration when ``engine.unroll=0``.

  A static scan on CPU is unrolled fully up to 16 steps (loop overhead dominates
  there); dynamic loops (which stop at each client's own step count) and other
  backends use 1.
  """
  if jax.default_backend() == "cpu" and not dynamic_steps:
    return int(max(1, min(max_steps, 16)))
  return 1


def make_training(client_cfg, client_size, rounds, unroll=0,
                  dynamic_steps=False) -> base.LocalTraining:
  """LocalTraining from a (merged) client config and the clients' sizes.

  ``dynamic_steps=True`` makes local-step loops run each client's own step count
  (see :class:`fedfrac.algorithms.base.LocalTraining`).
  """
  tx = schedules.client_optimizer(client_cfg.optimizer, momentum=client_cfg.momentum,
                                  weight_decay=client_cfg.weight_decay)
  sched = schedules.lr_schedule(client_cfg.schedule, client_cfg.lr, rounds,
                                client_cfg.final_lr_fraction, client_cfg.lr_decay)
  steps = client_cfg.local_steps or None
  epochs = None if steps else client_cfg.local_epochs
  b = client_cfg.batch_size
  sizes = np.asarray(client_size)
  max_steps = steps if steps else int(epochs * np.ceil(sizes.max() / b))
  return base.LocalTraining(
      optimizer=tx, lr_schedule=sched, batch_size=b, local_epochs=epochs,
      local_steps=steps, max_steps=max(int(max_steps), 1),
      unroll=unroll or default_unroll(max_steps, dynamic_steps),
      dynamic_steps=bool(dynamic_steps))


def churn_rates(config, fed_data=None):
  """``None`` (no churn) or ``(p_leave, p_join)`` for the engine.

  Scalars from ``config.churn.p_leave/p_join``; with ``config.churn.per_class``
  (group -> (p_leave, p_join), asymmetric churn) per-client ``[K]`` arrays built
  from ``fed_data.client_group`` (BEV: vehicle class), other groups keeping the
  scalar rates.
  """
  ch = config.churn
  per_class = dict(ch.get("per_class", {}) or {})
  if not per_class:
    if ch.p_leave > 0 or ch.p_join < 1:
      return (float(ch.p_leave), float(ch.p_join))
    return None
  if fed_data is None or fed_data.client_group is None:
    raise ValueError("config.churn.per_class needs data with client groups "
                     "(vehicle classes of a BEV source)")
  groups = np.asarray(fed_data.client_group).astype(str)
  p_leave = np.full(groups.shape, float(ch.p_leave), np.float32)
  p_join = np.full(groups.shape, float(ch.p_join), np.float32)
  for cls, (leave, join) in per_class.items():
    sel = groups == cls
    p_leave[sel], p_join[sel] = float(leave), float(join)
  return (p_leave, p_join)


def engine_config(config, label=None, fed_data=None) -> engine_lib.EngineConfig:
  """Engine settings of the run (with ``label``: that method's attack settings;
  with ``fed_data``: per-client churn rates from ``config.churn.per_class``)."""
  churn = churn_rates(config, fed_data)
  attack = None if label is None else config_lib.engine_attack(config, label)
  e = config.engine
  return engine_lib.EngineConfig(
      rounds=config.rounds, participation=config.participation,
      client_parallelism=e.client_parallelism,
      eval_batch_size=e.eval_batch_size, availability=churn, attack=attack,
      step_buckets=int(e.get("step_buckets", 0)),
      shard_clients=e.get("shard_clients", False))


def build_simulation(config, label, fed_data, all_client_sizes=None,
                     traced_options=False) -> engine_lib.Simulation:
  """Everything for one method on one federated dataset.

  ``all_client_sizes`` (default: this dataset's) sets the static local-step scan
  length, so batched runs over several partitions share one program;
  ``traced_options`` lets the simulation rebuild the algorithm from traced option
  overrides (hyper-parameter grids).
  """
  task = make_task(config)
  num_outputs = fed_data.num_classes if task.name == "classification" else 1
  model = models.build(config.model, fed_data.input_shape, num_outputs,
                       fed_data.input_scale)
  client_cfg = config_lib.client_config(config, label)
  sizes = fed_data.client_size if all_client_sizes is None else all_client_sizes
  training = make_training(client_cfg, sizes, config.rounds, config.engine.unroll,
                           config.engine.get("dynamic_steps", False))
  ctx = base.BuildContext(model=model, task=task, training=training,
                          data_info=fed_data.info(), rounds=config.rounds,
                          client_cfg=client_cfg,
                          aggregator=config_lib.aggregator_spec(config, label),
                          participation=float(config.participation))
  method = config.methods[label]
  options = config_lib.method_options(method)
  algorithm = algorithms.make(method.name, ctx, **options)
  algorithm_fn = None
  if traced_options:
    algorithm_fn = lambda hp: algorithms.make(method.name, ctx, **{**options, **hp})
  return engine_lib.Simulation(algorithm, fed_data, model, task, training,
                               engine_config(config, label, fed_data),
                               algorithm_fn=algorithm_fn)


# --------------------------------------------------------------------------- results


@dataclasses.dataclass
class RunRecord:
  """One (method, seed) run."""
  method: str
  algorithm: str
  seed: int
  rows: list            # evaluated rounds
  round_rows: list      # every round
  status: str = "ok"
  compile_s: float = 0.0
  wall_s: float = 0.0
  client_arrays: dict = dataclasses.field(default_factory=dict)

  def curve(self, name):
    return (np.asarray([r["round"] for r in self.rows]),
            np.asarray([r.get(name, np.nan) for r in self.rows], np.float64))


@dataclasses.dataclass
class Results:
  """What ``run`` returns: per-round rows, per-run records and a summary."""
  config: Any
  records: list

  @property
  def rows(self):
    return [r for rec in self.records for r in rec.rows]

  @property
  def round_rows(self):
    return [r for rec in self.records for r in rec.round_rows]

  def record(self, method, seed):
    for rec in self.records:
      if rec.method == method and rec.seed == seed:
        return rec
    raise KeyError((method, seed))

  def methods(self):
    return list(dict.fromkeys(rec.method for rec in self.records))

  def summary(self) -> dict:
    return summarize(self.records, self.config)

  def table(self) -> str:
    return format_table(self.summary(), self.config)


def _final_metric_names(records):
  names = []
  for rec in records:
    if rec.rows:
      for k, v in rec.rows[-1].items():
        if k not in FIRST_COLUMNS and isinstance(v, (int, float)) and k not in names:
          names.append(k)
  return names


def summarize(records, config) -> dict:
  """Final metrics per method and seed, and their mean/std/95% CI over seeds."""
  out = {"name": config.name, "rounds": config.rounds, "methods": {}}
  classification = config.task.loss == "cross_entropy"
  for method in dict.fromkeys(r.method for r in records):
    recs = [r for r in records if r.method == method]
    per_seed = {}
    for rec in recs:
      final = dict(rec.rows[-1]) if rec.rows else {}
      for k in FIRST_COLUMNS:
        final.pop(k, None)
      rounds_done = rec.rows[-1]["round"] if rec.rows else 0
      entry = {"status": rec.status, "rounds_done": rounds_done,
               "wall_s": rec.wall_s, "compile_s": rec.compile_s, "final": final}
      if classification and rec.rows:
        r, acc = rec.curve("accuracy")
        entry["best_accuracy"] = float(np.nanmax(acc))
        entry["best_round"] = int(r[int(np.nanargmax(acc))])
        entry["rounds_to_target"] = metrics_lib.rounds_to_target(
            r, acc, config.target_accuracy)
      elif rec.rows and config.target_rmse > 0:
        r, rmse = rec.curve("rmse")
        entry["rounds_to_target"] = metrics_lib.rounds_to_target(
            r, rmse, config.target_rmse, higher_is_better=False)
      per_seed[str(rec.seed)] = entry
    agg = {}
    for name in _final_metric_names(recs):
      agg[name] = metrics_lib.seed_stats([r.rows[-1].get(name) for r in recs if r.rows])
    agg["wall_s"] = metrics_lib.seed_stats([r.wall_s for r in recs])
    if classification:
      agg["best_accuracy"] = metrics_lib.seed_stats(
          [e.get("best_accuracy") for e in per_seed.values()])
    out["methods"][method] = {"algorithm": recs[0].algorithm, "seeds": per_seed,
                              "mean": agg}
  return out


def format_table(summary, config) -> str:
  """Markdown table: final accuracy (or RMSE), rounds to target, wall time."""
  classification = config.task.loss == "cross_entropy"
  if classification:
    head = (f"| method | final accuracy | best accuracy | rounds to "
            f"{config.target_accuracy:.0%} | wall s/run | status |")
  else:
    head = "| method | final RMSE | final MAE | rounds to target | wall s/run | status |"
  lines = [head, "|---|---|---|---|---|---|"]
  for method, m in summary["methods"].items():
    seeds = m["seeds"].values()
    statuses = sorted({e["status"] for e in seeds})
    r2t = [e.get("rounds_to_target") for e in seeds]
    reached = [x for x in r2t if x is not None]
    r2t_s = ("never" if not reached else
             f"{np.mean(reached):.1f}" + ("" if len(reached) == len(r2t)
                                          else f" ({len(reached)}/{len(r2t)} seeds)"))
    wall = m["mean"]["wall_s"]["mean"]

    def fmt(name):
      s = m["mean"].get(name)
      if not s or s["mean"] is None:
        return "n/a"
      return f"{s['mean']:.4f} ± {s['std']:.4f}" if s["n"] > 1 else f"{s['mean']:.4f}"
    if classification:
      cols = [fmt("accuracy"), fmt("best_accuracy"), r2t_s]
    else:
      cols = [fmt("rmse"), fmt("mae"), r2t_s]
    lines.append(f"| {method} | " + " | ".join(cols) +
                 f" | {wall:.1f} | {', '.join(statuses)} |")
  return "\n".join(lines)


# ------------------------------------------------------------------------ checkpoints


class Checkpointer:
  """orbax checkpoints of the engine state plus a JSON history, per (method, seed)."""

  def __init__(self, directory):
    import orbax.checkpoint as ocp
    self._ocp = ocp
    self.directory = os.path.abspath(directory)
    os.makedirs(self.directory, exist_ok=True)
    self.manager = ocp.CheckpointManager(
        self.directory, options=ocp.CheckpointManagerOptions(
            max_to_keep=2, enable_async_checkpointing=False))

  def latest(self):
    return self.manager.latest_step()

  def save(self, step, state, history):
    leaves = jax.tree.leaves(state)
    self.manager.save(step, args=self._ocp.args.StandardSave(
        {f"leaf_{i:05d}": np.asarray(x) for i, x in enumerate(leaves)}), force=True)
    self.manager.wait_until_finished()
    _atomic_write(os.path.join(self.directory, f"history_{step}.json"),
                  json.dumps(history, default=_json_default))

  def restore(self, step, like_state):
    leaves, treedef = jax.tree.flatten(like_state)
    target = {f"leaf_{i:05d}": np.zeros(np.shape(x), np.asarray(x).dtype)
              for i, x in enumerate(leaves)}
    restored = self.manager.restore(step, args=self._ocp.args.StandardRestore(target))
    state = jax.tree.unflatten(treedef, [jnp.asarray(restored[f"leaf_{i:05d}"])
                                         for i in range(len(leaves))])
    with open(os.path.join(self.directory, f"history_{step}.json")) as f:
      history = json.load(f)
    return state, history


def _json_default(o):
  if isinstance(o, (np.floating,)):
    return float(o)
  if isinstance(o, (np.integer,)):
    return int(o)
  if isinstance(o, np.ndarray):
    return o.tolist()
  return str(o)


def _atomic_write(path, text):
  tmp = f"{path}.tmp{os.getpid()}"
  with open(tmp, "w") as f:
    f.write(text)
  os.replace(tmp, path)


# ------------------------------------------------------------------------------- run


def _to_host(tree):
  return jax.tree.map(np.asarray, jax.device_get(tree))


def _scalar(v):
  v = np.asarray(v)
  return float(v) if v.ndim == 0 else None


class _Progress:
  def __init__(self, enabled, total, desc, initial):
    self.bar = None
    if enabled:
      from tqdm.auto import tqdm
      self.bar = tqdm(total=total, desc=desc, initial=initial, leave=False,
                      dynamic_ncols=True, file=sys.stderr)

  def update(self, n, **postfix):
    if self.bar is not None:
      self.bar.update(n)
      self.bar.set_postfix(postfix, refresh=False)

  def close(self):
    if self.bar is not None:
      self.bar.close()


class RunLog:
  """Rows, cumulative traffic, wall time and status of one (method, seed) run."""

  def __init__(self, label, algorithm_name, seed, comm, payload_bytes, message_bytes,
               on_divergence="stop", history=None, host_metrics=None):
    self.label, self.algorithm_name, self.seed = label, algorithm_name, seed
    self.host_metrics = host_metrics
    self._host_keys = set()
    self.comm = round_communication(comm)
    self.payload_bytes, self.message_bytes = payload_bytes, message_bytes
    self.on_divergence = on_divergence
    h = history or {}
    self.rows = h.get("rows", [])
    self.round_rows = h.get("round_rows", [])
    self.status = h.get("status", "ok")
    self.wall = h.get("wall_s", 0.0)
    self.cum_up = h.get("cum_bytes_up", 0.0)
    self.cum_down = h.get("cum_bytes_down", 0.0)
    self.compile_s = 0.0
    self.client_arrays = {}

  def history(self):
    return {"rows": self.rows, "round_rows": self.round_rows, "status": self.status,
            "wall_s": self.wall, "cum_bytes_up": self.cum_up,
            "cum_bytes_down": self.cum_down}

  def add_chunk(self, first_round, round_metrics, evaluation, seconds):
    """Record a chunk (host arrays, leading axis = rounds); returns the eval row.

    A run whose metrics stop being finite is marked diverged (or raises, with
    ``on_divergence="error"``) and records nothing further.
    """
    if self.status != "ok":
      return None
    n = len(round_metrics["cohort"])
    self.wall += seconds
    for i in range(n):
      participants = float(round_metrics["cohort"][i])
      up, down = self.comm(self.payload_bytes, self.message_bytes, participants,
                           first_round + i)
      self.cum_up += up
      self.cum_down += down
      row = {"method": self.label, "algorithm": self.algorithm_name, "seed": self.seed,
             "round": first_round + i + 1, "bytes_up": up, "bytes_down": down,
             "cum_bytes_up": self.cum_up, "cum_bytes_down": self.cum_down}
      for k, v in round_metrics.items():
        if not k.startswith("clients/"):
          value = _scalar(v[i])
          if value is not None:
            row[k] = value
      if self.host_metrics is not None:
        extra = {k: float(v) for k, v in self.host_metrics(first_round + i + 1).items()}
        self._host_keys.update(extra)
        row.update(extra)
      self.round_rows.append(row)
    row = dict(self.round_rows[-1])
    row.update({k: float(v) for k, v in evaluation.items() if not k.startswith("clients/")})
    row["wall_s"] = self.wall
    self.rows.append(row)
    self.client_arrays = {k: np.asarray(v) for k, v in evaluation.items()
                          if k.startswith("clients/")}
    bad = [k for k, v in row.items() if isinstance(v, float) and not math.isfinite(v)
           and not k.startswith("server/") and not k.endswith(("_min", "_max"))
           and k not in self._host_keys]   # e.g. ε = inf without noise
    if bad:
      r = row["round"]
      msg = (f"method {self.label!r} seed {self.seed} diverged at round {r}: "
             f"{', '.join(bad)} not finite (lower client.lr or check the method's options)")
      if self.on_divergence == "error":
        raise FloatingPointError(msg)
      warnings.warn(msg)
      self.status = f"diverged at round {r}"
    return row

  def record(self) -> RunRecord:
    return RunRecord(self.label, self.algorithm_name, self.seed, self.rows,
                     self.round_rows, self.status, self.compile_s, self.wall,
                     self.client_arrays)


def _postfix(row, n, dt):
  if not row:
    return {}
  value = row.get("accuracy", row.get("rmse", float("nan")))
  return {"acc": f"{value:.4f}", "rps": f"{n / max(dt, 1e-9):.1f}"}


def run_one(config, label, seed, fed_data, workdir=None, stop_after_round=None,
            progress=None) -> RunRecord:
  """Run one method for one seed; resume from ``workdir`` if it has a checkpoint."""
  sim = build_simulation(config, label, fed_data)
  state = sim.init(seed)
  history, ckpt = None, None
  if workdir:
    ckpt = Checkpointer(os.path.join(workdir, "checkpoints", label, f"seed_{seed}"))
    step = ckpt.latest()
    if step is not None:
      state, history = ckpt.restore(step, state)
  payload_bytes, message_bytes = sim.communication_bytes(state)
  log = RunLog(label, config.methods[label].name, seed, sim.algorithm.comm,
               payload_bytes, message_bytes, config.on_divergence, history,
               sim.algorithm.host_metrics)
  start_round = int(state.round)
  end_round = config.rounds if stop_after_round is None else min(config.rounds,
                                                                 stop_after_round)
  show = config.progress if progress is None else progress
  bar = _Progress(show and log.status == "ok", config.rounds, f"{label} seed {seed}",
                  start_round)
  chunk_index, r = 0, start_round
  try:
    while r < end_round and log.status == "ok":
      n = min(config.eval_every, config.rounds - r, end_round - r)
      log.compile_s += sim.compile(n)
      t0 = time.perf_counter()
      state, round_metrics = sim.run_chunk(state, n)
      evaluation = sim.evaluate(state)
      jax.block_until_ready((state, evaluation))
      dt = time.perf_counter() - t0
      row = log.add_chunk(r, _to_host(round_metrics), _to_host(evaluation), dt)
      r += n
      bar.update(n, **_postfix(row, n, dt))
      chunk_index += 1
      if ckpt and (r >= end_round or log.status != "ok" or (
          config.checkpoint_every and chunk_index % config.checkpoint_every == 0)):
        ckpt.save(r, state, log.history())
  finally:
    bar.close()
  return log.record()


def _slice_run(tree, i):
  """Run ``i`` of a batched tree (0-d leaves, e.g. the shared round, are kept)."""
  return jax.tree.map(lambda x: x[i] if np.ndim(x) else x, tree)


def run_many(config, seeds=None, grid: Optional[dict] = None,
             workdir: Optional[str] = None, progress: Optional[bool] = None,
             data_cache: Optional[dict] = None) -> Results:
  """Every method's runs over ``seeds`` (× a ``grid``) vmapped as ONE compiled program.

  Args:
    config: as for :func:`run`.
    seeds: seeds to run (default ``config.seeds``); each seed gets its own
      initial model, sampling stream and (with ``data.seed=-1``) partition.
    grid: optional ``{option: [values]}`` for one continuous algorithm option
      (e.g. ``{"alpha": [0.5, 0.8, 1.0]}``); methods that have the option run
      every value (labelled ``method[option=value]``), the others run once.
    data_cache: optional dict reused across calls (sweep scripts): federated
      datasets are memoised in it by (data config, data seed), so a sweep
      generates or loads each dataset once.
  Returns:
    :class:`Results` equal (to float rounding) to separate ``run`` calls.
    No checkpoints are written (a batched job restarts from scratch).
  """
  config_lib.validate(config)
  _apply_cpu_devices(config)
  seeds = tuple(config.seeds if seeds is None else seeds)
  if grid is not None and len(grid) != 1:
    raise ValueError(f"grid={grid!r}: give exactly one option and its values")
  data_cache = {} if data_cache is None else data_cache
  records = []
  data_key = config.data.to_json_best_effort(sort_keys=True)
  show = config.progress if progress is None else progress
  for label in config_lib.method_labels(config):
    feds = []
    for seed in seeds:
      ds = (data_key, _data_seed(config, seed))
      if ds not in data_cache:
        data_cache[ds] = data_lib.build(config.data, ds[1])
      feds.append(data_cache[ds])
    method = config.methods[label]
    options = config_lib.method_options(method)
    grid_key, values = None, [None]
    if grid:
      key, vals = next(iter(grid.items()))
      if key in algorithms.hparams(method.name, options):
        grid_key, values = key, list(vals)
        for v in values:   # validate every concrete value up front
          try:
            algorithms.hparams(method.name, {**options, key: v}, prefix="grid.")
          except ValueError as e:
            raise config_lib.ConfigError(f"{e} (method {label!r})") from None
    all_sizes = np.concatenate([f.client_size for f in feds])
    sim = build_simulation(config, label, feds[0], all_client_sizes=all_sizes,
                           traced_options=bool(grid_key))
    runs = [(i, seed, v) for i, seed in enumerate(seeds) for v in values]
    batch = engine_lib.BatchedSimulation(
        sim, [feds[i] for i, _, _ in runs],
        [{grid_key: v} for _, _, v in runs] if grid_key else None)
    states = batch.init([seed for _, seed, _ in runs])
    payload_bytes, message_bytes = sim.communication_bytes(_slice_run(states, 0))
    logs = []
    for _, seed, v in runs:
      run_label = label if grid_key is None else f"{label}[{grid_key}={v}]"
      # Host-side metrics (e.g. DP ε) from the run's own concrete option values.
      run_algorithm = sim.algorithm if grid_key is None else sim.algorithm_fn({grid_key: v})
      logs.append(RunLog(run_label, method.name, seed, sim.algorithm.comm, payload_bytes,
                         message_bytes, config.on_divergence,
                         host_metrics=run_algorithm.host_metrics))
    bar = _Progress(show, config.rounds, f"{label} x{len(runs)} runs", 0)
    # Compile evaluation up front so wall_s counts only running rounds and evals.
    r, compile_s = 0, batch.compile_eval(states)
    try:
      while r < config.rounds and any(l.status == "ok" for l in logs):
        n = min(config.eval_every, config.rounds - r)
        compile_s += batch.compile(n, states)
        t0 = time.perf_counter()
        states, round_metrics = batch.run_chunk(states, n)
        evaluation = batch.evaluate(states)
        jax.block_until_ready((states, evaluation))
        dt = time.perf_counter() - t0
        round_metrics, evaluation = _to_host(round_metrics), _to_host(evaluation)
        row = None
        for i, log in enumerate(logs):
          row = log.add_chunk(r, _slice_run(round_metrics, i), _slice_run(evaluation, i),
                              dt / len(logs)) or row
        r += n
        bar.update(n, **_postfix(row, n, dt))
    finally:
      bar.close()
    for log in logs:
      log.compile_s = compile_s / len(logs)
      records.append(log.record())
  results = Results(config, records)
  if workdir:
    os.makedirs(workdir, exist_ok=True)
    _atomic_write(os.path.join(workdir, "config.json"), config.to_json_best_effort(indent=2))
    write_outputs(results, workdir)
  return results


def round_communication(comm):
  """``(payload_bytes, message_bytes, participants, round_index) -> (up, down)``.

  An algorithm's ``comm`` may take a ``round_index`` keyword (0-based) when its
  traffic changes between rounds (e.g. FibFL++ warm-up rounds).
  """
  import inspect
  try:
    takes_round = "round_index" in inspect.signature(comm).parameters
  except (TypeError, ValueError):
    takes_round = False
  if takes_round:
    return lambda p, m, n, r: comm(p, m, n, round_index=r)
  return lambda p, m, n, r: comm(p, m, n)


def _apply_cpu_devices(config):
  """``engine.cpu_devices > 0``: split the CPU into that many devices if JAX has
  not started yet (warn otherwise); see :func:`fedfrac.engine.use_cpu_devices`."""
  n = int(config.engine.get("cpu_devices", 0) or 0)
  if n and not engine_lib.use_cpu_devices(n, strict=False):
    warnings.warn(f"config.engine.cpu_devices={n} ignored: JAX had already started "
                  f"with {jax.device_count()} device(s); set it before any JAX "
                  f"operation or use XLA_FLAGS=--xla_force_host_platform_device_count={n}")


def _data_seed(config, seed):
  return seed if config.data.seed < 0 else config.data.seed


def run(config, workdir: Optional[str] = None, stop_after_round: Optional[int] = None,
        progress: Optional[bool] = None) -> Results:
  """Run every method × seed of ``config`` (validated first); see module docstring.

  Args:
    config: a ConfigDict from ``fedfrac.config.base_config()`` / ``configs/*.py``.
    workdir: output and checkpoint directory (None: keep results in memory).
    stop_after_round: stop every run after this many rounds (resume later from
      ``workdir``); None runs all ``config.rounds``.
    progress: override ``config.progress``.
  """
  config_lib.validate(config)
  _apply_cpu_devices(config)
  if workdir:
    os.makedirs(workdir, exist_ok=True)
    _atomic_write(os.path.join(workdir, "config.json"), config.to_json_best_effort(indent=2))
  seeds = (config.seeds,) if isinstance(config.seeds, int) else tuple(config.seeds)
  data_cache = {}
  records = []
  for label in config_lib.method_labels(config):
    for seed in seeds:
      ds = _data_seed(config, seed)
      if ds not in data_cache:
        data_cache[ds] = data_lib.build(config.data, ds)
      records.append(run_one(config, label, seed, data_cache[ds], workdir,
                             stop_after_round, progress))
  results = Results(config, records)
  if workdir:
    write_outputs(results, workdir)
  return results


# --------------------------------------------------------------------------- outputs


def _csv_text(rows):
  columns = list(FIRST_COLUMNS)
  for row in rows:
    for k in row:
      if k not in columns:
        columns.append(k)
  buf = io.StringIO()
  writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
  writer.writeheader()
  for row in rows:
    writer.writerow({k: row.get(k, "") for k in columns})
  return buf.getvalue()


def write_outputs(results: Results, workdir: str):
  """metrics.csv/jsonl, rounds.csv, summary.json and plots, each written atomically."""
  rows = results.rows
  _atomic_write(os.path.join(workdir, "metrics.csv"), _csv_text(rows))
  _atomic_write(os.path.join(workdir, "metrics.jsonl"),
                "".join(json.dumps(r, default=_json_default) + "\n" for r in rows))
  _atomic_write(os.path.join(workdir, "rounds.csv"), _csv_text(results.round_rows))
  _atomic_write(os.path.join(workdir, "summary.json"),
                json.dumps(results.summary(), indent=2, default=_json_default))
  _atomic_write(os.path.join(workdir, "summary.md"), results.table() + "\n")
  plot_curves(results, os.path.join(workdir, "accuracy.png"))


def plot_curves(results: Results, path: str, metric: Optional[str] = None):
  """Mean (± std band over seeds) of ``metric`` vs round, one line per method."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  if metric is None:
    metric = "accuracy" if results.config.task.loss == "cross_entropy" else "rmse"
  fig, ax = plt.subplots(figsize=(7, 4.5))
  for method in results.methods():
    curves = [rec.curve(metric) for rec in results.records if rec.method == method]
    length = min(len(c[0]) for c in curves)
    if length == 0:
      continue
    rounds = curves[0][0][:length]
    values = np.stack([c[1][:length] for c in curves])
    mean = values.mean(0)
    ax.plot(rounds, mean, label=method)
    if len(curves) > 1:
      std = values.std(0)
      ax.fill_between(rounds, mean - std, mean + std, alpha=0.2)
  ax.set_xlabel("round")
  ax.set_ylabel(metric)
  ax.set_title(results.config.name)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8, ncol=2)
  fig.tight_layout()
  tmp = path + ".tmp.png"
  fig.savefig(tmp, dpi=120)
  plt.close(fig)
  os.replace(tmp, path)

