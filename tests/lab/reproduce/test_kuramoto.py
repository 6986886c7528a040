"""fedfrac_lab.reproduce.kuramoto: one verdict rule for a weighting against FedAvg,
in the table the command writes and in the docs that quote it."""
from __future__ import annotations

import math
import re

from fedfrac_lab.reproduce import common, doc_blocks_other, kuramoto


def test_a_weighting_is_judged_by_the_interval_of_its_paired_difference():
  # Every seed below FedAvg and a mean 7 points under: the old rule said "tie"
  # because the seeds did not all agree in sign; the interval cannot tell.
  assert kuramoto.paired_verdict(-0.071, 0.066, 3) == "inconclusive"
  assert kuramoto.paired_verdict(0.0, 0.0, 3) == "tie"
  assert kuramoto.paired_verdict(-0.126, 0.030, 3) == "hurts"
  assert kuramoto.paired_verdict(0.126, 0.030, 3) == "helps"
  assert kuramoto.paired_verdict(-0.64, None, 1, diverged=2) == "diverged"
  assert kuramoto.paired_verdict(0.0, 0.0, 2) == "too few seeds"
  # From per-seed differences: a non-finite one is a seed that diverged.
  assert kuramoto.verdict([0.001, -0.001, 0.0]) == "tie"
  assert kuramoto.verdict([-0.7, math.nan, -0.69]) == "diverged"
  assert kuramoto.verdict([-0.10, -0.12, -0.11]) == "hurts"


def test_the_committed_table_and_the_docs_use_that_one_rule():
  text = open(common.find_file(doc_blocks_other.KURAMOTO_MD), encoding="utf-8").read()
  legend = [ln for ln in text.splitlines() if ln.startswith("- *verdict*:")]
  assert legend == ["- " + kuramoto.RULE]
  seeds = doc_blocks_other._seeds()
  rows = [row for rows in doc_blocks_other.kuramoto_sections().values() for row in rows
          if row["method"] in kuramoto.WEIGHTINGS]
  assert len(rows) == 54
  for row in rows:
    m = re.search(r"\((\d+)/(\d+) diverged\)", row["final accuracy (mean over clients)"])
    diverged = int(m.group(1)) if m else 0
    mean, std = common.parse_mean_std(row["Δ final vs FedAvg"]) or (None, None)
    want = kuramoto.paired_verdict(mean, std, seeds - diverged, diverged)
    assert row["verdict (final)"] == want, row
    # The docs count the table's verdicts, not a rule of their own.
    assert doc_blocks_other.tie_verdict(row) == ("ties" if want == "tie" else want)


def _stats(final):
  return {"final": final, "final_global": final, "best": final, "best_round": 5,
          "loss_var": 0.01, "max_weight": 0.1, "ok": math.isfinite(final),
          "fallbacks": 0, "rounds": 10}


def test_the_table_writer_prints_that_rule_in_rows_summary_and_notes():
  seeds, kappas = (0, 1, 2), (0.1,)
  base = [0.80, 0.82, 0.84]
  finals = {"coupled": [0.80, 0.82, 0.84], "paper": [0.10, math.nan, 0.11],
            "reference_code": [0.79, 0.72, 0.84]}
  stats = {"fedavg": {x: _stats(base[x]) for x in seeds},
           "scaffold": {x: _stats(base[x]) for x in seeds}}
  for w, f in finals.items():
    stats[kuramoto.label_of(w, 0.1)] = {x: _stats(f[x]) for x in seeds}
  rows = "\n".join(kuramoto.table_for(stats, seeds, kappas, 10))
  assert rows.splitlines()[4].endswith("| tie |")              # coupled
  assert rows.splitlines()[5].endswith("| diverged |")         # paper, a seed diverged
  assert rows.splitlines()[6].endswith("| inconclusive |")     # reference_code
  summary, _ = kuramoto.summary_lines({(10, 3): stats}, seeds, kappas)
  assert summary[3].startswith("| paper | 0.1 | diverged (")
  notes = kuramoto.notes({(10, 3): stats}, seeds, kappas)
  assert notes[2] == ("- Verdicts over the 3 (weighting, κ0, s) cells: 1 tie, 0 helps, "
                      "0 hurts, 1 inconclusive, 1 diverged.")
