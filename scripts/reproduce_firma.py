"""Reproduce FIRMA Tables 11–12 (MNIST-1797 = scikit-learn digits, N = 5, R = 10).

Runs FedAvg, RDFL, FedRep, FibFL, FibFL+ and FibFL++ on the seven scenarios
(IID, Dirichlet α = 0.8 / 0.5 / 0.1, label skew K = 1 / 2 / 3) over 5 seeds, in
both compatibility modes (``paper`` and ``reference_code``, see
``configs/firma/digits.py``), and writes a markdown table of mean ± std (over
seeds) of the final mean per-client accuracy and of its Gini coefficient next to
the paper's published values.

  PYTHONPATH=. python scripts/reproduce_firma.py --out results/firma_digits.md

How it runs fast: for each (mode, method, number of clients) ONE program is
compiled — all seeds of a scenario run in it at once (vmapped), and every
scenario with the same number of clients reuses it (index tables are padded to
common widths; local-step loops run each client's own step count,
``engine.dynamic_steps``). Each round is followed by the per-client evaluation
inside the same compiled scan, so R50% and the plateau σ come from every round.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
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
from fedfrac import engine as engine_lib
from fedfrac import experiment
from fedfrac import metrics as metrics_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LABELS = {"fedavg": "FedAvg", "rdfl": "RDFL", "fedrep": "FedRep", "fibfl": "FibFL",
          "fibfl_plus": "FibFL+", "fibfl_pp": "FibFL++"}
SCENARIO_LABELS = {"iid": "IID", "dir0.8": "Dir α=0.8", "dir0.5": "Dir α=0.5",
                   "dir0.1": "Dir α=0.1", "ls1": "Label-skew K=1",
                   "ls2": "Label-skew K=2", "ls3": "Label-skew K=3"}

# Published values (FIRMA, Table 11: mean accuracy on MNIST-1797, 5 seeds) that
# could be obtained here; every other cell of Tables 11–12 is marked "n/f"
# (not found) rather than guessed.
PAPER_ACCURACY = {("fibfl_pp", "dir0.8"): 0.9209, ("fibfl_pp", "dir0.5"): 0.8663,
                  ("fibfl_pp", "dir0.1"): 0.3323}
PAPER_GINI = {}


def load_digits_config():
  path = os.path.join(ROOT, "configs", "firma", "digits.py")
  spec = importlib.util.spec_from_file_location("firma_digits_config", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


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
      s, m = sim._round(sim.algorithm, arrays, s)
      return s, (m, sim._evaluate(arrays, s))
    return jax.lax.scan(body, state, None, length=rounds)
  return jax.jit(jax.vmap(one_run, in_axes=(ARRAY_AXES, engine_lib.STATE_AXES),
                          out_axes=(engine_lib.STATE_AXES, 0)))


def stack_arrays(feds, training):
  per_run = [engine_lib.data_arrays(f, training) for f in feds]
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
  comm = experiment.round_communication(sim.algorithm.comm)
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
    sim = experiment.build_simulation(cfg0, method, runs[0][4])
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
  """One method in every mode (in one process, so a program that does not
  depend on the mode is compiled once and found in the compilation cache for
  the second mode). With ``parts_dir`` the result is also saved there, and a
  saved result of the same code and arguments is returned instead of
  recomputing (an interrupted command resumes where it stopped)."""
  method, modes, scenarios, seeds, batch_runs, cache_dir, parts_dir = task
  part = os.path.join(parts_dir, f"{method}.json") if parts_dir else None
  if part and os.path.exists(part):
    with open(part) as f:
      saved = json.load(f)
    return method, {mode: ({tuple(k.split("|")): v for k, v in res.items()}, timing)
                    for mode, (res, timing) in saved.items()}
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
  if part:
    tmp = f"{part}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
      json.dump({mode: ({"|".join(k): v for k, v in res.items()}, timing)
                 for mode, (res, timing) in out.items()}, f, default=float)
    os.replace(tmp, part)
  return method, out


def parts_directory(args, modes, scenarios, seeds):
  """Where finished methods are kept: keyed by the arguments and by a hash of
  the code that produces the numbers (fedfrac/, configs/firma/, this script)."""
  import hashlib
  h = hashlib.sha256(repr((modes, scenarios, seeds, args.batch_runs)).encode())
  for folder in ("fedfrac", os.path.join("configs", "firma")):
    for dirpath, _, files in sorted(os.walk(os.path.join(ROOT, folder))):
      for name in sorted(files):
        if name.endswith(".py"):
          with open(os.path.join(dirpath, name), "rb") as f:
            h.update(f.read())
  with open(os.path.abspath(__file__), "rb") as f:
    h.update(f.read())
  return os.path.join(tempfile.gettempdir(), "firma_tables_parts", h.hexdigest()[:16])


def enable_compile_cache(cache_dir):
  jax.config.update("jax_compilation_cache_dir", cache_dir)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


# Relative cost, to start the longest tasks first.
_TASK_COST = {"fibfl_pp": 6, "fibfl_plus": 5, "fibfl": 5, "rdfl": 2, "fedavg": 2,
              "fedrep": 1}


# ---------------------------------------------------------------------- tables


def mean_std(values):
  s = metrics_lib.seed_stats(values)
  return s["mean"], s["std"]


def fmt(values, digits=4):
  m, s = mean_std(values)
  return "n/a" if m is None else f"{m:.{digits}f} ± {s:.{digits}f}"


def accuracy_table(results, scenarios, methods, paper, key):
  head = "| scenario | " + " | ".join(LABELS[m] for m in methods) + " |"
  lines = [head, "|---" * (len(methods) + 1) + "|"]
  for scen in scenarios:
    cells = []
    for m in methods:
      runs = results[(scen, m)]["runs"]
      ours = fmt([r[key] for r in runs])
      pub = paper.get((m, scen))
      cells.append(f"{ours}<br>paper: {pub:.4f}" if pub is not None else
                   f"{ours}<br>paper: n/f")
    n = results[(scen, methods[0])]["num_clients"]
    label = SCENARIO_LABELS[scen] + (f" (N={n})" if n != 5 else "")
    lines.append(f"| {label} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def detail_table(results, scenarios, methods):
  lines = ["| scenario | method | R50% | plateau σ | bytes/round | spectral gap "
           "(mean over rounds) | ring cost before → after (saving) |",
           "|---|---|---|---|---|---|---|"]
  for scen in scenarios:
    for m in methods:
      runs = results[(scen, m)]["runs"]
      r50 = [r["r50"] for r in runs]
      reached = [x for x in r50 if x is not None]
      r50_s = ("never" if not reached else f"{np.mean(reached):.1f}" +
               ("" if len(reached) == len(r50) else f" ({len(reached)}/{len(r50)})"))
      plateau = fmt([r["plateau_std"] for r in runs])
      b = runs[0]["bytes_per_round"]
      bytes_s = (f"{b[-1]:,}" if len(set(b)) == 1 else
                 f"{b[0]:,} (warm-up), {b[-1]:,}")
      gap = "—"
      if "spectral_gap" in runs[0]:
        gap = fmt([float(np.mean(r["spectral_gap"])) for r in runs], 3)
      ring_s = "—"
      if "ring_cost_before" in runs[0]:
        ring_s = (f"{np.mean([r['ring_cost_before'] for r in runs]):.3f} → "
                  f"{np.mean([r['ring_cost_after'] for r in runs]):.3f} "
                  f"({np.mean([r['ring_saving_pct'] for r in runs]):.1f}%)")
      lines.append(f"| {SCENARIO_LABELS[scen]} | {LABELS[m]} | {r50_s} | {plateau} | "
                   f"{bytes_s} | {gap} | {ring_s} |")
  return "\n".join(lines)


def differences(all_results, scenarios, methods):
  out = []
  for mode, results in all_results.items():
    for (m, scen), pub in PAPER_ACCURACY.items():
      if (scen, m) not in results:
        continue
      ours, _ = mean_std([r["accuracy"] for r in results[(scen, m)]["runs"]])
      diff = 100 * (ours - pub)
      verdict = "within 2 pp" if abs(diff) <= 2 else "differs by more than 2 pp"
      out.append(f"- `{mode}` {LABELS[m]} {SCENARIO_LABELS[scen]}: {ours:.4f} vs "
                 f"paper {pub:.4f} ({diff:+.1f} pp, {verdict}).")
  return "\n".join(out)


def write_markdown(path, all_results, timings, scenarios, methods, seeds, command,
                   total):
  lines = ["# FIRMA Tables 11–12 on MNIST-1797 (scikit-learn digits), N = 5, R = 10",
           "",
           f"Produced by `{command}` "
           f"(jax {jax.__version__}, backend {jax.default_backend()}, "
           f"{os.cpu_count()} CPU cores).",
           "",
           f"Mean ± sample std over seeds {list(seeds)} of the final-round mean "
           "per-client test accuracy (each client evaluates its own model on its own "
           "test split; FedAvg evaluates the global model) and of the Gini "
           "coefficient of the per-client accuracies. `paper:` is the published "
           "value; `n/f` means the published value was not available when this "
           "table was made (only the three FibFL++ Dirichlet cells of Table 11 "
           "were), so no comparison is claimed for that cell.",
           "",
           f"Runtime of the whole command (both modes, {total['workers']} worker "
           f"processes): {total['wall_s']:.0f} s wall, {total['cpu_s']:.0f} s CPU "
           f"(user + system of all processes; the machine was shared with other "
           f"jobs, so CPU time is the steadier figure). Per mode below." +
           (f" Resumed run: {', '.join(total['resumed'])} came from an earlier, "
            f"interrupted run of the same code (their CPU time below is from that "
            f"run; the wall and total CPU time above do not include them)."
            if total.get("resumed") else ""),
           ""]
  for mode, results in all_results.items():
    t = timings[mode]
    lines += [f"## `compat=\"{mode}\"`", "",
              f"CPU time for this mode: {t['cpu_s']:.0f} s, of which "
              f"{t['compile_cpu_s']:.0f} s compiling {t['compiles']} programs "
              f"(programs identical to the other mode's come from the compilation "
              f"cache); {len(methods)} methods × {len(scenarios)} scenarios × "
              f"{len(seeds)} seeds = {len(methods) * len(scenarios) * len(seeds)} runs.",
              "", "### Accuracy (Table 11)", "",
              accuracy_table(results, scenarios, methods, PAPER_ACCURACY, "accuracy"),
              "", "### Gini of per-client accuracy (Table 12)", "",
              accuracy_table(results, scenarios, methods, PAPER_GINI, "gini"),
              "", "### Convergence, traffic and ring diagnostics", "",
              "R50%: first round whose mean accuracy is ≥ 0.5 (mean over the seeds "
              "that reach it); plateau σ: std of the mean accuracy over the last "
              "half of the rounds; bytes/round: float32 traffic from the message "
              "shapes (Table 2: 2Np, 2Np_e, 2K_gNp_e).", "",
              detail_table(results, scenarios, methods), ""]
  lines += ["## Where the numbers differ from the paper", "",
            differences(all_results, scenarios, methods), ""]
  with open(path, "w") as f:
    f.write("\n".join(lines))


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--modes", default="paper,reference_code")
  p.add_argument("--scenarios", default="iid,dir0.8,dir0.5,dir0.1,ls1,ls2,ls3")
  p.add_argument("--methods", default="fedavg,rdfl,fedrep,fibfl,fibfl_plus,fibfl_pp")
  p.add_argument("--seeds", type=int, default=5)
  p.add_argument("--batch-runs", type=int, default=5,
                 help="runs vmapped together in one call of a compiled program")
  p.add_argument("--out", default="results/firma_digits.md")
  p.add_argument("--json", default=None, help="also write all per-seed numbers here")
  p.add_argument("--no-compile-cache", dest="compile_cache", action="store_false",
                 help="do not reuse identical compiled programs across modes")
  p.add_argument("--resume", action="store_true",
                 help="keep each finished method under $TMPDIR/firma_tables_parts and "
                      "reuse it when the same code is run again with the same "
                      "arguments (the table then reports the CPU time of the "
                      "original runs, and the wall time of this one)")
  p.add_argument("--workers", type=int, default=2,
                 help="processes running methods in parallel (one per CPU core)")
  args = p.parse_args(argv)
  modes = [m for m in args.modes.split(",") if m]
  scenarios = [s for s in args.scenarios.split(",") if s]
  methods = [m for m in args.methods.split(",") if m]
  seeds = tuple(range(args.seeds))
  log = log_stderr
  cache_dir = tempfile.mkdtemp(prefix="firma_xla_cache_") if args.compile_cache else None
  parts_dir = parts_directory(args, modes, scenarios, seeds) if args.resume else None
  done = []
  if parts_dir:
    os.makedirs(parts_dir, exist_ok=True)
    done = sorted(f[:-5] for f in os.listdir(parts_dir) if f.endswith(".json"))
    if done:
      log(f"resuming: {', '.join(done)} already done in {parts_dir}")
  t0, c0 = time.perf_counter(), cpu_seconds()
  tasks = [(m, modes, scenarios, seeds, args.batch_runs, cache_dir, parts_dir)
           for m in sorted(methods, key=lambda m: -_TASK_COST.get(m, 1))]
  if args.workers > 1:
    import multiprocessing as mp
    with mp.get_context("spawn").Pool(args.workers, maxtasksperchild=1) as pool:
      outputs = dict(pool.imap_unordered(method_task, tasks))
  else:
    outputs = dict(method_task(t) for t in tasks)
  all_results = {mode: {} for mode in modes}
  timings = {mode: {"wall_s": 0.0, "cpu_s": 0.0, "compile_s": 0.0, "compile_cpu_s": 0.0,
                    "compiles": 0} for mode in modes}
  for method in methods:
    for mode in modes:
      res, timing = outputs[method][mode]
      all_results[mode].update(res)
      for k in timings[mode]:
        timings[mode][k] += timing[k]
  for mode in modes:
    t = timings[mode]
    log(f"[{mode}] {t['cpu_s']:.0f}s CPU ({t['compiles']} compiles, "
        f"{t['compile_cpu_s']:.0f}s CPU compiling)")
  children = resource.getrusage(resource.RUSAGE_CHILDREN)
  total = {"wall_s": time.perf_counter() - t0,
           "cpu_s": cpu_seconds() - c0 + children.ru_utime + children.ru_stime,
           "workers": args.workers, "resumed": [m for m in done if m in methods]}
  log(f"total: {total['wall_s']:.0f}s wall, {total['cpu_s']:.0f}s CPU")
  command = "PYTHONPATH=. python scripts/reproduce_firma.py " + " ".join(
      a for a in (argv if argv is not None else sys.argv[1:]))
  os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
  write_markdown(args.out, all_results, timings, scenarios, methods, seeds,
                 command.strip(), total)
  if args.json:
    with open(args.json, "w") as f:
      json.dump({mode: {f"{s}/{m}": v for (s, m), v in res.items()}
                 for mode, res in all_results.items()} | {"timings": timings,
                                                          "total": total}, f,
                default=float)
  log(f"wrote {args.out}")


if __name__ == "__main__":
  main()
