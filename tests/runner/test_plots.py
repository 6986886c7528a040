"""Figure primitives: distinct colour-and-style pairs, coinciding curves grouped,
titles from the resolved config, scenario and sweep figures. The two figures of a
run are tested in test_overview.py."""
from __future__ import annotations

import numpy as np

from fedfrac.runner import plots
from tests import helpers


def test_line_styles_differ_in_colour_and_style_then_marker():
  styles = [plots.line_style(i) for i in range(45)]
  pairs = [(s["color"], s["linestyle"]) for s in styles]
  assert len(set(pairs[:40])) == 40, "the first 40 lines differ in colour-and-style pair"
  assert len({(c, ls, s.get("marker")) for (c, ls), s in zip(pairs, styles)}) == 45


def test_coinciding_curves_are_grouped():
  x = np.arange(1, 9)
  same = np.linspace(0.2, 0.9, 8)
  groups = plots.group_coinciding({"fedavg": (x, same), "fedprox": (x, same.copy()),
                                   "scaffold": (x, same + 0.05),
                                   "kuramoto_fedavg": (x, same + 1e-9)})
  assert groups == [["fedavg", "fedprox", "kuramoto_fedavg"], ["scaffold"]]


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



def test_figures_saved_into_a_missing_folder_create_it(tmp_path):
  """``results.plot().save(dir)`` with a folder not made yet (it raised
  FileNotFoundError naming a temporary file)."""
  from fedfrac.runner.overview import ResultFigures
  lines = {"fedavg": [(1.0, [0.8]), (2.0, [0.9])]}
  figures = ResultFigures(plots.sweep_figure(lines, xlabel="lr"),
                          plots.sweep_figure(lines, xlabel="lr"))
  figures.save(str(tmp_path / "new" / "figs"))
  assert sorted(p.name for p in (tmp_path / "new" / "figs").iterdir()) == [
      "accuracy.png", "ranking.png"]
  assert (tmp_path / "new" / "figs" / "accuracy.png").stat().st_size > 0
