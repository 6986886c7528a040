"""The data of the reproduction figures (``docs/images/reproduction/``), computed
from the committed results by the same functions that render the results tables,
so a figure shows what its table says: per cell the published value, ours, Δ, the
90 % interval of Δ, the margin and the verdict (:mod:`fedfrac_lab.reproduce.verdicts`).

Three kinds of figure (:mod:`fedfrac_lab.reproduce.figure_draw` draws them):

* ``delta``: a table judged on the paper's data (FIRMA Tables 7–13). One row per
  row of the table (a cell, or one run of a cell run more than once), Δ = ours −
  published with its 90 % interval as an error bar, ±margin as a shaded band,
  the point coloured by its verdict; one panel per section of the table
  (compat mode, input scaling).
* ``values``: a table of a paper whose data we only stand in for (FOFedAvg,
  FO-RI-FedAvg, Kuramoto-FedAvg). No verdict applies, so no interval or margin is
  drawn: the published value and ours (mean ± std over seeds) side by side in
  the table's units, one panel per column.
* ``curves``: per-round accuracy of fedfrac's runs beside a run of the authors'
  code.

A figure is re-drawn only when its data changes: :func:`digest` of the data (and
of the drawing code) is written into the PNG and ``fedfrac-reproduce docs
--check`` compares it with the results (:mod:`fedfrac_lab.reproduce.figure_files`).
This module is data only (no matplotlib).
"""
from __future__ import annotations

import hashlib
import json
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from fedfrac_lab.reproduce import common, published_tables, verdicts

DELTA, VALUES, CURVES = "delta", "values", "curves"
IMAGES = "docs/images/reproduction"


class Cell(NamedTuple):
  """One row of a table: the published value, ours (mean, sample std, seeds) and
  the comparison, in the table's own units (``scale`` turns Δ, the interval and
  the margin into the panel's unit: 100 for an accuracy fraction shown in pp)."""
  label: str
  published: float
  ours: Optional[float]
  std: Optional[float]
  n: int
  delta: Optional[float]
  half_width: Optional[float]
  margin: Optional[float]
  verdict: str
  scale: float = 1.0


class Curve(NamedTuple):
  """One run's per-round values (``group`` sets its colour and legend entry)."""
  label: str
  group: str
  rounds: Tuple[int, ...]
  values: Tuple[float, ...]


class Panel(NamedTuple):
  """One axes: a section or column of a table (``cells``), or curves with
  horizontal reference lines (``references``: (label, value)). ``limit``: the
  half-width of a ``delta`` panel's x-axis in its unit (rows beyond it are drawn
  at the edge with their value)."""
  title: str
  unit: str
  cells: Tuple[Cell, ...] = ()
  curves: Tuple[Curve, ...] = ()
  references: Tuple[Tuple[str, float], ...] = ()
  limit: float = 0.0


class Figure(NamedTuple):
  """A figure: ``name`` is its file's stem under :data:`IMAGES`; ``table`` the
  table it shows ("Table 11"; "" for curves), ``results`` the results files
  whose table it is."""
  name: str
  paper: str
  table: str
  kind: str
  title: str
  panels: Tuple[Panel, ...]
  results: Tuple[str, ...]
  note: str = ""

  @property
  def path(self) -> str:
    return f"{IMAGES}/{self.name}.png"

  def cells(self) -> List[Cell]:
    return [c for p in self.panels for c in p.cells]


def _rounded(x):
  """``x`` with every float to 9 significant digits (a digest that does not move
  with the last bits of a mean)."""
  if isinstance(x, float):
    return float(f"{x:.9g}")
  if isinstance(x, dict):
    return {k: _rounded(v) for k, v in x.items()}
  if isinstance(x, (list, tuple)):
    return [_rounded(v) for v in x]
  return x


def as_data(fig: Figure) -> dict:
  """The figure as plain JSON data (what its digest covers)."""
  def panel(p):
    return {"title": p.title, "unit": p.unit, "limit": p.limit,
            "cells": [c._asdict() for c in p.cells],
            "curves": [c._asdict() for c in p.curves],
            "references": [list(r) for r in p.references]}
  return _rounded({"name": fig.name, "paper": fig.paper, "table": fig.table,
                   "kind": fig.kind, "title": fig.title, "note": fig.note,
                   "results": list(fig.results), "panels": [panel(p) for p in fig.panels]})


def digest(fig: Figure, code: str = "") -> str:
  """sha256 of the figure's data and ``code`` (the drawing code's own digest)."""
  text = json.dumps(as_data(fig), sort_keys=True, ensure_ascii=True) + "\n" + code
  return hashlib.sha256(text.encode("utf-8")).hexdigest()


def judged(label: str, c: verdicts.Comparison, scale: float = 1.0) -> Cell:
  """A :class:`Cell` of a judged table row."""
  return Cell(label, c.published.value if c.published else float("nan"), c.mean,
              c.std, c.n, c.delta, c.half_width, c.margin, c.verdict, scale)


def limit(cells: Sequence[Cell], cap: float) -> float:
  """The half-width of a ``delta`` panel's x-axis: every interval and margin
  inside it, but at most ``cap`` (in the panel's unit), so the ±margin band stays
  readable beside a cell tens of points away."""
  reach = [abs(c.delta * c.scale) + (c.half_width or 0.0) * c.scale
           for c in cells if c.delta is not None]
  margins = [c.margin * c.scale for c in cells if c.margin is not None]
  want = max(reach + [1.5 * m for m in margins] + [0.0]) * 1.08
  return float(min(cap, want) if want > 0 else cap)


