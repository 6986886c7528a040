"""``fedfrac-reproduce asynchronous --collect=WORKDIR``: the committed study of
asynchronous against synchronous aggregation on the simulated clock
(``configs/async/fashion_mnist.py``; the guide's "Asynchronous runs"), from a
finished workdir of

    python -m fedfrac.main --config=configs/async/fashion_mnist.py --workdir=WORKDIR

into ``results/async_fashion_mnist_cpu.md`` (per method and seed: simulated time
to the config's target accuracy, the final accuracy, and the summary across
seeds; for a method with a ``clock.deadline``, the clients a round dropped and
how long its rounds lasted) and ``results/async_fashion_mnist_cpu.png`` (accuracy against simulated
time and against server steps, every seed). Every number is read from the
workdir's ``metrics.csv`` and ``summary.json``; nothing is run here.
"""
from __future__ import annotations

import argparse
import csv
import json
import os

from fedfrac.sim.clock import ASYNCHRONOUS_SERVERS
from fedfrac_lab.reproduce import common

OUT_MD = "results/async_fashion_mnist_cpu.md"
OUT_PNG = "results/async_fashion_mnist_cpu.png"
COMMAND = "python -m fedfrac.main --config=configs/async/fashion_mnist.py --workdir=WORKDIR"


def read_curves(workdir):
  """{(method, seed): [(round, simulated time, accuracy)]} from ``metrics.csv``."""
  curves: dict = {}
  with open(os.path.join(workdir, "metrics.csv")) as f:
    for row in csv.DictReader(f):
      if not row.get("accuracy") or not row.get("clock/time"):
        continue
      key = (row["method"], int(row["seed"]))
      curves.setdefault(key, []).append(
          (int(row["round"]), float(row["clock/time"]), float(row["accuracy"])))
  return {k: sorted(v) for k, v in curves.items()}


def time_to(curve, target):
  """The simulated time of the first evaluation at or above ``target`` (None: never)."""
  return next((t for _, t, a in curve if a >= target), None)


def method_clocks(config) -> dict:
  """{method label: its clock settings} (the shared ``clock`` section with the
  method's own ``clock`` overrides) from the workdir's ``config.json``."""
  shared = config.get("clock") or {}
  return {label: {**shared, **(entry.get("clock") or {})}
          for label, entry in (config.get("methods") or {}).items()}


def round_means(workdir, names) -> dict:
  """{(method, seed): {name: mean over the run's rounds}} of the ``rounds.csv``
  columns ``names`` (empty without the file or the columns)."""
  path = os.path.join(workdir, "rounds.csv")
  if not os.path.exists(path):
    return {}
  sums: dict = {}
  with open(path) as f:
    for row in csv.DictReader(f):
      if not all(row.get(n) for n in names):
        continue
      entry = sums.setdefault((row["method"], int(row["seed"])), [0, [0.0] * len(names)])
      entry[0] += 1
      entry[1] = [t + float(row[n]) for t, n in zip(entry[1], names)]
  return {k: {n: t / count for n, t in zip(names, totals)}
          for k, (count, totals) in sums.items()}


def deadline_lines(workdir, config, methods, base) -> list:
  """Per method with a finite ``clock.deadline``: the clients a round dropped
  and how long its rounds lasted, against ``base``'s, from ``rounds.csv``."""
  clocks = method_clocks(config)
  means = round_means(workdir, ("cohort", "clock/dropped", "clock/step_time"))
  plain = round_means(workdir, ("clock/step_time",))
  lines = []
  for m in methods:
    deadline = float(clocks.get(m, {}).get("deadline", float("inf")))
    seeds = sorted(s for mm, s in means if mm == m)
    if deadline == float("inf") or not seeds:
      continue
    dropped = [means[(m, s)]["clock/dropped"] for s in seeds]
    sampled = [means[(m, s)]["cohort"] + means[(m, s)]["clock/dropped"] for s in seeds]
    lasted = [means[(m, s)]["clock/step_time"] for s in seeds]
    base_lasted = [plain[(base, s)]["clock/step_time"] for s in seeds
                   if (base, s) in plain]
    lines.append(
        f"- {m} (`clock.deadline` = {deadline:g}): of the {sum(sampled) / len(seeds):.0f} "
        f"clients sampled a round, {sum(dropped) / len(seeds):.2f} missed the deadline "
        f"and sent nothing, on average (per seed {' / '.join(f'{d:.2f}' for d in dropped)}); "
        f"a round lasted {sum(lasted) / len(seeds):.1f} time units on average"
        + (f", {sum(base_lasted) / len(base_lasted):.1f} for {base} without a deadline."
           if base_lasted else "."))
  return lines


