"""Generated doc blocks of docs/design.md: the figures its FIRMA notes (§3.3,
"FibFL / FibFL+ below Tables 7–8 on Fashion-MNIST") quote from the committed
Fashion-MNIST runs — the gap to the published cells, the verdicts of the other
methods, the rounds at which runs are best — so the design notes follow the
files as the tables do. The runs beside the authors' PyTorch code, the one-change
runs and the shared-start variant are rendered by
:mod:`fedfrac_lab.reproduce.doc_blocks_design_runs`. See
:mod:`fedfrac_lab.reproduce.docs`."""
from __future__ import annotations

from fedfrac_lab.reproduce import firma_notes, firma_tables, verdicts
from fedfrac_lab.reproduce import firma_files_table
from fedfrac_lab.reproduce.doc_blocks import FMNIST_JSONS, FMNIST_MD, span
from fedfrac_lab.reproduce.doc_blocks_firma_files import (FMNIST_AUTHORS, FMNIST_UNIT,
                                                      firma_rows, fmnist)
from fedfrac_lab.reproduce.doc_registry import block

DESIGN = "docs/design.md"


def method_tally(groups, methods, group=FMNIST_AUTHORS, key="accuracy"):
  """Verdict counts (one per cell) of ``methods`` in one section."""
  paper = firma_files_table.published_table(firma_files_table.PUBLISHED, "Table 7" if key ==
                                      "accuracy" else "Table 8")
  return verdicts.tally(firma_files_table.cell_verdicts(groups[group], paper, key,
                                                  methods).values())


def _deltas(group, methods):
  """Accuracy Δ in pp of every run of ``methods`` in one section (a row each)."""
  return [100 * c.delta for m, _, c, _, _ in firma_rows(group) if m in methods]


@block("design_fibfl_gap", DESIGN, *FMNIST_JSONS, inline=True)
def design_fibfl_gap():
  groups, _ = fmnist()
  ring = ("fibfl", "fibfl_plus")
  authors, unit = _deltas(FMNIST_AUTHORS, ring), _deltas(FMNIST_UNIT, ring)
  under, total = sum(d < 0 for d in authors + unit), len(authors) + len(unit)
  count = f"all {total} of their" if under == total else f"{under} of their {total}"
  best = {m: firma_notes.best_rounds_summary(groups, m) for m in ring}
  others = ("fedavg", "rdfl", "fedrep")
  return (f"In `reference_code` mode (`{FMNIST_MD}`) FibFL and FibFL+ sit under the "
          f"published cells in {count} table rows (a row: one cell's seeds on one "
          f"device): by {span([-d for d in authors], 1)} pp "
          f"with the authors' inputs "
          f"(Table 7's accuracy verdicts, one per cell: "
          f"{verdicts.tally_text(method_tally(groups, ring))}) "
          f"and by {span([-d for d in unit], 1)} pp with [0, 1] inputs (1 or 2 seeds). "
          f"In Table 7 (accuracy; Table 8's Gini apart) FedAvg, RDFL and FedRep read "
          f"{verdicts.tally_text(method_tally(groups, others))}"
          f" and FibFL++ {verdicts.tally_text(method_tally(groups, ('fibfl_pp',)))} with "
          f"the authors' inputs. Their accuracy does not as a rule peak at round 2: FibFL: "
          f"{best['fibfl']}; FibFL+: {best['fibfl_plus']}")


@block("design_fibfl_runs", DESIGN, *FMNIST_JSONS, inline=True)
def design_fibfl_runs():
  s = firma_notes.curve_summary(fmnist()[0], first=6)
  pub = firma_tables.published("Table 7")[("fibfl", "iid")]
  return (f"fedfrac's {s.runs} runs of the cell ({s.where}; `{FMNIST_MD}`) read "
          f"{', '.join(s.first_rounds)} at rounds 1–6, are "
          f"{firma_notes.best_rounds_text(s)} and end at {span(s.finals)} against the "
          f"published {pub:.4f}")


@block("design_fibfl_ends", DESIGN, *FMNIST_JSONS, inline=True)
def design_fibfl_ends():
  s = firma_notes.curve_summary(fmnist()[0])
  groups, _ = fmnist()
  best = [max(r.record["curve"]) for r in firma_notes.runs_of(groups, "iid", "fibfl")]
  return (f"best {span(best)} over the rounds and {span(s.finals)} after 30 "
          f"(FibFL IID, {s.runs} runs)")
