"""The tables of the FO-RI-FedAvg BEV report (:mod:`fedfrac_lab.reproduce.fo_ri_fedavg`):
mean ± std cells over seeds, rounds to target, the per-method metric rows and the
main table (:func:`table`), with the paper's method names.
"""
from __future__ import annotations


import numpy as np

from fedfrac import metrics as metrics_lib


PAPER_NAMES = {
    "fedavg": "FedAvg", "fedprox": "FedProx", "scaffold": "SCAFFOLD",
    "fednova": "FedNova", "fedadam": "FedAdam", "moon": "MOON", "feddyn": "FedDyn",
    "ri_fedavg": "RI-FedAvg", "fo_fedavg": "FO-FedAvg", "fo_ri_fedavg": "FO-RI-FedAvg",
    "fo_ri_fedavg_lr05": "FO-RI-FedAvg (η = 0.05)",
}
OURS = "fo_ri_fedavg"


def stats(values):
  return metrics_lib.seed_stats([v for v in values if v is not None and np.isfinite(v)])


def cell(values, digits=1):
  s = stats(values)
  if s["mean"] is None:
    return "n/a"
  return f"{s['mean']:.{digits}f} ± {s['std']:.{digits}f}"


def md_table(header, rows):
  out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
  return "\n".join(out)


def final(rec, name):
  if not rec.rows or rec.status != "ok":
    return None
  v = rec.rows[-1].get(name)
  return None if v is None else float(v)


def rounds_to(rec, target):
  if not rec.rows or target <= 0:
    return None
  r, rmse = rec.curve("rmse")
  return metrics_lib.rounds_to_target(r, rmse, target, higher_is_better=False)


def r2t_cell(recs, target):
  vals = [rounds_to(r, target) for r in recs]
  hit = [v for v in vals if v is not None]
  if not hit:
    return "never"
  s = f"{np.mean(hit):.0f}"
  return s if len(hit) == len(vals) else f"{s} ({len(hit)}/{len(vals)} seeds)"


def status_cell(recs):
  bad = [f"seed {r.seed}: {r.status}" for r in recs if r.status != "ok"]
  return "ok" if not bad else "; ".join(bad)


METRIC_COLS = (("rmse", "RMSE (Wh)"), ("mae", "MAE (Wh)"), ("mape", "MAPE (%)"),
               ("rmse_macro", "macro RMSE"), ("mae_macro", "macro MAE"),
               ("mape_macro", "macro MAPE (%)"))


def group(results, order=None):
  """label -> records (seed order), in ``order`` (default: as run)."""
  out = {}
  for rec in results.records:
    out.setdefault(rec.method, []).append(rec)
  if order:
    out = {k: out[k] for k in sorted(out, key=lambda k: (
        list(order).index(k) if k in order else len(order), k))}
  return out


def metric_rows(groups, target, first_col=lambda label: label, per_round=True,
                cols=METRIC_COLS):
  rows = []
  for label, recs in groups.items():
    row = [first_col(label)] + [cell([final(r, k) for r in recs]) for k, _ in cols]
    row.append(r2t_cell(recs, target))
    if per_round:
      rounds = max(recs[0].rows[-1]["round"], 1) if recs[0].rows else 1
      row.append(f"{np.mean([r.wall_s for r in recs]) / rounds * 1e3:.0f}")
    row.append(status_cell(recs))
    rows.append(row)
  header = ["method"] + [h for _, h in cols] + [f"rounds to RMSE ≤ {target:g}"]
  if per_round:
    header.append("ms/round/run")
  header.append("status")
  return header, rows


def table(results, target):
  """Markdown main table of ``results`` (``ff.run_many`` of a configs/bev/ config):
  one row per method, mean ± std over seeds of the final test metrics, rounds to
  RMSE <= ``target`` (Wh), time per round and run status."""
  header, rows = metric_rows(group(results), target,
                             first_col=lambda label: PAPER_NAMES.get(label, label))
  return md_table(header, rows)
