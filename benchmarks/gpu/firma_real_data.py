"""FIRMA Tables 7-8 (Fashion-MNIST) and 9-10 (MNIST-60k) on local files: N = 10,
R = 30, Table 4 hyper-parameters, through the runner of Tables 11-12
(``fedfrac.reproduce.firma``: padded shapes, vmapped seeds), one scenario at a time
so that a run stopped early keeps every finished scenario in ``--json``.

  python benchmarks/gpu/firma_real_data.py --dir=/usr/share/datasets/fashion-mnist \
      --modes=reference_code --seeds=2 --json=firma_fashion_mnist.json
  python benchmarks/gpu/firma_real_data.py --table a.json,b.json \
      --out=results/firma_fashion_mnist.md        # Tables 7-8 beside the paper's cells
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import types

from fedfrac import config as config_lib
from fedfrac.reproduce import firma

PUBLISHED = os.path.join(os.path.dirname(firma.__file__), "published", "firma.json")
COLUMNS = {"iid": "IID", "dir0.8": "Dir 0.8", "dir0.5": "Dir 0.5", "dir0.1": "Dir 0.1",
           "ls1": "LS K=1", "ls2": "LS K=2", "ls3": "LS K=3"}
ROWS = {"fedavg": "FedAvg", "rdfl": "RDFL", "fedrep": "FedRep", "fibfl": "FibFL",
        "fibfl_plus": "FibFL+", "fibfl_pp": "FibFL++"}


def published_table(path, name):
  """{row: {column: value}} of table ``name`` in a published-values file."""
  with open(path) as f:
    data = json.load(f)
  tables = data.get("tables", data)
  entry = tables[name]
  return entry.get("rows", entry)


def _fmt(value):
  return "n/f" if value is None else f"{value:.4f}"


def verdict(paper, mean, std):
  """agrees when |Δ| <= max(0.02, 2·std) (accuracy fractions; Gini alike)."""
  if paper is None or mean is None:
    return "n/a"
  return "agrees" if abs(mean - paper) <= max(0.02, 2 * std) else "differs"


def write_table(json_paths, out, published=PUBLISHED):
  """Tables 7 (accuracy) and 8 (Gini) on the runs in ``json_paths``, every cell of
  the paper beside ours (mean ± std over seeds), Δ and a verdict."""
  scen, args = {}, {}
  for path in json_paths:
    with open(path) as f:
      d = json.load(f)
    scen.update(d["scenarios"])
    args = d["args"]
  lines = [f"# FIRMA Tables 7–8 on the real Fashion-MNIST (60,000 / 10,000), N = 10, "
           f"R = {args['rounds']}, compat = {args['modes']}", "",
           f"Seeds per cell: {args['seeds']} (0..{args['seeds'] - 1}); Table 4 "
           "hyper-parameters of `configs/firma/digits.py` with N = 10 and R = 30, data "
           "through the `files` source (Debian's `dataset-fashion-mnist`). Produced "
           "on an NVIDIA H100 80GB by "
           "`python benchmarks/gpu/firma_real_data.py --dir=DIR --modes="
           f"{args['modes']} --scenarios=... --seeds={args['seeds']} --json=...` "
           "(one scenario at a time), then `--table`. Verdict: agrees when "
           "|Δ| <= max(0.02, 2 × our std). Scenarios without a column of ours were "
           "not run (the accelerator time ran out).", ""]
  for table, key, label in (("Table 7", "accuracy", "mean per-client test accuracy"),
                            ("Table 8", "gini", "Gini of per-client accuracy")):
    paper = published_table(published, table)
    lines += [f"## {table}: {label}", "",
              "| method | scenario | paper | ours (mean ± std) | Δ | verdict |",
              "|---|---|---|---|---|---|"]
    counts = {}
    for method, row in ROWS.items():
      for s, col in COLUMNS.items():
        p_val = paper.get(row, {}).get(col)
        cell = None
        for mode in args["modes"].split(","):
          cell = scen.get(s, {}).get("results", {}).get(mode, {}).get(f"{s}/{method}")
        if cell is None:
          lines.append(f"| {row} | {col} | {_fmt(p_val)} | not run | | |")
          continue
        vals = [r[key] for r in cell["runs"]]
        m = statistics.fmean(vals)
        sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
        v = verdict(p_val, m, sd)
        counts[v] = counts.get(v, 0) + 1
        d = "" if p_val is None else f"{m - p_val:+.4f}"
        lines.append(f"| {row} | {col} | {_fmt(p_val)} | {m:.4f} ± {sd:.4f} | {d} | {v} |")
    lines += ["", "Verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
              ""]
  os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
  with open(out, "w") as f:
    f.write("\n".join(lines))


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--dir", help="data.dir of the files source")
  p.add_argument("--table", default="", help="comma-separated --json files: write "
                 "the markdown table of them to --out instead of running")
  p.add_argument("--out", default="results/firma_fashion_mnist.md")
  p.add_argument("--published", default=PUBLISHED)
  p.add_argument("--name", default="FIRMA Fashion-MNIST")
  p.add_argument("--modes", default="reference_code")
  p.add_argument("--scenarios", default=",".join(firma.SCENARIOS))
  p.add_argument("--methods", default=",".join(firma.METHODS))
  p.add_argument("--seeds", type=int, default=2)
  p.add_argument("--rounds", type=int, default=30)
  p.add_argument("--parallelism", default="vmap", help="engine.client_parallelism")
  p.add_argument("--json", default="")
  args = p.parse_args(argv)
  if args.table:
    write_table(args.table.split(","), args.out, args.published)
    return
  if not args.dir or not args.json:
    p.error("--dir and --json are needed to run")
  digits = firma.load_digits_config()

  def firma_config(mode, scenario):
    c = digits.firma_config(mode, scenario, num_clients=10, rounds=args.rounds)
    c.name = c.name.replace("FIRMA digits (MNIST-1797)", args.name)
    config_lib.files_source(c, args.dir)
    c.engine.client_parallelism = args.parallelism
    return c

  module = types.SimpleNamespace(firma_config=firma_config, __file__=digits.__file__)
  firma.load_digits_config = lambda: module
  out = {"args": vars(args), "scenarios": {}}
  for scenario in [s for s in args.scenarios.split(",") if s]:
    t0 = time.perf_counter()
    results, timings, _ = firma.run(args.modes.split(","), [scenario],
                                    args.methods.split(","), args.seeds,
                                    batch_runs=args.seeds, workers=1)
    out["scenarios"][scenario] = {
        "wall_s": time.perf_counter() - t0, "timings": timings,
        "results": {mode: {f"{s}/{m}": v for (s, m), v in res.items()}
                    for mode, res in results.items()}}
    with open(args.json, "w") as f:
      json.dump(out, f, default=float)
    print(f"{scenario}: {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
  main()
