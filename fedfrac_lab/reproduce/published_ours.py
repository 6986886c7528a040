"""Our side of the papers' published tables (:mod:`fedfrac_lab.reproduce.published_tables`):
for each paper, the committed runs each published cell is set beside, read from
the results files, with the setting they ran in (:class:`Ours`)."""
from __future__ import annotations


from typing import NamedTuple, Optional

import numpy as np

from fedfrac_lab.reproduce import common, verdicts




class Ours(NamedTuple):
  """A number of ours for one published cell, in the table's units: ``mean`` (and
  ``std`` over ``n`` seeds where it is a mean over seeds), or ``text`` for a
  non-numeric cell ("NR"), and the ``setting`` it really comes from.
  ``comparison``: a :class:`fedfrac_lab.reproduce.verdicts.Comparison` for a run on
  the paper's own data (judged by the rule); None for a stand-in."""
  mean: Optional[float]
  std: Optional[float]
  n: int
  setting: str
  text: str = ""
  comparison: Optional[object] = None

  @property
  def real(self) -> bool:
    """Whether this number comes from the paper's own data (not a stand-in)."""
    return self.comparison is not None


def from_values(values, setting, scale=1.0):
  """Ours from per-seed values (non-finite left out), times ``scale``."""
  mean, std, n = verdicts.seed_summary(values)
  if mean is None:
    return Ours(None, None, 0, setting, "no finite value")
  return Ours(mean * scale, std * scale, n, setting)


def _need(node, key, where):
  """``node[key]``, or a KeyError naming the results file and the key."""
  if key not in node:
    raise KeyError(f"{where}: no {key!r} (have: {', '.join(map(str, node))})")
  return node[key]


# ------------------------------------------------------------------ FO-RI-FedAvg

BEV_JSON = "results/bev_synthetic.json"
BEV_SETTING = ("synthetic fleet (10 vehicles, one client each; configs/bev/base.py), "
               "C = 0.5, 40 rounds, SGD η 0.02, 5 seeds")
PAPER_PROBE = "paper probe (M 10, m 100, B_probe 128) every 5 rounds"
LIGHT_PROBE = "light probe (M 4, m 20, B_probe 64)"
BEV_ROWS = {"FedAvg": "fedavg", "FedProx": "fedprox", "SCAFFOLD": "scaffold",
            "FedNova": "fednova", "FedAdam": "fedadam", "MOON": "moon",
            "FedDyn": "feddyn", "RI-FedAvg": "ri_fedavg", "FO-FedAvg": "fo_fedavg",
            "FO-RI-FedAvg": "fo_ri_fedavg"}
PROBED = ("ri_fedavg", "fo_ri_fedavg", "fo_ri_fedavg_lr05")


def _seed_finals(node, metric, where):
  """Final ``metric`` of every finished seed of a run node {seed: record}."""
  runs = [r for r in node.values() if isinstance(r, dict) and r.get("status") == "ok"]
  if not runs:
    raise KeyError(f"{where}: no finished run")
  return [r["final"].get(metric, np.nan) for r in runs]


