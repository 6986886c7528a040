"""The data of FIRMA's reproduction figures (:mod:`fedfrac_lab.reproduce.figure_data`
has the types): Tables 11–12 on MNIST-1797 (``results/firma_digits.json``),
7–8 on Fashion-MNIST and 9–10 on MNIST-60k (the ``firma_files`` runs), Table 13's
Dir 0.1 ablation, and FibFL's per-round accuracy beside a run of the authors'
PyTorch code (``results/firma_authors_fmnist.json``).

Each row is what the table prints: the rows of ``firma_tables.comparisons`` for
digits and of ``firma_files_table.section_rows`` (one per run of a cell) for the
real data, with the same comparison and verdict.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

from fedfrac_lab.reproduce import (common, firma_notes, firma_tables, firma_variants,
                               verdicts)
from fedfrac_lab.reproduce import firma_files_table
from fedfrac_lab.reproduce.doc_blocks import (FIRMA_JSON, FMNIST_JSONS, FMNIST_MD, MNIST_JSONS,
                                             MNIST_MD)
from fedfrac_lab.reproduce.figure_data import (CURVES, DELTA, Cell, Curve, Figure, Panel, judged,
                                           limit)

DIGITS_MD = "results/firma_digits.md"
AUTHORS_JSON = "results/firma_authors_fmnist.json"
# The x-axis of a delta panel reaches at most this far (accuracy in pp, Gini in
# its own units); rows beyond are drawn at the edge with their value.
CAP = {"accuracy": 20.0, "gini": 0.2}
SCALE = {"accuracy": 100.0, "gini": 1.0}
UNIT = {"accuracy": "pp", "gini": "Gini"}
WHAT = {"accuracy": "mean per-client accuracy", "gini": "Gini of per-client accuracy"}
ABLATION_ROWS = "FibFL, FibFL+, FibFL++ and the gains between them"
INPUT_NAMES = {"authors": "the authors' inputs (x − 0.5) / 0.5",
               "unit": "inputs in [0, 1]"}


def _label(method: str, mode: str, scenario: str) -> str:
  return f"{firma_tables.row_label(method, mode)} · {firma_tables.PAPER_COLUMNS[scenario]}"


def _panel(title: str, cells: List[Cell], key: str) -> Panel:
  return Panel(title, UNIT[key], tuple(cells), limit=limit(cells, CAP[key]))


def _seeds(cells: List[Cell]) -> str:
  ns = sorted({c.n for c in cells if c.ours is not None})
  return f"{'/'.join(map(str, ns))} seed{'s' if ns != [1] else ''}"


# ------------------------------------------------------------ MNIST-1797 (digits)


def digits_figure(key: str) -> Figure:
  """Table 11 (``key="accuracy"``) or 12 (``"gini"``) on MNIST-1797: one panel per
  compat mode, a row per published cell."""
  all_results, _, _ = firma_tables.load_json(FIRMA_JSON)
  scenarios, methods, seeds = firma_tables.grid_of(all_results)
  panels = []
  for mode, results in all_results.items():
    rows = firma_tables.comparisons(results, scenarios, methods, key, mode)
    where = [(m, s) for m in methods for s in scenarios]    # the order of its rows
    cells = [judged(_label(m, mode, s), c, SCALE[key])
             for (m, s), (_, _, c, _) in zip(where, rows)]
    panels.append(_panel(f"compat = {mode} ({_seeds(cells)})", cells, key))
  table = "Table 11" if key == "accuracy" else "Table 12"
  title = (f"FIRMA {table} ({WHAT[key]}) on MNIST-1797, the paper's data: ours "
           f"(N = 5, R = 10, {len(seeds)} seeds) against every published cell")
  return Figure(f"firma_{table.split()[1]}", "firma", table, DELTA, title, tuple(panels),
                (DIGITS_MD,))


# ------------------------------------------------------------ Fashion-MNIST, MNIST-60k


def _device(device: str, short: bool = False) -> str:
  """"CPU" of "CPU, 2 cores"; with ``short`` "H200" of "NVIDIA H200"."""
  name = device.split(",")[0]
  return name.replace("NVIDIA ", "") if short else name


def section_cells(cells: dict, paper: dict, key: str, mode: str) -> List[Cell]:
  """The rows of one section of Tables 7–10 that have a number of ours, in the
  table's order (:func:`fedfrac_lab.reproduce.firma_files_table.section_rows`): a cell
  run more than once has a row per run, named by its device and seeds."""
  out = []
  for method, row in firma_files_table.ROWS.items():
    for s, col in firma_files_table.COLUMNS.items():
      entries = cells.get((s, method), [])
      for cell, device in entries:
        c = firma_files_table.cell_comparison(paper.get(row, {}).get(col), cell, key)
        label = _label(method, mode, s)
        if len(entries) > 1:
          label += f" ({_device(device, short=True)}, n = {c.n})"
        out.append(judged(label, c, SCALE[key]))
  return out


def files_figure(paths, dataset: str, key: str) -> Optional[Figure]:
  """Table 7/8 (Fashion-MNIST) or 9/10 (MNIST-60k): one panel per section
  (compat mode, input scaling, a labelled variant apart) of the ``firma_files``
  runs in ``paths``; None without runs."""
  if not paths:
    return None
  title_, names, _, _ = firma_files_table.DATASETS[dataset]
  table = names[0] if key == "accuracy" else names[1]
  groups, _ = firma_files_table.json_groups(list(paths))
  paper = firma_files_table.published_table(firma_files_table.PUBLISHED, table)
  order = sorted(groups, key=lambda g: (g[0] != "reference_code", g[1] != "authors"))
  panels = []
  for group in order:
    mode, inputs = group
    cells = section_cells(groups[group], paper, key, mode)
    devices = sorted({_device(d) for entries in groups[group].values() for _, d in entries})
    base, _, init = inputs.partition("+")
    what = INPUT_NAMES.get(base, base) + (f", {firma_variants.TITLES[init]}" if init else "")
    panels.append(_panel(f"compat = {mode}, {what}: {len(groups[group])} of 42 cells, "
                         f"{_seeds(cells)}, {' + '.join(devices)}", cells, key))
  md = FMNIST_MD if dataset == "fashion_mnist" else MNIST_MD
  title = (f"FIRMA {table} ({WHAT[key]}) on the real {title_}, the paper's data: ours "
           f"(N = 10, R = 30) against the published cells; cells run more than once "
           f"have a row per run (device, seeds)")
  return Figure(f"firma_{table.split()[1]}", "firma", table, DELTA, title, tuple(panels),
                (md,))


# ------------------------------------------------------------ Table 13


def ablation_figure() -> Figure:
  """Table 13 (Dir 0.1 ablation): the MNIST-1797 row in both modes and the
  Fashion-MNIST row (the authors' inputs; each cell's run with the most seeds),
  accuracies and gains in pp."""
  from fedfrac_lab.reproduce.doc_blocks_firma_files import FMNIST_AUTHORS
  from fedfrac_lab.reproduce.firma_files_table import best_cells
  all_results, _, _ = firma_tables.load_json(FIRMA_JSON)
  panels = []

  def cells_of(rows) -> List[Cell]:
    return [judged(label, c, 100.0 if i < 3 else 1.0) for i, (label, c, _) in
            enumerate(rows)]
  for mode, results in all_results.items():
    cells = cells_of(firma_tables.ablation_rows(results))
    panels.append(Panel(f"MNIST-1797, compat = {mode} ({_seeds(cells)})", "pp",
                        tuple(cells), limit=limit(cells, CAP["accuracy"])))
  groups, _ = firma_files_table.json_groups(list(FMNIST_JSONS))
  fm, devices = best_cells(groups.get(FMNIST_AUTHORS, {}))
  if all(("dir0.1", m) in fm for m in ("fibfl", "fibfl_plus", "fibfl_pp")):
    cells = cells_of(firma_tables.ablation_rows(fm, "Fashion-MNIST"))
    where = " + ".join(sorted({_device(devices[("dir0.1", m)])
                               for m in ("fibfl", "fibfl_plus", "fibfl_pp")}))
    panels.append(Panel(f"Fashion-MNIST, compat = reference_code, the authors' inputs "
                        f"({_seeds(cells)}, {where})", "pp", tuple(cells),
                        limit=limit(cells, CAP["accuracy"])))
  title = ("FIRMA Table 13 (Dir 0.1 ablation): FibFL, FibFL+, FibFL++ accuracy and the "
           "gains Δsel, Δring, Δtotal (ours paired by seed) against the published row, "
           "in pp; a gain agrees only when its two accuracies do")
  return Figure("firma_13", "firma", "Table 13", DELTA, title, tuple(panels),
                (DIGITS_MD, FMNIST_MD))


# ------------------------------------------------------------ curves beside the authors'


def authors_run() -> Optional[dict]:
  """The committed run of the authors' code (:data:`AUTHORS_JSON`); None when absent."""
  return common.load_results_json(AUTHORS_JSON)


