"""Reproduce FIRMA Tables 11–12 (MNIST-1797 = scikit-learn digits, N = 5, R = 10).

Runs FedAvg, RDFL, FedRep, FibFL, FibFL+ and FibFL++ on the seven scenarios
(IID, Dirichlet α = 0.8 / 0.5 / 0.1, label skew K = 1 / 2 / 3) over 5 seeds, in
both compatibility modes (``paper`` and ``reference_code``, see
``configs/firma/digits.py``), and writes a markdown table of mean ± std (over
seeds) of the final mean per-client accuracy and of its Gini coefficient next to
the paper's published values.

  fedfrac-reproduce firma --out results/firma_digits.md
  python -m fedfrac.reproduce firma --out results/firma_digits.md     # the same

Beside ``--out=X.md`` it writes ``X_<mode>.png`` per compatibility mode: the mean
per-client accuracy per round of every method, one panel per scenario (mean ± std
band over seeds; :func:`figures`).

From a notebook: ``all_results, timings, total = ff.reproduce.firma.run()`` and
``ff.reproduce.firma.table(all_results["paper"])`` (Table 11 next to the
published values of ``published/firma.json``; ``key="gini"`` for Table 12).

How it runs fast: for each (mode, method, number of clients) ONE program is
compiled — all seeds of a scenario run in it at once (vmapped), and every
scenario with the same number of clients reuses it (index tables are padded to
common widths; local-step loops run each client's own step count,
``engine.dynamic_steps``). Each round is followed by the per-client evaluation
inside the same compiled scan, so R50% and the plateau σ come from every round.

Each (mode, scenario, method, seed) is one point of a ``fedfrac.sweep`` sweep
(``fedfrac.runner.points``): the points of one method form one batch, batches
run as a work queue over one worker process per CPU core (or device), and each
finished point is written to its own file, so ``--resume`` / ``--dir`` skip
finished points after an interruption.

The table writer (Tables 2, 4, 11–13, the diagnostics and the figures) is
:mod:`fedfrac.reproduce.firma_tables`; its names are re-exported here.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import sys
import tempfile
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac import data as data_lib
from fedfrac import sim as sim_lib
from fedfrac import runner
from fedfrac import metrics as metrics_lib
from fedfrac.reproduce import common, jobs
from fedfrac.runner import points as points_lib

from fedfrac.reproduce.firma_tables import (  # noqa: F401  (re-exported)
    LABELS, METHODS, MODES, PAPER_ACCURACY, PAPER_COLUMNS, PAPER_GINI, SCENARIO_LABELS,
    SCENARIOS, figures, load_json, markdown, published, render_from_json, table)

SEEDS = 5


def load_digits_config():
  return common.config_module("firma/digits.py")


def cpu_seconds():
  r = resource.getrusage(resource.RUSAGE_SELF)
  return r.ru_utime + r.ru_stime


# ------------------------------------------------------------------ batched runs

ARRAY_AXES = {"x": None, "y": None, "x_test": None, "y_test": None,
              "client_index": 0, "client_size": 0, "num_steps": 0,
              "client_test_index": 0, "client_test_size": 0,
              "y_test_scale": None, "y_test_center": None}


def make_program(sim, rounds):
  """jit(vmap over runs) of R rounds, each followed by the evaluation."""
  def one_run(arrays, state):
    def body(s, _):
      s, m = sim.run_round(sim.algorithm, arrays, s)
      return s, (m, sim._evaluate(arrays, s))
    return jax.lax.scan(body, state, None, length=rounds)
  return jax.jit(jax.vmap(one_run, in_axes=(ARRAY_AXES, sim_lib.STATE_AXES),
                          out_axes=(sim_lib.STATE_AXES, 0)))


def stack_arrays(feds, training):
  per_run = [sim_lib.data_arrays(f, training) for f in feds]
  out = {}
  for key, axis in ARRAY_AXES.items():
    if axis is None:
      out[key] = jnp.asarray(per_run[0][key])
    else:
      out[key] = jnp.asarray(np.stack([a[key] for a in per_run]))
  return out


def stack_states(sim, seeds, feds):
  states = [sim.init(s, f) for s, f in zip(seeds, feds)]
  stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *[st._replace(round=None)
                                                      for st in states])
  return stacked._replace(round=states[0].round)


# ------------------------------------------------------------------- one mode


def build_feds(cfg_module, mode, scenarios, seeds):
  """{scenario: (config, [fed per seed])} for one compatibility mode."""
  out = {}
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")   # expected label-skew drops (K = 3)
    for scen in scenarios:
      cfg = cfg_module.firma_config(mode, scen)
      cache, feds = {}, []
      for seed in seeds:
        ds = seed if cfg.data.seed < 0 else cfg.data.seed
        if ds not in cache:
          cache[ds] = data_lib.build(cfg.data, ds)
        feds.append(cache[ds])
      out[scen] = (cfg, feds)
  return out


def _pad_rows(a, rows):
  """Append copies of row 0 up to ``rows`` rows (rows no client index refers to)."""
  if a.shape[0] == rows:
    return a
  return np.concatenate([a, np.repeat(a[:1], rows - a.shape[0], axis=0)])


def common_shapes(all_feds):
  """Pad every dataset of every mode to the same array shapes, so a method whose
  compiled program does not depend on the mode (FedAvg, RDFL, FedRep, FibFL,
  FibFL+: the mode only changes their initial state) compiles once for both
  (the compilation cache recognises the identical program). The digits splits
  of the two modes differ by one row (1,438/359 vs 1,437/360); the extra rows
  are copies of row 0 that no client's index refers to. Per-client metrics are
  unaffected; only FedAvg's pooled (non-reported) test accuracy sees one extra
  test row."""
  feds = [f for per_mode in all_feds.values() for _, fs in per_mode.values() for f in fs]
  n_max = max(f.client_index.shape[1] for f in feds)
  m_max = max(f.client_test_index.shape[1] for f in feds)
  n_train = max(f.x_train.shape[0] for f in feds)
  n_test = max(f.x_test.shape[0] for f in feds)

  def pad(f):
    f = data_lib.federated.pad_tables(f, n_max, m_max)
    return dataclasses.replace(f, x_train=_pad_rows(f.x_train, n_train),
                               y_train=_pad_rows(f.y_train, n_train),
                               x_test=_pad_rows(f.x_test, n_test),
                               y_test=_pad_rows(f.y_test, n_test))
  cache = {}

  def padded(f):
    if id(f) not in cache:
      cache[id(f)] = pad(f)
    return cache[id(f)]
  return {mode: {s: (c, [padded(f) for f in fs]) for s, (c, fs) in per_mode.items()}
          for mode, per_mode in all_feds.items()}


def summarize_runs(sim, method, states, round_metrics, evaluation, rounds, num_clients):
  """Per-seed summary dicts from the batched outputs (host NumPy)."""
  acc = np.asarray(evaluation["client_accuracy_mean"])       # [seeds, R]
  gini = np.asarray(evaluation["client_accuracy_gini"])
  first = jax.tree.map(lambda x: x[0] if np.ndim(x) else x, states)
  payload_b, message_b = sim.communication_bytes(first)
  comm = runner.round_communication(sim.algorithm.comm)
  per_round_bytes = [sum(comm(payload_b, message_b, num_clients, r)) for r in range(rounds)]
  runs = []
  for i in range(acc.shape[0]):
    r50 = metrics_lib.rounds_to_target(np.arange(1, rounds + 1), acc[i], 0.5)
    run = {"accuracy": float(acc[i, -1]), "gini": float(gini[i, -1]),
           "curve": acc[i].tolist(), "r50": r50,
           "plateau_std": metrics_lib.plateau_std(acc[i]),
           "bytes_per_round": per_round_bytes}
    for key in ("spectral_gap", "ring_cost_before", "ring_cost_after",
                "ring_saving_pct"):
      name = f"server/{key}"
      if name in round_metrics:
        v = np.asarray(round_metrics[name])[i]
        run[key] = float(v[-1]) if key.startswith("ring") else v.tolist()
    runs.append(run)
  return runs


def run_method(feds, mode, method, scenarios, seeds, log, batch_runs=5):
  """Every (scenario, seed) run of ``method`` in ``mode``.

  Runs with the same number of clients share one compiled program. They are
  sorted by their largest client (local-step loops run to the batch's largest
  step count) and executed ``batch_runs`` at a time (vmapped), so a batch holds
  runs of similar cost. Returns ``(results, timing)``.
  """
  t_wall, t_cpu = time.perf_counter(), cpu_seconds()
  groups = {}
  for scen in scenarios:
    for i, (seed, fed) in enumerate(zip(seeds, feds[scen][1])):
      groups.setdefault(fed.num_clients, []).append((int(fed.client_size.max()), scen,
                                                     i, seed, fed))
  results, compile_s, compile_cpu, compiles = {}, 0.0, 0.0, 0
  for n, runs in groups.items():
    runs = sorted(runs, key=lambda r: (r[0], scenarios.index(r[1]), r[2]))
    cfg0 = feds[runs[0][1]][0]
    sim = runner.build_simulation(cfg0, method, runs[0][4])
    rounds = cfg0.rounds
    program, compiled = make_program(sim, rounds), None
    per_run, run_s = {}, 0.0
    for start in range(0, len(runs), batch_runs):
      batch = runs[start:start + batch_runs]
      if len(batch) < batch_runs:     # keep one shape: repeat the last run
        batch = batch + [batch[-1]] * (batch_runs - len(batch))
      fs = [r[4] for r in batch]
      arrays = stack_arrays(fs, sim.training)
      states = stack_states(sim, [r[3] for r in batch], fs)
      if compiled is None:
        t0, c0 = time.perf_counter(), cpu_seconds()
        compiled = program.lower(arrays, states).compile()
        dt = time.perf_counter() - t0
        compile_s, compiles = compile_s + dt, compiles + 1
        compile_cpu += cpu_seconds() - c0
        log(f"  [{mode}] {method} N={n}: compiled in {dt:.1f}s")
      t0 = time.perf_counter()
      out_states, (round_metrics, evaluation) = compiled(arrays, states)
      jax.block_until_ready(evaluation)
      run_s += time.perf_counter() - t0
      round_metrics = jax.tree.map(np.asarray, jax.device_get(round_metrics))
      evaluation = jax.tree.map(np.asarray, jax.device_get(
          {k: v for k, v in evaluation.items() if not k.startswith("clients/")}))
      summaries = summarize_runs(sim, method, out_states, round_metrics, evaluation,
                                 rounds, n)
      for r, summary in zip(batch, summaries):
        per_run[(r[1], r[2])] = summary
    for scen in dict.fromkeys(r[1] for r in runs):
      scen_runs = [per_run[(scen, i)] for i in range(len(seeds))]
      results[(scen, method)] = {"runs": scen_runs, "num_clients": n}
      acc = [r["accuracy"] for r in scen_runs]
      log(f"  [{mode}] {method:10s} {scen:6s} acc {np.mean(acc):.4f} ± "
          f"{np.std(acc, ddof=1) if len(acc) > 1 else 0.0:.4f}")
    log(f"  [{mode}] {method} N={n}: {len(runs)} runs in {run_s:.1f}s")
  timing = {"wall_s": time.perf_counter() - t_wall, "cpu_s": cpu_seconds() - t_cpu,
            "compile_s": compile_s, "compile_cpu_s": compile_cpu, "compiles": compiles}
  return results, timing


def log_stderr(msg):
  print(msg, file=sys.stderr, flush=True)


def method_task(task):
  """One method in the given modes, scenarios and seeds, in one process (so a
  program that does not depend on the mode is compiled once and found in the
  compilation cache for the second mode). Returns ``(method, {mode: (results,
  timing)})`` as :func:`run_method` gives them."""
  method, modes, scenarios, seeds, batch_runs, cache_dir = task
  if cache_dir:
    enable_compile_cache(cache_dir)
  cfg_module = load_digits_config()
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    all_feds = common_shapes({mode: build_feds(cfg_module, mode, scenarios, seeds)
                              for mode in modes})
  out = {}
  for mode in modes:
    out[mode] = run_method(all_feds[mode], mode, method, scenarios, seeds, log_stderr,
                           batch_runs)
  return method, out


def point_key(mode, scenario, method, seed):
  """What defines one FIRMA point (one run); its id is the digest of this."""
  return {"reproduce": "firma", "mode": mode, "scenario": scenario, "method": method,
          "seed": int(seed)}


def sweep_batch(spec):
  """``fedfrac.sweep`` executor: every point of one method (all its modes,
  scenarios and seeds, run as :func:`method_task` runs them); yields ``(point
  id, record)``, the record holding the run's summary, its number of clients
  and the (method, mode) timing."""
  method, out = method_task((spec["method"], spec["modes"], spec["scenarios"],
                             spec["seeds"], spec["batch_runs"], spec["cache_dir"]))
  for mode, (results, timing) in out.items():
    for (scen, _), result in results.items():
      for seed, run_summary in zip(spec["seeds"], result["runs"]):
        yield (points_lib.point_id(point_key(mode, scen, method, seed)),
               {"mode": mode, "scenario": scen, "method": method, "seed": int(seed),
                "run": run_summary, "num_clients": result["num_clients"],
                "timing": timing})


def code_digest():
  """Hash of the code that produces the numbers (fedfrac/, which holds this
  module, and configs/firma/)."""
  import hashlib
  h = hashlib.sha256()
  for folder in (common.PACKAGE_DIR, os.path.dirname(load_digits_config().__file__)):
    for dirpath, _, files in sorted(os.walk(folder)):
      for name in sorted(files):
        if name.endswith(".py"):
          with open(os.path.join(dirpath, name), "rb") as f:
            h.update(f.read())
  return h.hexdigest()[:16]


def sweep_fingerprint(batch_runs, modes, scenarios, seeds):
  """What every point depends on besides its own key: the code and the batch
  layout (which runs share a vmapped batch follows from the scenarios and seeds)."""
  return {"reproduce": "firma", "code": code_digest(), "batch_runs": batch_runs,
          "modes": list(modes), "scenarios": list(scenarios), "seeds": list(seeds)}


def parts_directory(batch_runs, modes, scenarios, seeds):
  """Where ``--resume`` keeps finished points: keyed by the fingerprint."""
  return os.path.join(tempfile.gettempdir(), "firma_tables_parts",
                      points_lib.digest(sweep_fingerprint(batch_runs, modes, scenarios,
                                                          seeds)))


def enable_compile_cache(cache_dir):
  jax.config.update("jax_compilation_cache_dir", cache_dir)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


# Relative cost, to start the longest tasks first.
_TASK_COST = {"fibfl_pp": 6, "fibfl_plus": 5, "fibfl": 5, "rdfl": 2, "fedavg": 2,
              "fedrep": 1}


def run(modes=MODES, scenarios=SCENARIOS, methods=METHODS, seeds=SEEDS, batch_runs=5,
        workers=2, compile_cache=True, resume=False, log=log_stderr, directory=None,
        overwrite=False):
  """Run the grid through ``fedfrac.sweep``'s runner; returns ``(all_results,
  timings, total)``: ``all_results[mode]`` is {(scenario, method):
  {"num_clients", "runs": [per-seed record]}}, ``timings`` the per-mode
  wall/CPU/compile seconds and ``total`` those of the whole call.

  ``seeds`` is a count (seeds 0..seeds-1). Each (mode, scenario, method, seed)
  is one point; the points of one method form one batch (one process runs it,
  all modes, so mode-independent programs compile once). ``workers`` batches
  run at once, one worker process per CPU core or device (None: all of them;
  1: in this process). Finished points are kept in ``directory`` (with
  ``resume`` and no directory: under ``$TMPDIR/firma_tables_parts``; else a
  fresh temporary one) and skipped when the same code runs again."""
  modes, scenarios, methods = list(modes), list(scenarios), list(methods)
  seeds = tuple(range(seeds))
  cache_dir = tempfile.mkdtemp(prefix="firma_xla_cache_") if compile_cache else None
  if directory is None:
    directory = (parts_directory(batch_runs, modes, scenarios, seeds) if resume else
                 tempfile.mkdtemp(prefix="firma_points_"))
  store = points_lib.PointStore(directory, sweep_fingerprint(batch_runs, modes,
                                                             scenarios, seeds), overwrite)
  ids = {(mode, scen, m, s): points_lib.point_id(point_key(mode, scen, m, s))
         for mode in modes for scen in scenarios for m in methods for s in seeds}
  done_ids = store.done()
  done = [m for m in methods if all(pid in done_ids for k, pid in ids.items() if k[2] == m)]
  if done:
    log(f"resuming: {', '.join(done)} already done in {store.directory}")
  batches = [points_lib.Batch(
      "fedfrac.reproduce.firma:sweep_batch",
      {"method": m, "modes": modes, "scenarios": scenarios, "seeds": seeds,
       "batch_runs": batch_runs, "cache_dir": cache_dir},
      tuple(pid for k, pid in ids.items() if k[2] == m), cost=_TASK_COST.get(m, 1))
      for m in methods if m not in done]
  t0, c0 = time.perf_counter(), cpu_seconds()
  stats = points_lib.execute(batches, store, workers=workers, log=log)
  all_results = {mode: {} for mode in modes}
  timings = {mode: {"wall_s": 0.0, "cpu_s": 0.0, "compile_s": 0.0, "compile_cpu_s": 0.0,
                    "compiles": 0} for mode in modes}
  for method in methods:
    for mode in modes:
      for scen in scenarios:
        recs = [store.load(ids[(mode, scen, method, s)]) for s in seeds]
        all_results[mode][(scen, method)] = {"runs": [r["run"] for r in recs],
                                             "num_clients": recs[0]["num_clients"]}
      timing = recs[0]["timing"]      # one (method, mode) timing, on every point
      for k in timings[mode]:
        timings[mode][k] += timing[k]
  for mode in modes:
    t = timings[mode]
    log(f"[{mode}] {t['cpu_s']:.0f}s CPU ({t['compiles']} compiles, "
        f"{t['compile_cpu_s']:.0f}s CPU compiling)")
  children = resource.getrusage(resource.RUSAGE_CHILDREN)
  total = {"wall_s": time.perf_counter() - t0,
           "cpu_s": cpu_seconds() - c0 + children.ru_utime + children.ru_stime,
           "workers": stats["workers"] if batches else workers, "resumed": done}
  log(f"total: {total['wall_s']:.0f}s wall, {total['cpu_s']:.0f}s CPU")
  return all_results, timings, total


def main(argv=None):
  p = argparse.ArgumentParser(prog="fedfrac-reproduce firma",
                              description=__doc__.split("\n")[0])
  p.add_argument("--modes", default=",".join(MODES))
  p.add_argument("--scenarios", default=",".join(SCENARIOS))
  p.add_argument("--methods", default=",".join(METHODS))
  p.add_argument("--seeds", type=int, default=SEEDS)
  p.add_argument("--batch-runs", type=int, default=5,
                 help="runs vmapped together in one call of a compiled program")
  p.add_argument("--out", default="results/firma_digits.md")
  p.add_argument("--json", default=None, help="also write all per-seed numbers here")
  p.add_argument("--no-compile-cache", dest="compile_cache", action="store_false",
                 help="do not reuse identical compiled programs across modes")
  p.add_argument("--resume", action="store_true",
                 help="keep each finished point under $TMPDIR/firma_tables_parts and "
                      "reuse it when the same code is run again with the same "
                      "arguments (the table then reports the CPU time of the "
                      "original runs, and the wall time of this one)")
  jobs.add_point_flags(p, "firma", batches="methods", things="points", resume=False)
  p.add_argument("--from-json", dest="from_json", default=None,
                 help="re-render --out from this results JSON without running")
  p.add_argument("--no-figures", dest="figures", action="store_false",
                 help="with --from-json: write the markdown only, not the figures")
  argv = sys.argv[1:] if argv is None else list(argv)
  args = p.parse_args(argv)
  if args.from_json:
    render_from_json(args.from_json, args.out, common.command_line("firma", argv),
                     draw=args.figures)
    log_stderr(f"wrote {args.out}")
    return
  modes = [m for m in args.modes.split(",") if m]
  scenarios = [s for s in args.scenarios.split(",") if s]
  methods = [m for m in args.methods.split(",") if m]
  try:
    all_results, timings, total = run(modes, scenarios, methods, args.seeds,
                                      args.batch_runs, args.workers, args.compile_cache,
                                      args.resume, directory=args.dir,
                                      overwrite=args.overwrite)
  except points_lib.SweepMismatch as e:
    raise SystemExit(str(e)) from None
  command = common.command_line("firma", argv)
  os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
  environment = (f"jax {jax.__version__}, backend {jax.default_backend()}, "
                 f"{os.cpu_count()} CPU cores")
  common.write_text(args.out, markdown(all_results, timings, scenarios, methods,
                                       tuple(range(args.seeds)), command, total,
                                       environment=environment))
  for path in figures(all_results, args.out):
    log_stderr(f"wrote {path}")
  if args.json:
    with open(args.json, "w") as f:
      json.dump({mode: {f"{s}/{m}": v for (s, m), v in res.items()}
                 for mode, res in all_results.items()} | {"timings": timings,
                                                          "total": total}, f,
                default=float)
  log_stderr(f"wrote {args.out}")


if __name__ == "__main__":
  main()