def bev_ours():
  """{(table, row, column): [Ours]} from results/bev_synthetic.json."""
  raw = common.load_results_json(BEV_JSON)
  if raw is None:
    return {}
  studies = raw["studies"]
  main = _need(_need(studies, "main", BEV_JSON), "main", f"{BEV_JSON} studies.main")
  abl = _need(studies, "ablations", BEV_JSON)
  out = {}

  def add(key, node, metric, setting, where):
    out.setdefault(key, []).append(
        from_values(_seed_finals(node, metric, where), setting))

  def main_setting(label, statistic):
    probe = f"; {PAPER_PROBE}" if label in PROBED else ""
    lr = "; η 0.05 constant" if label == "fo_ri_fedavg_lr05" else ""
    return f"{BEV_SETTING}{lr}{probe}; {statistic}"
  for row, label in BEV_ROWS.items():
    node = _need(main, label, f"{BEV_JSON} main")
    for col, metric, stat in (("VED RMSE", "rmse", "final test RMSE (Wh/window)"),
                              ("VED MAE", "mae", "final test MAE (Wh/window)"),
                              ("VED MAPE", "mape", "final test MAPE (%, Eq. 34)")):
      add(("Table X", row, col), node, metric, main_setting(label, stat), label)
      if label == "fo_ri_fedavg":
        add(("Table X", row, col), _need(main, "fo_ri_fedavg_lr05", BEV_JSON), metric,
            main_setting("fo_ri_fedavg_lr05", stat), label)
    never = [r for r in node.values() if isinstance(r, dict) and r.get("status") == "ok"]
    lowest = min(v for r in never for _, v in r["curve_rmse"])
    for col, theta in (("VED theta=55", 55.0), ("VED theta=45", 45.0)):
      reached = sum(any(v <= theta for _, v in r["curve_rmse"]) for r in never)
      text = (f"NR in {len(never) - reached} of {len(never)} seeds (lowest RMSE "
              f"evaluated {lowest:.1f})")
      out[("Table XI", row, col)] = [Ours(None, None, len(never), main_setting(
          label, "RMSE evaluated every 10 rounds, 40 rounds (paper: 200)"), text)]
  ablation = f"{BEV_SETTING}; {LIGHT_PROBE}"
  probe = {every: _need(_need(abl, f"probe_every={every}", BEV_JSON), "fo_ri_fedavg",
                        f"{BEV_JSON} ablations.probe_every={every}")
           for every in (1, 5, 10)}
  rmse = "final test RMSE (Wh/window)"
  t12 = {
      "Default (alpha=0.8, lambda_t=lambda, probe every round, delta>0, clip, "
      "beta_kappa=0)": (probe[1], f"{ablation} every round; {rmse}"),
      "alpha=1.0 (integer-order)": (
          _need(_need(abl, "alpha", BEV_JSON), "fo_ri_fedavg[alpha=1.0]", "alpha"),
          f"{ablation} every 5 rounds, α = 1.0; {rmse}"),
      "No roughness control (r(I_k)=0; FO-FedAvg)": (
          main["fo_fedavg"], f"{BEV_SETTING}; FO-FedAvg (no probe); {rmse}"),
      "No safeguards (delta->0, no clipping)": (
          _need(_need(abl, "safeguard=delta0_no_clip", BEV_JSON), "fo_ri_fedavg",
                "safeguard=delta0_no_clip"),
          f"{ablation} every 5 rounds, δ = 1e-12, no clip; {rmse}"),
      "Add spectral gate (beta_kappa=0.5)": (
          _need(_need(abl, "beta_kappa", BEV_JSON), "fo_ri_fedavg[beta_kappa=0.5]",
                "beta_kappa"), f"{ablation} every 5 rounds, β_κ = 0.5; {rmse}"),
  }
  for row, (node, setting) in t12.items():
    add(("Table XII", row, "VED RMSE"), node, "rmse", setting, row)
  for every, row in ((1, "Every round (1x)"), (5, "Every 5 rounds"),
                     (10, "Every 10 rounds")):
    add(("Table XIII", row, "VED RMSE"), probe[every], "rmse",
        f"{ablation} every {every} round{'s' if every > 1 else ''}; {rmse}", row)
  beta = _need(abl, "beta_kappa", BEV_JSON)
  for value, row in (("0.0", "beta_kappa=0"), ("0.25", "beta_kappa=0.25"),
                     ("0.5", "beta_kappa=0.5"), ("1.0", "beta_kappa=1.0")):
    node = _need(beta, f"fo_ri_fedavg[beta_kappa={value}]", f"{BEV_JSON} beta_kappa")
    setting = f"{ablation} every 5 rounds, β_κ = {value}"
    add(("Table XIV", row, "VED RMSE"), node, "rmse", f"{setting}; {rmse}", row)
    add(("Table XIV", row, "VED D_cv(200)"), node, "server/drift_cv",
        f"{setting}; D_cv at the final round, 40 (paper: round 200)", row)
  fo_ri = main["fo_ri_fedavg"]
  for col, metric in (("Pearson r", "server/pearson_roughness_drift"),
                      ("Spearman rho", "server/spearman_roughness_drift")):
    add(("Table XV", "VED", col), fo_ri, metric,
        main_setting("fo_ri_fedavg", "correlation of I_k and the update size over "
                     "the cohort at the final round, 40 (paper: round 100)"), col)
  return out


# ---------------------------------------------------------------------- FOFedAvg

DIGITS_SETTING = ("scikit-learn digits (1,437 / 360), Dirichlet 0.3, 10 clients, MLP "
                  "(128, 64), μ_t = 0.1/√(t+1), 30 rounds, 3 seeds")
FMNIST_SETTING = ("real Fashion-MNIST, CNNMnist, IID, K = 10, C = 0.2, E = 1, 15 rounds "
                  "(reduced), 3 seeds")


# Table IV's α rows: the α grids with the mean fractional factor (digits, and the
# reduced real Fashion-MNIST run) and the fractional family's digits table, whose
# grid has α = 0.6 (its α = 0.5 and 0.97 are the same runs as the first file's).
ALPHA_SOURCES = (("results/fofedavg_alpha_digits.json", DIGITS_SETTING),
                 ("results/fractional_digits.json", DIGITS_SETTING),
                 ("results/fofedavg_alpha_fashion_mnist.json", FMNIST_SETTING))


def fofedavg_method_rows():
  """FOFedAvg Tables II–VI's row names -> our method labels (the eleven methods
  of ``fedfrac-reproduce fofedavg --tables=methods``)."""
  return {"FOFedAvg": "fofedavg", "MOON": "moon", "FedAdam": "fedadam",
          "FedNova": "fednova", "FedAvg": "fedavg", "FedProx": "fedprox",
          "SCAFFOLD": "scaffold", "SparseSecAgg": "sparse_secagg", "DPSGD": "dp_sgd",
          "FedBM": "fedbm", "FDSE": "fdse"}


