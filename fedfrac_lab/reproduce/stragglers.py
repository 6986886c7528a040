"""Straggler study: FedAvg, FedNova, FedProx (and FedEL when registered) on digits
with log-normal client speeds under a round deadline, policies ``drop`` and
``partial`` (plus FedAvg without a deadline as the reference).

  python -m fedfrac_lab.reproduce stragglers --out=results/stragglers_digits.md

Speeds s_k = exp(σ·z_k), z_k ~ N(0, 1), fixed per seed (:mod:`fedfrac.ops.system`);
client k needs τ_k = E·⌈n_k/B⌉ local steps, one step at speed 1 takes one time
unit. ``drop``: clients that cannot finish τ_k steps by the deadline T send
nothing; ``partial``: each client runs min(τ_k, ⌊T·s_k⌋) steps (FedNova's
setting of variable local work). Reported per method and policy, over seeds:
final test accuracy, simulated time (sum of the rounds' wall-clock durations)
until the test accuracy first reaches the target, and local steps run in all.
Writes ``--out`` (markdown) and the same numbers as ``<out>.json``.

The runs go through ``fedfrac.sweep``'s point runner
(:mod:`fedfrac_lab.reproduce.jobs`): each (policy, method, seed) is one point, each
(policy, method) one batch, batches a work queue over ``--workers`` processes
(default one per CPU core or device). ``--dir=D`` (or ``--resume``) keeps every
finished run, so an interrupted command rerun the same way runs only what is
missing; a directory of other code or arguments is refused unless
``--overwrite``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from fedfrac import algorithms
from fedfrac.config_base import base_config
from fedfrac.metrics import statistics
from fedfrac_lab.reproduce import common, jobs
from fedfrac.runner import points as points_lib

METHODS = ("fedavg", "fednova", "fedprox", "fedel", "fedel_window0")
POLICIES = ("drop", "partial")
# label -> (algorithm, options on top of its quickstart options)
VARIANTS = {"fedel_window0": ("fedel", {"window": 0})}


def methods_available():
  """The study's methods (labels) whose algorithm is registered."""
  return tuple(m for m in METHODS if VARIANTS.get(m, (m,))[0] in algorithms.names())


def study_config(policy, methods, sigma=1.0, deadline=10.0, rounds=30, seeds=(0, 1, 2)):
  """Digits, 10 clients, Dirichlet(0.5), MLP(64), SGD lr 0.1, B = 32, E = 2, every
  client sampled; ``config.system`` log-normal(σ) speeds, deadline T, ``policy``
  (``none``: no deadline)."""
  c = base_config()
  c.name = f"stragglers: digits, lognormal sigma={sigma}, policy {policy}"
  c.seeds = tuple(seeds)
  c.rounds = rounds
  c.eval_every = 1
  c.checkpoint_every = 0
  c.target_accuracy = 0.8
  c.progress = False
  c.data.source = "sklearn_digits"
  c.data.num_clients = 10
  c.data.partition = "dirichlet"
  c.data.alpha = 0.5
  c.model.name = "mlp"
  c.model.hidden = (64,)
  c.client.optimizer = "sgd"
  c.client.lr = 0.1
  c.client.batch_size = 32
  c.client.local_epochs = 2
  c.engine.unroll = 1
  c.system.speed = "lognormal"
  c.system.sigma = sigma
  c.system.policy = policy
  c.system.deadline = float("inf") if policy == "none" else deadline
  ms = type(c.methods)()
  for label in methods:
    name, extra = VARIANTS.get(label, (label, {}))
    options = {**algorithms.quickstart_methods()[name], **extra}
    ms[label] = type(c.methods)(dict(name=name, **options))
  c.methods = ms
  return c


def time_to_target(record, target):
  """Simulated time (sum of ``system/wall_time`` up to and including the round)
  at which the test accuracy first reaches ``target``; None if it never does."""
  clock = np.cumsum([r["system/wall_time"] for r in record.round_rows])
  for row in record.rows:
    if row.get("accuracy", 0.0) >= target:
      return float(clock[row["round"] - 1])
  return None


