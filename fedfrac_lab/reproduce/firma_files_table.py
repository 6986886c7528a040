"""The tables of ``fedfrac-reproduce firma_files`` (FIRMA Tables 7–8 on
Fashion-MNIST, 9–10 on MNIST-60k) rendered from its ``--json`` files, without
running anything: one section per (compat mode, input scaling), every published
cell beside ours with the clients each run kept, Δ, the 90 % interval, the margin
and the verdict (:mod:`fedfrac_lab.reproduce.verdicts`; a cell with runs at chance is
*collapsed*), the verdicts counted once per cell. The runner is
:mod:`fedfrac_lab.reproduce.firma_files`.
"""
from __future__ import annotations

import json
import os

from fedfrac_lab.reproduce import common, firma_notes, firma_tables, firma_variants, verdicts

PUBLISHED = os.path.join(os.path.dirname(__file__), "published", "firma.json")
# --dataset -> (title, Tables (accuracy, Gini), the data set's files and size)
DATASETS = {
    "fashion_mnist": ("Fashion-MNIST", ("Table 7", "Table 8"), "60,000 / 10,000",
                      "Debian's `dataset-fashion-mnist`"),
    "mnist": ("MNIST-60k", ("Table 9", "Table 10"), "60,000 / 10,000",
              "the MNIST IDX files or `mnist.pkl.gz`"),
}
COLUMNS = {"iid": "IID", "dir0.8": "Dir 0.8", "dir0.5": "Dir 0.5", "dir0.1": "Dir 0.1",
           "ls1": "LS K=1", "ls2": "LS K=2", "ls3": "LS K=3"}
ROWS = {"fedavg": "FedAvg", "rdfl": "RDFL", "fedrep": "FedRep", "fibfl": "FibFL",
        "fibfl_plus": "FibFL+", "fibfl_pp": "FibFL++"}


def published_table(path, name):
  """{row: {column: value}} of table ``name`` in a published-values file."""
  with open(path) as f:
    data = json.load(f)
  tables = data.get("tables", data)
  entry = tables[name]
  return entry.get("rows", entry)


def _fmt(value):
  return "n/f" if value is None else f"{value:.4f}"


def verdict(paper, values, key="accuracy"):
  """The :mod:`fedfrac_lab.reproduce.verdicts` comparison of one cell (accuracy or
  Gini margin by ``key``)."""
  return verdicts.compare(paper, values, firma_tables.MARGINS[key])


INPUTS = {"unit": "inputs in [0, 1]",
          "authors": "inputs (x − 0.5) / 0.5 as the authors' code (torchvision Normalize)"}


# A run that ends at chance (10 classes) within this margin makes its cell
# *collapsed* in the accuracy and Gini tables: its number is real (it counts in
# the mean and the spread), but it is a run whose model stopped learning, not a
# spread of accuracies (FibFL++ `reference_code`: docs/design.md §3.3, "FibFL++
# runs that stay at chance"; :func:`fedfrac_lab.reproduce.verdicts.collapsed`).
CHANCE, CHANCE_MARGIN = 0.10, verdicts.CHANCE_MARGIN


def at_chance(runs) -> int:
  """How many of ``runs`` ended at chance: each record's own ``at_chance`` flag
  (written since the records carry it), else accuracy <= CHANCE + CHANCE_MARGIN."""
  return verdicts.runs_at_chance(runs, round(1 / CHANCE))


def json_cells(d):
  """(mode, inputs, scenario, method, cell) of every cell of one ``--json`` result
  ``d``; ``inputs`` counts only for ``reference_code`` (else ``"unit"``), with a
  labelled variant's name (:func:`fedfrac_lab.reproduce.firma_variants.cell_inputs`)."""
  for entry in d["scenarios"].values():
    for mode, res in entry["results"].items():
      inputs = firma_variants.cell_inputs(mode, d["args"])
      for key, cell in res.items():
        yield (mode, inputs, *key.split("/"), cell)


def json_groups(json_paths):
  """``{(mode, inputs): {(scenario, method): [(cell, device), ...]}}`` and the run
  descriptions of each group, over the ``--json`` files of runs (a cell run in
  several files keeps every run, one table row each)."""
  groups, sources = {}, {}
  for path in json_paths:
    with open(common.find_file(path)) as f:
      d = json.load(f)
    a = d["args"]
    device = a.get("device", "unknown device")
    ran = {}
    for mode, inputs, s, method, cell in json_cells(d):
      groups.setdefault((mode, inputs), {}).setdefault((s, method), []).append((cell, device))
      ran.setdefault((mode, inputs), {}).setdefault(method, []).append(s)
    note = f"; {a['note']}" if a.get("note") else ""
    for group, methods in ran.items():
      what = ", ".join(f"{ROWS.get(m, m)} {'/'.join(COLUMNS.get(x, x) for x in scen)}"
                       for m, scen in methods.items())
      sources.setdefault(group, []).append(
          f"{what}: {a['seeds']} seed{'s' if a['seeds'] != 1 else ''}, "
          f"R = {a['rounds']}, {device}{note}")
  return groups, sources


