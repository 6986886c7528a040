"""Generated blocks of the verdicts' sensitivity to the margin, and of what each
real-data table's n covers, for REPRODUCTION.md and the guide's FIRMA and FOFedAvg
pages (a one-line link in README.md).

Every cell the README's table judges on a paper's own data is judged again, from
the same Δ and interval, at accuracy margins of 1, 2 and 3 points and at the Gini
rule's relative margin beside absolute ones
(:func:`fedfrac_lab.reproduce.verdicts.sensitivity`, the one function that counts
it). What n covers is read from the config that made the runs
(:func:`fedfrac_lab.reproduce.verdicts.n_covers` of its ``data.seed``).
"""
from __future__ import annotations

import functools
from typing import List, NamedTuple, Sequence, Tuple

from fedfrac_lab.reproduce import (common, doc_blocks_firma_files, firma_tables, fofedavg_mnist,
                                   published_tables, verdicts)
from fedfrac_lab.reproduce.doc_blocks import (FIRMA_JSON, FMNIST_JSONS, MNIST_JSONS, README,
                                              REPRODUCING, firma_digits)
from fedfrac_lab.reproduce.doc_registry import block

REPRODUCTION = "REPRODUCTION.md"
PAGE = "docs/api/guide/reproductions/{}.rst"
FOFEDAVG_JSONS = ("results/fofedavg_mnist_iid.json", "results/fofedavg_mnist_alpha.json")
SOURCES = (FIRMA_JSON, *FMNIST_JSONS, *MNIST_JSONS, *FOFEDAVG_JSONS)


class Row(NamedTuple):
  paper: str
  what: str
  data_seed: int
  cells: Sequence[Tuple[verdicts.Margin, Sequence[verdicts.Comparison]]]


def _digits_cells(mode):
  all_results, _, _, scenarios, methods, _ = firma_digits()
  return [(firma_tables.MARGINS[key], [c]) for key in ("accuracy", "gini")
          for _, _, c, _ in firma_tables.comparisons(all_results[mode], scenarios,
                                                      methods, key, mode)]


def _fofedavg_cells():
  tables, _, ours_fn = published_tables.PAPERS["fofedavg"]
  doc, ours = common.published_document("fofedavg"), ours_fn()
  return [(verdicts.ACCURACY, [c]) for name in tables
          for _, _, _, o, c in published_tables.table_rows(name, doc["tables"][name], ours)
          if o is not None and o.real]


@functools.lru_cache(maxsize=None)
def rows() -> Tuple[Row, ...]:
  """The README table's rows on a paper's own data, each with its judged cells
  and the ``data.seed`` of the config its runs came from."""
  out: List[Row] = []
  for dataset, what, paths in (
      ("fashion_mnist", "Tables 7–8, Fashion-MNIST, `reference_code`", FMNIST_JSONS),
      ("mnist", "Tables 9–10, MNIST-60k, `reference_code`", MNIST_JSONS)):
    out.append(Row("firma", what, firma_tables.partition_seed("reference_code"),
                   doc_blocks_firma_files.cell_comparisons(paths, dataset)))
  for mode in ("reference_code", "paper"):
    out.append(Row("firma", f"Tables 11–12, MNIST-1797, `{mode}`",
                   firma_tables.partition_seed(mode), _digits_cells(mode)))
  seed = fofedavg_mnist.partition_seed(*(common.load_results_json(p) or {}
                                          for p in FOFEDAVG_JSONS))
  if seed is not None:
    out.append(Row("fofedavg", "Tables II–IV, MNIST (CPU)", seed, _fofedavg_cells()))
  return tuple(out)


def _counts(t: dict) -> str:
  """"21 / 9 / 6" (agrees / differs / inconclusive); "–" where no cell of the row
  is judged at that margin's rule (no Gini cells in a row, say)."""
  if not sum(t.values()):
    return "–"
  return " / ".join(str(t[v]) for v in verdicts.MOVABLE)


def table_rows(papers: Sequence[str] = ("firma", "fofedavg")) -> Tuple[List[str], List[List[str]]]:
  """(header, rows): per row of :func:`rows` of ``papers`` (and their total) the
  agrees / differs / inconclusive counts at every margin of
  :func:`fedfrac_lab.reproduce.verdicts.margin_variants` (accuracy columns, then
  Gini), and what its n covers."""
  picked = [r for r in rows() if r.paper in papers]
  labels = [label for label, _, _ in verdicts.margin_variants()]
  acc = list(dict.fromkeys(x for x in labels if x.startswith("accuracy")))
  gini = list(dict.fromkeys(x for x in labels if x.startswith("Gini")))
  head = ["table and data"] + [x.replace("accuracy ", "") for x in acc] + gini + ["n covers"]
  body: List[List[str]] = []
  total: List = []
  for r in picked:
    s = verdicts.sensitivity(r.cells)
    total += list(r.cells)
    body.append([r.what] + [_counts(s[x]) for x in acc + gini]
                + [verdicts.n_covers(r.data_seed).split(":")[0]])
  if len(picked) > 1:
    s = verdicts.sensitivity(total)
    body.append(["all of the above"] + [_counts(s[x]) for x in acc + gini] + [""])
  return head, body


def markdown(papers: Sequence[str]) -> str:
  head, body = table_rows(papers)
  return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                   + ["| " + " | ".join(r) + " |" for r in body])


def _csv(text: str) -> str:
  return '"' + text.replace("`", "``").replace('"', '""') + '"'


def rst(papers: Sequence[str]) -> str:
  """The same table as a reST csv-table."""
  head, body = table_rows(papers)
  return "\n".join([".. csv-table::", "   :header: " + ", ".join(map(_csv, head)), ""]
                   + ["   " + ", ".join(map(_csv, r)) for r in body])


LEAD = ("Each entry is *agrees / differs / inconclusive*: the cells on the paper's own "
        "data judged again with the same Δ and 90 % interval at another margin "
        "(`fedfrac_lab.reproduce.verdicts.sensitivity`). Accuracy cells (and FOFedAvg's "
        "std over rounds, an accuracy) at 1, 2 and 3 points; Gini cells at the rule's "
        "relative margin and at absolute ones. Cells with too few seeds, collapsed, "
        "not defined or not run are not moved by a margin and are left out. *n covers*: "
        "from the `data.seed` of the config that made the runs; a shared partition means "
        "the interval says nothing about another partition draw.")


def _section(papers, rest=False):
  if rest:
    return f"{LEAD.replace('`', '``')}\n\n{rst(papers)}"
  return f"{LEAD}\n\n{markdown(papers)}"


@block("verdict_sensitivity", REPRODUCTION, *SOURCES)
def verdict_sensitivity():
  return _section(("firma", "fofedavg"))


@block("verdict_sensitivity_guide", REPRODUCING, *SOURCES)
def verdict_sensitivity_guide():
  return _section(("firma", "fofedavg"))


@block("firma_sensitivity", PAGE.format("firma"), FIRMA_JSON, *FMNIST_JSONS, *MNIST_JSONS)
def firma_sensitivity():
  return _section(("firma",), rest=True)


@block("fofedavg_sensitivity", PAGE.format("fofedavg"), *FOFEDAVG_JSONS)
def fofedavg_sensitivity():
  return _section(("fofedavg",), rest=True)


@block("readme_sensitivity", README, *SOURCES, inline=True)
def readme_sensitivity():
  s = verdicts.sensitivity(c for r in rows() for c in r.cells)
  parts = [f"{label.split(' (')[0].replace('accuracy ', '')}: {_counts(s[label])}"
           for label in s if label.startswith("accuracy")]
  return "; ".join(parts)
