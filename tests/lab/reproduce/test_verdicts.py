"""fedfrac_lab.reproduce.verdicts: the rule that judges every published cell — never
kinder than the seeds allow. The cases below are ones the rule before it
(|Δ| ≤ max(2 pp, 2 × our std)) called *agrees*."""
from __future__ import annotations

import pytest

from fedfrac_lab.reproduce import verdicts as v


def _values(mean, std, n):
  """n values with exactly this mean and sample std (symmetric around the mean)."""
  if n == 1:
    return [mean]
  half = n // 2
  # ±d on `half` values each (and the mean once if n is odd): sample std
  # = d · sqrt(2·half / (n − 1)).
  d = std / (2 * half / (n - 1)) ** 0.5
  return [mean - d] * half + [mean + d] * half + ([mean] if n % 2 else [])


def test_values_helper_has_the_asked_mean_and_std():
  mean, std, n = v.seed_summary(_values(0.5, 0.03, 5))
  assert (mean, n) == (pytest.approx(0.5), 5) and std == pytest.approx(0.03)


def test_fewer_than_three_seeds_get_no_verdict():
  # FibFL+ Dir 0.8 on Fashion-MNIST: 2 seeds 6.5 pp apart, −12 pp from the paper;
  # the old rule said "agrees" (12 ≤ 2 × 6.5).
  c = v.compare(0.7334, _values(0.7334 - 0.12, 0.065, 2), v.ACCURACY)
  assert c.verdict == v.TOO_FEW and c.delta == pytest.approx(-0.12)
  assert v.compare(0.5, [0.5], v.ACCURACY).verdict == v.TOO_FEW
  assert v.compare(0.5, _values(0.5, 0.01, 3), v.ACCURACY).verdict == v.AGREES


def test_agreement_needs_the_whole_interval_inside_the_margin():
  # n = 5: t_{0.95, 4} = 2.132; h = 2.132 · s / √5.
  t4 = v.t_one_sided(4)
  assert t4 == pytest.approx(2.1318, abs=1e-4)
  s = 0.01
  h = t4 * s / 5 ** 0.5                                        # 0.00953
  assert v.compare(0.9, _values(0.9 + 0.02 - h - 1e-4, s, 5), v.ACCURACY).verdict == \
      v.AGREES
  assert v.compare(0.9, _values(0.9 + 0.02 - h + 1e-4, s, 5), v.ACCURACY).verdict == \
      v.INCONCLUSIVE
  assert v.compare(0.9, _values(0.9 + 0.02 + h + 1e-4, s, 5), v.ACCURACY).verdict == \
      v.DIFFERS
  c = v.compare(0.9, _values(0.91, s, 5), v.ACCURACY)
  assert c.half_width == pytest.approx(h) and c.margin == 0.02


def test_more_noise_never_turns_a_cell_into_agreement():
  # The old bound max(2 pp, 2 × std) grew with the spread: 4 pp off with a 3 pp
  # std "agreed". Here a wider spread only widens the interval.
  assert v.compare(0.9, _values(0.94, 0.03, 5), v.ACCURACY).verdict == v.INCONCLUSIVE
  verdicts_by_std = [v.compare(0.9, _values(0.91, s, 5), v.ACCURACY).verdict
                     for s in (0.001, 0.01, 0.03, 0.1)]
  assert verdicts_by_std == [v.AGREES, v.AGREES, v.INCONCLUSIVE, v.INCONCLUSIVE]
  assert [v.compare(0.9, _values(0.95, s, 5), v.ACCURACY).verdict
          for s in (0.001, 0.05)] == [v.DIFFERS, v.INCONCLUSIVE]


def test_gini_is_judged_on_a_relative_margin():
  # RDFL LS K=2: 0.011 against a published 0.031 "agreed" within 2 absolute points.
  c = v.compare(0.031, _values(0.011, 0.001, 5), v.GINI)
  assert c.margin == pytest.approx(0.25 * 0.031) and c.verdict == v.DIFFERS
  assert v.compare(0.40, _values(0.45, 0.005, 5), v.GINI).verdict == v.AGREES
  # Near zero the floor of 0.005 holds.
  assert v.compare(0.004, _values(0.006, 0.0005, 5), v.GINI).margin == 0.005


def test_the_papers_printed_spread_widens_the_interval():
  ours = _values(44.0, 1.0, 5)
  exact = v.compare(41.9, ours, v.ACCURACY_PERCENT)
  spread = v.compare({"mean": 41.9, "std": 0.9}, ours, v.ACCURACY_PERCENT, runs=5)
  unstated = v.compare({"mean": 41.9, "std": 0.9}, ours, v.ACCURACY_PERCENT)
  assert exact.half_width < spread.half_width < unstated.half_width
  t4 = v.t_one_sided(4)
  assert spread.half_width == pytest.approx(t4 * (1.0 / 5 + 0.81 / 5) ** 0.5)
  assert unstated.half_width == pytest.approx(t4 * (1.0 / 5 + 0.81) ** 0.5)


def test_a_derived_difference_inherits_the_cells_beneath_it():
  # FIRMA Table 13 in `paper` mode: the gain is within 2 pp of the paper while both
  # accuracies it is the difference of are 60+ pp off.
  fibfl = v.compare(0.2866, _values(0.95, 0.03, 5), v.ACCURACY)
  plus = v.compare(0.3248, _values(0.969, 0.012, 5), v.ACCURACY)
  own = v.compare(3.8, _values(3.5, 0.5, 5), v.GAIN_PP)
  assert (fibfl.verdict, plus.verdict, own.verdict) == (v.DIFFERS, v.DIFFERS, v.AGREES)
  c = v.inherit(own, [("FibFL+", plus), ("FibFL", fibfl)])
  assert c.verdict == v.DIFFERS and "FibFL+, FibFL" in c.note
  agreeing = v.compare(0.30, _values(0.30, 0.001, 5), v.ACCURACY)
  assert v.inherit(own, [("a", agreeing), ("b", agreeing)]) == own
  loose = v.compare(0.30, _values(0.31, 0.03, 5), v.ACCURACY)
  assert v.inherit(own, [("a", agreeing), ("b", loose)]).verdict == v.INCONCLUSIVE