def cell_comparison(paper, cell, key="accuracy"):
  """The verdict of one run of a cell (``{"runs", "num_clients"}``) against the
  published ``paper`` value: :func:`verdict` of its per-seed ``key``, *collapsed*
  when any of its runs ended at chance (:func:`at_chance`)."""
  c = verdict(paper, [r[key] for r in cell["runs"]], key)
  return verdicts.collapsed(c, at_chance(cell["runs"]))


def section_rows(cells, paper, key, mode):
  """[(method, row text, comparison or None)] of one table of one section: every
  published cell, a row per run of it (None: not run), with the clients it ran
  with (N: the authors' label-skew rule drops the clients it starves)."""
  out = []
  for method, row in ROWS.items():
    label = firma_tables.row_label(method, mode)
    for s, col in COLUMNS.items():
      p_val = paper.get(row, {}).get(col)
      if (s, method) not in cells:
        out.append((method, f"| {label} | {col} | – | {_fmt(p_val)} | – | | | | | "
                            f"{verdicts.NOT_RUN} |", None))
        continue
      for cell, device in cells[(s, method)]:
        c = cell_comparison(p_val, cell, key)
        d = "" if c.delta is None else f"{c.delta:+.4f}"
        margin = "–" if c.margin is None else f"±{c.margin:.4f}"
        out.append((method, f"| {label} | {col} | {cell.get('num_clients', '?')} | "
                            f"{_fmt(p_val)} | {verdicts.ours_text(c, 4)} | {device} | {d} | "
                            f"{verdicts.interval_text(c, 4, 1.0)} | {margin} | "
                            f"{verdicts.verdict_text(c)} |", c))
  return out


def client_counts(groups):
  """{scenario: sorted client counts} over every cell of ``groups`` (the clients
  a run kept after the authors' rule dropped the ones it starves)."""
  out = {}
  for cells in groups.values():
    for (s, _), entries in cells.items():
      for cell, _ in entries:
        if "num_clients" in cell:
          out.setdefault(s, set()).add(int(cell["num_clients"]))
  return {s: sorted(n) for s, n in out.items()}


def clients_text(groups, planned=10):
  """"N = 10 (9 at LS K=2, 5 at LS K=3)": the clients the runs had, the planned
  count and every scenario where the runs kept fewer."""
  fewer = [f"{'/'.join(map(str, n))} at {COLUMNS.get(s, s)}"
           for s, n in sorted(client_counts(groups).items(),
                              key=lambda kv: list(COLUMNS).index(kv[0])
                              if kv[0] in COLUMNS else len(COLUMNS))
           if n != [planned]]
  return f"N = {planned}" + (f" ({', '.join(fewer)})" if fewer else "")


def cell_verdicts(cells, paper, key, methods=None):
  """{(scenario, method): verdict} of every cell of ours in one section: a cell
  run more than once (another device, another file) counts once, with the least
  favourable verdict of its runs that have the seeds for one
  (:func:`fedfrac_lab.reproduce.verdicts.least_favourable`)."""
  out = {}
  for (s, method), entries in cells.items():
    if methods is not None and method not in methods:
      continue
    p_val = paper.get(ROWS.get(method, method), {}).get(COLUMNS.get(s, s))
    out[(s, method)] = verdicts.least_favourable(
        cell_comparison(p_val, cell, key).verdict for cell, _ in entries)
  return out


def tables(json_paths, published=PUBLISHED, dataset="fashion_mnist"):
  """{(mode, inputs): {table: {group: tally}}}: the verdict counts of every
  section of :func:`write_table`, per row group (the authors' methods apart from
  the reconstructed baselines in ``reference_code``), one count per cell
  (:func:`cell_verdicts`), not per row."""
  title, names, size, files = DATASETS[dataset]
  groups, _ = json_groups(json_paths)
  out = {}
  for group, cells in groups.items():
    mode = group[0]
    out[group] = {}
    for table, key in zip(names, ("accuracy", "gini")):
      paper = published_table(published, table)
      out[group][table] = {
          name: verdicts.tally(cell_verdicts(cells, paper, key, members).values())
          for name, members in firma_tables.row_groups(mode)}
  return out


