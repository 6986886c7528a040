"""Generated blocks of the user guide's reproduction pages
(``docs/api/guide/reproductions/<paper>.rst``, reST; :mod:`fedfrac_lab.reproduce.docs`):
per table the figure (:mod:`fedfrac_lab.reproduce.doc_figures`), the verdict tally as
the results table counts it, and the link to that table; the per-round curves
beside the authors' code where a run of theirs is committed, and what is not run
where none is. Every number comes from the committed results.
"""
from __future__ import annotations

import os
import re
from typing import Dict, List, Optional

from fedfrac_lab.reproduce import common, figure_data, figure_data_firma, published_tables, verdicts
from fedfrac_lab.reproduce import published_ours
from fedfrac_lab.reproduce.doc_blocks import FIRMA_JSON, FMNIST_JSONS, MNIST_JSONS
from fedfrac_lab.reproduce.doc_figures import FOFEDAVG_SOURCES
from fedfrac_lab.reproduce.doc_registry import block

PAGE = "docs/api/guide/reproductions/{paper}.rst"
# From a page to the checkout's root (docs/api/guide/reproductions/ -> ../../../../).
UP = "../../../../"
KURAMOTO_AUTHORS_JSON = "results/kuramoto_authors.json"
CAPTIONS = {
    figure_data.DELTA: (
        "Each row is a row of the table: Δ = ours − published, the bar its 90 % "
        "interval, the grey band ±margin, colour and shape the verdict "
        "(``fedfrac_lab.reproduce.verdicts``; the legend counts rows). A row beyond the "
        "axis sits at its edge with its Δ written beside it."),
    figure_data.VALUES: (
        "Open diamond: the published value; dot and bar: ours, mean ± std over seeds, "
        "in the table's units. Our data only stands in for the paper's, so no cell "
        "is judged (*stand-in*): the figure shows the size of the gap."),
    figure_data.CURVES: "",
}


def rst_text(text: str) -> str:
  """``text`` safe as reST inline text: ``*``, backquotes, ``|`` and a trailing
  ``_`` escaped."""
  text = re.sub(r"([*`|\\])", r"\\\1", text)
  return re.sub(r"_(?=\s|$|[,.;:)])", r"\\_", text)


def heading(text: str, mark: str = "~") -> str:
  return f"{text}\n{mark * len(text)}"


def link(path: str) -> str:
  """A download link to a committed results file (Sphinx copies it into the site)."""
  return f":download:`{path} <{UP}{path}>`"


def figure_rst(fig: figure_data.Figure) -> str:
  """A figure directive for ``fig``, its caption saying how to read it."""
  caption = CAPTIONS.get(fig.kind, "")
  if fig.note:
    caption = f"{caption} {rst_text(fig.note[0].upper() + fig.note[1:])}.".strip()
  return "\n".join([f".. figure:: {UP[3:]}images/reproduction/{fig.name}.png",
                    f"   :alt: {rst_text(fig.title)}", "   :width: 100%", "",
                    f"   {caption}"])


COUNTED = (verdicts.AGREES, verdicts.DIFFERS, verdicts.INCONCLUSIVE, verdicts.TOO_FEW,
           verdicts.COLLAPSED)


def _csv(text: str) -> str:
  return '"' + rst_text(text).replace('"', '""') + '"'


def tally_table(rows) -> str:
  """A csv-table of verdict counts: rows = [(section, group, {verdict: n})]."""
  header = ", ".join(_csv(h) for h in ("section", "rows of the table", *COUNTED))
  lines = [".. csv-table::", f"   :header: {header}", ""]
  lines += [f"   {_csv(section)}, {_csv(group)}, " + ", ".join(str(t.get(v, 0)) for v in COUNTED)
            for section, group, t in rows]
  return "\n".join(lines)


def _figures(paper: str) -> Dict[str, figure_data.Figure]:
  from fedfrac_lab.reproduce import doc_figures
  make = {"firma": doc_figures.firma, "fofedavg": doc_figures.fofedavg,
          "fo_ri_fedavg": doc_figures.fo_ri_fedavg, "kuramoto": doc_figures.kuramoto}[paper]
  return {fig.table or fig.name: fig for fig in make()}


# ------------------------------------------------------------ FIRMA

FIRMA_TABLES = (("Table 11", "MNIST-1797 (scikit-learn digits), mean per-client accuracy"),
                ("Table 12", "MNIST-1797, Gini of per-client accuracy"),
                ("Table 7", "Fashion-MNIST, mean per-client accuracy"),
                ("Table 8", "Fashion-MNIST, Gini of per-client accuracy"),
                ("Table 9", "MNIST-60k, mean per-client accuracy"),
                ("Table 10", "MNIST-60k, Gini of per-client accuracy"),
                ("Table 13", "Dir 0.1 ablation, the MNIST-1797 and Fashion-MNIST rows"))


@block("firma_page_tables", PAGE.format(paper="firma"), FIRMA_JSON, *FMNIST_JSONS,
       *MNIST_JSONS)