def authors_curves_figure() -> Optional[Figure]:
  """FibFL, Fashion-MNIST IID, ``reference_code``: the per-round accuracy of every
  committed fedfrac run of the cell beside the authors' PyTorch code's run and the
  published cell; None without the authors' run."""
  theirs = authors_run()
  if theirs is None:
    return None
  scenario, method = theirs["scenario"], theirs["method"]
  groups, _ = firma_files_table.json_groups(list(FMNIST_JSONS))
  curves: List[Curve] = []
  for run in firma_notes.runs_of(groups, scenario, method):
    if "curve" not in run.record:
      continue
    values = tuple(float(v) for v in run.record["curve"])
    group = f"fedfrac, {INPUT_NAMES.get(run.inputs, run.inputs)}"
    curves.append(Curve(f"{group}, {_device(run.device)}", group,
                        tuple(range(1, len(values) + 1)), values))
  theirs_label = (f"the authors' code (PyTorch), {INPUT_NAMES.get(theirs['inputs'])}, "
                  f"seed {theirs['seed']}")
  curves.append(Curve(theirs_label, "the authors' code",
                      tuple(int(r) for r in theirs["rounds"]),
                      tuple(float(v) for v in theirs["accuracy"])))
  published = firma_tables.published("Table 7")[(method, scenario)]
  label = f"{firma_tables.LABELS[method]} {firma_tables.PAPER_COLUMNS[scenario]}"
  runs = len(curves) - 1
  title = (f"FIRMA {label} on Fashion-MNIST (N = 10, compat = reference_code): "
           f"accuracy per round of fedfrac's {runs} committed runs (30 rounds) beside "
           f"the authors' PyTorch code ({len(theirs['rounds'])} rounds, one run)")
  panel = Panel(f"{label}: {firma_notes.where_text(firma_notes.runs_of(groups, scenario, method))}",
                "mean per-client test accuracy", curves=tuple(curves),
                references=((f"published (Table 7): {published:.4f}", float(published)),))
  return Figure(f"firma_{method}_{scenario}_authors", "firma", "", CURVES, title, (panel,),
                (FMNIST_MD, AUTHORS_JSON), note=theirs.get("source", ""))


