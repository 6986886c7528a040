"""Sweep a config over overrides and/or one vmapped option grid; write a markdown table.

  python scripts/sweep.py --config=configs/fofedavg/digits.py \\
      --grid=alpha=0.5,0.6,0.8,0.97,1.0 --grid_methods=fofedavg \\
      --out=results/fractional_digits.md

Flags:
  --config FILE         a configs/*.py file (its get_config()).
  --set KEY=VALUE       a fixed override (repeatable), e.g. --set=rounds=50,
                        --set=methods.fofedavg.delta=1e-4.
  --sweep KEY=V1,V2     a config axis (repeatable); every combination of the
                        axes is one separate point, e.g. --sweep=data.alpha=0.1,1.0.
                        Separate values with ';' when they contain commas:
                        --sweep="model.hidden=(64,);(128,64)".
  --grid OPTION=V1,V2   one continuous algorithm option whose values run as one
                        compiled program with the seeds (``ff.run_many``).
  --grid_methods A,B    method labels the grid applies to (default: every method
                        that has the option).
  --seeds 0,1,2         seeds (default: the config's).
  --metrics M1,M2       final-round metrics to tabulate (default: accuracy, or
                        rmse for regression); any column of metrics.csv works,
                        e.g. server/drift_mean; ``mean:<name>`` is the mean over
                        all rounds of a per-round column (rounds.csv), NaNs skipped.
  --no_batch            run seeds one after another with ``ff.run`` instead of
                        vmapping them with ``ff.run_many``.
  --out FILE.md         markdown table (a FILE.json with every summary is written
                        next to it).

Values are Python literals where they parse (0.5, 10, (16,), True) and strings
otherwise. The table has one row per (sweep point, method label) with mean ± std
over seeds of each metric's final value.
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import itertools
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import fedfrac as ff  # noqa: E402
from fedfrac import algorithms  # noqa: E402
from fedfrac import config as config_lib  # noqa: E402
from fedfrac import metrics as metrics_lib  # noqa: E402


def parse_value(text):
  """A Python literal when ``text`` parses as one, else the string itself."""
  try:
    return ast.literal_eval(text)
  except (ValueError, SyntaxError):
    return text


def parse_assignment(text, flag, many=False):
  """``KEY=VALUE`` (or ``KEY=V1,V2`` with ``many``) -> (key, value or [values])."""
  if "=" not in text:
    raise SystemExit(f"{flag}={text!r}: expected KEY=VALUE")
  key, raw = text.split("=", 1)
  key = key.strip()
  if not key:
    raise SystemExit(f"{flag}={text!r}: empty key")
  if not many:
    return key, parse_value(raw)
  parts = raw.split(";") if ";" in raw else raw.split(",")
  values = [parse_value(p.strip()) for p in parts if p.strip()]
  if not values:
    raise SystemExit(f"{flag}={text!r}: no values")
  return key, values


def load_config(path):
  spec = importlib.util.spec_from_file_location("sweep_config", path)
  if spec is None:
    raise SystemExit(f"--config={path!r}: not a Python file")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config()


def set_key(config, dotted, value):
  """Set ``config.<dotted>`` (creating method options that are not there yet)."""
  parts = dotted.split(".")
  target = config
  with config.unlocked():
    for p in parts[:-1]:
      if p not in target:
        raise SystemExit(f"config key {dotted!r}: {p!r} does not exist")
      target = target[p]
    target[parts[-1]] = value


def run_point(config, seeds, grid, grid_methods, batch):
  """Records of every method at one sweep point (grid applied to grid_methods)."""
  labels = config_lib.method_labels(config)
  if grid:
    option = next(iter(grid))
    with_option = [l for l in labels
                   if option in algorithms.hparams(config.methods[l].name,
                                                   config_lib.method_options(config.methods[l]))]
    targets = grid_methods or with_option
    unknown = [t for t in targets if t not in labels]
    if unknown:
      raise SystemExit(f"--grid_methods: unknown method label {unknown[0]!r}; labels are "
                       f"{', '.join(labels)}")
  else:
    targets = []
  records = []
  for label in labels:
    single = config.copy_and_resolve_references()
    single.only = label
    g = grid if label in targets else None
    if batch:
      res = ff.run_many(single, seeds=seeds, grid=g)
    else:
      if g:
        raise SystemExit("--grid needs batched runs; drop --no_batch")
      single.seeds = tuple(seeds)
      res = ff.run(single)
    records.extend(res.records)
  return records


def _run_value(rec, name):
  """Final-round value of ``name``; ``mean:<name>`` averages it over all rounds."""
  if name.startswith("mean:"):
    values = np.asarray([r.get(name[5:], np.nan) for r in rec.round_rows], np.float64)
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else None
  return rec.rows[-1].get(name) if rec.rows else None


def summarize(records, metric_names):
  """Ordered rows: method label -> {metric: seed_stats, wall: seed_stats, status}."""
  rows = {}
  for rec in records:
    rows.setdefault(rec.method, []).append(rec)
  out = {}
  for label, recs in rows.items():
    entry = {"n": len(recs), "statuses": sorted({r.status for r in recs}),
             "wall_s": metrics_lib.seed_stats([r.wall_s for r in recs])}
    for name in metric_names:
      values = [_run_value(r, name) for r in recs]
      entry[name] = metrics_lib.seed_stats([v for v in values if v is not None
                                            and np.isfinite(v)])
      if name in ("accuracy",):
        best = [float(np.nanmax(r.curve(name)[1])) for r in recs if r.rows]
        entry[f"best_{name}"] = metrics_lib.seed_stats(best)
    out[label] = entry
  return out


def fmt(stats, digits=4):
  if not stats or stats["mean"] is None:
    return "n/a"
  if stats["n"] > 1:
    return f"{stats['mean']:.{digits}f} ± {stats['std']:.{digits}f}"
  return f"{stats['mean']:.{digits}f}"


def markdown(points, sweep_keys, metric_names, title, command, notes):
  columns = list(sweep_keys) + ["method"]
  for name in metric_names:
    columns.append(name.replace("mean:", "mean over rounds of ") if name.startswith("mean:")
                   else f"final {name}")
    if name == "accuracy":
      columns.append("best accuracy")
  columns += ["seeds", "wall s/run", "status"]
  lines = [f"# {title}", "", f"Command: `{command}`", ""] + notes + [
      "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
  for point, summary in points:
    for label, entry in summary.items():
      cells = [repr(point[k]) if not isinstance(point[k], str) else point[k]
               for k in sweep_keys] + [label]
      for name in metric_names:
        cells.append(fmt(entry[name]))
        if name == "accuracy":
          cells.append(fmt(entry["best_accuracy"]))
      cells += [str(entry["n"]), f"{entry['wall_s']['mean']:.1f}",
                ", ".join(entry["statuses"])]
      lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--config", required=True)
  parser.add_argument("--set", action="append", default=[], dest="sets")
  parser.add_argument("--sweep", action="append", default=[])
  parser.add_argument("--grid", default=None)
  parser.add_argument("--grid_methods", default="")
  parser.add_argument("--seeds", default="")
  parser.add_argument("--metrics", default="")
  parser.add_argument("--no_batch", action="store_true")
  parser.add_argument("--title", default="")
  parser.add_argument("--out", default="")
  args = parser.parse_args(argv)

  base = load_config(args.config)
  base.progress = False
  for text in args.sets:
    set_key(base, *parse_assignment(text, "--set"))
  axes = [parse_assignment(t, "--sweep", many=True) for t in args.sweep]
  grid = None
  if args.grid:
    key, values = parse_assignment(args.grid, "--grid", many=True)
    grid = {key: values}
  grid_methods = [m for m in args.grid_methods.split(",") if m]
  seeds = ([int(s) for s in args.seeds.split(",") if s] if args.seeds else
           ([base.seeds] if isinstance(base.seeds, int) else list(base.seeds)))
  metric_names = [m for m in args.metrics.split(",") if m] or (
      ["accuracy"] if base.task.loss == "cross_entropy" else ["rmse"])

  points = []
  t0 = time.perf_counter()
  for combo in itertools.product(*[values for _, values in axes]):
    config = base.copy_and_resolve_references()
    point = {}
    for (key, _), value in zip(axes, combo):
      set_key(config, key, value)
      point[key] = value
    config_lib.validate(config)
    records = run_point(config, seeds, grid, grid_methods, not args.no_batch)
    summary = summarize(records, metric_names)
    points.append((point, summary))
    for label, entry in summary.items():
      print(" ".join(f"{k}={v}" for k, v in point.items()), label,
            " ".join(f"{m}={fmt(entry[m])}" for m in metric_names), flush=True)
  elapsed = time.perf_counter() - t0

  command = "python scripts/sweep.py " + " ".join(
      a if " " not in a else repr(a) for a in (argv if argv is not None else sys.argv[1:]))
  notes = [f"Config: {base.name}; seeds {tuple(seeds)}; {base.rounds} rounds. "
           f"Mean ± sample std over seeds of each metric's final-round value. "
           f"Total {elapsed:.0f} s.", ""]
  text = markdown(points, [k for k, _ in axes], metric_names,
                  args.title or f"Sweep: {base.name}", command, notes)
  print(text)
  if args.out:
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
      f.write(text)
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
      json.dump([{"point": p, "summary": s} for p, s in points], f, indent=2,
                default=str)
    print(f"wrote {args.out}")
  return points


if __name__ == "__main__":
  main()