# ------------------------------------------------------------ stand-in tables

PAPER_NAMES = {"fofedavg": "FOFedAvg", "fo_ri_fedavg": "FO-RI-FedAvg",
               "kuramoto": "Kuramoto-FedAvg", "firma": "FIRMA"}
# Per paper: what stands in for its data, as a figure's title says it.
STAND_IN = {
    "fofedavg": "scikit-learn digits (and a reduced real Fashion-MNIST run in Table IV) "
                "stand in for MNIST",
    "fo_ri_fedavg": "the synthetic BEV fleet stands in for VED (40 rounds, C = 0.5, "
                    "5 seeds; the paper: 200–300 rounds)",
    "kuramoto": "scikit-learn digits (K = 10, s = 3, 100 rounds, 3 seeds) stand in "
                "for MNIST",
}
# Column names as an axis shows them (the table's own name otherwise).
UNITS = {"MNIST · max_accuracy": "best accuracy (%)", "MNIST · round": "round of the best",
         "VED RMSE": "RMSE (Wh/window)", "VED MAE": "MAE (Wh/window)",
         "VED MAPE": "MAPE (%)", "VED D_cv(200)": "D_cv (drift dispersion)"}


def _clauses(setting: str) -> List[str]:
  return [c.strip() for c in setting.split(";") if c.strip()]


def _short(clause: str) -> str:
  """A setting clause as a row tag: its first comma part without parentheses
  ("scikit-learn digits", "real Fashion-MNIST, reduced", "coupled weighting")."""
  head = clause.split(", ")[0].split(" (")[0].replace("`", "")
  return head + (", reduced" if "(reduced)" in clause else "")


def tags(settings: Sequence[str]) -> List[str]:
  """A short tag per setting of one cell's several numbers of ours: the clauses
  that only it has, shortened ("" for the one with no clause of its own)."""
  if len(settings) < 2:
    return [""] * len(settings)
  parts = [_clauses(s) for s in settings]
  common_ = set.intersection(*(set(p) for p in parts))
  return [", ".join(_short(c) for c in p if c not in common_)[:60] for p in parts]


def standin_cells(paper: str, table: str) -> Dict[str, List[Cell]]:
  """{column: [Cell]} of one stand-in table: every published cell that has a
  number of ours, a row per number (tagged by the setting it comes from), in the
  table's order (:func:`fedfrac_lab.reproduce.published_tables.table_rows`)."""
  doc = common.published_document(paper)
  ours = published_tables.PAPERS[paper][2]()
  rows = published_tables.table_rows(table, doc["tables"][table], ours)
  by_label: Dict[str, list] = {}
  for label, _, _, o, c in rows:
    if (o is not None and o.mean is not None and c.published is not None
        and not o.real):        # runs on the paper's own data are not stand-ins
      by_label.setdefault(label, []).append((o, c))
  out: Dict[str, List[Cell]] = {}
  for label, entries in by_label.items():
    row, _, column = label.partition(" · ")
    for tag, (o, c) in zip(tags([o.setting for o, _ in entries]), entries):
      name = f"{row} ({tag})" if tag else row
      out.setdefault(column, []).append(Cell(
          name, c.published.value, o.mean, o.std, o.n, c.delta, None, None, c.verdict))
  return out


def standin_figure(paper: str, table: str) -> Optional[Figure]:
  """The ``values`` figure of one stand-in table; None when no cell of it has a
  number of ours."""
  columns = standin_cells(paper, table)
  if not columns:
    return None
  seeds = sorted({c.n for cells in columns.values() for c in cells})
  panels = tuple(Panel(column, UNITS.get(column, column), tuple(cells))
                 for column, cells in columns.items())
  caption = common.published_document(paper)["tables"][table].get("caption", "")
  title = (f"{PAPER_NAMES[paper]} {table} beside ours on a STAND-IN — "
           f"{STAND_IN[paper]}; n = {'/'.join(map(str, seeds))} seeds; no verdict. "
           f"{caption}")
  return Figure(f"{paper}_{table.split()[1].lower()}", paper, table, VALUES, title,
                panels, (f"results/published_{paper}.md",),
                note="open diamond: published; dot and bar: ours, mean ± std over seeds")


def standin_figures(paper: str) -> List[Figure]:
  """Every table of ``paper`` (as ``fedfrac-reproduce published`` lists them)
  that has a number of ours, as a figure."""
  figs = [standin_figure(paper, t) for t in published_tables.PAPERS[paper][0]]
  return [f for f in figs if f is not None]


def standin_tally(paper: str, table: str) -> Tuple[int, int, dict]:
  """(published cells, cells with a number of ours, {verdict: rows}) of one
  stand-in table, as its results table counts them (the rows run on the paper's
  own data aside: :func:`real_tally`)."""
  doc = common.published_document(paper)
  body = doc["tables"][table]
  rows = published_tables.table_rows(table, body, published_tables.PAPERS[paper][2]())
  return (len(published_tables.table_cells(body)),
          len({label for label, _, _, o, _ in rows if o is not None}),
          published_tables.split_tally(rows)[1])


def real_tally(paper: str, table: str) -> dict:
  """{verdict: rows} of the rows of one table run on the paper's own data."""
  body = common.published_document(paper)["tables"][table]
  rows = published_tables.table_rows(table, body, published_tables.PAPERS[paper][2]())
  return published_tables.split_tally(rows)[0]
