"""The two figures of a run: one panel per method family with FedAvg dashed in
each, shared axes; the final values ranked with error bars over seeds and the
diverged, partial and stand-in methods marked; both from ``Results.plot()`` and
in every workdir, without touching the caller's matplotlib backend."""
from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.collections import PolyCollection

import fedfrac as ff
from fedfrac import catalog
from fedfrac.runner import overview
from fedfrac.runner.records import Results, RunRecord
from tests import helpers


def _record(method, seed, values, status="ok"):
  rows = [{"method": method, "algorithm": method, "seed": seed, "round": r + 1,
           "accuracy": float(v)} for r, v in enumerate(values)]
  return RunRecord(method=method, algorithm=method, seed=seed, rows=rows, round_rows=rows,
                   status=status)


def _results(curves, seeds=(0,), statuses=None):
  """Results with one record per (method, seed); ``curves``: method -> values."""
  statuses = statuses or {}
  records = [_record(m, s, np.asarray(v) + 0.01 * s, statuses.get(m, "ok"))
             for m, v in curves.items() for s in seeds]
  return Results(helpers.tiny_config(), records)


def _panels(fig):
  return {ax.get_title(): ax for ax in fig.axes if ax.get_title()}


def _labels(ax):
  return [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]


def test_one_panel_per_family_with_fedavg_dashed_in_each_and_shared_axes():
  x = np.linspace(0.2, 0.9, 8)
  fig = _results({"fedavg": x, "fedprox": x, "scaffold": x + 0.02, "fofedavg": x - 0.1,
                  "fibfl": x + 0.03, "dp_sgd": x - 0.2}).plot().rounds
  panels = _panels(fig)
  assert list(panels) == ["Baselines", "Fractional", "FIRMA ring methods",
                          "Privacy and secure aggregation"]
  # FedProx coincides with FedAvg: drawn once, named with it.
  assert _labels(panels["Baselines"]) == ["fedavg = fedprox (reference)", "scaffold"]
  assert _labels(panels["Fractional"]) == ["fedavg (reference)", "fofedavg"]
  assert _labels(panels["Privacy and secure aggregation"]) == [
      "fedavg (reference)", "dp_sgd"]
  for ax in panels.values():
    ref = ax.get_lines()[0]
    assert ref.get_linestyle() == "--" and matplotlib.colors.to_hex(ref.get_color()) == "#000000"
    np.testing.assert_allclose(ref.get_ydata(), x)
  axes = list(panels.values())
  assert all(axes[0].get_shared_y_axes().joined(axes[0], ax) for ax in axes[1:])
  assert all(axes[0].get_shared_x_axes().joined(axes[0], ax) for ax in axes[1:])
  assert len({ax.get_ylim() for ax in axes}) == 1


def test_every_registered_algorithm_is_drawn_in_its_familys_panel():
  rounds = np.arange(1, 6)
  curves = {name: 0.5 + 0.01 * i + 0.001 * rounds for i, name in
            enumerate(ff.algorithms.names())}
  panels = _panels(_results(curves).plot().rounds)
  assert list(panels) == [f.title for f in catalog.FAMILIES]
  for fam in catalog.FAMILIES:
    drawn = [lab.replace(" (reference)", "").replace(" [stand-in]", "")
             for lab in _labels(panels[fam.title])]
    assert drawn[0] == "fedavg"
    assert sorted(drawn[1:]) == sorted(n for n in fam.names if n != "fedavg")
    styles = [(ln.get_color(), ln.get_linestyle()) for ln in panels[fam.title].get_lines()]
    assert len(set(styles)) == len(styles), "no two lines of a panel share a style"


def test_several_seeds_give_mean_and_band():
  values = np.linspace(0.1, 0.8, 6)
  ax = _panels(_results({"fedavg": values, "fedavgm": values[::-1]},
                        seeds=(0, 1, 2)).plot().rounds)["Baselines"]
  np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), values + 0.01)
  assert sum(isinstance(c, PolyCollection) for c in ax.collections) == 2


def test_ranking_is_best_first_ties_by_name_with_error_bars_and_marks():
  x = np.linspace(0.2, 0.8, 5)
  res = _results({"fedavg": x, "scaffold": x + 0.1, "fedprox": x, "fdse": x + 0.05,
                  "dp_sgd": x - 0.1, "moon": x + 0.2},
                 seeds=(0, 1), statuses={"dp_sgd": "partial",
                                         "moon": "diverged at round 6"})
  fig = res.plot().ranking
  ax = fig.axes[0]
  names = [t.get_text() for t in ax.get_yticklabels()]
  # moon has the highest last value, but it diverged: after every other method.
  assert names == ["scaffold", "fdse [stand-in]", "fedavg", "fedprox", "dp_sgd [partial]",
                   "moon [diverged]"]
  bars = [c for c in ax.containers]
  assert len(bars) == 6 and all(c.has_xerr for c in bars)
  means = [c.lines[0].get_xdata()[0] for c in bars]
  np.testing.assert_allclose(means[:2], [0.905, 0.855])
  reference = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
  assert len(reference) == 1 and reference[0].get_xdata()[0] == means[2]
  # One seed: no error bars.
  one = _results({"fedavg": x, "scaffold": x + 0.1}).plot().ranking.axes[0]
  assert not any(c.has_xerr for c in one.containers)


def test_lower_rmse_ranks_first():
  finals = [overview.Final("a", "fedavg", 120.0, 1.0, 2, ("ok",)),
            overview.Final("b", "scaffold", 99.0, 1.0, 2, ("ok",)),
            overview.Final("c", "fedprox", None, 0.0, 0, ("diverged at round 1",))]
  assert [f.label for f in overview.ranked(finals, higher_is_better=False)] == ["b", "a", "c"]
  assert not overview.larger_is_better("rmse") and overview.larger_is_better("accuracy")


def test_workdir_gets_both_figures_titled_from_config_backend_unchanged(tmp_path):
  previous = matplotlib.get_backend()
  matplotlib.use("pdf")
  try:
    config = helpers.tiny_config(rounds=2, eval_every=1, seeds=(0,))
    config.data.alpha = 0.1
    config.participation = 0.5
    results = ff.run(config, workdir=str(tmp_path))
    assert matplotlib.get_backend() == "pdf"
  finally:
    matplotlib.use(previous)
  for name in overview.FIGURE_FILES:
    assert (tmp_path / name).stat().st_size > 0
  figures = results.plot()
  for fig in figures:
    title = fig.get_suptitle()
    assert "Dirichlet α=0.1" in title and "6 clients" in title
    assert "participation 0.5 (3/round)" in title and config.name not in title
  out = tmp_path / "copy"
  out.mkdir()
  figures.save(str(out))
  assert sorted(p.name for p in out.iterdir()) == sorted(overview.FIGURE_FILES)


def test_both_figures_display_in_jupyter_and_a_workdir_lists_them(monkeypatch):
  import sys
  import types
  from fedfrac.runner import workdir
  figures = _results({"fedavg": np.linspace(0.2, 0.9, 4)}).plot()
  shown = []
  display = types.ModuleType("IPython.display")
  display.display = lambda *objs: shown.extend(objs)
  with monkeypatch.context() as patch:
    patch.setitem(sys.modules, "IPython", types.ModuleType("IPython"))
    patch.setitem(sys.modules, "IPython.display", display)
    figures._ipython_display_()
  assert shown == [figures.rounds, figures.ranking]
  assert all(hasattr(f, "_repr_png_") for f in shown)
  # --overwrite removes both figures with the rest of a workdir's results.
  assert set(overview.FIGURE_FILES) <= set(workdir.WORKDIR_ITEMS)
