"""``fedfrac-reproduce firma_adam_ablation``: the FibFL++ warm-up Adam-state ablation
behind docs/design.md §3.3 ("FibFL++ runs that stay at chance"): FibFL++
``reference_code``, Fashion-MNIST IID, the authors' inputs, W = 5 pinned so every
round is a warm-up round, with each client's warm-up Adam state kept across the
warm-up average (``keep``, the authors' code), reset to a fresh state (``reset``) or
averaged like the params (``average``); each run one ``fedfrac-reproduce
firma_authors fedfrac ... --live-units`` command, written with its command and its
printed output to one results file that the design page renders its numbers from.

  fedfrac-reproduce firma_adam_ablation --out=results/firma_fibfl_pp_adam_ablation_cpu.json

The runs go one at a time, each in its own process. A run already in the file with
the same command is kept, not rerun (``--runs`` picks runs as ``variant:seed``); each
run's ``curve``, ``live_units`` and ``wall_s`` are those of the JSON line its command
printed.
"""
from __future__ import annotations

import argparse
import json
import os
from typing import Dict, List, NamedTuple, Tuple

from fedfrac_lab.reproduce.firma_start_rounds import DATA, PREFIX, run_printed

OUT = "results/firma_fibfl_pp_adam_ablation_cpu.json"
ROUNDS = 3
WARMUP_ROUNDS = 5
VARIANTS = ("keep", "reset", "average")
# The measured fields of a run, copied from the line its command printed.
MEASURED = ("curve", "live_units", "wall_s")
DESCRIPTIONS = {
    "curve": "mean per-client test accuracy after each round",
    "live_units": "per round, per client: units of the extractor's last ReLU layer "
                  "(FC 256->128 + ReLU) active (> 0) on at least one of the training "
                  "images, from the params after the round's average",
    "wall_s": "seconds from the simulation's start to its last round (compilation "
              "included); process_wall_s: the whole process (data loading included)",
}


class Run(NamedTuple):
  variant: str
  seed: int

  @property
  def name(self) -> str:
    return f"{self.variant}:{self.seed}"

  def flags(self, rounds: int) -> Tuple[str, ...]:
    return ("--method=fibfl_pp", f"--rounds={rounds}", f"--set=warmup_rounds={WARMUP_ROUNDS}",
            f"--set=warmup_optimizer={self.variant}", f"--seed={self.seed}", "--live-units")

  def command(self, rounds: int, data: str) -> str:
    extra = [] if data == DATA else [f"--data={data}"]
    return " ".join([PREFIX, *self.flags(rounds), *extra])


# Seeds 0-4 with the state kept or reset, 0-2 with it averaged.
RUNS = tuple(Run(v, s) for v, seeds in (("keep", range(5)), ("reset", range(5)),
                                        ("average", range(3))) for s in seeds)
NAMES = tuple(r.name for r in RUNS)


def file_command(path: str, rounds: int, data: str) -> str:
  """The command that remakes the file at ``path``."""
  extra = ([] if rounds == ROUNDS else [f"--rounds={rounds}"]) + \
      ([] if data == DATA else [f"--data={data}"])
  return " ".join(["fedfrac-reproduce firma_adam_ablation", f"--out={path}", *extra])


def load(path: str, rounds: int, data: str) -> Dict:
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      doc = json.load(f)
  else:
    doc = {"what": " ".join(__doc__.split("\n\n")[0].split(": ", 1)[1].split()),
           **DESCRIPTIONS, "runs": []}
  doc["command"] = file_command(path, rounds, data)
  return doc


def run_one(run: Run, rounds: int, data: str) -> Dict:
  """Run one (variant, seed) in a child process: its command and the measured
  fields of the JSON line it printed, with the wall time of the whole process."""
  command = run.command(rounds, data)
  record, wall = run_printed(run.flags(rounds), data, command)
  if record.get("options", {}).get("warmup_optimizer") != run.variant or \
      record.get("seed") != run.seed:
    raise SystemExit(f"{command} printed a record of another run: {record}")
  return {"variant": run.variant, "seed": run.seed, "command": command,
          **{k: record[k] for k in MEASURED}, "process_wall_s": wall}


def main(argv: List[str] | None = None) -> int:
  p = argparse.ArgumentParser(prog="fedfrac-reproduce firma_adam_ablation",
                              description=__doc__.split("\n\n")[0])
  p.add_argument("--out", default=OUT)
  p.add_argument("--data", default=DATA, help="the Fashion-MNIST IDX files")
  p.add_argument("--rounds", type=int, default=ROUNDS,
                 help=f"rounds per run (at most W = {WARMUP_ROUNDS}: all warm-up rounds)")
  p.add_argument("--runs", default=",".join(NAMES),
                 help=f"comma-separated variant:seed, of {', '.join(NAMES)}")
  args = p.parse_args(argv)
  picked = [x for x in args.runs.split(",") if x]
  unknown = [x for x in picked if x not in NAMES]
  if unknown:
    p.error(f"--runs: {unknown[0]!r} is not a run; allowed: {', '.join(NAMES)}")
  if not 1 <= args.rounds <= WARMUP_ROUNDS:
    p.error(f"--rounds: {args.rounds}; allowed: 1 to {WARMUP_ROUNDS} (the warm-up rounds)")
  doc = load(args.out, args.rounds, args.data)
  have = {(r["variant"], r["seed"]): r for r in doc["runs"]}
  for run in RUNS:
    if run.name not in picked:
      continue
    kept = have.get((run.variant, run.seed))
    if kept and kept.get("command") == run.command(args.rounds, args.data):
      continue
    have[(run.variant, run.seed)] = run_one(run, args.rounds, args.data)
    doc["runs"] = [have[(r.variant, r.seed)] for r in RUNS if (r.variant, r.seed) in have]
    with open(args.out, "w", encoding="utf-8") as f:
      json.dump(doc, f, indent=1, ensure_ascii=False)
      f.write("\n")
    print(f"{run.name}: {have[(run.variant, run.seed)]['curve']}", flush=True)
  return 0
