"""The reproduction figures: each wired module draws its PNGs beside ``--out=X.md``
from a small results structure built here (no training run), every plotted method
gets its own (colour, line style) pair, and the caller's matplotlib backend is left
as it was (the figures use their own Agg canvas)."""
from __future__ import annotations

import contextlib
import os

import matplotlib
import numpy as np

from fedfrac_lab.reproduce import common, firma, fo_ri_fedavg, fofedavg, kuramoto

ROUNDS = 6


@contextlib.contextmanager
def _pdf_backend():
  """Run the body under the pdf backend and check it is still selected after."""
  previous = matplotlib.get_backend()
  matplotlib.use("pdf")
  try:
    yield
    assert matplotlib.get_backend() == "pdf", "a figure changed the caller's backend"
  finally:
    matplotlib.use(previous)


def _written(paths, expected):
  assert [os.path.basename(p) for p in paths] == expected
  for p in paths:
    assert os.path.getsize(p) > 0, p


def _styles(lines):
  """(colour, line style) of each drawn line."""
  return [(matplotlib.colors.to_hex(ln.get_color()), ln.get_linestyle()) for ln in lines]


def _errorbar_styles(fig):
  return {c.get_label(): _styles([c.lines[0]])[0] for c in fig.axes[0].containers}


def _curve(level, seed):
  return (level + 0.05 * np.arange(ROUNDS) + 0.01 * seed).tolist()


def test_kuramoto_rounds_and_kappa0_figures(tmp_path):
  seeds, kappas = (0, 1), (0.005, 0.3)
  rounds = list(range(1, ROUNDS + 1))

  def stats(level, diverged_seed=None):
    return {s: {"final": np.nan if s == diverged_seed else _curve(level, s)[-1],
                "curve": (rounds, _curve(level, s))} for s in seeds}
  setting = {"fedavg": stats(0.4), "scaffold": stats(0.42)}
  for i, w in enumerate(kuramoto.WEIGHTINGS):
    for j, k in enumerate(kappas):
      setting[kuramoto.label_of(w, k)] = stats(0.3 + 0.02 * i + 0.01 * j,
                                               diverged_seed=1 if i == 1 else None)
  all_stats = {(10, 3): setting, (10, 5): setting}
  with _pdf_backend():
    paths = kuramoto.figures(all_stats, seeds, kappas, str(tmp_path / "k.md"))
  _written(paths, ["k_rounds.png", "k_kappa0.png"])


def test_kuramoto_methods_have_distinct_styles():
  from fedfrac.runner import plots
  kappas = (0.005, 0.1, 0.3)
  stats = {"fedavg": 0, "scaffold": 0} | {kuramoto.label_of(w, k): 0
                                          for w in kuramoto.WEIGHTINGS for k in kappas}
  names = list(kuramoto.method_names(stats, kappas).values())
  assert len(names) == 11 and len(set(names)) == 11
  x = np.arange(1, 4)
  fig = plots.scenarios_figure({"s": {n: (x, np.ones((1, 3)) * i)
                                      for i, n in enumerate(names)}})
  styles = _styles(fig.axes[0].get_lines())
  assert len(styles) == 11 and len(set(styles)) == 11


def test_firma_figure_per_mode(tmp_path):
  results = {(scen, m): {"num_clients": 5,
                         "runs": [{"curve": _curve(0.5 + 0.01 * i, s)} for s in range(3)]}
             for scen in ("iid", "dir0.1", "ls3")
             for i, m in enumerate(firma.METHODS)}
  all_results = {"paper": results, "reference_code": results}
  with _pdf_backend():
    paths = firma.figures(all_results, str(tmp_path / "firma.md"))
  _written(paths, ["firma_paper.png", "firma_reference_code.png"])


def test_fofedavg_sweep_figure(tmp_path):
  def entry(mean, std):
    return {"accuracy": {"mean": mean, "std": std, "ci95": 0.0, "n": 3}}
  summary = {"fedavg": entry(0.80, 0.01)}
  for a in (0.5, 0.8, 1.0):
    summary[f"fofedavg[alpha={a}]"] = entry(0.7 + 0.1 * a, 0.02)
    summary[f"fofedavg_round[alpha={a}]"] = entry(0.65 + 0.1 * a, 0.01)
  path = common.figure_path(str(tmp_path / "fractional_digits.md"), "alpha")
  with _pdf_backend():
    fig = fofedavg.figure([({}, summary)], "alpha", path)
  _written([path], ["fractional_digits_alpha.png"])
  styles = _errorbar_styles(fig)
  assert list(styles) == ["fofedavg", "fofedavg_round", "fedavg (no alpha)"]
  assert len(set(styles.values())) == 3
  xdata, ydata = fig.axes[0].containers[0].lines[0].get_data()
  np.testing.assert_allclose(xdata, [0.5, 0.8, 1.0])
  np.testing.assert_allclose(ydata, [0.75, 0.78, 0.80])
  flat_x, flat_y = fig.axes[0].containers[2].lines[0].get_data()
  np.testing.assert_allclose(flat_x, [0.5, 0.8, 1.0])
  np.testing.assert_allclose(flat_y, [0.80] * 3)


def test_fo_ri_fedavg_figures(tmp_path):
  def runs(level, bad_seed=None):
    out = {}
    for s in range(2):
      curve = [[r + 1, 40.0 - 2 * r + level + s] for r in range(ROUNDS)]
      out[str(s)] = {"status": "diverged" if s == bad_seed else "ok",
                     "final": {"rmse": curve[-1][1]}, "curve_rmse": curve}
    return out
  methods = {"fedavg": runs(3.0), "fo_ri_fedavg": runs(0.0, bad_seed=1)}
  raw = {
      "main": {"main": methods},
      "participation": {str(c): methods for c in (0.1, 0.5)},
      "churn": {"asym_class": methods},
      "ablations": {"alpha": {f"fo_ri_fedavg[alpha={a}]": runs(a) for a in (0.6, 1.0)},
                    "probe_every=1": {"fo_ri_fedavg": runs(1.0)},
                    "probe_every=5": {"fo_ri_fedavg": runs(2.0)},
                    "safeguard=paper": {"fo_ri_fedavg": runs(0.0)}},
  }
  with _pdf_backend():
    paths = fo_ri_fedavg.figures(raw, str(tmp_path / "bev.md"))
  _written(paths, ["bev_rounds.png", "bev_participation.png", "bev_ablation_alpha.png",
                   "bev_ablation_probe_every.png"])
