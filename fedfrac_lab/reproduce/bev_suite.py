"""The FO-RI-FedAvg BEV studies (paper §IV) as :class:`Suite`: each study's
configurations (``configs_<study>``: its scenario grid, built from configs/bev/)
and its section of the report (``study_<study>``). The runs are
:class:`fedfrac_lab.reproduce.bev_runs.SuiteRuns`, the timing and latency studies
:class:`fedfrac_lab.reproduce.bev_speed.SpeedStudies`, the tables
:mod:`fedfrac_lab.reproduce.bev_tables`.
"""
from __future__ import annotations


import ml_collections
import numpy as np

from fedfrac import algorithms
from fedfrac_lab.reproduce.bev_tables import (OURS, PAPER_NAMES, cell, final, group, md_table,
                                          metric_rows,
                                          r2t_cell,
                                          stats,
                                          status_cell)
from fedfrac_lab.reproduce.bev_runs import STUDIES, load_config_module  # noqa: F401
from fedfrac_lab.reproduce.bev_speed import SpeedStudies


class Suite(SpeedStudies):
  """Runs the studies, keeps every number, and writes the report."""

  # -- studies
  def configs_main(self):
    return [("main", self.configure(load_config_module("main_table").get_config()), None)]

  def study_main(self):
    base = load_config_module("base")
    _, c, _ = self.configs_main()[0]
    res = self.run(c)
    self.main_results = res
    self.main_config = c
    self.keep("main", "main", res)
    groups = group(res, base.MAIN_METHODS)
    missing = [PAPER_NAMES.get(l, l) for l, (n, _) in base.MAIN_METHODS.items()
               if n not in algorithms.names()]
    header, rows = metric_rows(groups, c.target_rmse,
                               first_col=lambda l: PAPER_NAMES.get(l, l))
    text = [md_table(header, rows)]
    if missing:
      text.append(f"\nNot implemented in this installation, so not in the table: "
                  f"{', '.join(missing)}.")
    text.append(self._paired(groups))
    text.append(self._diagnostics(groups))
    return "Main table", "\n".join(t for t in text if t)

  def _paired(self, groups):
    mine = [l for l in (OURS, OURS + "_lr05") if l in groups]
    if not mine:
      return f"\n{PAPER_NAMES[OURS]} is not available: no paired comparison."
    rows = []
    for label, recs in groups.items():
      if label in mine:
        continue
      row = [PAPER_NAMES.get(label, label)]
      for m in mine:
        ours = {r.seed: final(r, "rmse") for r in groups[m]}
        diffs, wins = [], 0
        for r in recs:
          a, b = ours.get(r.seed), final(r, "rmse")
          if a is None or b is None:
            continue
          diffs.append(a - b)
          wins += a < b
        if diffs:
          s = stats(diffs)
          row += [f"{s['mean']:+.1f} ± {s['std']:.1f} (CI ± {s['ci95']:.1f})",
                  f"{wins}/{len(diffs)}"]
        else:
          row += ["n/a", "n/a"]
      rows.append(row)
    header = ["baseline"]
    for m in mine:
      header += [f"Δ RMSE, {PAPER_NAMES[m]} − baseline (Wh)", "seeds better"]
    return ("\nPaired by seed (same initial model, client sampling and data): final "
            "RMSE difference (negative = the FO-RI-FedAvg row is better), mean ± std "
            "over seeds with the 95% t-interval half-width, and the number of seeds "
            "where the FO-RI-FedAvg row has the lower RMSE.\n\n" +
            md_table(header, rows))

  def _diagnostics(self, groups):
    names = ("server/drift_mean", "server/drift_cv", "server/roughness_mean",
             "server/pearson_roughness_drift", "server/spearman_roughness_drift")
    rows = []
    for label, recs in groups.items():
      vals = {}
      for n in names:
        per_seed = []
        for r in recs:
          v = [row.get(n) for row in r.round_rows if row.get(n) is not None
               and np.isfinite(row.get(n))]
          per_seed.append(float(np.mean(v)) if v else None)
        vals[n] = per_seed
      if any(v is not None for v in vals["server/drift_mean"]):
        rows.append([PAPER_NAMES.get(label, label)] +
                    [cell(vals[n], 3) for n in names])
    if not rows:
      return ""
    return ("\nDrift and roughness diagnostics (mean over rounds, then mean ± std over "
            "seeds; D = ‖w_{t+1}^k − w_t‖, correlations between I_k and D over the "
            "cohort):\n\n" + md_table(["method", "D_mean", "D_cv", "mean I_k",
                                        "Pearson(I, D)", "Spearman(I, D)"], rows))

  def study_types(self):
    if self.main_results is None:
      self.study_main()
    res, c = self.main_results, self.main_config
    fed = self.fed_data(c)
    classes = [str(g) for g in fed.client_group]
    kinds = list(dict.fromkeys(classes))
    n_test = fed.client_test_size.astype(np.float64)
    rows = []
    for label, recs in group(res, load_config_module("base").MAIN_METHODS).items():
      row = [PAPER_NAMES.get(label, label)]
      for kind in kinds:
        sel = np.asarray([k == kind for k in classes]) & (n_test > 0)
        rmse, mae = [], []
        for r in recs:
          if r.status != "ok" or "clients/client_rmse" not in r.client_arrays:
            continue
          cr = r.client_arrays["clients/client_rmse"]
          cm = r.client_arrays["clients/client_mae"]
          w = n_test[sel]
          rmse.append(float(np.sqrt(np.sum(w * cr[sel] ** 2) / w.sum())))
          mae.append(float(np.sum(w * cm[sel]) / w.sum()))
        row += [cell(rmse), cell(mae)]
      rows.append(row)
    counts = ", ".join(f"{k}: {classes.count(k)} vehicles, "
                       f"{int(n_test[np.asarray(classes) == k].sum())} test windows"
                       for k in kinds)
    header = ["method"] + [f"{k} {m}" for k in kinds for m in ("RMSE", "MAE")]
    mean_y = {}
    bev = fed.meta.get("bev")
    if bev is not None:
      y = np.abs(bev.denormalize_y(bev.y_test, bev.client_test))
      for k in kinds:
        mean_y[k] = float(np.mean(y[np.asarray(classes)[bev.client_test] == k]))
    scale = ", ".join(f"{k} {v:.0f} Wh" for k, v in mean_y.items())
    return "Vehicle types", (
        f"Main-table runs, errors pooled over the vehicles of each class (Wh per "
        f"window; {counts}; mean |label|: {scale}).\n\n" + md_table(header, rows))

  def configs_ablations(self):
    """``[((study, value or None), config, grid)]``: a continuous option as one
    grid over its values, the others one configuration per value."""
    mod = load_config_module("ablations")
    if OURS not in algorithms.names():
      return []
    out = []
    for study, (values, gridable) in mod.STUDIES.items():
      if gridable:
        c = self.configure(mod.get_config(f"{study}={values[0]}"))
        label = next(iter(c.methods.keys()))
        method = c.methods[label]
        c.methods = ml_collections.ConfigDict()
        c.methods[OURS] = method
        c.name = f"BEV ablation {study}, SYNTHETIC fleet"
        out.append(((study, None), c, {study: list(values)}))
      else:
        out += [((study, v), self.configure(mod.get_config(f"{study}={v}")), None)
                for v in values]
    return out

  def study_ablations(self):
    mod = load_config_module("ablations")
    if OURS not in algorithms.names():
      return "Ablations", f"{PAPER_NAMES[OURS]} is not available: no ablations."
    parts = []
    planned = self.configs_ablations()
    for study, (values, gridable) in mod.STUDIES.items():
      groups = {}
      for (name, v), c, grid in planned:
        if name != study:
          continue
        res = self.run(c, grid=grid)
        if grid:
          self.keep("ablations", study, res)
          by_value = {label.split("=", 1)[1].rstrip("]"): recs
                      for label, recs in group(res).items()}
          for value in values:
            groups[str(value)] = by_value[str(value)]
        else:
          self.keep("ablations", f"{study}={v}", res)
          groups[str(v)] = next(iter(group(res).values()))
      header, rows = metric_rows(groups, self.target(), per_round=not gridable)
      header[0] = study
      parts.append(f"**{study}**\n\n" + md_table(header, rows))
    note = ("The paper's grids (§IV-G) on the scaled-down synthetic setup (40 rounds, "
            "C = 0.5, η = 0.02, not the paper's protocol of configs/bev/paper.py). "
            "FO-RI-FedAvg with the paper's defaults (α 0.8, λ 0.1, R_probe 5, δ 1e-6, "
            "p ∈ [0.2, 5], β_κ 0) except the option varied, and the light roughness "
            "probe (M 4, m 20, B_probe 64). α = 1 is RI-FedAvg. Continuous options "
            "(α, λ, β_κ) run as one vmapped grid (results equal separate runs; "
            "per-round time is then shared and not shown). Safeguard (δ × clip): "
            "`paper` δ 1e-6, p ∈ [0.2, 5]; `no_clip` δ 1e-6, no clip; `delta0` "
            "δ = 1e-12 (δ → 0), p ∈ [0.2, 5]; `delta0_no_clip` δ = 1e-12, no clip. "
            "The β_κ gate acts on the head's [32, 1] kernel, whose κ is 1 (rank one): "
            "the gate is the constant 1/(1 + β_κ) on local steps h ≥ 1.")
    return "Ablations (FO-RI-FedAvg)", note + "\n\n" + "\n\n".join(parts)

  def target(self):
    return load_config_module("base").get_config().target_rmse

  def configs_participation(self):
    mod = load_config_module("participation")
    return [(v, self.configure(mod.get_config(str(v))), None) for v in mod.VALUES]

  def study_participation(self):
    mod = load_config_module("participation")
    rows_by = {}
    main_c = load_config_module("base").get_config().participation
    for v, c, _ in self.configs_participation():
      res = self.run(c)
      self.keep("participation", str(v), res)
      rows_by[v] = group(res, mod.METHODS)
    rows = []
    for v, groups in rows_by.items():
      for label, recs in groups.items():
        rows.append([f"{v:g}", PAPER_NAMES.get(label, label),
                     cell([final(r, "rmse") for r in recs]),
                     cell([final(r, "mae") for r in recs]),
                     cell([final(r, "mape") for r in recs]),
                     r2t_cell(recs, self.target()), status_cell(recs)])
    return "Participation sweep", (
        f"Client fraction C (|S_t| = ceil(C·K) of K = 10 vehicles per round; the main "
        f"table uses C = {main_c:g}); FO-RI-FedAvg with the light roughness probe.\n\n" +
        md_table(["C", "method", "RMSE (Wh)", "MAE (Wh)", "MAPE (%)",
                  f"rounds to RMSE ≤ {self.target():g}", "status"], rows))

  def configs_churn(self):
    mod = load_config_module("churn")
    settings = [str(p) for p in mod.SYMMETRIC] + list(mod.ASYMMETRIC)
    if self.ved:
      settings = [s for s in settings if s != "asym_class"]
    return [(s, self.configure(mod.get_config(s)), None) for s in settings]

  def study_churn(self):
    mod = load_config_module("churn")
    rows = []
    for s, c, _ in self.configs_churn():
      res = self.run(c)
      self.keep("churn", s, res)
      groups = group(res, mod.METHODS)
      if s.startswith("loss="):
        desc = f"net loss ({s[5:]}, {mod.FIXED_RATE:g})"
      elif s.startswith("gain="):
        desc = f"net gain ({mod.FIXED_RATE:g}, {s[5:]})"
      elif s == "asym_rates":
        desc = "asym. (0.2, 0.05)"
      elif s == "asym_class":
        desc = "per class: car (0.2, 0.2), truck/bus (0.02, 0.5)"
      else:
        desc = "none" if float(s) == 0 else f"sym. ({s}, {s})"
      for label, recs in groups.items():
        cohort = [np.mean([row.get("cohort", np.nan) for row in r.round_rows])
                  for r in recs]
        rows.append([desc, PAPER_NAMES.get(label, label),
                     cell([final(r, "rmse") for r in recs]),
                     cell([final(r, "mae") for r in recs]),
                     cell(cohort, 2), r2t_cell(recs, self.target()), status_cell(recs)])
    return "Client churn", (
        "Availability per vehicle is a two-state Markov chain (p_leave, p_join); all "
        "vehicles start available; S_t has max(ceil(0.5·|A_t|), 1) of the |A_t| "
        "available vehicles (§IV-N; mean cohort column). The paper's regimes: "
        "symmetric p ∈ {0.05, 0.1, 0.2}, net loss (p_join = 0.02) and net gain "
        "(p_leave = 0.02) with the other rate in {0.05, 0.1, 0.2}; `asym. (0.2, 0.05)` "
        "and `per class` are ours. Scaled-down setup (40 rounds, C = 0.5; the paper: "
        "T = 300, C = 0.3). FO-RI-FedAvg with the light roughness probe; the `none` "
        "rows are the participation sweep's C = 0.5 runs.\n\n" +
        md_table(["churn (p_leave, p_join)", "method", "RMSE (Wh)", "MAE (Wh)",
                  "mean cohort", f"rounds to RMSE ≤ {self.target():g}", "status"], rows))

  def configs_architectures(self):
    mod = load_config_module("architectures")
    return [(arch, self.configure(mod.get_config(arch)), None) for arch in mod.MODELS]

  def study_architectures(self):
    mod = load_config_module("architectures")
    rows = []
    for arch, c, _ in self.configs_architectures():
      res = self.run(c)
      self.keep("architectures", arch, res)
      for label, recs in group(res, mod.METHODS).items():
        rows.append([arch.upper(), PAPER_NAMES.get(label, label),
                     cell([final(r, "rmse") for r in recs]),
                     cell([final(r, "mae") for r in recs]),
                     cell([final(r, "mape") for r in recs]), status_cell(recs)])
    return "Architectures", (
        "The paper's backbone study (§IV-O, Tables XXXII–XXXIII): the window MLP "
        "(ANN), a single-layer GRU and a single-layer LSTM (hidden 64, linear head on "
        "the last hidden state), same federation; scaled-down setup (40 rounds, "
        "C = 0.5; the paper: T = 300, C = 0.3), FO-RI-FedAvg with the light "
        "roughness probe. The ANN rows are the participation sweep's C = 0.5 runs."
        "\n\n" + md_table(["backbone", "method", "RMSE (Wh)", "MAE (Wh)", "MAPE (%)",
                            "status"], rows))

  def configs_scaling(self):
    if self.ved:
      return []
    mod = load_config_module("scaling")
    return [(k, self.configure(mod.get_config(str(k))), None) for k in mod.VALUES]

  def study_scaling(self):
    if self.ved:
      return "Client scaling", "Not run on VED (the fleet size is fixed by the files)."
    mod = load_config_module("scaling")
    rows = []
    for k, c, _ in self.configs_scaling():
      res = self.run(c)
      self.keep("scaling", str(k), res)
      fed = self.fed_data(c)
      for label, recs in group(res, mod.METHODS).items():
        rounds = max(recs[0].rows[-1]["round"], 1) if recs[0].rows else 1
        rows.append([str(k), str(int(fed.client_size.sum())),
                     PAPER_NAMES.get(label, label),
                     cell([final(r, "rmse") for r in recs]),
                     cell([final(r, "rmse_macro") for r in recs]),
                     cell([final(r, "mae") for r in recs]),
                     f"{np.mean([r.wall_s for r in recs]) * len(recs) / rounds:.2f}",
                     f"{np.mean([r.compile_s for r in recs]) * len(recs):.0f}",
                     status_cell(recs)])
    return "Client scaling", (
        "K vehicles (2 h of driving each, C = 0.2, 20 rounds; FO-RI-FedAvg with the "
        "light roughness probe); time per round is for "
        f"the whole {len(self.seeds)}-seed vmapped program, compile time separate.\n\n" +
        md_table(["K", "train windows", "method", "RMSE (Wh)", "macro RMSE",
                  "MAE (Wh)", "s/round (all seeds)", "compile s", "status"], rows))
