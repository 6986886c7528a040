"""The verdicts at other margins (fedfrac_lab.reproduce.verdicts.sensitivity) and
the page blocks rendered from them (fedfrac_lab.reproduce.doc_blocks_sensitivity)."""
from __future__ import annotations

import pytest

from fedfrac_lab.reproduce import verdicts as v

ACC_1, ACC_2, ACC_3 = "accuracy ±1 pp", "accuracy ±2 pp (the rule)", "accuracy ±3 pp"
GINI_RULE = "Gini max(25 % of p, 0.005) (the rule)"


def _cell(published, gap, n=5, std=0.001, margin=v.ACCURACY):
  """One comparison of n seeds with mean published + gap and a tight spread."""
  d = std / (2 * (n // 2) / (n - 1)) ** 0.5
  values = [published + gap - d] * (n // 2) + [published + gap + d] * (n // 2)
  values += [published + gap] * (n % 2)
  return v.compare(published, values, margin)


def test_a_gap_of_1_5_points_agrees_at_2_and_3_points_and_differs_at_1():
  c = _cell(0.80, -0.015)
  assert c.half_width < 0.002 and c.verdict == v.AGREES          # the rule: 2 pp
  s = v.sensitivity([(v.ACCURACY, [c])])
  assert s[ACC_1][v.DIFFERS] == 1 and s[ACC_1][v.AGREES] == 0
  assert s[ACC_2][v.AGREES] == 1 and s[ACC_3][v.AGREES] == 1
  # an accuracy cell is not counted in a Gini column
  assert sum(s[GINI_RULE].values()) == 0


def test_the_tallies_of_a_small_set_of_cells():
  cells = [(v.ACCURACY, [_cell(0.80, -0.015)]),                 # 1.5 pp
           (v.ACCURACY, [_cell(0.70, 0.025)]),                  # 2.5 pp
           (v.ACCURACY, [_cell(0.60, 0.005)]),                  # 0.5 pp
           (v.ACCURACY_PERCENT, [_cell(90.0, 3.5, std=0.1,      # 3.5 points, in %
                                       margin=v.ACCURACY_PERCENT)]),
           (v.ACCURACY, [_cell(0.90, 0.0, std=0.05)]),          # wide: inconclusive
           (v.ACCURACY, [_cell(0.50, 0.10, n=2)]),              # too few seeds: kept
           (v.ACCURACY, [])]                                     # not run: not counted
  s = v.sensitivity(cells)
  assert [s[ACC_1][x] for x in (v.AGREES, v.DIFFERS, v.INCONCLUSIVE, v.TOO_FEW)] == [1, 3, 1, 1]
  assert [s[ACC_2][x] for x in (v.AGREES, v.DIFFERS, v.INCONCLUSIVE, v.TOO_FEW)] == [2, 2, 1, 1]
  assert [s[ACC_3][x] for x in (v.AGREES, v.DIFFERS, v.INCONCLUSIVE, v.TOO_FEW)] == [3, 1, 1, 1]
  # the rule's column is the rule's verdicts
  assert s[ACC_2] == v.tally(c.verdict for _, cs in cells for c in cs)


def test_a_gini_gap_of_0_1_agrees_relatively_and_differs_absolutely():
  c = _cell(0.5, 0.1, margin=v.GINI)
  assert c.verdict == v.AGREES                                   # 25 % of 0.5 = 0.125
  s = v.sensitivity([(v.GINI, [c])])
  assert s[GINI_RULE][v.AGREES] == 1
  assert s["Gini ±0.02"][v.DIFFERS] == 1 and s["Gini ±0.03"][v.DIFFERS] == 1
  assert sum(s[ACC_2].values()) == 0


def test_a_cell_run_twice_takes_the_least_favourable_verdict_at_each_margin():
  close, far = _cell(0.80, 0.005), _cell(0.80, 0.015)
  s = v.sensitivity([(v.ACCURACY, [close, far])])
  assert s[ACC_1][v.DIFFERS] == 1 and s[ACC_2][v.AGREES] == 1


def test_rejudge_keeps_verdicts_a_margin_cannot_move():
  collapsed = v.collapsed(_cell(0.80, -0.5), 2)
  few = _cell(0.80, 0.1, n=2)
  for c in (collapsed, few):
    assert v.rejudge(c, v.Margin("x", 0.5)) == c.verdict
  assert v.rejudge(_cell(0.80, 0.015), v.Margin("x", 0.01)) == v.DIFFERS


def test_the_page_table_counts_the_readme_rows_verdicts():
  """The rule's columns of the sensitivity view, accuracy and Gini together, are
  the README table's agrees / differs / inconclusive of the same rows."""
  from fedfrac_lab.reproduce import doc_blocks_readme, doc_blocks_sensitivity as ds
  readme = [(r[0], r[4]) for r in doc_blocks_readme.reproduces_rows()]
  firma = [t for paper, t in readme if paper == "firma"]
  rows = [r for r in ds.rows() if r.paper == "firma"]
  assert len(rows) == len(firma) == 4
  for row, counts in zip(rows, firma):
    s = v.sensitivity(row.cells)
    for verdict in v.MOVABLE:
      assert s[ACC_2][verdict] + s[GINI_RULE][verdict] == counts[verdict], row.what
  fofedavg = [t for paper, t in readme if paper == "fofedavg"][0]
  s = v.sensitivity(next(r for r in ds.rows() if r.paper == "fofedavg").cells)
  for verdict in v.MOVABLE:
    assert s[ACC_2][verdict] == fofedavg[verdict]


@pytest.mark.parametrize("seed,covers", [(-1, "each seed draws its own partition"),
                                         (42, "every seed shares one partition")])
def test_what_n_covers_follows_the_data_seed(seed, covers):
  assert v.n_covers(seed).startswith(covers)


def test_the_real_data_configs_pin_the_partition_in_reference_code_only():
  from fedfrac_lab.reproduce import common, firma_program, firma_tables, fofedavg_mnist
  assert firma_tables.partition_seed("reference_code") == 42
  assert firma_tables.partition_seed("paper") == -1
  for dataset in ("fashion_mnist", "mnist"):      # the real data sets' configs
    files = {"dataset": dataset, "dir": "", "rounds": 30, "inputs": "authors",
             "parallelism": "vmap"}
    module = firma_program.config_module(files)
    assert module.firma_config("reference_code", "ls2").data.seed == 42
    assert module.firma_config("paper", "ls2").data.seed == -1
  docs = [common.load_results_json(p) for p in ("results/fofedavg_mnist_iid.json",
                                                 "results/fofedavg_mnist_alpha.json")]
  assert fofedavg_mnist.partition_seed(*docs) == -1
  mixed = {"cells": {"a": {"config": {"data": {"seed": -1}}},
                     "b": {"config": {"data": {"seed": 3}}}}}
  with pytest.raises(ValueError, match="data.seed"):
    fofedavg_mnist.partition_seed(mixed)


def test_the_real_data_tables_say_what_their_n_covers():
  """Each real-data results table carries the sentence its config gives."""
  import os
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__)))))
  shared, own = v.n_covers(42), v.n_covers(-1)
  for path, expected in (("results/firma_fashion_mnist.md", [shared]),
                         ("results/firma_mnist.md", [shared]),
                         ("results/firma_digits.md", [own, shared]),
                         ("results/fofedavg_mnist_cpu.md", [own])):
    with open(os.path.join(root, path), encoding="utf-8") as f:
      text = f.read()
    for sentence in expected:
      assert sentence in text, path