def figures() -> List[Figure]:
  """Every FIRMA figure, in the order its page shows them."""
  out: List[Optional[Figure]] = [digits_figure("accuracy"), digits_figure("gini")]
  for paths, dataset in ((FMNIST_JSONS, "fashion_mnist"), (MNIST_JSONS, "mnist")):
    out += [files_figure(paths, dataset, "accuracy"), files_figure(paths, dataset, "gini")]
  out += [ablation_figure(), authors_curves_figure()]
  return [f for f in out if f is not None]


def tallies() -> List[Tuple[str, str, str, dict]]:
  """[(table, section, row group, {verdict: cells})] of every FIRMA table with a
  figure, counted as its results table counts them (one per cell)."""
  out = []
  all_results, _, _ = firma_tables.load_json(FIRMA_JSON)
  scenarios, methods, _ = firma_tables.grid_of(all_results)
  counts, _ = firma_tables.summary(all_results, scenarios, methods)
  for key, table in (("accuracy", "Table 11"), ("gini", "Table 12"), ("ablation", "Table 13")):
    for mode, grouped in counts.items():
      for group, c in grouped.items():
        if key != "ablation":
          out.append((table, f"MNIST-1797, compat = {mode}", group, c[key]))
        elif sum(c[key].values()):
          out.append((table, f"MNIST-1797, compat = {mode}", ABLATION_ROWS, c[key]))
  for paths, dataset in ((FMNIST_JSONS, "fashion_mnist"), (MNIST_JSONS, "mnist")):
    if not paths:
      continue
    title_, names, _, _ = firma_files_table.DATASETS[dataset]
    for (mode, inputs), tables in firma_files_table.tables(list(paths), dataset=dataset).items():
      base, _, init = inputs.partition("+")
      what = INPUT_NAMES.get(base, base) + (f", {firma_variants.TITLES[init]}" if init else "")
      for table in names:
        for group, t in tables[table].items():
          out.append((table, f"{title_}, compat = {mode}, {what}", group, t))
  for panel in ablation_figure().panels:
    if not panel.title.startswith("Fashion-MNIST"):
      continue
    out.append(("Table 13", panel.title.split(" (")[0], ABLATION_ROWS,
                verdicts.tally(c.verdict for c in panel.cells)))
  order = {f"Table {i}": i for i in range(7, 14)}
  return sorted(out, key=lambda r: order[r[0]])
