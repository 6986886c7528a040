"""Generated doc blocks of FO-RI-FedAvg (Tables X–XV, XX–XXVI, XXXII–XXXIII and
the guide's BEV summary) from the synthetic-fleet suite's results; see
:mod:`fedfrac_lab.reproduce.docs` for the mechanism."""
from __future__ import annotations

import functools

import numpy as np

from fedfrac_lab.reproduce import common
from fedfrac_lab.reproduce import published_ours
from fedfrac_lab.reproduce.doc_blocks import REPRODUCING, R
from fedfrac_lab.reproduce.doc_registry import block

BEV_JSON = published_ours.BEV_JSON
BEV_MD = "results/bev_synthetic.md"


@functools.lru_cache(maxsize=None)
def bev():
  return common.load_results_json(BEV_JSON)


@functools.lru_cache(maxsize=None)
def bev_cells():
  return published_ours.bev_ours()


def _bev_cell(table, row, column, which=0):
  return bev_cells()[(table, row, column)][which]


def _o(o, digits=1):
  return f"{o.mean:.{digits}f} ± {o.std:.{digits}f}"


def _paper(table, row, column):
  """A published FO-RI-FedAvg value (its mean) to the paper's precision."""
  rows = common.published("fo_ri_fedavg")[table]
  cell = rows[row][column]
  return common.fmt_value(common.published_mean(cell), common.column_places(rows, column))


T12 = {"default": "Default (alpha=0.8, lambda_t=lambda, probe every round, delta>0, clip, "
                  "beta_kappa=0)",
       "alpha": "alpha=1.0 (integer-order)",
       "gate": "Add spectral gate (beta_kappa=0.5)"}


@block("fo_ri_scale", R, BEV_JSON, inline=True)
def fo_ri_scale():
  return (f"our FedAvg RMSE {_bev_cell('Table X', 'FedAvg', 'VED RMSE').mean:.0f} vs the "
          f"paper's {_paper('Table X', 'FedAvg', 'VED RMSE')} Wh/window")


@block("fo_ri_runtime", R, BEV_JSON, inline=True)
def fo_ri_runtime():
  return (f"CPU measured: {bev()['total_s'] / 60:.0f} min wall for the reduced suite "
          f"(`{bev()['command']}`, every study)")


@block("fo_ri_t10", R, BEV_JSON, inline=True)
def fo_ri_t10():
  rows = published_ours.BEV_ROWS
  ours = {r: _bev_cell("Table X", r, "VED RMSE") for r in rows}
  best = min(ours, key=lambda r: ours[r].mean)
  paper = {r: _paper("Table X", r, "VED RMSE") for r in common.published(
      "fo_ri_fedavg")["Table X"]}
  p_best = min(paper, key=lambda r: float(paper[r]))
  return (f"FO-RI-FedAvg {_o(ours['FO-RI-FedAvg'])} vs {paper['FO-RI-FedAvg']} Wh; "
          f"{best} best on the fleet ({_o(ours[best])}) where the paper has {p_best} "
          f"best ({paper[p_best]})")


@block("fo_ri_t11", R, BEV_JSON, inline=True)
def fo_ri_t11():
  lowest = min(v for node in bev()["studies"]["main"]["main"].values()
               for r in node.values() for _, v in r["curve_rmse"])
  return (f"thresholds 55 / 45 Wh are below every fleet RMSE (the lowest evaluated, "
          f"any method, seed and round: {lowest:.1f})")


@block("fo_ri_t12", R, BEV_JSON, inline=True)
def fo_ri_t12():
  default, alpha = _bev_cell("Table XII", T12["default"], "VED RMSE"), _bev_cell(
      "Table XII", T12["alpha"], "VED RMSE")
  gate = _bev_cell("Table XII", T12["gate"], "VED RMSE")
  helps = "helps" if default.mean < alpha.mean else "does not help"
  return (f"default (probe every round) {_o(default)}, α = 1.0 {_o(alpha)}, β_κ = 0.5 "
          f"{_o(gate)} Wh: the fractional order {helps} on the fleet (paper: "
          f"{_paper('Table XII', T12['default'], 'VED RMSE')}, "
          f"{_paper('Table XII', T12['alpha'], 'VED RMSE')}, "
          f"{_paper('Table XII', T12['gate'], 'VED RMSE')})")


@block("fo_ri_t13", R, BEV_JSON, inline=True)
def fo_ri_t13():
  rows = ("Every round (1x)", "Every 5 rounds", "Every 10 rounds")
  ours = " / ".join(_o(_bev_cell("Table XIII", r, "VED RMSE")) for r in rows)
  paper = " / ".join(str(_paper("Table XIII", r, "VED RMSE")) for r in rows)
  return (f"RMSE at R_probe 1 / 5 / 10: {ours} Wh (paper {paper}); overhead in "
          f"`results/bev_synthetic.md`")


