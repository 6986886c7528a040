"""Reproduce the FO-RI-FedAvg BEV experiment suite (paper §IV) as one markdown report.

  fedfrac-reproduce fo_ri_fedavg                 # SYNTHETIC fleet
      -> results/bev_synthetic.md (+ .json with every per-seed number)
  fedfrac-reproduce fo_ri_fedavg --ved=/path/to/VED_DynamicData \
      --out=results/bev_ved.md                    # real VED CSVs

(``bev`` is accepted for ``fo_ri_fedavg``.) From a notebook:
``results = ff.run_many(config)`` on a configs/bev/ config, then
``print(ff.reproduce.fo_ri_fedavg.table(results, config.target_rmse))``.

Studies (``--studies``, comma-separated; default all): ``main`` (every method,
10 vehicles), ``types`` (per vehicle class, from the main runs), ``ablations``
(α, λ, R_probe, preconditioner safeguard, spectral gate), ``participation``
(C ∈ {0.1, 0.2, 0.3, 0.5}), ``churn`` (symmetric and asymmetric availability),
``architectures`` (window MLP, GRU, LSTM),
``scaling`` (10/50/100/200 vehicles; synthetic only), ``timing`` (per-round time
and the share spent on roughness probes and diagnostics), ``latency``
(inference: batch-1 median and p95, batch-32 throughput).

Every configuration runs all seeds (default 5) as ONE vmapped program
(``ff.run_many``); numbers are mean ± sample std over seeds of the final
(last-round) test metrics in Wh per window. The configs are in configs/bev/; each
study's config can also be run on its own with ``python -m fedfrac.main``.
``--rounds`` overrides every study's round count (for smoke runs); seeds are
never cut by the script.

The runs go through ``fedfrac.sweep``'s point runner
(:mod:`fedfrac.reproduce.jobs`): the configurations of the chosen studies are
collected first (:meth:`Suite.plan`; one configuration shared by two studies
runs once), each (configuration, method, seed) is one point and each
(configuration, method) one batch, and the batches run as a work queue over
``--workers`` processes (default one per CPU core or device) before the
studies write their tables. Finished runs are kept under ``--resume_dir``
(default runs/bev_suite, git-ignored) in a folder named after the code and the
configurations, so re-running an interrupted command resumes it and changed
code starts afresh; ``--dir=D`` keeps them exactly in D instead (a D of other
code or configurations is refused unless ``--overwrite``). The timing and
latency studies measure this process and run in it.

Beside the report ``X.md`` (and ``X.json``) the command writes ``X_rounds.png``
(test RMSE per round, one panel per configuration of the main, participation,
churn, architecture and scaling studies), ``X_participation.png`` and
``X_scaling.png`` (final RMSE vs C and vs the number of vehicles) and
``X_ablation_<option>.png`` for the numeric ablations (α, λ, R_probe, β_κ); see
:func:`figures`.

The studies share one runner and one report (``Suite``), which is why this module
is about 800 lines.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

import fedfrac as ff
from fedfrac import algorithms, models
from fedfrac import data as data_lib
from fedfrac import metrics as metrics_lib
from fedfrac.reproduce import common, jobs
from fedfrac.runner import plots
from fedfrac.runner import points as points_lib

STUDIES = ("main", "types", "ablations", "participation", "churn", "architectures",
           "scaling", "timing", "latency")
PAPER_NAMES = {
    "fedavg": "FedAvg", "fedprox": "FedProx", "scaffold": "SCAFFOLD",
    "fednova": "FedNova", "fedadam": "FedAdam", "moon": "MOON", "feddyn": "FedDyn",
    "ri_fedavg": "RI-FedAvg", "fo_fedavg": "FO-FedAvg", "fo_ri_fedavg": "FO-RI-FedAvg",
    "fo_ri_fedavg_lr05": "FO-RI-FedAvg (η = 0.05)",
}
OURS = "fo_ri_fedavg"


def load_config_module(name):
  """The config module configs/bev/<name>.py."""
  return common.config_module(f"bev/{name}.py")


# ------------------------------------------------------------------- formatting


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


# --------------------------------------------------------------------- figures

# Studies with per-round curves (one panel per configuration) and studies whose
# configurations are numbers (a sweep figure: final RMSE vs that number).
ROUND_STUDIES = ("main", "participation", "churn", "architectures", "scaling")
SWEEP_STUDIES = {"participation": "client fraction C", "scaling": "vehicles K"}
ABLATION_SYMBOLS = {"alpha": "α", "lam": "λ", "probe_every": "R_probe",
                    "beta_kappa": "β_κ"}


def _seed_curves(by_seed):
  """(rounds [n], RMSE [seeds, n]) of one method's kept runs (``Suite.keep``)."""
  return common.stack_curves(
      [([row[0] for row in run["curve_rmse"]],
        [np.nan if row[1] is None else row[1] for row in run["curve_rmse"]])
       for run in by_seed.values()])


