"""The figures of the FO-RI-FedAvg BEV report: test RMSE per round for each
configuration, final RMSE against the swept value (client fraction, fleet size)
and the numeric ablations (:func:`figures`).
"""
from __future__ import annotations


import numpy as np

from fedfrac_lab.reproduce import common
from fedfrac.runner import plots
from fedfrac_lab.reproduce.bev_tables import OURS, PAPER_NAMES


# Studies with per-round curves (one panel per configuration) and studies whose
# configurations are numbers (a sweep figure: final RMSE vs that number).
ROUND_STUDIES = ("main", "participation", "churn", "architectures", "scaling")
SWEEP_STUDIES = {"participation": "client fraction C", "scaling": "vehicles K"}
ABLATION_SYMBOLS = {"alpha": "α", "lam": "λ", "probe_every": "R_probe",
                    "beta_kappa": "β_κ"}


def seed_curves(by_seed):
  """(rounds [n], RMSE [seeds, n]) of one method's kept runs (``Suite.keep``)."""
  return common.stack_curves(
      [([row[0] for row in run["curve_rmse"]],
        [np.nan if row[1] is None else row[1] for row in run["curve_rmse"]])
       for run in by_seed.values()])


def seed_finals(by_seed, metric="rmse"):
  """Final ``metric`` of each seed of one method; None for a run that did not
  finish ok (left out, as in the tables)."""
  return [run["final"].get(metric) if run["status"] == "ok" else None
          for run in by_seed.values()]


def number(text):
  try:
    return float(text)
  except (TypeError, ValueError):
    return None


def figures(raw, out):
  """Write the report's figures beside ``out`` (``X.md``) from ``raw``
  ({study: {configuration: {method: {seed: kept run}}}}, ``Suite.raw``, as the
  report's JSON holds it) and return their paths. Curves: mean ± std band over
  seeds; sweeps: mean ± sample std over seeds of the final test RMSE (Wh)."""
  paths = []
  scenarios = {}
  for study in ROUND_STUDIES:
    for key, by_label in raw.get(study, {}).items():
      panel = {}
      for label, by_seed in by_label.items():
        curve = seed_curves(by_seed)
        if curve is not None:
          panel[PAPER_NAMES.get(label, label)] = curve
      if panel:
        scenarios[study if key == study else f"{study}: {key}"] = panel
  if scenarios:
    paths.append(common.figure_path(out, "rounds"))
    plots.scenarios_figure(scenarios, ylabel="test RMSE (Wh)", columns=4,
                           title="BEV energy regression: test RMSE per round",
                           path=paths[-1])
  for study, xlabel in SWEEP_STUDIES.items():
    lines = {}
    for key, by_label in raw.get(study, {}).items():
      x = number(key)
      for label, by_seed in by_label.items():
        if x is not None:
          lines.setdefault(PAPER_NAMES.get(label, label), []).append(
              (x, seed_finals(by_seed)))
    if lines:
      paths.append(common.figure_path(out, study))
      plots.sweep_figure(lines, xlabel=xlabel, ylabel="final test RMSE (Wh)",
                         title=f"BEV {study} study: final RMSE vs {xlabel}",
                         path=paths[-1])
  ablations = raw.get("ablations", {})
  for option, symbol in ABLATION_SYMBOLS.items():
    points = []
    for key, by_label in ablations.items():
      for label, by_seed in by_label.items():
        parsed = common.split_grid_label(label)
        if key == option and parsed is not None and parsed[1] == option:
          points.append((parsed[2], seed_finals(by_seed)))
        elif key.startswith(option + "=") and number(key.split("=", 1)[1]) is not None:
          points.append((number(key.split("=", 1)[1]), seed_finals(by_seed)))
    if points:
      paths.append(common.figure_path(out, f"ablation_{option}"))
      plots.sweep_figure({PAPER_NAMES[OURS]: points}, xlabel=symbol,
                         ylabel="final test RMSE (Wh)",
                         title=f"FO-RI-FedAvg ablation: final RMSE vs {symbol}",
                         path=paths[-1])
  return paths
