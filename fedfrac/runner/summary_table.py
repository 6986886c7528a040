"""The summary table of a run (``summary.md``, the table ``fedfrac-run`` prints and
``Results.table()`` returns).

One row per method, best final value first (accuracy: highest; RMSE: lowest;
ties by name; methods without a finite final value last), with the method's
family (:func:`fedfrac.algorithms.families.family`), the difference of its mean final value
to the reference method's (FedAvg: percentage points for accuracy, the metric's
units for RMSE), rounds to target, wall time, and a status that marks diverged
and partial runs, runs stopped at their target (``config.stop_at_target``) and
stand-in methods (:data:`fedfrac.algorithms.families.STAND_INS`).
"""
from __future__ import annotations

import numpy as np

from fedfrac.algorithms import families as catalog
from fedfrac.runner import finals as method_finals


def _fmt(stats) -> str:
  if not stats or stats["mean"] is None or not np.isfinite(stats["mean"]):
    return "n/a"
  return (f"{stats['mean']:.4f} ± {stats['std']:.4f}" if stats["n"] > 1
          else f"{stats['mean']:.4f}")


def _mean_reached(seeds, key, fmt) -> str:
  """The mean of ``key`` over the seeds that reached the target ("never": none
  did; "(k/n seeds)" when only some did)."""
  values = [e.get(key) for e in seeds]
  reached = [x for x in values if x is not None]
  if not reached:
    return "never"
  return format(np.mean(reached), fmt) + ("" if len(reached) == len(values)
                                          else f" ({len(reached)}/{len(values)} seeds)")


def _rounds_to_target(seeds) -> str:
  return _mean_reached(seeds, "rounds_to_target", ".1f")


def _time_to_target(seeds) -> str:
  return _mean_reached(seeds, "time_to_target", ".4g")


def _difference(final, reference, accuracy: bool) -> str:
  if reference is None or final.mean is None or reference.mean is None:
    return "n/a"
  if final.label == reference.label:
    return "reference"
  d = final.mean - reference.mean
  return f"{100 * d:+.2f} pp" if accuracy else f"{d:+.4g}"


def _status(final, seeds, rounds: int) -> str:
  # A run kept in the workdir from a command of another length says so; runs
  # that stopped at their target say at which rounds (one entry for them all).
  seeds = list(seeds)
  stopped = sorted({e["stopped"]["round"] for e in seeds if e.get("stopped")})
  statuses = sorted({e["status"] if e["status"] != "ok" or n == rounds
                     else f"ok ({n} rounds)"
                     for e, n in ((e, e.get("rounds_done", rounds)) for e in seeds)
                     if not e.get("stopped")})
  if stopped:
    statuses.append(f"ok, stopped at target (round{'s' if len(stopped) > 1 else ''} "
                    f"{', '.join(map(str, stopped))})")
  text = ", ".join(statuses or final.statuses)
  if final.algorithm in catalog.STAND_INS:
    text += ", stand-in"
  return text


def format_table(summary, config) -> str:
  """Markdown table of ``summary`` (:func:`fedfrac.runner.records.summarize`):
  method, family, final metric, difference to FedAvg, best accuracy (or final
  MAE), rounds to target, wall time and status, best method first."""
  classification = config.task.loss == "cross_entropy"
  metric = "accuracy" if classification else "rmse"
  finals = method_finals.ranked(method_finals.summary_finals(summary, metric),
                                  higher_is_better=classification)
  ref_label = method_finals.reference_label(finals)
  reference = next((f for f in finals if f.label == ref_label), None)
  ref_name = ref_label or catalog.REFERENCE
  if classification:
    head = ["method", "family", "final accuracy", f"vs {ref_name}", "best accuracy",
            f"rounds to {config.target_accuracy:.0%}", "wall s/run", "status"]
  else:
    head = ["method", "family", "final RMSE", f"vs {ref_name}", "final MAE",
            "rounds to target", "wall s/run", "status"]
  # Runs on the simulated clock (config.clock) also say when, in its time.
  timed = any("time_to_target" in e for m in summary["methods"].values()
              for e in m["seeds"].values())
  if timed:
    head.insert(6, "time to target")
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for final in finals:
    m = summary["methods"][final.label]
    second = m["mean"].get("best_accuracy" if classification else "mae")
    cells = [final.label, catalog.family(final.algorithm).key,
             _fmt(m["mean"].get(metric)), _difference(final, reference, classification),
             _fmt(second), _rounds_to_target(m["seeds"].values()),
             *([_time_to_target(m["seeds"].values())] if timed else []),
             f"{m['mean']['wall_s']['mean']:.1f}",
             _status(final, m["seeds"].values(), config.rounds)]
    lines.append("| " + " | ".join(cells) + " |")
  stand_ins = [f.label for f in finals if f.algorithm in catalog.STAND_INS]
  if stand_ins:
    lines += ["", "stand-in: built without the paper's full text "
              f"({', '.join(stand_ins)}; see `fedfrac.algorithms.families.STAND_INS`)."]
  return "\n".join(lines)
