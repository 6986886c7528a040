"""FIRMA Tables 7–8 (Fashion-MNIST) and 9–10 (MNIST-60k) on local files: N = 10,
R = 30, Table 4 hyper-parameters, through the batched runner of Tables 11–12
(:mod:`fedfrac_lab.reproduce.firma`: padded shapes, a cell's seeds in one
program), one scenario at a time so that a run stopped early keeps every
finished scenario in ``--json`` (and a rerun with the same flags skips them).

  fedfrac-reproduce firma_files --dir=/usr/share/datasets/fashion-mnist \
      --modes=paper,reference_code --seeds=5 --json=F.json
  fedfrac-reproduce firma_files --table=F.json,G.json --out=results/firma_fashion_mnist.md

``--inputs=authors`` (default) gives the ``reference_code`` mode the authors'
input normalisation ((x − 0.5) / 0.5, ``configs/firma/digits.py``
``AUTHORS_NORMALISATION``); ``--inputs=unit`` keeps [0, 1] in every mode. The
table has one section per (mode, inputs): every published cell beside ours
(mean ± std over seeds), Δ and a verdict (:mod:`fedfrac_lab.reproduce.verdicts`;
FedAvg and FedRep of ``reference_code`` are reconstructions, counted apart).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time

from fedfrac_lab.reproduce import common, firma, firma_variants
from fedfrac_lab.reproduce import firma_program, firma_tables
# How the runs execute here (re-exported: --parallelism and --workers).
from fedfrac_lab.reproduce.firma_forms import cpu_backend, parallelism, workers  # noqa: F401
from fedfrac_lab.reproduce.firma_files_table import (  # noqa: F401  (re-exported)
    CHANCE, CHANCE_MARGIN, COLUMNS, DATASETS, INPUTS, PUBLISHED, ROWS, json_groups, at_chance,
    cell_comparison, cell_verdicts, client_counts, clients_text, json_cells, markdown,
    published_table, section_rows, tables, verdict, write_table)
from fedfrac_lab.reproduce.firma_files_table import best_cells
from fedfrac_lab.reproduce.item_files import unique_tmp


def files_spec(args) -> dict:
  """The data of a ``firma_files`` run as :func:`fedfrac_lab.reproduce.firma_program.config_module`
  takes it (a plain dict: it travels to worker processes and into point keys)."""
  spec = {"dataset": args.dataset, "dir": os.path.abspath(args.dir), "rounds": args.rounds,
          "inputs": args.inputs, "parallelism": parallelism(args.parallelism)}
  if getattr(args, "step_buckets", None) is not None:
    spec["step_buckets"] = int(args.step_buckets)
  if getattr(args, "init", None):
    spec["init"] = args.init
  if getattr(args, "partition", None):
    spec["partition"] = args.partition
  return spec


def files_config_module(args):
  """A stand-in for ``configs/firma/digits.py`` whose ``firma_config(mode,
  scenario)`` gives the digits protocol with N = 10, ``args.rounds`` rounds, the
  ``files`` source at ``args.dir``, ``args.inputs`` and ``args.parallelism``."""
  return firma_program.config_module(files_spec(args))


def dataset_widths(args, scenarios=None) -> dict:
  """The padded widths (:func:`fedfrac_lab.reproduce.firma_program.table_widths`)
  of every scenario (default: all seven) of ``args``' dataset, modes and seeds:
  given to :func:`run_scenarios`, each scenario's runs get the same array shapes,
  so one compiled program per method (and number of clients) serves them all
  through a shared compilation cache. Builds the partitions only (host NumPy)."""
  import warnings
  module = files_config_module(args)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")    # expected label-skew drops (K = 3)
    return firma_program.table_widths({mode: firma_program.build_feds(module, mode,
                                                      scenarios or firma_tables.SCENARIOS,
                                                      tuple(range(args.seeds)))
                               for mode in args.modes.split(",")})


def run_scenarios(args, log=print, cache_dir=None, widths=None):
  """Run ``args.scenarios`` one at a time, saving ``args.json`` after each; a
  scenario already in an existing ``args.json`` written with the same flags is
  kept, not run again. ``cache_dir`` and ``widths`` (:func:`dataset_widths`) go
  to :func:`fedfrac_lab.reproduce.firma.run`: with both, a scenario after the first
  finds its compiled program in the cache (the numbers do not change)."""
  import jax
  flags = {k: v for k, v in vars(args).items()
           if k not in ("json", "table", "out", "published", "workers")}
  flags["parallelism"] = parallelism(args.parallelism)
  for key in ("step_buckets", "init", "partition"):   # defaults: older files match
    if flags.get(key) is None:
      flags.pop(key, None)
  dev = jax.devices()[0]
  device = f"CPU, {os.cpu_count()} cores" if dev.platform == "cpu" else dev.device_kind
  out = {"args": {**flags, "device": device}, "scenarios": {}}
  if os.path.exists(args.json):
    with open(args.json) as f:
      old = json.load(f)
    same = {k: v for k, v in old.get("args", {}).items() if k != "scenarios"}
    if same == {k: v for k, v in out["args"].items() if k != "scenarios"}:
      out["scenarios"] = old["scenarios"]
  spec = files_spec(args)
  for scenario in [s for s in args.scenarios.split(",") if s]:
    if scenario in out["scenarios"]:
      log(f"{scenario}: already in {args.json}")
      continue
    t0 = time.perf_counter()
    results, timings, _ = firma.run(args.modes.split(","), [scenario],
                                    args.methods.split(","), args.seeds,
                                    batch_runs=args.seeds, workers=workers(args.workers),
                                    files=spec, cache_dir=cache_dir, widths=widths)
    out["scenarios"][scenario] = {
        "wall_s": time.perf_counter() - t0, "timings": timings,
        "workers": workers(args.workers),
        "results": {mode: {f"{s}/{m}": v for (s, m), v in res.items()}
                    for mode, res in results.items()}}
    tmp = unique_tmp(args.json)
    with open(tmp, "w") as f:
      json.dump(out, f, default=float)
    os.replace(tmp, args.json)
    log(f"{scenario}: {time.perf_counter() - t0:.0f} s")
  return out


def write_predictions(args):
  """``--predict``: the variant's prediction for each cell of ``--scenarios`` x
  ``--methods`` (:func:`firma_variants.predictions`), from the best-evidenced
  authors'-draw cell of the ``--table`` files, written to ``--json`` with the
  command that remade it."""
  groups, _ = json_groups(args.table.split(","))
  plain, _ = best_cells(groups.get(("reference_code", args.inputs), {}))
  means = {k: sum(r["accuracy"] for r in c["runs"]) / len(c["runs"])
           for k, c in plain.items()}
  accuracy_table = DATASETS[args.dataset][1][0]
  cells = [(s, m) for s in args.scenarios.split(",") for m in args.methods.split(",")]
  out = {"variant": args.predict, "title": firma_variants.TITLES[args.predict],
         "dataset": args.dataset, "published_table": accuracy_table,
         "command": shlex.join(["fedfrac-reproduce", "firma_files", *args.argv]),
         "rule": firma_variants.PREDICTION_RULE,
         "cells": firma_variants.predictions(
             firma_tables.published(accuracy_table), means, cells)}
  tmp = unique_tmp(args.json)
  with open(tmp, "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
  os.replace(tmp, args.json)


def main(argv=None):
  p = argparse.ArgumentParser(prog="fedfrac-reproduce firma_files",
                              description=__doc__.split("\n")[0])
  p.add_argument("--dataset", default="fashion_mnist", choices=tuple(DATASETS),
                 help="which of the paper's tables: fashion_mnist (7–8), mnist (9–10)")
  p.add_argument("--dir", help="data.dir of the files source")
  p.add_argument("--table", default="", help="comma-separated --json files: write "
                 "the markdown table of them to --out instead of running")
  p.add_argument("--out", type=common.output_path("--out"),
                 default="results/firma_fashion_mnist.md")
  p.add_argument("--published", default=PUBLISHED)
  p.add_argument("--modes", default="reference_code")
  p.add_argument("--scenarios", default=",".join(firma_tables.SCENARIOS))
  p.add_argument("--methods", default=",".join(firma_tables.METHODS))
  p.add_argument("--seeds", type=int, default=2)
  p.add_argument("--rounds", type=int, default=30)
  p.add_argument("--parallelism", default="auto", choices=("auto", "vmap", "map"),
                 help="engine.client_parallelism; auto: map on a CPU, vmap on an "
                 "accelerator")
  p.add_argument("--workers", type=int, default=0,
                 help="processes running the methods of a scenario side by side; 0: "
                 "one per core, each pinned to it, on a CPU, 1 on an accelerator")
  p.add_argument("--step-buckets", type=int, default=None,
                 help="engine.step_buckets with clients vmapped (default: the engine's "
                 "choice by client sizes; 1 gives every scenario the same program)")
  p.add_argument("--inputs", default="authors", choices=tuple(INPUTS),
                 help="authors: the reference_code mode normalises inputs as the "
                 "authors' code, (x - 0.5) / 0.5; unit: every mode keeps [0, 1]")
  p.add_argument("--init", default=None, choices=firma_variants.INITS,
                 help="a labelled variant of reference_code: shared = one shared "
                 "initial model for the ring methods (its own table section)")
  p.add_argument("--partition", default=None, choices=firma_variants.PARTITIONS,
                 help="a labelled variant of reference_code: per_seed = each seed draws "
                 "its own partition (data.seed = -1) where the authors' code pins one, "
                 "so n covers the partition draw (its own table section)")
  p.add_argument("--note", default="", help="a line about this run, kept in --json "
                 "and printed with its runs in the table")
  p.add_argument("--json", type=common.output_path("--json"), default="")
  p.add_argument("--predict", default=None, choices=firma_variants.INITS,
                 help="write what the variant predicts for --scenarios x --methods "
                 "to --json, from the authors'-draw cells of the --table files "
                 "(commit it before the variant's runs), instead of running")
  args = p.parse_args(argv)
  args.argv = list(sys.argv[1:] if argv is None else argv)
  if args.predict:
    if not args.table or not args.json:
      p.error("--predict needs --table (the result files with the authors'-draw "
              "cells) and --json (where the predictions go)")
    write_predictions(args)
    return
  if args.table:
    write_table(args.table.split(","), args.out, args.published, args.dataset)
    return
  if not args.dir or not args.json:
    p.error("--dir and --json are needed to run")
  if args.workers < 0:
    p.error(f"--workers={args.workers}: allowed values are 0 (one per core on a CPU, "
            "1 on an accelerator) or a positive count")
  if args.step_buckets is not None and args.step_buckets < 1:
    p.error(f"--step-buckets={args.step_buckets}: allowed values are integers >= 1 "
            "(or leave it out for the engine's choice)")
  for key, allowed in (("modes", firma_tables.MODES), ("scenarios", firma_tables.SCENARIOS),
                       ("methods", firma_tables.METHODS)):
    bad = [v for v in getattr(args, key).split(",") if v and v not in allowed]
    if bad:
      p.error(f"--{key}={getattr(args, key)}: {bad[0]!r} unknown; allowed: "
              f"{', '.join(allowed)}")
  run_scenarios(args)