def markdown(workdir, target, device, config=None) -> str:
  config = config or {}
  clocks = method_clocks(config)
  curves = read_curves(workdir)
  methods = list(dict.fromkeys(m for m, _ in curves))
  with open(os.path.join(workdir, "summary.md")) as f:
    summary = f.read().strip()
  seeds_all = sorted({s for _, s in curves})
  lines = [f"# Asynchronous against synchronous aggregation, Fashion-MNIST ({device}, "
           f"{len(seeds_all)} seeds)", "",
           "`configs/async/fashion_mnist.py`: 100 clients (Dirichlet 0.5), MLP (64), 10 "
           "client updates per server step, client speeds log-normal (spread 1), "
           f"1 MB per time unit; made by `{COMMAND}`, then `fedfrac-reproduce "
           f"asynchronous --collect=WORKDIR`.", "",
           f"## Simulated time to {target:.0%} accuracy, per seed", "",
           "| method | " + " | ".join(f"seed {s}" for s in seeds_all)
           + " | final accuracy per seed |", "|---" * (len(seeds_all) + 2) + "|"]
  for m in methods:
    seeds = sorted(s for mm, s in curves if mm == m)
    times = [time_to(curves[(m, s)], target) for s in seeds]
    finals = [curves[(m, s)][-1][2] for s in seeds]
    lines.append(f"| {m} | " + " | ".join("never" if t is None else f"{t:.0f}"
                                          for t in times)
                 + f" | {' / '.join(f'{a:.4f}' for a in finals)} |")
  base = "fedavg" if "fedavg" in methods else None
  if base:
    lines += ["", "Against synchronous FedAvg, seed by seed (the FedBuff paper, Nguyen et "
              "al. 2022, reports buffered asynchronous aggregation reaching a target "
              "accuracy in less time than synchronous FedAvg when client speeds vary):"]
    for m in methods:
      if m == base:
        continue
      seeds = sorted(s for mm, s in curves if mm == m and (base, s) in curves)
      pairs = [(time_to(curves[(m, s)], target), time_to(curves[(base, s)], target))
               for s in seeds]
      sooner = sum(a is not None and (b is None or a < b) for a, b in pairs)
      paper = (clocks.get(m, {}).get("server") in ASYNCHRONOUS_SERVERS
               and sooner == len(seeds))
      lines.append(f"- {m} reaches {target:.0%} sooner in {sooner} of {len(seeds)} seeds"
                   f"{' (the same direction)' if paper else ''}.")
    dropped = deadline_lines(workdir, config, methods, base)
    if dropped:
      lines += ["", "Synchronous rounds with a deadline on the clock (from `rounds.csv`; "
                "the same clients are slow all run, since speeds are fixed per seed):"]
      lines += dropped
  lines += ["", "## Summary (the run's own table)", "", summary, "",
            f"![accuracy against simulated time]({os.path.basename(OUT_PNG)})", ""]
  return "\n".join(lines)


def figure(workdir, out):
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  curves = read_curves(workdir)
  fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
  colors = {}
  for (m, s), c in sorted(curves.items()):
    color = colors.setdefault(m, f"C{len(colors)}")
    label = m if s == 0 else None
    axes[0].plot([t for _, t, _ in c], [a for _, _, a in c], color=color, label=label,
                 alpha=0.8)
    axes[1].plot([r for r, _, _ in c], [a for _, _, a in c], color=color, label=label,
                 alpha=0.8)
  axes[0].set_xscale("log")
  axes[0].set_xlabel("simulated time (log)")
  axes[1].set_xlabel("server steps")
  for ax in axes:
    ax.set_ylabel("test accuracy")
    ax.grid(alpha=0.3)
  axes[0].legend()
  fig.suptitle("Fashion-MNIST, 100 clients, log-normal speeds: every seed")
  fig.tight_layout()
  fig.savefig(out, dpi=110)
  plt.close(fig)


def main(argv=None):
  p = argparse.ArgumentParser(prog="fedfrac-reproduce asynchronous",
                              description=__doc__.split("\n")[0])
  p.add_argument("--collect", required=True, help="a finished workdir of the study")
  p.add_argument("--device", default="CPU, 2 cores (shared)")
  p.add_argument("--out", type=common.output_path("--out"), default=OUT_MD)
  args = p.parse_args(argv)
  for name in ("metrics.csv", "summary.md", "config.json"):
    if not os.path.exists(os.path.join(args.collect, name)):
      raise SystemExit(f"--collect={args.collect}: no {name} there; run the study first "
                       f"({COMMAND})")
  with open(os.path.join(args.collect, "config.json")) as f:
    config = json.load(f)
  with open(args.out, "w") as f:
    f.write(markdown(args.collect, float(config["target_accuracy"]), args.device,
                     config))
  figure(args.collect, os.path.join(os.path.dirname(args.out) or ".",
                                    os.path.basename(OUT_PNG)))
  print(f"wrote {args.out} and its figure")