def markdown(json_paths, out, published=PUBLISHED, dataset="fashion_mnist"):
  """Tables 7 (accuracy) and 8 (Gini) on the runs in ``json_paths``, one section per
  (compat mode, input scaling): every cell of the paper beside ours (mean ± std
  over seeds), Δ, the 90 % interval, the margin and the verdict
  (:mod:`fedfrac_lab.reproduce.verdicts`)."""
  title, names, size, files = DATASETS[dataset]
  groups, sources = json_groups(json_paths)
  counts = tables(json_paths, published, dataset)
  order = sorted(groups, key=lambda g: (g[0] != "reference_code", g[1] != "authors"))
  numbers = f"{names[0].split()[1]}–{names[1].split()[1]}"
  run_on = sorted({dev for cells in groups.values() for entries in cells.values()
                   for _, dev in entries})
  lines = [f"# FIRMA Tables {numbers} on the real {title} ({size}), "
           f"{clients_text(groups)} (devices: {'; '.join(run_on) or 'none yet'})", ""]
  text = firma_notes.note(dataset, groups)
  if text:
    lines += [text, ""]
  lines += ["Table 4 hyper-parameters of `configs/firma/digits.py` with N = 10 and "
            "R = 30 (N = clients: at LS K=2 and K=3 the authors' label-skew rule, which "
            "`reference_code` follows, starves and drops some of the 10; column N has the "
            f"clients each run kept), data through the `files` source ({files}), made by "
            f"`fedfrac-reproduce firma_files --dataset={dataset} --dir=DIR --modes=MODE "
            "--inputs=INPUTS --scenarios=... --methods=... --seeds=S --json=...` "
            "(one scenario at a time), then `--table`. n = seeds; a cell run more "
            "than once (another device or input scaling) has a row per run. A cell "
            "without ours was not run: on the 2-core CPU one run of 30 rounds takes "
            "about 45 min for FibFL / FibFL+ / FibFL++ (E_e = 20) and 4–11 min for "
            "FedRep, FedAvg and RDFL (measured, two runs side by side).", "",
            f"Rendered by `fedfrac-reproduce firma_files --dataset={dataset} "
            f"--table={','.join(json_paths)} --out={out}`.", "",
            verdicts.RULE, "",
            firma_tables.covers_text(sorted({mode for mode, _ in groups}, key=lambda m: (
                m != "reference_code", m))) + per_seed_text(groups), "",
            firma_tables.RECONSTRUCTED_NOTE, "", "## Summary", "",
            "One count per published cell of ours: a cell run more than once (another "
            "device or file) counts once, with the least favourable verdict of its "
            "runs that have the seeds for one.", "",
            f"| compat | inputs | devices | methods | {names[0]} (accuracy) | "
            f"{names[1]} (Gini) |", "|---|---|---|---|---|---|"]
  body = []
  for group in order:
    mode, inputs = group
    cells = groups[group]
    devices = sorted({dev for entries in cells.values() for _, dev in entries})
    for name, _ in firma_tables.row_groups(mode):
      lines.append(f"| {mode} | {firma_variants.title(inputs, INPUTS)} | "
                   f"{', '.join(devices)} | {name} | "
                   f"{verdicts.tally_text(counts[group][names[0]][name])} | "
                   f"{verdicts.tally_text(counts[group][names[1]][name])} |")
    body += [f"## compat = {mode}, {firma_variants.title(inputs, INPUTS)}", "",
             "Runs:", ""] + [f"- {line}" for line in sources[group]] + [""]
    for table, key, label in ((names[0], "accuracy", "mean per-client test accuracy"),
                              (names[1], "gini", "Gini of per-client accuracy")):
      rows = section_rows(cells, published_table(published, table), key, mode)
      body += [f"### {table}: {label}", "",
               "| method | scenario | N | paper | ours: mean ± std (n seeds) | device | Δ | "
               "90 % interval of Δ | margin | verdict |",
               "|---|---|---|---|---|---|---|---|---|---|"] + [r for _, r, _ in rows]
      if any(c is not None and c.verdict == verdicts.COLLAPSED for _, _, c in rows):
        body += ["", f"*collapsed: k of n at chance*: k runs ended with accuracy ≤ "
                 f"{CHANCE + CHANCE_MARGIN:.2f} (chance {CHANCE:.2f}); they count in "
                 "the mean and the spread, and the cell gets no other verdict (it is "
                 "counted apart)."]
      body += ["", "Verdicts, one per cell (a cell run more than once counts with the "
               "least favourable verdict of its runs that have 3 seeds) — " + "; ".join(
          f"{name}: {verdicts.tally_text(t)}" for name, t in counts[group][table].items())
          + ".", ""]
  return "\n".join(lines + [""] + body + beyond_section(groups, order, names, published)
                   + table13_section(groups, dataset))