def summarize(results, policy, target):
  """{method: numbers over seeds} of one policy's ``run_many`` results."""
  out = {}
  for label in results.methods():
    recs = [r for r in results.records if r.method == label]
    acc = [r.rows[-1]["accuracy"] if r.rows else float("nan") for r in recs]
    t2t = [time_to_target(r, target) for r in recs]
    steps = [float(sum(x["system/steps_run"] for x in r.round_rows)) for r in recs]
    cost = [float(sum(x.get("system/cost_steps", x["system/steps_run"])
                      for x in r.round_rows)) for r in recs]
    dropped = [float(np.mean([x["system/dropped"] for x in r.round_rows])) for r in recs]
    total = [float(sum(x["system/wall_time"] for x in r.round_rows)) for r in recs]
    out[label] = {"seeds": [r.seed for r in recs],
                  "status": sorted({r.status for r in recs}),
                  "final_accuracy": acc, "time_to_target": t2t, "steps_run": steps,
                  "cost_steps": cost,
                  "dropped_per_round": dropped, "simulated_time": total}
  return out


def _fmt_time(values):
  reached = [v for v in values if v is not None]
  if not reached:
    return "never"
  text = f"{np.mean(reached):.0f}"
  return text if len(reached) == len(values) else f"{text} ({len(reached)}/{len(values)} seeds)"


def table(rows, target):
  """Markdown table of ``[(policy, method, numbers)]``."""
  lines = [f"| method | policy | final accuracy | per seed | time to {target:.0%} | "
           "simulated time (all rounds) | steps run | cost-weighted steps | dropped / round |",
           "|---|---|---|---|---|---|---|---|---|"]
  for policy, method, n in rows:
    acc = np.asarray(n["final_accuracy"])
    note = "" if n["status"] == ["ok"] else f" ({', '.join(n['status'])})"
    lines.append(
        f"| {method} | {policy} | {statistics.format_mean_std(acc)}{note} | "
        f"{', '.join(f'{a:.3f}' for a in acc)} | {_fmt_time(n['time_to_target'])} | "
        f"{np.mean(n['simulated_time']):.0f} | {np.mean(n['steps_run']):.0f} | "
        f"{np.mean(n.get('cost_steps', n['steps_run'])):.0f} | "
        f"{np.mean(n['dropped_per_round']):.2f} |")
  return "\n".join(lines)


def plan_configs(sigma=1.0, deadline=10.0, rounds=30, seeds=(0, 1, 2), methods=None):
  """``[(policy, config)]``: FedAvg without a deadline, then every policy."""
  methods = methods_available() if methods is None else tuple(methods)
  plan = [("none", ("fedavg",))] + [(p, methods) for p in POLICIES]
  return [(policy, study_config(policy, names, sigma, deadline, rounds, seeds))
          for policy, names in plan]


def study(sigma=1.0, deadline=10.0, rounds=30, seeds=(0, 1, 2), methods=None,
          workers=1, directory=None, resume=False, overwrite=False):
  """Run the grid; returns ``(rows, setup)`` with rows ``[(policy, method, numbers)]``.

  Each policy's config is one ``ff.run_many`` job run as sweep points
  (:func:`fedfrac_lab.reproduce.jobs.run_jobs`: ``workers``, ``directory``,
  ``resume`` and ``overwrite`` as there); ``setup["runs"]`` counts the runs,
  ``setup["runs_from_earlier_run"]`` those found in the point directory."""
  methods = methods_available() if methods is None else tuple(methods)
  plan = plan_configs(sigma, deadline, rounds, seeds, methods)
  outcome = jobs.run_jobs("stragglers", [jobs.Job(c) for _, c in plan], workers=workers,
                          directory=directory, resume=resume, overwrite=overwrite)
  rows = []
  for (policy, config), results in zip(plan, outcome.results):
    for label, numbers in summarize(results, policy, config.target_accuracy).items():
      rows.append((policy, label, numbers))
  setup = {"sigma": sigma, "deadline": deadline, "rounds": rounds, "seeds": list(seeds),
           "methods": list(methods), "target_accuracy": 0.8,
           "data": "sklearn digits, 10 clients, Dirichlet(0.5)",
           "model": "MLP (64), SGD lr 0.1, batch 32, 2 local epochs, full participation",
           "runs": outcome.total, "runs_from_earlier_run": outcome.skipped}
  return rows, setup


