"""The notes under the title of a FIRMA real-data table
(:mod:`fedfrac_lab.reproduce.firma_files_table`) and the run summaries the docs quote
beside them (:mod:`fedfrac_lab.reproduce.doc_blocks_firma_files`): every figure in
them is computed from the runs the table is rendered from, so a note cannot
speak of "four runs" once there are seven. What the committed runs cannot show
(the side-by-side runs with the authors' PyTorch code, the one-change runs of
``fedfrac-reproduce firma_authors fedfrac``) is left to docs/design.md §3.3, which
names its commands; the notes point there instead of quoting it.

``groups`` is what :func:`fedfrac_lab.reproduce.firma_files_table._groups` returns:
``{(mode, inputs): {(scenario, method): [(cell, device), ...]}}``.
"""
from __future__ import annotations

from typing import List, NamedTuple, Optional, Tuple

import numpy as np

from fedfrac_lab.reproduce import firma_tables, verdicts

INPUT_NAMES = {"authors": "the authors' inputs", "unit": "[0, 1] inputs"}


class Run(NamedTuple):
  """One run (one seed) of a cell: its record, the device and the input scaling."""
  record: dict
  device: str
  inputs: str


def is_variant(inputs: str) -> bool:
  """Whether a group's key names a labelled variant of ``reference_code``
  (:func:`fedfrac_lab.reproduce.firma_variants.cell_inputs`: ``authors+shared``)."""
  return "+" in inputs


def runs_of(groups, scenario: str, method: str, mode: str = "reference_code") -> List[Run]:
  """Every run of (``scenario``, ``method``) in ``mode``, any input scaling, in
  the order of the groups and files; a labelled variant's runs are not the
  authors' code and stay out."""
  return [Run(r, device, inputs)
          for (m, inputs), cells in sorted(groups.items())
          if m == mode and not is_variant(inputs)
          for cell, device in cells.get((scenario, method), [])
          for r in cell["runs"]]


def _span(values, digits=3):
  lo, hi = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
  return lo if lo == hi else f"{lo}–{hi}"


def where_text(runs: List[Run]) -> str:
  """"4 with the authors' inputs (1 on CPU, 3 on NVIDIA H200), 3 with [0, 1]
  inputs (1 on CPU, 2 on NVIDIA H100 80GB)"."""
  parts = []
  for inputs in sorted({r.inputs for r in runs}):
    on = [r.device.split(",")[0] for r in runs if r.inputs == inputs]
    devices = ", ".join(f"{on.count(d)} on {d}" for d in dict.fromkeys(on))
    parts.append(f"{len(on)} with {INPUT_NAMES.get(inputs, inputs)} ({devices})")
  return ", ".join(parts)


class CurveSummary(NamedTuple):
  """The per-round accuracy of several runs of one cell: how many, where they
  ran, the range of each of the first rounds, the round each run was best at
  (first occurrence), and the final accuracies."""
  runs: int
  where: str
  first_rounds: Tuple[str, ...]        # "0.515–0.641" per round 1, 2, ...
  best_rounds: Tuple[int, ...]          # sorted
  finals: Tuple[float, ...]
  below_best_pp: Tuple[float, ...]      # best minus final, in pp, per run

  def best_at(self, rnd: int) -> int:
    return sum(1 for b in self.best_rounds if b == rnd)


def curve_summary(groups, scenario="iid", method="fibfl", first=3) -> Optional[CurveSummary]:
  """:class:`CurveSummary` of every ``reference_code`` run of a cell that kept
  its curve (None without one)."""
  runs = [r for r in runs_of(groups, scenario, method) if "curve" in r.record]
  curves = [np.asarray(r.record["curve"], np.float64) for r in runs]
  if not curves:
    return None
  first = min([first] + [len(c) for c in curves])     # runs of fewer rounds
  return CurveSummary(
      len(runs), where_text(runs),
      tuple(_span([c[i] for c in curves]) for i in range(first)),
      tuple(sorted(int(np.argmax(c)) + 1 for c in curves)),
      tuple(float(c[-1]) for c in curves),
      tuple(100 * float(c.max() - c[-1]) for c in curves))


def best_rounds_text(s: CurveSummary) -> str:
  """"best at round 2 in 1 of 7 runs (rounds 2, 3, 8, 8, 8, 16, 28)"."""
  return (f"best at round 2 in {s.best_at(2)} of {s.runs} runs (rounds "
          f"{', '.join(map(str, s.best_rounds))})")