@block("fo_ri_t14", R, BEV_JSON, inline=True)
def fo_ri_t14():
  rows = ("beta_kappa=0", "beta_kappa=0.25", "beta_kappa=0.5", "beta_kappa=1.0")
  rmse = " / ".join(f"{_bev_cell('Table XIV', r, 'VED RMSE').mean:.1f}" for r in rows)
  dcv = " / ".join(f"{_bev_cell('Table XIV', r, 'VED D_cv(200)').mean:.2f}" for r in rows)
  paper = " / ".join(str(_paper("Table XIV", r, "VED RMSE")) for r in rows)
  return (f"β_κ ∈ {{0, 0.25, 0.5, 1}} (the paper's grid): RMSE {rmse} Wh (paper "
          f"{paper}), D_cv at our final round {dcv}")


@block("fo_ri_t15", R, BEV_JSON, inline=True)
def fo_ri_t15():
  p, s = (_bev_cell("Table XV", "VED", c) for c in ("Pearson r", "Spearman rho"))
  return (f"Pearson / Spearman of I_k and the update size at our final round: "
          f"{_o(p, 2)} / {_o(s, 2)} (paper at round 100: "
          f"{_paper('Table XV', 'VED', 'Pearson r')} / "
          f"{_paper('Table XV', 'VED', 'Spearman rho')}); per run in "
          f"`results/fractional_digits_roughness.md` and `results/bev_synthetic.md`")


def _finals(node, metric="rmse"):
  return {s: r["final"][metric] for s, r in node.items() if r.get("status") == "ok"}


def _probe_share():
  """Share of an FO-RI-FedAvg round (paper probe, R_probe 5) spent probing, from
  the timing table of results/bev_synthetic.md."""
  rows = next(rows for heading, rows in common.markdown_tables(BEV_MD)
              if heading.startswith("Per-round time"))
  t = {r[next(iter(r))]: float(r["median ms/round"]) for r in rows}
  fo = t["FO-FedAvg (λ = 0: no probe), diagnostics off"]
  probed = t["FO-RI-FedAvg, paper probe, R_probe 5, diagnostics off"]
  return (probed - fo) / probed


def _bev_diagnostic(method, column):
  """A cell of the drift and roughness diagnostics table of results/bev_synthetic.md
  (means over rounds, which the JSON does not keep)."""
  rows = next(rows for _, rows in common.markdown_tables(BEV_MD)
              if rows and column in rows[0])
  return next(r[column] for r in rows if r["method"] == method)


@block("readme_bev", REPRODUCING, BEV_JSON, BEV_MD, "benchmarks/results.md")
def readme_bev():
  main = bev()["studies"]["main"]["main"]
  ours = {r: _bev_cell("Table X", r, "VED RMSE") for r in published_ours.BEV_ROWS}
  fo, fo05 = ours["FO-RI-FedAvg"], _bev_cell("Table X", "FO-RI-FedAvg", "VED RMSE", 1)
  rank = sorted(ours, key=lambda r: ours[r].mean).index("FO-RI-FedAvg") + 1
  a, b = _finals(main["fo_ri_fedavg"]), _finals(main["fedavg"])
  paired = [a[s] - b[s] for s in a]
  f = _finals(main["fo_fedavg"])
  pull = [a[s] - f[s] for s in a]
  gate = [_bev_cell("Table XIV", r, "VED RMSE").mean
          for r in ("beta_kappa=0", "beta_kappa=1.0")]
  roughness = _bev_diagnostic("FO-RI-FedAvg", "mean I_k")
  arch = []
  for name in ("gru", "lstm"):
    node = bev()["studies"]["architectures"][name]
    x, y = _finals(node["fo_ri_fedavg"]), _finals(node["fedavg"])
    arch.append(float(np.mean([x[s] - y[s] for s in x])))
  return (f"- **BEV energy regression** (SYNTHETIC fleet, 10 vehicles, {fo.n} seeds; "
          f"`results/bev_synthetic.md`): FO-RI-FedAvg ranks {rank} of {len(ours)} "
          f"methods by mean RMSE — {_o(fo)} Wh at the shared η = 0.02 and {_o(fo05)} at "
          f"a constant η = 0.05 (the paper's η0, without its 1/√(t+1) decay) vs FedAvg "
          f"{_o(ours['FedAvg'])} and SCAFFOLD {_o(ours['SCAFFOLD'])}; paired by seed, "
          f"FO-RI-FedAvg − FedAvg = {np.mean(paired):+.1f} ± {np.std(paired, ddof=1):.1f} "
          f"Wh (lower on {sum(d < 0 for d in paired)} of {len(paired)} seeds). The "
          f"roughness index is small (mean I_k over rounds {roughness}; FO-RI-FedAvg − "
          f"FO-FedAvg = {np.mean(pull):+.1f} ± {np.std(pull, ddof=1):.1f} Wh, so the "
          f"roughness pull {'does nothing here' if max(map(abs, pull)) < 0.05 else 'acts'}), the "
          f"spectral gate moves RMSE from {gate[0]:.1f} to {gate[1]:.1f} Wh over β_κ "
          f"0 → 1, and with GRU / LSTM backbones FO-RI-FedAvg − FedAvg is "
          f"{arch[0]:+.1f} / {arch[1]:+.1f} Wh. The paper probe takes "
          f"{100 * _probe_share():.0f} % of a round at R_probe = 5 in this report's timing "
          f"(one run, loaded 2-core CPU; the benchmark's interleaved chunks give "
          f"{bench_probe_shares(BENCH_CPU)[1]} %, `{BENCH_CPU}`). "
          "The paper's own protocol (T = 300, C = 0.3, B = 64, η_t = 0.05/√(t+1), "
          "stride 1, regime skew α_D = 0.3) is `configs/bev/paper.py`.")


