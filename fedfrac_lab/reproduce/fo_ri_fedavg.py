"""Reproduce the FO-RI-FedAvg BEV experiment suite (paper §IV) as one markdown report.

  fedfrac-reproduce fo_ri_fedavg                 # SYNTHETIC fleet
      -> results/bev_synthetic.md (+ .json with every per-seed number)
  fedfrac-reproduce fo_ri_fedavg --ved=/path/to/VED_DynamicData \
      --out=results/bev_ved.md                    # real VED CSVs

(``bev`` is accepted for ``fo_ri_fedavg``.) From a notebook:
``results = ff.run_many(config)`` on a configs/bev/ config, then
``print(ff.reproduce.fo_ri_fedavg.table(results, config.target_rmse))``.

Studies (``--studies``, comma-separated; default all): ``main`` (every method,
10 vehicles), ``types`` (per vehicle class, from the main runs), ``ablations``
(α, λ, R_probe, preconditioner safeguard, spectral gate), ``participation``
(C ∈ {0.1, 0.2, 0.3, 0.5}), ``churn`` (symmetric and asymmetric availability),
``architectures`` (window MLP, GRU, LSTM),
``scaling`` (10/50/100/200 vehicles; synthetic only), ``timing`` (per-round time
and the share spent on roughness probes and diagnostics), ``latency``
(inference: batch-1 median and p95, batch-32 throughput).

Every configuration runs all seeds (default 5) as ONE vmapped program
(``ff.run_many``); numbers are mean ± sample std over seeds of the final
(last-round) test metrics in Wh per window. The configs are in configs/bev/; each
study's config can also be run on its own with ``python -m fedfrac.main``.
``--rounds`` overrides every study's round count (for smoke runs); seeds are
never cut by the script.

The runs go through ``fedfrac.sweep``'s point runner
(:mod:`fedfrac_lab.reproduce.jobs`): the configurations of the chosen studies are
collected first (:meth:`Suite.plan`; one configuration shared by two studies
runs once), each (configuration, method, seed) is one point and each
(configuration, method) one batch, and the batches run as a work queue over
``--workers`` processes (default one per CPU core or device) before the
studies write their tables. Finished runs are kept under ``--resume_dir``
(default runs/bev_suite, git-ignored) in a folder named after the code and the
configurations, so re-running an interrupted command resumes it and changed
code starts afresh; ``--dir=D`` keeps them exactly in D instead (a D of other
code or configurations is refused unless ``--overwrite``). The timing and
latency studies measure this process and run in it.

Beside the report ``X.md`` (and ``X.json``) the command writes ``X_rounds.png``
(test RMSE per round, one panel per configuration of the main, participation,
churn, architecture and scaling studies), ``X_participation.png`` and
``X_scaling.png`` (final RMSE vs C and vs the number of vehicles) and
``X_ablation_<option>.png`` for the numeric ablations (α, λ, R_probe, β_κ); see
:func:`figures`.

This module is the command; its pieces are modules of their own, each name still
importable from here: :mod:`fedfrac_lab.reproduce.bev_suite` (the studies, each
with its configurations and its section of the report), its runs
(:mod:`fedfrac_lab.reproduce.bev_runs`) and timing / latency measurements
(:mod:`fedfrac_lab.reproduce.bev_speed`), :mod:`fedfrac_lab.reproduce.bev_tables` (the
table writer) and :mod:`fedfrac_lab.reproduce.bev_figures`.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

import jax

from fedfrac_lab.reproduce import common, jobs
from fedfrac_lab.reproduce.bev_figures import (  # noqa: F401  (re-exported)
    number, seed_curves, seed_finals, ABLATION_SYMBOLS, figures, ROUND_STUDIES, SWEEP_STUDIES)
from fedfrac_lab.reproduce.bev_suite import Suite  # noqa: F401
from fedfrac_lab.reproduce.bev_runs import load_config_module, STUDIES  # noqa: F401
from fedfrac_lab.reproduce.bev_tables import (  # noqa: F401  (re-exported)
    cell, final, group, md_table, METRIC_COLS, metric_rows, OURS, PAPER_NAMES, r2t_cell,
    rounds_to, stats, status_cell, table)
from fedfrac.runner import points as points_lib


def main(argv=None):
  p = argparse.ArgumentParser(prog="fedfrac-reproduce fo_ri_fedavg",
                              description=__doc__.split("\n")[0])
  p.add_argument("--out", type=common.output_path("--out"),
                 default=None, help="markdown report path (default "
                 "results/bev_synthetic.md, or results/bev_ved.md with --ved)")
  p.add_argument("--studies", default=",".join(STUDIES))
  p.add_argument("--seeds", default="0,1,2,3,4")
  p.add_argument("--rounds", type=int, default=0, help="override rounds (0 = configs)")
  p.add_argument("--ved", default="", help="VED dynamic-data CSV file/dir (real data)")
  p.add_argument("--ved_stride", type=int, default=10)
  p.add_argument("--timing_repeats", type=int, default=5)
  p.add_argument("--latency_calls", type=int, default=200)
  p.add_argument("--resume_dir", default=os.path.join("runs", "bev_suite"),
                 help="finished runs are kept under here, in a folder named after "
                 "the code and the studies' configurations, and reused when the "
                 "same command runs again (an interrupted suite resumes); '' keeps "
                 "them in a temporary folder, deleted at the end")
  jobs.add_point_flags(p, "bev", batches="(configuration, method) batches",
                       resume=False)
  argv = sys.argv[1:] if argv is None else list(argv)
  args = p.parse_args(argv)
  studies = [s.strip() for s in args.studies.split(",") if s.strip()]
  for s in studies:
    if s not in STUDIES:
      p.error(f"--studies: unknown study {s!r}; allowed: {', '.join(STUDIES)}")
  out = args.out or os.path.join("results",
                                 "bev_ved.md" if args.ved else "bev_synthetic.md")
  suite = Suite(args)
  load0 = os.getloadavg()
  start = time.perf_counter()
  try:
    outcome = suite.run_planned(studies)
  except points_lib.SweepMismatch as e:
    raise SystemExit(str(e)) from None
  sections = []
  for s in STUDIES:
    if s not in studies:
      continue
    t0 = time.perf_counter()
    suite.run_s = 0.0
    print(f"study {s}", file=sys.stderr, flush=True)
    title, body = getattr(suite, f"study_{s}")()
    sections.append((title, body, time.perf_counter() - t0, suite.run_s))
  total = time.perf_counter() - start
  command = common.command_line("fo_ri_fedavg", argv)
  data_name = "VED (real data)" if args.ved else "SYNTHETIC fleet"
  base = load_config_module("base").get_config()
  lines = [
      f"# BEV energy regression — {data_name} results",
      "",
      ("**These numbers come from the physics-based SYNTHETIC fleet "
       "(`data.source = \"synthetic_bev\"`), not from VED/eVED: they show how the "
       "methods compare on a fleet with the structure of the paper's setting, not the "
       "paper's numbers.**" if not args.ved else
       "**These numbers come from the VED dynamic-data CSVs given on the command line.**"),
      "",
      f"Command: `{command.strip()}`",
      "",
      f"Date: {datetime.datetime.now().isoformat(timespec='seconds')}; jax "
      f"{jax.__version__} on {jax.default_backend().upper()}; {platform.platform()}; "
      f"{os.cpu_count()} CPU cores shared with other jobs (load average "
      f"{load0[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end). Total "
      f"runtime {total / 60:.1f} min." + (
          f" The runs ({outcome.total} (configuration, method, seed) points, "
          f"{outcome.skipped} of them from an earlier run of the same code) took "
          f"{outcome.wall_s / 60:.1f} min on {max(outcome.workers, 1)} worker "
          f"process(es)." if outcome else ""),
      "",
      f"Setup (configs/bev/base.py): {base.data.num_clients} vehicles (class mix "
      f"passenger/truck/bus {tuple(base.data.bev.class_mix)}), "
      f"{base.data.bev.hours_per_vehicle:g} h of 1 Hz driving each, windows of "
      f"{base.data.bev.window} s with stride {base.data.bev.stride}, trip-level "
      f"70/10/20 split per vehicle, per-vehicle robust normalisation fitted on train "
      f"trips (inputs clipped to ±{base.data.bev.input_clip:g}); "
      f"{base.model.name} {tuple(base.model.hidden)}; {base.task.loss.upper()} loss; "
      f"SGD clients (lr {base.client.lr}, batch {base.client.batch_size}, "
      f"{base.client.local_epochs} local epoch); C = {base.participation}; "
      f"{args.rounds or base.rounds} rounds; seeds {args.seeds} (one fleet, "
      f"data.seed = {base.data.seed}: seeds change the initial model, client sampling "
      f"and batch order). Metrics: final-round test RMSE / MAE (Wh per window) and "
      f"MAPE (%, Eq. 34: |e|/(|y| + {base.task.mape_eps:g} Wh) over every window) "
      f"after the per-vehicle "
      f"inverse transform; micro = pooled over all test windows, macro = mean over "
      f"vehicles; mean ± sample std over seeds. Baselines run with their library "
      f"defaults, untuned for this task.",
      "",
  ]
  for title, body, dt, run_s in sections:
    runtime = (f"{run_s:.0f} s of runs (compile + rounds, shared runs counted in "
               f"each study that uses them), {dt:.0f} s here" if run_s else f"{dt:.0f} s")
    lines += [f"## {title}", "", f"_Runtime: {runtime}._", "", body, ""]
  os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
  with open(out, "w") as f:
    f.write("\n".join(lines))
  with open(os.path.splitext(out)[0] + ".json", "w") as f:
    json.dump({"command": command, "total_s": total, "studies": suite.raw}, f,
              indent=1, default=float)
  print(f"wrote {out} ({total / 60:.1f} min)", file=sys.stderr)
  for path in figures(suite.raw, out):
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
  main()
