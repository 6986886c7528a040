"""Reproduce FIRMA Tables 11–12 (MNIST-1797 = scikit-learn digits, N = 5, R = 10).

Runs FedAvg, RDFL, FedRep, FibFL, FibFL+ and FibFL++ on the seven scenarios
(IID, Dirichlet α = 0.8 / 0.5 / 0.1, label skew K = 1 / 2 / 3) over 5 seeds, in
both compatibility modes (``paper`` and ``reference_code``, see
``configs/firma/digits.py``), and writes a markdown table of mean ± std (over
seeds) of the final mean per-client accuracy and of its Gini coefficient next to
the paper's published values.

  fedfrac-reproduce firma --out results/firma_digits.md
  python -m fedfrac_lab.reproduce firma --out results/firma_digits.md     # the same

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

This module is the command (:func:`run`, :func:`main`); its pieces are the
compiled programs and per-seed records (:mod:`fedfrac_lab.reproduce.firma_program`),
the sweep points (:mod:`fedfrac_lab.reproduce.firma_points`) and the table writer
(Tables 2, 4, 11–13, the diagnostics and the figures,
:mod:`fedfrac_lab.reproduce.firma_tables`); their names are re-exported here.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time

import jax

from fedfrac_lab.reproduce import common, jobs
from fedfrac.runner import points as points_lib

from fedfrac_lab.reproduce.firma_report import (  # noqa: F401  (re-exported)
    figures, markdown, render_from_json)
from fedfrac_lab.reproduce.firma_tables import (  # noqa: F401  (re-exported)
    LABELS, METHODS, MODES, PAPER_ACCURACY, PAPER_COLUMNS, PAPER_GINI, SCENARIO_LABELS,
    SCENARIOS, load_json, published, table)
from fedfrac_lab.reproduce.firma_program import (  # noqa: F401  (re-exported)
    pad_rows, ARRAY_AXES, build_feds, common_shapes, config_module, cpu_seconds,
    load_digits_config,
    make_program, SEEDS, stack_arrays, stack_states, summarize_runs, table_widths)
from fedfrac_lab.reproduce.firma_groups import run_group, run_method  # noqa: F401
from fedfrac_lab.reproduce.firma_points import (  # noqa: F401  (re-exported)
    TASK_COST, code_digest, enable_compile_cache, log_stderr, method_task, parts_directory,
    point_key, sweep_batch, sweep_fingerprint)


def run(modes=MODES, scenarios=SCENARIOS, methods=METHODS, seeds=SEEDS, batch_runs=5,
        workers=2, compile_cache=True, resume=False, log=log_stderr, directory=None,
        overwrite=False, files=None, cache_dir=None, widths=None):
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
  fresh temporary one) and skipped when the same code runs again. ``files``:
  the runs on local files instead of digits (a dict,
  :func:`~fedfrac_lab.reproduce.firma_program.config_module`), part of every point's
  key. ``cache_dir``: the compilation cache's directory (default: a fresh one when
  ``compile_cache``); ``widths``: a floor for the padded array shapes
  (:func:`~fedfrac_lab.reproduce.firma_program.table_widths`), so calls on different
  scenarios share compiled programs through ``cache_dir`` (same numbers)."""
  modes, scenarios, methods = list(modes), list(scenarios), list(methods)
  seeds = tuple(range(seeds))
  if cache_dir is None and compile_cache:
    cache_dir = tempfile.mkdtemp(prefix="firma_xla_cache_")
  if directory is None:
    directory = (parts_directory(batch_runs, modes, scenarios, seeds, files) if resume
                 else tempfile.mkdtemp(prefix="firma_points_"))
  store = points_lib.PointStore(directory, sweep_fingerprint(batch_runs, modes, scenarios,
                                                             seeds, files), overwrite)
  ids = {(mode, scen, m, s): points_lib.point_id(point_key(mode, scen, m, s, files))
         for mode in modes for scen in scenarios for m in methods for s in seeds}
  done_ids = store.done()
  done = [m for m in methods if all(pid in done_ids for k, pid in ids.items() if k[2] == m)]
  if done:
    log(f"resuming: {', '.join(done)} already done in {store.directory}")
  batches = [points_lib.Batch(
      "fedfrac_lab.reproduce.firma_points:sweep_batch",
      {"method": m, "modes": modes, "scenarios": scenarios, "seeds": seeds,
       "batch_runs": batch_runs, "cache_dir": cache_dir, "files": files,
       "widths": widths},
      tuple(pid for k, pid in ids.items() if k[2] == m), cost=TASK_COST.get(m, 1))
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
  p.add_argument("--out", type=common.output_path("--out"), default="results/firma_digits.md")
  p.add_argument("--json", type=common.output_path("--json"),
                 default=None, help="also write all per-seed numbers here")
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
