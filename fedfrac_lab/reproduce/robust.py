"""Robust-aggregation table: every method of a config under its attack, over seeds.

  fedfrac-reproduce robust --config=configs/robust/digits_signflip.py --out=results/robust_digits.md

From a notebook: ``results = ff.run_many(config)`` (or
``ff.reproduce.robust.run(config, workers=None)``, the same results through the
point runner) then ``text, finals = ff.reproduce.robust.table(results, config)``.

Runs every method of the config for all its seeds as one compiled program per
method (``ff.run_many``), prints a markdown table of the final test accuracy
(mean ± std over seeds, and per seed) and writes it to ``--out`` together with
the setup and this command. With ``--check`` the script exits non-zero unless
plain averaging under attack stays below ``--collapse_max`` and every robust
rule reaches ``--robust_min``.

The runs go through ``fedfrac.sweep``'s point runner (:func:`run`,
:mod:`fedfrac_lab.reproduce.jobs`): each (method, seed) is one point, each method
one batch, batches a work queue over ``--workers`` processes (default one per
CPU core or device). ``--dir=D`` (or ``--resume``) keeps every finished run, so
an interrupted command rerun the same way runs only what is missing; a
directory of other code or another config is refused unless ``--overwrite``.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from fedfrac import config_base
from fedfrac.metrics import statistics
from fedfrac_lab.reproduce import common, jobs
from fedfrac.runner import points as points_lib

# The grid: one config per table (every method of it, all its seeds).
CONFIGS = ("configs/robust/digits_signflip.py", "configs/robust/digits_signflip_dirichlet.py")


def load_config(path):
  """(config, its docstring) of the config file ``path``."""
  module = common.load_module(path)
  return module.get_config(), (module.__doc__ or "").strip()


def describe(config, label):
  """(aggregator text, attack text) of one method."""
  spec = config_base.aggregator_spec(config, label)
  agg = spec.name
  if spec.name == "trimmed_mean":
    agg += f" (β={spec.trim_beta})"
  elif spec.name in ("krum", "multi_krum"):
    agg += f" (f={spec.num_byzantine}"
    if spec.name == "multi_krum":
      agg += f", m={spec.multi or 'S−f'}"
    agg += ")"
  ac = config_base.attack_config(config, label)
  if ac.kind == "none":
    attack = "none"
  else:
    detail = {"sign_flip": f"−{ac.scale:g}·Δ", "scaled": f"{ac.scale:g}·Δ",
              "gaussian": f"N(0, {ac.std:g}²)", "label_flip": "y → C−1−y"}[ac.kind]
    attack = f"{ac.kind} {ac.fraction:.0%} ({detail})"
  return agg, attack


def table(results, config):
  """(markdown table, {label: final accuracy per seed}) of ``ff.run_many(config)``."""
  lines = ["| method | aggregator | attack | final accuracy | per seed | "
           "best accuracy | rounds to " f"{config.target_accuracy:.0%} |",
           "|---|---|---|---|---|---|---|"]
  summary = results.summary()["methods"]
  finals = {}

  def order(label):   # no attack first, then the plain mean under attack, then robust
    attacked = config_base.attack_config(config, label).kind != "none"
    return (attacked, not config_base.aggregator_spec(config, label).is_mean)
  for label in sorted(results.methods(), key=order):
    recs = [r for r in results.records if r.method == label]
    acc = np.asarray([r.rows[-1]["accuracy"] if r.rows else np.nan for r in recs])
    finals[label] = acc
    best = summary[label]["mean"]["best_accuracy"]
    r2t = [summary[label]["seeds"][str(r.seed)].get("rounds_to_target") for r in recs]
    reached = [x for x in r2t if x is not None]
    r2t_s = ("never" if not reached else f"{np.mean(reached):.1f}" +
             ("" if len(reached) == len(r2t) else f" ({len(reached)}/{len(r2t)} seeds)"))
    agg, attack = describe(config, label)
    status = sorted({r.status for r in recs})
    note = "" if status == ["ok"] else f" ({', '.join(status)})"
    lines.append(
        f"| {label} | {agg} | {attack} | {statistics.format_mean_std(acc)}{note} | "
        f"{', '.join(f'{a:.3f}' for a in acc)} | {best['mean']:.4f} | {r2t_s} |")
  return "\n".join(lines), finals


def run(config, workers=1, directory=None, resume=False, overwrite=False):
  """``ff.run_many(config)`` as sweep points (see
  :func:`fedfrac_lab.reproduce.jobs.run_jobs` for the arguments): the same
  :class:`fedfrac.Results`."""
  return jobs.run_jobs("robust", [jobs.Job(config)], workers=workers,
                       directory=directory, resume=resume,
                       overwrite=overwrite).results[0]


def check(config, finals, robust_min, collapse_max):
  """Messages for every failed claim (empty: all hold)."""
  failures = []
  for label, acc in finals.items():
    spec = config_base.aggregator_spec(config, label)
    attacked = config_base.attack_config(config, label).kind != "none"
    if not attacked:
      continue
    if spec.is_mean and not np.all(acc < collapse_max):
      failures.append(f"{label}: mean under attack reached {acc.max():.4f} "
                      f">= {collapse_max}")
    if not spec.is_mean and not np.all(acc >= robust_min):
      failures.append(f"{label}: {acc.min():.4f} < {robust_min}")
  return failures


def main(argv=None):
  p = argparse.ArgumentParser(prog="fedfrac-reproduce robust", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--config", default=CONFIGS[0])
  p.add_argument("--out", type=common.output_path("--out"),
                 default="", help="markdown file to write (default: print only)")
  p.add_argument("--rounds", type=int, default=0, help="override config.rounds")
  p.add_argument("--seeds", default="", help="comma-separated seeds (default: config)")
  p.add_argument("--check", action="store_true", help="exit 1 if a claim fails")
  p.add_argument("--robust_min", type=float, default=0.85)
  p.add_argument("--collapse_max", type=float, default=0.5)
  jobs.add_point_flags(p, "robust", batches="methods")
  argv = sys.argv[1:] if argv is None else list(argv)
  args = p.parse_args(argv)

  config, doc = load_config(args.config)
  if args.rounds:
    config.rounds = args.rounds
  if args.seeds:
    config.seeds = common.parse_seeds(args.seeds)
  config.progress = False
  t0 = time.time()
  try:
    outcome = jobs.run_jobs("robust", [jobs.Job(config)], workers=args.workers,
                            directory=args.dir, resume=args.resume,
                            overwrite=args.overwrite)
  except points_lib.SweepMismatch as e:
    raise SystemExit(str(e)) from None
  results = outcome.results[0]
  elapsed = time.time() - t0
  text, finals = table(results, config)
  failures = check(config, finals, args.robust_min, args.collapse_max)
  command = common.command_line("robust", argv)
  verdict = ("holds" if not failures else "FAILS: " + "; ".join(failures))
  body = "\n".join([
      f"# {config.name}",
      "",
      f"Final test accuracy after {config.rounds} rounds, mean ± std over seeds "
      f"{', '.join(str(s) for s in config.seeds)}.",
      "",
      text,
      "",
      f"Claim (mean under attack < {args.collapse_max}, every robust rule >= "
      f"{args.robust_min} on every seed): {verdict}.",
      "",
      "Setup (from the config's docstring):",
      "",
      "\n".join("    " + line if line else "" for line in doc.splitlines()),
      "",
      f"Command: `{command.strip()}`",
      "",
      common.produced_line(elapsed) + (
          f" {outcome.skipped} of the {outcome.total} runs came from an earlier "
          "run of the same code (the point directory)." if outcome.skipped else ""),
      ""])
  print(body)
  if args.out:
    common.write_text(args.out, body)
  if args.check and failures:
    sys.exit(1)


if __name__ == "__main__":
  main()