def best_rounds_summary(groups, method: str) -> str:
  """Over every ``reference_code`` run of ``method`` (all scenarios): "of its 30
  runs 2 are best at round 2 and 20 after round 10, and each ends 0.3–7.0 pp under
  its best"."""
  curves = [np.asarray(r.record["curve"], np.float64)
            for scen in firma_tables.SCENARIOS for r in runs_of(groups, scen, method)]
  best = [int(np.argmax(c)) + 1 for c in curves]
  drop = [100 * float(c.max() - c[-1]) for c in curves]
  return (f"of its {len(curves)} runs {best.count(2)} are best at round 2 and "
          f"{sum(b > 10 for b in best)} after round 10, and each ends "
          f"{_span(drop, 1)} pp under its best")


def at_chance_cells(groups, method="fibfl_pp"):
  """[(scenario, inputs, device, runs at chance, runs)] of every ``reference_code``
  cell of ``method`` with a run at chance, and (runs at chance, runs) over all
  its cells."""
  found, stuck, total = [], 0, 0
  for (mode, inputs), cells in sorted(groups.items()):
    if mode != "reference_code" or is_variant(inputs):
      continue
    for (scen, m), entries in cells.items():
      if m != method:
        continue
      for cell, device in entries:
        k = verdicts.runs_at_chance(cell["runs"])
        stuck, total = stuck + k, total + len(cell["runs"])
        if k:
          found.append((scen, inputs, device, k, len(cell["runs"])))
  order = list(firma_tables.SCENARIOS)
  return sorted(found, key=lambda f: order.index(f[0])), (stuck, total)


def _cells_text(found):
  return ", ".join(f"{firma_tables.PAPER_COLUMNS[s]} with {INPUT_NAMES.get(i, i)} on "
                   f"{d.split(',')[0]}: {k} of {n}" for s, i, d, k, n in found)


def fashion_mnist(groups) -> str:
  """The note under Tables 7–8: the FibFL / FibFL+ gap and the FibFL++ runs at
  chance, with the figures of the runs the table holds."""
  s = curve_summary(groups)
  published = firma_tables.published("Table 7")[("fibfl", "iid")]
  fibfl = ("" if s is None else
           f"FibFL IID has {s.runs} runs below ({s.where}): accuracy "
           f"{', '.join(s.first_rounds)} at "
           f"{'round 1' if len(s.first_rounds) == 1 else f'rounds 1–{len(s.first_rounds)}'}, "
           f"{best_rounds_text(s)}, final {_span(s.finals)} "
           f"({_span(s.below_best_pp, 1)} pp under each run's best) against the "
           f"published {published:.4f}. ")
  found, (stuck, total) = at_chance_cells(groups)
  chance = (f"In the runs below {stuck} of {total} FibFL++ runs ended at chance "
            f"({_cells_text(found)})" if stuck else
            f"None of the {total} FibFL++ runs below ended at chance")
  return (
      "**FibFL / FibFL+ below the paper.** Their `reference_code` rows are what the "
      "authors' public code computes; the gap is between that code and the published "
      "cells (docs/design.md §3.3, \"FibFL / FibFL+ below Tables 7–8\": run against "
      "the authors' `fibfl/fibfl.py` under PyTorch with `fedfrac-reproduce "
      "firma_authors`, fedfrac computes the same per-round accuracy on a full-batch "
      f"synthetic problem and the same curve on this data). {fibfl}"
      "docs/design.md §3.3 traces the gap to "
      "blending extractors that start from independent random draws (the authors' "
      "initialisation) after 20 Adam epochs a round, and shows a shared start (the "
      "`paper` mode, one seed) reaching the published level, so the published FibFL / "
      "FibFL+ cells behave like runs from a shared start. The public runner does not "
      "parse and imports modules that are not in the repository, and the paper's §6 "
      "describes a Fibonacci client participation that neither Alg. 1–2 nor the public "
      "code has. No departure of `reference_code` from the authors' code was found; "
      "the numbers below are unchanged.\n\n"
      "**FibFL++ runs at chance.** In `reference_code` the FedAvg warm-up averages ten "
      "models drawn independently (the authors' initialisation), and the average of "
      "these unaligned models kills the extractor's last ReLU layer: no unit active on "
      "any training image, in the runs that stay at chance and in those that escape "
      "alike. What revives it is each client's own warm-up Adam state, which the "
      "authors' code keeps across the average: reset there or averaged like the "
      "params, no run escapes (`results/firma_fibfl_pp_adam_ablation_cpu.json`). The "
      "authors' own code collapses the same way, and one shared initial model avoids "
      "it (docs/design.md §3.3, \"FibFL++ runs that stay "
      f"at chance\"). {chance}. A cell with such runs reads *collapsed: k of n at "
      "chance* and is counted apart.")


NOTES = {"fashion_mnist": fashion_mnist}


def note(dataset: str, groups) -> str:
  """The note under the title of ``dataset``'s table ("" when it has none)."""
  return NOTES[dataset](groups) if dataset in NOTES else ""
