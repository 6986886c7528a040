"""Figures: distinct colour-and-style pairs, coinciding curves named together, a
title from the resolved config, seed bands, and no change to the caller's backend."""
from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.collections import PolyCollection

import fedfrac as ff
from fedfrac.runner import plots
from fedfrac.runner.records import Results, RunRecord
from tests import helpers


def _record(method, seed, values):
  rows = [{"method": method, "algorithm": method, "seed": seed, "round": r + 1,
           "accuracy": float(v)} for r, v in enumerate(values)]
  return RunRecord(method=method, algorithm=method, seed=seed, rows=rows, round_rows=rows)


def _results(curves, seeds=(0,)):
  """Results with one record per (method, seed); ``curves``: method -> values."""
  config = helpers.tiny_config()
  records = [_record(m, s, np.asarray(v) + 0.01 * s) for m, v in curves.items()
             for s in seeds]
  return Results(config, records)


def test_no_two_methods_share_colour_and_style():
  rounds = np.arange(1, 11)
  curves = {f"method_{i}": 0.5 + 0.01 * i + 0.001 * rounds for i in range(45)}
  fig = _results(curves).plot()
  lines = plots.figure_lines(fig)
  assert len(lines) == 45
  pairs = [(c, ls) for _, c, ls, _ in lines[:40]]
  assert len(set(pairs)) == 40, "the first 40 lines differ in colour-and-style pair"
  assert len({(c, ls, m) for _, c, ls, m in lines}) == 45


def test_coinciding_curves_are_drawn_once_and_named_together():
  same = np.linspace(0.2, 0.9, 8)
  fig = _results({"fedavg": same, "fedprox": same, "kuramoto_fedavg": same.copy(),
                  "scaffold": same + 0.05}).plot()
  labels = [label for label, *_ in plots.figure_lines(fig)]
  assert labels == ["fedavg = fedprox = kuramoto_fedavg", "scaffold"]
  legend = fig.axes[0].get_legend()
  # The legend sits right of the axes, not over the data.
  assert legend.get_bbox_to_anchor().x0 >= fig.axes[0].get_window_extent().x1


def test_several_seeds_give_mean_and_band():
  values = np.linspace(0.1, 0.8, 6)
  fig = _results({"a": values, "b": values[::-1]}, seeds=(0, 1, 2)).plot()
  ax = fig.axes[0]
  (x, y) = ax.get_lines()[0].get_data()
  np.testing.assert_allclose(y, values + 0.01)        # mean of +0, +0.01, +0.02
  assert sum(isinstance(c, PolyCollection) for c in ax.collections) == 2


def test_title_reflects_override_and_backend_is_unchanged(tmp_path):
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
  assert (tmp_path / "accuracy.png").stat().st_size > 0
  title = results.plot().axes[0].get_title()
  assert "Dirichlet α=0.1" in title and "6 clients" in title
  assert "participation 0.5 (3/round)" in title
  assert config.name not in title


def test_describe_config_partitions():
  c = helpers.tiny_config()
  c.data.partition = "shards"
  c.data.shards_per_client = 3
  assert "shards, 3 per client" in plots.describe_config(c)
  c.data.source = "tfds"
  c.data.tfds.name = "cifar10"
  assert plots.describe_config(c).startswith("cifar10, ")


def test_scenario_and_sweep_figures(tmp_path):
  x = np.arange(1, 6)
  scenarios = {s: {"fedavg": (x, np.stack([x * 0.1, x * 0.1 + 0.02])),
                   "firma": (x, np.stack([x * 0.12, x * 0.12]))} for s in ("A", "B")}
  fig = plots.scenarios_figure(scenarios, title="two scenarios",
                               path=str(tmp_path / "s.png"))
  assert len(fig.axes) == 2 and (tmp_path / "s.png").stat().st_size > 0
  styles = {ax.get_title(): [(ln.get_color(), ln.get_linestyle()) for ln in ax.get_lines()]
            for ax in fig.axes}
  assert styles["A"] == styles["B"] and len(set(styles["A"])) == 2

  lines = {"fofedavg": [(0.5, [0.80, 0.82]), (0.8, [0.85, 0.86]), (1.0, [0.84, 0.84])],
           "fedavg": [(1.0, [0.83])]}
  fig = plots.sweep_figure(lines, xlabel="α", path=str(tmp_path / "alpha.png"))
  assert (tmp_path / "alpha.png").stat().st_size > 0
  containers = fig.axes[0].containers
  assert [c.get_label() for c in containers] == ["fofedavg", "fedavg"]
  xdata, ydata = containers[0].lines[0].get_data()
  np.testing.assert_allclose(xdata, [0.5, 0.8, 1.0])
  np.testing.assert_allclose(ydata, [0.81, 0.855, 0.84])