BENCH_H100, BENCH_CPU = "benchmarks/results_h100.md", "benchmarks/results.md"


def bench_probe_shares(path):
  """(share at R_probe 1, share at R_probe 5) in % of a round spent in the
  roughness probe, as a bench report states it (FO-FedAvg against FO-RI-FedAvg
  rounds, median of interleaved chunks, workload 4's setting)."""
  import re
  text = open(common.find_file(path), encoding="utf-8").read()
  m = re.search(r"\*\*(\d+)% at R_probe = 1, (\d+)% at R_probe = 5\*\*", text)
  return int(m.group(1)), int(m.group(2))


def probe_share_text():
  """Each measured probe share with the measurement it comes from."""
  h1, h5 = bench_probe_shares(BENCH_H100)
  c1, c5 = bench_probe_shares(BENCH_CPU)
  return (f"the paper probe's share of a round: benchmark {h5} % / {h1} % at "
          f"R_probe 5 / 1 on an H100 (`{BENCH_H100}`), {c5} % / {c1} % on the 2-core CPU "
          f"(`{BENCH_CPU}`); the reproduction's timing (one run, loaded CPU, `{BEV_MD}`) "
          f"{100 * _probe_share():.0f} % at R_probe 5")


@block("fo_ri_timing", R, BENCH_H100, BENCH_CPU, BEV_MD, inline=True)
def fo_ri_timing():
  """The probe's share of a round in each measurement (:func:`probe_share_text`),
  beside the paper's Table XXVI."""
  rows = common.published("fo_ri_fedavg")["Table XXVI"]
  paper = common.published_mean(rows["FO-RI-FedAvg"]["VED Overhead (%)"])
  return (f"{probe_share_text()}; the paper's Table XXVI overhead over FedAvg is "
          f"{paper:.2f} %")


@block("fo_ri_backbones", R, BEV_JSON, inline=True)
def fo_ri_backbones():
  """Tables XXXII–XXXIII: final RMSE per backbone, FedAvg and FO-RI-FedAvg."""
  arch = bev()["studies"]["architectures"]
  parts = []
  for name in ("ann", "gru", "lstm"):
    o = {m: published_ours.from_values(list(_finals(arch[name][m]).values()), "")
         for m in ("fedavg", "fo_ri_fedavg")}
    parts.append(f"{name.upper()} {_o(o['fedavg'])} / {_o(o['fo_ri_fedavg'])}")
  return (f"final RMSE, FedAvg / FO-RI-FedAvg: {'; '.join(parts)} Wh "
          f"(`{BEV_MD}`, \"Architectures\")")


@block("fo_ri_t10_methods", R, BEV_JSON, "fedfrac_lab/reproduce/published/fo_ri_fedavg.json",
       inline=True)
def fo_ri_t10_methods():
  """Which of Table X's methods the fleet suite runs, and where each one it does
  not run stands in fedfrac (its module, or that it has none)."""
  from fedfrac import algorithms
  from fedfrac.algorithms import families
  rows = list(common.published("fo_ri_fedavg")["Table X"])
  ran = [r for r in rows if r in published_ours.BEV_ROWS]
  parts = []
  for row in rows:
    if row in ran:
      continue
    name = row.lower().replace("-", "_")
    if algorithms.is_builtin(name):
      module = algorithms.entry(name).build.__module__.replace(".", "/")
      stand_in = families.STAND_INS.get(name)
      parts.append(f"{row} is in fedfrac (`{module}.py`"
                   + (f", a stand-in: {stand_in}" if stand_in else "")
                   + ") but the suite does not run it, so its cells read *not run*")
    else:
      parts.append(f"{row} is not in fedfrac")
  return (f"synthetic fleet; the suite runs {len(ran)} of the table's {len(rows)} "
          f"methods" + (f": {'; '.join(parts)}" if parts else ""))