def main(argv=None):
  p = argparse.ArgumentParser(prog="fedfrac-reproduce stragglers", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--out", type=common.output_path("--out"),
                 default="", help="markdown file to write (and <out>.json)")
  p.add_argument("--sigma", type=float, default=1.0)
  p.add_argument("--deadline", type=float, default=10.0)
  p.add_argument("--rounds", type=int, default=30)
  p.add_argument("--seeds", default="0,1,2")
  jobs.add_point_flags(p, "stragglers", batches="(policy, method) batches")
  argv = sys.argv[1:] if argv is None else list(argv)
  args = p.parse_args(argv)
  seeds = common.parse_seeds(args.seeds)
  t0 = time.time()
  try:
    rows, setup = study(args.sigma, args.deadline, args.rounds, seeds,
                        workers=args.workers, directory=args.dir, resume=args.resume,
                        overwrite=args.overwrite)
  except points_lib.SweepMismatch as e:
    raise SystemExit(str(e)) from None
  elapsed = time.time() - t0
  missing = [m for m in METHODS if m not in setup["methods"]]
  body = "\n".join([
      "# Stragglers on digits: deadline policies under log-normal client speeds",
      "",
      f"Client speeds s_k = exp(σ·z), σ = {args.sigma:g}, fixed per seed; deadline "
      f"T = {args.deadline:g} time units per round (one local step at speed 1 = 1 "
      f"unit; a client needs τ_k = 2·⌈n_k/32⌉ steps). {setup['data']}; "
      f"{setup['model']}; {args.rounds} rounds; seeds {', '.join(map(str, seeds))}. "
      "`none` = no deadline (every client runs τ_k steps; the round lasts as long "
      "as the slowest client), `drop` = clients that cannot finish by T send "
      "nothing, `partial` = each client runs the steps that fit before T.",
      "",
      table(rows, 0.8),
      "",
      "Final accuracy: mean ± std over seeds of the test accuracy after the last "
      "round. Time to 80 %: simulated time summed over rounds until the test "
      "accuracy first reaches 0.8 (mean over the seeds that reach it). Steps run: "
      "local steps of all clients over all rounds (mean over seeds). Each method "
      "runs with its quickstart options (FedProx μ = 0.01: with at most a few "
      "dozen local steps its proximal term leaves FedAvg's test accuracy "
      "unchanged at the test set's resolution, 1/359, so the two rows agree). "
      "Cost-weighted steps: each step weighted by the part of a full step it "
      "costs (= steps run except for FedEL). FedEL is elastic: under either policy "
      "every client runs all τ_k steps, a client that cannot afford full steps "
      "trains only the tensors it can pay for (τ_k·c_k ≤ ⌊T·s_k⌋) inside the "
      "round's sliding window (`fedel`: default window, 2 tensors = one layer; "
      "`fedel_window0`: the whole model), and one that can afford no tensor "
      "counts as dropped.",
      "",
      ("Methods not registered when this was produced (the command adds them "
       f"once they are): {', '.join(missing)}." if missing else ""),
      "",
      f"Command: `{common.command_line('stragglers', argv).strip()}`",
      "",
      common.produced_line(elapsed) + (
          f" {setup['runs_from_earlier_run']} of the {setup['runs']} runs came from an "
          "earlier run of the same code (the point directory)." if setup["runs_from_earlier_run"]
          else ""),
      ""])
  print(body)
  if args.out:
    common.write_text(args.out, body)
    common.write_text(os.path.splitext(args.out)[0] + ".json",
                      json.dumps({"setup": setup, "rows": [dict(policy=p, method=m, **n)
                                                          for p, m, n in rows]}, indent=2))


if __name__ == "__main__":
  main()