def _seed_finals(by_seed, metric="rmse"):
  """Final ``metric`` of each seed of one method; None for a run that did not
  finish ok (left out, as in the tables)."""
  return [run["final"].get(metric) if run["status"] == "ok" else None
          for run in by_seed.values()]


def _number(text):
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
        curve = _seed_curves(by_seed)
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
      x = _number(key)
      for label, by_seed in by_label.items():
        if x is not None:
          lines.setdefault(PAPER_NAMES.get(label, label), []).append(
              (x, _seed_finals(by_seed)))
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
          points.append((parsed[2], _seed_finals(by_seed)))
        elif key.startswith(option + "=") and _number(key.split("=", 1)[1]) is not None:
          points.append((_number(key.split("=", 1)[1]), _seed_finals(by_seed)))
    if points:
      paths.append(common.figure_path(out, f"ablation_{option}"))
      plots.sweep_figure({PAPER_NAMES[OURS]: points}, xlabel=symbol,
                         ylabel="final test RMSE (Wh)",
                         title=f"FO-RI-FedAvg ablation: final RMSE vs {symbol}",
                         path=paths[-1])
  return paths


# ----------------------------------------------------------------------- suite


class Suite:
  """Runs the studies, keeps every number, and writes the report."""

  def __init__(self, args):
    self.args = args
    self.cache = {}
    self.memo = {}
    self.raw = {}
    self.sections = []
    self.main_results = None
    self.seeds = tuple(int(s) for s in args.seeds.split(","))
    self.ved = bool(args.ved)
    self.outcome = None
    self.run_s = 0.0     # seconds of the runs the current study used

  # -- config plumbing
  def configure(self, c):
    """Apply the command-line overrides (rounds, seeds, VED source)."""
    c.progress = False
    c.seeds = self.seeds
    if self.args.rounds:
      c.rounds = int(self.args.rounds)
      c.eval_every = min(c.eval_every, c.rounds)
    if self.ved:
      c.data.source = "ved_csv"
      c.data.num_clients = 0
      c.data.bev.ved_path = self.args.ved
      c.data.bev.stride = int(self.args.ved_stride)
      c.name = c.name.replace("SYNTHETIC fleet", "VED")
    return c

  @staticmethod
  def memo_key(c, grid=None):
    """A configuration's key: its config less its name, and its grid (studies
    that share a configuration, e.g. C = 0.5 and no churn, share its runs)."""
    key_cfg = ml_collections.ConfigDict(c.to_dict())
    key_cfg.name = ""
    return (key_cfg.to_json_best_effort(sort_keys=True), json.dumps(grid, sort_keys=True))

  def plan(self, studies):
    """Every ``run_many`` job of ``studies`` (``types`` needs ``main``'s runs),
    once per distinct configuration: ``[(key, config, grid)]``."""
    planned = {}
    wanted = set(studies) | ({"main"} if "types" in studies else set())
    for study in STUDIES:
      if study in wanted and hasattr(self, f"configs_{study}"):
        for _, c, grid in getattr(self, f"configs_{study}")():
          planned.setdefault(self.memo_key(c, grid), (c, grid))
    return [(k, c, g) for k, (c, g) in planned.items()]

  def run_planned(self, studies):
    """Run every job of ``studies`` as sweep points
    (:func:`fedfrac.reproduce.jobs.run_jobs`: one batch per (configuration,
    method), a work queue over ``--workers`` processes, finished runs kept in
    the point directory) and memoise their results for the studies."""
    planned = self.plan(studies)
    if not planned:
      return None
    job_list = [jobs.Job(c, grid=grid) for _, c, grid in planned]
    directory = self.args.dir
    if directory is None and self.args.resume_dir:
      directory = os.path.join(self.args.resume_dir,
                               points_lib.digest(jobs.fingerprint("fo_ri_fedavg", job_list)))
    outcome = jobs.run_jobs("fo_ri_fedavg", job_list, workers=self.args.workers,
                            directory=directory, overwrite=self.args.overwrite)
    for (key, c, _), res in zip(planned, outcome.results):
      self.memo[key] = res
      print(f"  [{jobs.run_seconds(res):6.1f}s] {c.name}: {', '.join(group(res))}",
            file=sys.stderr, flush=True)
    self.outcome = outcome
    return outcome

  def run(self, c, grid=None):
    """The results of configuration ``c`` (and ``grid``): from the planned runs
    (:meth:`run_planned`), else ``ff.run_many`` in this process."""
    key = self.memo_key(c, grid)
    if key not in self.memo:
      self.memo[key] = ff.run_many(c, grid=grid, data_cache=self.cache, progress=False)
    res = self.memo[key]
    self.run_s += jobs.run_seconds(res)
    return res

  def keep(self, study, key, results):
    out = {}
    for label, recs in group(results).items():
      out[label] = {str(r.seed): {"status": r.status, "wall_s": r.wall_s,
                                  "compile_s": r.compile_s,
                                  "final": {k: v for k, v in (r.rows[-1] if r.rows else
                                                              {}).items()
                                            if isinstance(v, (int, float))},
                                  "curve_rmse": [[row["round"], row.get("rmse")]
                                                 for row in r.rows]}
                    for r in recs}
    self.raw.setdefault(study, {})[key] = out

  def fed_data(self, c):
    """The federated dataset of ``c`` (memoised with the same key as run_many)."""
    key = (c.data.to_json_best_effort(sort_keys=True),
           c.data.seed if c.data.seed >= 0 else self.seeds[0])
    if key not in self.cache:
      self.cache[key] = data_lib.build(c.data, key[1])
    return self.cache[key]

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

  def study_timing(self):
    base = load_config_module("base")
    light_label = ("FO-RI-FedAvg, light probe (M 4, m 20, B_probe 64, loss-difference "
             "increments), R_probe 5, diagnostics off")
    diffs_label = ("FO-RI-FedAvg, paper probe with loss-difference increments "
             "(probe_increments='paper'), R_probe 5, diagnostics off")
    c = self.configure(load_config_module("main_table").get_config())
    fed = self.fed_data(c)
    variants = [("FedAvg", "fedavg", {})]
    have = OURS in algorithms.names()
    if have:
      off = {"diagnostics": False}
      variants += [
          ("FO-FedAvg (λ = 0: no probe), diagnostics off", "fo_fedavg", off),
          ("FO-RI-FedAvg, paper probe, R_probe 1, diagnostics off", OURS,
           {**off, "probe_every": 1}),
          ("FO-RI-FedAvg, paper probe, R_probe 5, diagnostics off", OURS, off),
          ("FO-RI-FedAvg, paper probe, R_probe 10, diagnostics off", OURS,
           {**off, "probe_every": 10}),
          ("FO-RI-FedAvg, paper probe, R_probe 5 (main-table setting)", OURS, {}),
          (diffs_label, OURS, {**off, "probe_increments": "paper"}),
          (light_label, OURS,
           {**off, **base.PROBE_LIGHT}),
      ]
    times = {}
    chunk, repeats = 10, int(self.args.timing_repeats)
    for desc, name, opts in variants:
      cc = ml_collections.ConfigDict(c.to_dict())
      cc.methods = ml_collections.ConfigDict()
      cc.methods["m"] = base.method(name, **{**dict(base.MAIN_METHODS[name][1]), **opts})
      sim = ff.runner.build_simulation(cc, "m", fed)
      state = sim.init(0)
      compile_s = sim.compile(chunk, state)
      state, _ = sim.run_chunk(state, chunk)       # warm-up
      jax.block_until_ready(state)
      samples = []
      for _ in range(repeats):
        t0 = time.perf_counter()
        state, _ = sim.run_chunk(state, chunk)
        jax.block_until_ready(state)
        samples.append((time.perf_counter() - t0) / chunk)
      times[desc] = (float(np.median(samples)), float(np.min(samples)), compile_s)
      print(f"  timing {desc}: {times[desc][0] * 1e3:.1f} ms/round", file=sys.stderr)
    rows = [[d, f"{t * 1e3:.1f}", f"{lo * 1e3:.1f}", f"{cs:.1f}"]
            for d, (t, lo, cs) in times.items()]
    text = md_table(["method (one seed, 10 vehicles, C = 0.5)", "median ms/round",
                     "min ms/round", "compile s"], rows)
    if have:
      fo = times["FO-FedAvg (λ = 0: no probe), diagnostics off"][0]
      full = times["FO-RI-FedAvg, paper probe, R_probe 5 (main-table setting)"][0]
      shares = []
      for r in (1, 5, 10):
        t = times[f"FO-RI-FedAvg, paper probe, R_probe {r}, diagnostics off"][0]
        shares.append(f"R_probe {r}: {100 * max(t - fo, 0) / t:.0f}%")
      light = times[light_label][0]
      diffs = times[diffs_label][0]
      nodiag = times["FO-RI-FedAvg, paper probe, R_probe 5, diagnostics off"][0]
      text += (
          "\n\nShare of an FO-RI-FedAvg round spent in roughness probes (paper probe: M "
          "10, m 100, B_probe 128, derivative increments), from the difference to "
          "FO-FedAvg (the same client step without the probe and the tiny λ term): "
          f"{', '.join(shares)}; the same probe with loss-difference increments at "
          f"R_probe 5: {100 * max(diffs - fo, 0) / diffs:.0f}%; light probe at R_probe "
          f"5: {100 * max(light - fo, 0) / light:.0f}%. Share spent on "
          f"the per-round drift/roughness diagnostics (main-table setting): "
          f"{100 * (full - nodiag) / full:.0f}%. A client probes on its 1st, "
          f"(R+1)-th, ... participation, so with C = 0.5 about one probe runs per "
          f"round at R_probe 5; times are medians over {repeats} chunks of {chunk} "
          f"rounds.")
    return "Per-round time and diagnostics share", (
        f"Compiled rounds timed with `Simulation.run_chunk` ({repeats} chunks of "
        f"{chunk} rounds after a warm-up chunk), single seed, on this machine "
        f"({platform.processor() or platform.machine()}, {os.cpu_count()} cores, shared "
        f"with other jobs: load average {os.getloadavg()[0]:.1f}, so absolute times "
        f"are inflated and noisy; ratios are the informative part).\n\n" + text)

  def study_latency(self):
    c = self.configure(load_config_module("base").get_config())
    shape = (c.data.bev.window, 6)
    rows = []
    for name in ("window_mlp", "window_gru", "window_lstm"):
      mc = ml_collections.ConfigDict(c.model.to_dict())
      mc.name = name
      model = models.build(mc, shape, 1)
      params = model.init(jax.random.PRNGKey(0))
      fn = jax.jit(lambda p, x: model.apply(p, x))
      x1 = jnp.asarray(np.random.default_rng(0).normal(size=(1,) + shape), jnp.float32)
      x32 = jnp.asarray(np.random.default_rng(1).normal(size=(32,) + shape), jnp.float32)
      fn(params, x1).block_until_ready()
      fn(params, x32).block_until_ready()
      lat = []
      for _ in range(int(self.args.latency_calls)):
        t0 = time.perf_counter()
        fn(params, x1).block_until_ready()
        lat.append(time.perf_counter() - t0)
      calls = max(int(self.args.latency_calls) // 4, 10)
      t0 = time.perf_counter()
      for _ in range(calls):
        fn(params, x32).block_until_ready()
      thr = 32 * calls / (time.perf_counter() - t0)
      n_params = sum(int(np.prod(p.shape)) for p in jax.tree.leaves(params))
      rows.append([name, f"{n_params:,}", f"{np.median(lat) * 1e3:.3f}",
                   f"{np.percentile(lat, 95) * 1e3:.3f}", f"{thr:,.0f}"])
    return "Inference latency", (
        f"One jitted forward pass on {jax.default_backend().upper()} "
        f"({os.cpu_count()} shared cores, load average {os.getloadavg()[0]:.1f}), "
        f"window {shape}; batch 1 over {self.args.latency_calls} calls, batch 32 "
        f"throughput over {max(int(self.args.latency_calls) // 4, 10)} calls. MLP "
        f"hidden {tuple(c.model.hidden)}, GRU/LSTM hidden {c.model.rnn_hidden}.\n\n" +
        md_table(["model", "parameters", "batch-1 median ms", "batch-1 p95 ms",
                  "batch-32 windows/s"], rows))


def main(argv=None):
  p = argparse.ArgumentParser(prog="fedfrac-reproduce fo_ri_fedavg",
                              description=__doc__.split("\n")[0])
  p.add_argument("--out", default=None, help="markdown report path (default "
                 "results/bev_synthetic.md, or results/bev_ved.md with --ved)")
  p.add_argument("--studies", default=",".join(STUDIES))
  p.add_argument("--seeds", default="0,1,2,3,4")
  p.add_argument("--rounds", type=int, default=0, help="override rounds (0 = configs)")
  p.add_argument("--ved", default="", help="VED dynamic-data CSV file/dir (real data)")
  p.add_argument("--ved_stride", type=int, default=10)
  p.add_argument("--timing_repeats", type=int, default=5)
  p.add_argument("--latency_calls", type=int, default=200)
  p.add_argument("--resume_dir", default=os.path.join("runs", "bev_suite"),
                 help="finished runs are kept under here, in a folder named after "
                 "the code and the studies' configurations, and reused when the "
                 "same command runs again (an interrupted suite resumes); '' keeps "
                 "them in a temporary folder, deleted at the end")
  jobs.add_point_flags(p, "bev", batches="(configuration, method) batches",
                       resume=False)
  argv = sys.argv[1:] if argv is None else list(argv)
  args = p.parse_args(argv)
  studies = [s.strip() for s in args.studies.split(",") if s.strip()]
  for s in studies:
    if s not in STUDIES:
      p.error(f"--studies: unknown study {s!r}; allowed: {', '.join(STUDIES)}")
  out = args.out or os.path.join("results",
                                 "bev_ved.md" if args.ved else "bev_synthetic.md")
  suite = Suite(args)
  load0 = os.getloadavg()
  start = time.perf_counter()
  try:
    outcome = suite.run_planned(studies)
  except points_lib.SweepMismatch as e:
    raise SystemExit(str(e)) from None
  sections = []
  for s in STUDIES:
    if s not in studies:
      continue
    t0 = time.perf_counter()
    suite.run_s = 0.0
    print(f"study {s}", file=sys.stderr, flush=True)
    title, body = getattr(suite, f"study_{s}")()
    sections.append((title, body, time.perf_counter() - t0, suite.run_s))
  total = time.perf_counter() - start
  command = common.command_line("fo_ri_fedavg", argv)
  data_name = "VED (real data)" if args.ved else "SYNTHETIC fleet"
  base = load_config_module("base").get_config()
  lines = [
      f"# BEV energy regression — {data_name} results",
      "",
      ("**These numbers come from the physics-based SYNTHETIC fleet "
       "(`data.source = \"synthetic_bev\"`), not from VED/eVED: they show how the "
       "methods compare on a fleet with the structure of the paper's setting, not the "
       "paper's numbers.**" if not args.ved else
       "**These numbers come from the VED dynamic-data CSVs given on the command line.**"),
      "",
      f"Command: `{command.strip()}`",
      "",
      f"Date: {datetime.datetime.now().isoformat(timespec='seconds')}; jax "
      f"{jax.__version__} on {jax.default_backend().upper()}; {platform.platform()}; "
      f"{os.cpu_count()} CPU cores shared with other jobs (load average "
      f"{load0[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end). Total "
      f"runtime {total / 60:.1f} min." + (
          f" The runs ({outcome.total} (configuration, method, seed) points, "
          f"{outcome.skipped} of them from an earlier run of the same code) took "
          f"{outcome.wall_s / 60:.1f} min on {max(outcome.workers, 1)} worker "
          f"process(es)." if outcome else ""),
      "",
      f"Setup (configs/bev/base.py): {base.data.num_clients} vehicles (class mix "
      f"passenger/truck/bus {tuple(base.data.bev.class_mix)}), "
      f"{base.data.bev.hours_per_vehicle:g} h of 1 Hz driving each, windows of "
      f"{base.data.bev.window} s with stride {base.data.bev.stride}, trip-level "
      f"70/10/20 split per vehicle, per-vehicle robust normalisation fitted on train "
      f"trips (inputs clipped to ±{base.data.bev.input_clip:g}); "
      f"{base.model.name} {tuple(base.model.hidden)}; {base.task.loss.upper()} loss; "
      f"SGD clients (lr {base.client.lr}, batch {base.client.batch_size}, "
      f"{base.client.local_epochs} local epoch); C = {base.participation}; "
      f"{args.rounds or base.rounds} rounds; seeds {args.seeds} (one fleet, "
      f"data.seed = {base.data.seed}: seeds change the initial model, client sampling "
      f"and batch order). Metrics: final-round test RMSE / MAE (Wh per window) and "
      f"MAPE (%, Eq. 34: |e|/(|y| + {base.task.mape_eps:g} Wh) over every window) "
      f"after the per-vehicle "
      f"inverse transform; micro = pooled over all test windows, macro = mean over "
      f"vehicles; mean ± sample std over seeds. Baselines run with their library "
      f"defaults, untuned for this task.",
      "",
  ]
  for title, body, dt, run_s in sections:
    runtime = (f"{run_s:.0f} s of runs (compile + rounds, shared runs counted in "
               f"each study that uses them), {dt:.0f} s here" if run_s else f"{dt:.0f} s")
    lines += [f"## {title}", "", f"_Runtime: {runtime}._", "", body, ""]
  os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
  with open(out, "w") as f:
    f.write("\n".join(lines))
  with open(os.path.splitext(out)[0] + ".json", "w") as f:
    json.dump({"command": command, "total_s": total, "studies": suite.raw}, f,
              indent=1, default=float)
  print(f"wrote {out} ({total / 60:.1f} min)", file=sys.stderr)
  for path in figures(suite.raw, out):
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
  main()