def test_by_construction_is_shown_but_not_counted():
  c = v.by_construction(4_705_680, 4_705_680)
  assert c.verdict == v.BY_CONSTRUCTION
  assert v.by_construction(4_705_680, 4_705_684).verdict == v.DIFFERS
  counts = v.tally([v.AGREES, v.BY_CONSTRUCTION, v.DIFFERS, v.TOO_FEW, v.STAND_IN])
  assert [counts[k] for k in v.JUDGED] == [1, 1, 0, 1]
  text = v.tally_text(counts)
  assert text == ("agrees 1 · differs 1 · inconclusive 0 · too few seeds 1 · "
                  "by construction 1 · stand-in 1")


def test_stand_in_and_missing_cells():
  c = v.compare(55.62, [112.0, 110.0, 115.0], v.ACCURACY_PERCENT, stand_in=True)
  assert c.verdict == v.STAND_IN and c.delta == pytest.approx(112.3333 - 55.62, abs=1e-3)
  assert v.compare("NR", [1.0, 2.0, 3.0], v.ACCURACY).verdict == v.NOT_RUN
  assert v.compare(0.5, [], v.ACCURACY).verdict == v.NOT_RUN
  # A diverged seed (non-finite) has no final number: 2 finite seeds are too few.
  assert v.compare(0.5, [0.5, float("nan"), 0.51], v.ACCURACY).verdict == v.TOO_FEW


def test_markdown_row_shows_the_interval_and_the_margin():
  c = v.compare(0.9, _values(0.91, 0.01, 5), v.ACCURACY)
  text = v.markdown_table([("FedAvg · IID", c, "a note")], 4, delta_scale=100.0)
  row = text.splitlines()[-1]
  assert row.startswith("| FedAvg · IID | 0.9000 | 0.9100 ± 0.0100 (n = 5) | +1.0 | "
                        "[+0.0, +2.0] | ±2.0 | agrees | a note |")


def test_a_cell_with_runs_at_chance_is_collapsed_and_counted_apart():
  # FibFL++ IID on Fashion-MNIST (H200, the authors' inputs): two of three runs
  # at chance; the interval alone says "inconclusive", which is kinder than the runs.
  values = [0.1028, 0.8796, 0.1024]
  c = v.compare(0.8788, values, v.ACCURACY)
  assert c.verdict == v.INCONCLUSIVE
  stuck = sum(v.at_chance(x) for x in values)
  d = v.collapsed(c, stuck)
  assert d.verdict == v.COLLAPSED and d.mean == c.mean and d.std == c.std
  assert v.verdict_text(d) == "collapsed: 2 of 3 at chance"
  assert v.collapsed(c, 0) == c                       # no run at chance: unchanged
  assert v.collapsed(v.compare(0.5, [], v.ACCURACY), 1).verdict == v.NOT_RUN
  counts = v.tally([d.verdict, v.AGREES])
  assert [counts[k] for k in v.JUDGED] == [1, 0, 0, 0]
  assert v.tally_text(counts) == ("agrees 1 · differs 0 · inconclusive 0 · too few seeds 0 "
                                  "· collapsed 1")
  row = v.markdown_table([("FibFL++ · IID", d, "")], 4, delta_scale=100.0).splitlines()[-1]
  assert "| collapsed: 2 of 3 at chance |" in row
  # Chance is 1 / classes + 2 pp; a diverged (non-finite) run is not at chance.
  assert v.at_chance(0.12) and not v.at_chance(0.121)
  assert v.at_chance(0.05, num_classes=100) is False and v.at_chance(0.03, num_classes=100)
  assert not v.at_chance(float("nan"))
  # A derived difference made of a collapsed cell is collapsed too.
  own = v.compare(2.1, _values(2.0, 0.1, 3), v.GAIN_PP)
  assert v.inherit(own, [("FibFL++", d), ("FibFL+", c)]).verdict == v.COLLAPSED


def test_a_cell_run_more_than_once_takes_its_least_favourable_verdict():
  assert v.least_favourable([v.AGREES, v.DIFFERS]) == v.DIFFERS
  assert v.least_favourable([v.AGREES, v.INCONCLUSIVE]) == v.INCONCLUSIVE
  assert v.least_favourable([v.DIFFERS, v.COLLAPSED]) == v.COLLAPSED
  # A run without the seeds for a verdict adds none beside one that has them.
  assert v.least_favourable([v.TOO_FEW, v.AGREES]) == v.AGREES
  assert v.least_favourable([v.TOO_FEW, v.TOO_FEW]) == v.TOO_FEW


def test_the_difference_of_two_means_and_its_interval():
  d, h = v.difference({"mean": 0.5, "std": 0.1, "n": 3},
                      {"mean": 0.4, "std": 0.1, "n": 5})
  assert d == pytest.approx(0.1)
  # t_{0.95, 2} = 2.919986 at the smaller n; Welch's standard error.
  assert h == pytest.approx(2.919986 * (0.01 / 3 + 0.01 / 5) ** 0.5, rel=1e-5)