BEYOND_TITLE = "Point estimates beyond the margin"
BEYOND_ANCHOR = "#point-estimates-beyond-the-margin"


def beyond_margin(cells, paper, key):
  """[(method, scenario, device, seeds, comparison, runs at chance)] of every run
  of a cell of one section whose point estimate lies beyond the margin, in the
  table's order."""
  out = []
  for method, row in ROWS.items():
    for s, col in COLUMNS.items():
      for cell, device in cells.get((s, method), []):
        c = cell_comparison(paper.get(row, {}).get(col), cell, key)
        if c.delta is not None and c.margin is not None and abs(c.delta) > c.margin:
          out.append((method, s, device, len(cell["runs"]), c, at_chance(cell["runs"])))
  return out


def beyond_section(groups, order, names, published=PUBLISHED):
  """The results file's list of every run whose point estimate lies beyond the
  margin (what the docs count, cell by cell), one table over every section."""
  lines = [f"## {BEYOND_TITLE}", "",
           "Every run of a cell (any seeds) whose mean lies farther from the published "
           "value than the margin, whatever its verdict: the cells the docs count as "
           "beyond the margin.", "",
           "| compat | inputs | table | method | scenario | device | n | Δ | margin | "
           "runs at chance |", "|---|---|---|---|---|---|---|---|---|---|"]
  for group in order:
    mode, inputs = group
    for table, key in zip(names, ("accuracy", "gini")):
      for m, s, device, n, c, stuck in beyond_margin(
          groups[group], published_table(published, table), key):
        lines.append(f"| {mode} | {firma_variants.title(inputs, INPUTS)} | {table} | "
                     f"{firma_tables.row_label(m, mode)} | {COLUMNS[s]} | {device} | {n} | "
                     f"{c.delta:+.4f} | ±{c.margin:.4f} | {stuck or ''} |")
  return lines + [""]


TABLE13_TITLE = "Table 13, the Fashion-MNIST row (Dir 0.1 ablation)"
TABLE13_ANCHOR = "#table-13-the-fashion-mnist-row-dir-01-ablation"


def per_seed_text(groups) -> str:
  """What n covers in the sections run with ``--partition=per_seed`` (none: "")."""
  if not any("per_seed" in inputs.split("+") for _, inputs in groups):
    return ""
  return (f" Sections with “{firma_variants.TITLES['per_seed'].split(' (')[0]}”: "
          f"{verdicts.n_covers(-1)}.")


def best_cells(group_cells):
  """{(scenario, method): cell} of one section, each cell's run with the most
  seeds (the first such), and {(scenario, method): device} of it."""
  cells, devices = {}, {}
  for key, entries in group_cells.items():
    cell, device = max(entries, key=lambda e: len(e[0]["runs"]))
    cells[key], devices[key] = cell, device
  return cells, devices


def table13_section(groups, dataset):
  """Table 13's row of this data set from the Dir 0.1 cells of the
  `reference_code` section with the authors' inputs (each cell's run with the
  most seeds), or a line saying why it has none."""
  title = DATASETS[dataset][0]
  lines = [f"## Table 13, the {title} row (Dir 0.1 ablation)", ""]
  methods = ("fibfl", "fibfl_plus", "fibfl_pp")
  group = groups.get(("reference_code", "authors"), {})
  cells, devices = best_cells(group)
  missing = [ROWS[m] for m in methods if ("dir0.1", m) not in cells]
  published = common.published("firma")["Table 13"].get(title)
  if published is None or missing:
    why = ("the paper prints no such row" if published is None else
           f"not run: {', '.join(missing)} at Dir 0.1 lack a run")
    return lines + [why, ""]
  rows = firma_tables.ablation_rows(cells, title)
  where = "; ".join(f"{ROWS[m]}: {devices[('dir0.1', m)]}, "
                    f"{len(cells[('dir0.1', m)]['runs'])} seeds" for m in methods)
  acc = verdicts.markdown_table(rows[:3], 4, delta_scale=100.0).splitlines()
  gains = verdicts.markdown_table(rows[3:], 1).splitlines()[2:]
  return lines + [f"From the Dir 0.1 cells of the `reference_code` section with the "
                  f"authors' inputs above, each cell's run with the most seeds ({where}); "
                  "the gains (in pp) are paired by seed, and a gain agrees only when the "
                  "two accuracies beneath it do.", ""] + acc + gains + [""]


def write_table(json_paths, out, published=PUBLISHED, dataset="fashion_mnist"):
  """Write :func:`markdown` to ``out``."""
  common.write_text(out, markdown(json_paths, out, published, dataset))