def firma_page_tables():
  figs = _figures("firma")
  tallies = figure_data_firma.tallies()
  parts = []
  for table, what in FIRMA_TABLES:
    fig: Optional[figure_data.Figure] = figs.get(table)
    parts.append(heading(f"{table}: {what}"))
    if fig is None:
      parts.append("Not run: no committed result of ours for this table.")
      continue
    parts.append(figure_rst(fig))
    rows = [(section, group, t) for tab, section, group, t in tallies if tab == table]
    parts.append("Verdicts, one per published cell (a cell run more than once counts "
                 "with the least favourable verdict of its runs that have the seeds "
                 "for one):")
    parts.append(tally_table(rows))
    parts.append("The table, cell by cell: " + ", ".join(link(p) for p in fig.results
                                                          if p.endswith(".md")) + ".")
  return "\n\n".join(parts)


@block("firma_page_authors", PAGE.format(paper="firma"), figure_data_firma.AUTHORS_JSON,
       *FMNIST_JSONS)
def firma_page_authors():
  fig = _figures("firma").get("firma_fibfl_iid_authors")
  theirs = figure_data_firma.authors_run()
  if fig is None or theirs is None:
    return (f"No run of the authors' code is committed ({figure_data_firma.AUTHORS_JSON} "
            "is absent): no figure.")
  curves = fig.panels[0].curves
  return "\n\n".join([
      figure_rst(fig),
      f"fedfrac's {len(curves) - 1} committed runs of the cell "
      f"({rst_text(fig.panels[0].title.split(': ', 1)[1])}) over 30 rounds, beside "
      f"the authors' code, run once (seed {theirs['seed']}, "
      f"{len(theirs['rounds'])} rounds) with ``{theirs['command']}``. Only that one "
      f"run of theirs is committed ({link(figure_data_firma.AUTHORS_JSON)}); the "
      "FibFL+ and FibFL++ comparisons with their code in docs/design.md §3.3 are "
      "ranges over seeds, not curves, and have no figure."])


# ------------------------------------------------------------ stand-in papers


def standin_tables_block(paper: str) -> str:
  """Per table of ``paper`` (as ``fedfrac-reproduce published`` lists them): its
  figure when a cell has a number of ours, the count of stand-in rows and of
  cells not run, and the link to the results table."""
  figs = _figures(paper)
  doc = common.published_document(paper)
  results = f"results/published_{paper}.md"
  parts = []
  for table in published_tables.PAPERS[paper][0]:
    caption = doc["tables"][table].get("caption", "")
    parts.append(heading(f"{table}: {caption}".rstrip(". ")))
    cells, with_ours, counts = figure_data.standin_tally(paper, table)
    fig = figs.get(table)
    if fig is not None:
      parts.append(figure_rst(fig))
    real = figure_data.real_tally(paper, table)
    judged = (f"{sum(real.values())} rows on the paper's own data "
              f"({verdicts.tally_text(real)}), " if any(real.values()) else "")
    parts.append(f"{cells} published cells, {with_ours} with a number of ours: {judged}"
                 f"{counts[verdicts.STAND_IN]} rows *stand-in* (Δ shown, no verdict), "
                 f"{counts[verdicts.NOT_RUN]} cells *not run*"
                 + ("" if fig is not None else "; no figure") + ". The table: "
                 f"{link(results)}.")
  return "\n\n".join(parts)


@block("fofedavg_page_tables", PAGE.format(paper="fofedavg"),
       "fedfrac_lab/reproduce/published/fofedavg.json", *FOFEDAVG_SOURCES)
def fofedavg_page_tables():
  return standin_tables_block("fofedavg")


@block("fo_ri_fedavg_page_tables", PAGE.format(paper="fo_ri_fedavg"),
       "fedfrac_lab/reproduce/published/fo_ri_fedavg.json", published_ours.BEV_JSON)
def fo_ri_fedavg_page_tables():
  return standin_tables_block("fo_ri_fedavg")


@block("kuramoto_page_tables", PAGE.format(paper="kuramoto"),
       "fedfrac_lab/reproduce/published/kuramoto.json", published_ours.KURAMOTO_MD)
def kuramoto_page_tables():
  return standin_tables_block("kuramoto")


@block("kuramoto_page_authors", PAGE.format(paper="kuramoto"), KURAMOTO_AUTHORS_JSON)
def kuramoto_page_authors():
  if not os.path.exists(os.path.join(common.CHECKOUT_DIR, KURAMOTO_AUTHORS_JSON)):
    return (f"**Not run yet**: no {KURAMOTO_AUTHORS_JSON} is committed, so there are "
            "no curves of the authors' code to show and no figure.")
  return (f"{link(KURAMOTO_AUTHORS_JSON)} is committed; its curves are not drawn as a "
          "figure yet (the tables of ``kuramoto_authors.md`` beside it compare them).")


def page_blocks(paper: str) -> List[str]:
  """The names of the blocks of ``paper``'s page, in page order."""
  return {"firma": ["firma_page_tables", "firma_page_authors"],
          "fofedavg": ["fofedavg_page_tables"],
          "fo_ri_fedavg": ["fo_ri_fedavg_page_tables"],
          "kuramoto": ["kuramoto_page_tables", "kuramoto_page_authors"]}[paper]
