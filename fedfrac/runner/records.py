"""What runs return: per-run records, :class:`Results`, summaries and tables."""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from fedfrac.metrics import statistics

FIRST_COLUMNS = ("method", "algorithm", "seed", "round")


def nonfinite_keys(row, allowed=()):
  """Keys of ``row`` whose float value is not finite and that count for
  divergence (not ``server/*`` diagnostics, ``*_min``/``*_max`` spreads, nor
  ``allowed`` keys such as a DP ε that is infinite without noise)."""
  return [k for k, v in row.items() if isinstance(v, float) and not math.isfinite(v)
          and not k.startswith("server/") and not k.endswith(("_min", "_max"))
          and k not in allowed]


@dataclasses.dataclass
class RunRecord:
  """One (method, seed) run.

  ``status`` is ``"ok"``, ``"partial"`` (stopped before ``config.rounds`` by
  ``stop_after_round`` or Ctrl-C; resumable) or ``"diverged at round r"`` (r: the
  first round whose metrics were not finite); a diverged run's rows end at its
  last finite evaluation.
  ``nonfinite_allowed``: metric keys that may be infinite without the run
  having diverged.
  """
  method: str
  algorithm: str
  seed: int
  rows: list            # evaluated rounds
  round_rows: list      # every round
  status: str = "ok"
  compile_s: float = 0.0
  wall_s: float = 0.0
  client_arrays: dict = dataclasses.field(default_factory=dict)
  nonfinite_allowed: tuple = ()

  @property
  def diverged(self) -> bool:
    return self.status.startswith("diverged")

  def curve(self, name):
    return (np.asarray([r["round"] for r in self.rows]),
            np.asarray([r.get(name, np.nan) for r in self.rows], np.float64))

  def finite_rows(self, rows=None):
    """``rows`` (default: the evaluated rows) up to, not including, the first
    whose metrics are not finite (all of them for a run that did not diverge)."""
    rows = self.rows if rows is None else rows
    for i, row in enumerate(rows):
      if nonfinite_keys(row, self.nonfinite_allowed):
        return rows[:i]
    return rows


@dataclasses.dataclass
class Results:
  """What ``run`` returns: per-round rows, per-run records and a summary."""
  config: Any
  records: list

  @property
  def rows(self):
    return [r for rec in self.records for r in rec.rows]

  @property
  def round_rows(self):
    return [r for rec in self.records for r in rec.round_rows]

  def record(self, method, seed):
    for rec in self.records:
      if rec.method == method and rec.seed == seed:
        return rec
    raise KeyError((method, seed))

  def methods(self):
    return list(dict.fromkeys(rec.method for rec in self.records))

  def summary(self) -> dict:
    return summarize(self.records, self.config)

  def table(self) -> str:
    return format_table(self.summary(), self.config)

  def plot(self, metric=None):
    """Figure of ``metric`` (default accuracy, RMSE for regression) vs round: one
    line per method, mean ± std over seeds (:func:`fedfrac.runner.plots.results_figure`);
    shows inline in Jupyter, ``.save(path)`` writes it."""
    from fedfrac.runner import plots
    return plots.results_figure(self, metric)


def _final_metric_names(records):
  names = []
  for rec in records:
    if rec.rows:
      for k, v in rec.rows[-1].items():
        if k not in FIRST_COLUMNS and isinstance(v, (int, float)) and k not in names:
          names.append(k)
  return names


def summarize(records, config) -> dict:
  """Final metrics per method and seed, and their mean/std/95% CI over seeds."""
  out = {"name": config.name, "rounds": config.rounds, "methods": {}}
  classification = config.task.loss == "cross_entropy"
  for method in dict.fromkeys(r.method for r in records):
    recs = [r for r in records if r.method == method]
    per_seed = {}
    for rec in recs:
      final = dict(rec.rows[-1]) if rec.rows else {}
      for k in FIRST_COLUMNS:
        final.pop(k, None)
      rounds_done = rec.rows[-1]["round"] if rec.rows else 0
      entry = {"status": rec.status, "rounds_done": rounds_done,
               "wall_s": rec.wall_s, "compile_s": rec.compile_s, "final": final}
      if classification and rec.rows:
        r, acc = rec.curve("accuracy")
        entry["best_accuracy"] = float(np.nanmax(acc))
        entry["best_round"] = int(r[int(np.nanargmax(acc))])
        entry["rounds_to_target"] = statistics.rounds_to_target(
            r, acc, config.target_accuracy)
      elif rec.rows and config.target_rmse > 0:
        r, rmse = rec.curve("rmse")
        entry["rounds_to_target"] = statistics.rounds_to_target(
            r, rmse, config.target_rmse, higher_is_better=False)
      per_seed[str(rec.seed)] = entry
    agg = {}
    for name in _final_metric_names(recs):
      agg[name] = statistics.seed_stats([r.rows[-1].get(name) for r in recs if r.rows])
    agg["wall_s"] = statistics.seed_stats([r.wall_s for r in recs])
    if classification:
      agg["best_accuracy"] = statistics.seed_stats(
          [e.get("best_accuracy") for e in per_seed.values()])
    out["methods"][method] = {"algorithm": recs[0].algorithm, "seeds": per_seed,
                              "mean": agg}
  return out


def format_table(summary, config) -> str:
  """Markdown table: final accuracy (or RMSE), rounds to target, wall time."""
  classification = config.task.loss == "cross_entropy"
  if classification:
    head = (f"| method | final accuracy | best accuracy | rounds to "
            f"{config.target_accuracy:.0%} | wall s/run | status |")
  else:
    head = "| method | final RMSE | final MAE | rounds to target | wall s/run | status |"
  lines = [head, "|---|---|---|---|---|---|"]
  for method, m in summary["methods"].items():
    seeds = m["seeds"].values()
    # A run kept in the workdir from a command with another length says so.
    done = [e.get("rounds_done", config.rounds) for e in seeds]
    statuses = sorted({e["status"] if e["status"] != "ok" or n == config.rounds
                       else f"ok ({n} rounds)" for e, n in zip(seeds, done)})
    r2t = [e.get("rounds_to_target") for e in seeds]
    reached = [x for x in r2t if x is not None]
    r2t_s = ("never" if not reached else
             f"{np.mean(reached):.1f}" + ("" if len(reached) == len(r2t)
                                          else f" ({len(reached)}/{len(r2t)} seeds)"))
    wall = m["mean"]["wall_s"]["mean"]

    def fmt(name):
      s = m["mean"].get(name)
      if not s or s["mean"] is None:
        return "n/a"
      return f"{s['mean']:.4f} ± {s['std']:.4f}" if s["n"] > 1 else f"{s['mean']:.4f}"
    if classification:
      cols = [fmt("accuracy"), fmt("best_accuracy"), r2t_s]
    else:
      cols = [fmt("rmse"), fmt("mae"), r2t_s]
    lines.append(f"| {method} | " + " | ".join(cols) +
                 f" | {wall:.1f} | {', '.join(statuses)} |")
  return "\n".join(lines)