def _summary_ours(s, setting):
  """{column kind: Ours} of one sweep summary entry ({"mean", "std", "ci95", "n"}
  of the final accuracy): the mean, the std and variance over seeds, and the 95 %
  t-interval of the mean."""
  a = s["accuracy"]
  if a["mean"] is None:
    return {}
  n = a["n"]
  over = f"over {n} seeds of the final test accuracy"
  return {
      "mean": Ours(a["mean"], a["std"], n, f"{setting}; mean {over}"),
      "std": Ours(a["std"], None, n, f"{setting}; sample std {over}"),
      "var": Ours(a["std"] ** 2, None, n, f"{setting}; sample variance {over}"),
      "lo": Ours(a["mean"] - a["ci95"], None, n,
                 f"{setting}; 95 % t-interval of the mean {over}"),
      "hi": Ours(a["mean"] + a["ci95"], None, n,
                 f"{setting}; 95 % t-interval of the mean {over}"),
  }


def fofedavg_ours():
  """{(table, row, column): [Ours]}: first the runs on the real MNIST of Tables
  II–IV that have finished (:mod:`fedfrac_lab.reproduce.fofedavg_mnist`, judged),
  then the stand-ins: Tables II–III of every method from
  results/fofedavg_methods_digits.json and Table IV's α rows from the α grids of
  ``ALPHA_SOURCES`` on digits and on the real Fashion-MNIST."""
  from fedfrac_lab.reproduce import fofedavg_mnist
  out = {key: list(entries) for key, entries in fofedavg_mnist.ours().items()}
  methods = common.load_results_json("results/fofedavg_methods_digits.json")
  if methods:
    summary = methods[0]["summary"]
    for row, label in fofedavg_method_rows().items():
      cells = _summary_ours(_need(summary, label, "fofedavg_methods_digits.json"),
                            DIGITS_SETTING + " (the paper's statistic may run over "
                            "rounds)")
      for col, kind in (("Mean", "mean"), ("Variance", "var"), ("Std. Dev.", "std")):
        if kind in cells:
          out.setdefault(("Table II", row, col), []).append(cells[kind])
      for col, kind in (("CI95_low", "lo"), ("CI95_high", "hi")):
        if kind in cells:
          out.setdefault(("Table III", row, col), []).append(cells[kind])
  seen = set()
  for path, setting in ALPHA_SOURCES:
    raw = common.load_results_json(path)
    if not raw:
      continue
    summary = raw[0]["summary"]
    for a in ("0.5", "0.6", "0.97", "1.5"):
      s = summary.get(f"fofedavg[alpha={a}]")
      if s is None or (setting, a) in seen:     # a grid without α, or one seen in the
        continue                                # same setting (the same runs) before
      seen.add((setting, a))
      cells = _summary_ours(s, setting)
      for col, kind in (("mean", "mean"), ("std", "std"), ("CI_low", "lo"),
                        ("CI_high", "hi")):
        if kind in cells:
          out.setdefault(("Table IV", f"alpha={a}", col), []).append(cells[kind])
  return out


# ---------------------------------------------------------------------- Kuramoto

KURAMOTO_MD = "results/kuramoto_digits.md"
KURAMOTO_SECTION = "K = 10 clients, s = 3 shards per client"


def kuramoto_ours():
  """{(table, row, column): [Ours]}: Table 1's MNIST column from the K = 10, s = 3
  section of results/kuramoto_digits.md (digits with label shards, a stand-in for
  MNIST; that run keeps no JSON, so the committed table is the source): best
  accuracy and its round per κ0 for each of our three weightings, FedAvg for
  No-sync."""
  try:
    tables = common.markdown_tables(KURAMOTO_MD)
  except FileNotFoundError:
    return {}
  rows = next((rows for heading, rows in tables if heading.startswith(KURAMOTO_SECTION)),
              None)
  if rows is None:
    raise KeyError(f"{KURAMOTO_MD}: no section {KURAMOTO_SECTION!r}")
  setting = ("scikit-learn digits, K = 10 clients, s = 3 label shards each, 100 rounds, "
             "3 seeds; the best over rounds of the accuracy averaged over clients")
  out = {}
  for r in rows:
    method, kappa = r["method"], r["κ0"]
    row = "No-sync" if method == "FedAvg" else (
        f"kappa0={kappa}" if method in ("coupled", "paper", "reference_code") else None)
    if row is None:
      continue
    what = "FedAvg" if method == "FedAvg" else f"`{method}` weighting"
    for col, key, scale in (("MNIST · max_accuracy", "best accuracy", 100.0),
                            ("MNIST · round", "round of best", 1.0)):
      parsed = common.parse_mean_std(r[key])
      if parsed is None:
        continue
      mean, std = parsed
      out.setdefault(("Table 1", row, col), []).append(Ours(
          mean * scale, None if std is None else std * scale, 3,
          f"{what}; {setting}" + (" (%)" if scale == 100.0 else "")))
  return out
