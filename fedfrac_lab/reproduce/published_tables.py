"""The published cells of a paper's result tables beside ours, from the committed
results (no runs): Kuramoto Table 1, FOFedAvg Tables II–VI, FO-RI-FedAvg Tables
X–XV, XX, XXI, XXVI. (FIRMA: ``fedfrac-reproduce firma --from-json`` and
``firma_files --table``.)

  fedfrac-reproduce published --paper=fo_ri_fedavg --out=results/published_fo_ri_fedavg.md

Each table lists every cell the paper prints: the published value (to the paper's
precision) and, where a results file holds a number of ours for it, ours (mean ±
std over seeds, a row per source), Δ and the setting that number really comes
from (data, partition, rounds, probe, statistic). All our data for these papers
are stand-ins (scikit-learn digits for MNIST, the synthetic fleet for VED/eVED),
so a cell with ours reads *stand-in* and one without *not run*
(:mod:`fedfrac_lab.reproduce.verdicts`). A key missing from a results file that is
present is an error, not a silently empty row.


Our side of each paper's tables (the runs each cell is set beside) is
:mod:`fedfrac_lab.reproduce.published_ours` (re-exported here); this module renders.
"""
from __future__ import annotations


import argparse
import math
import sys


from fedfrac_lab.reproduce import common, verdicts
from fedfrac_lab.reproduce.published_ours import (  # noqa: F401  (re-exported)
    ALPHA_SOURCES, BEV_JSON, BEV_ROWS, BEV_SETTING, DIGITS_SETTING, FMNIST_SETTING,
    KURAMOTO_MD, KURAMOTO_SECTION, LIGHT_PROBE, PAPER_PROBE, PROBED, Ours, bev_ours,
    fofedavg_method_rows, fofedavg_ours, from_values, kuramoto_ours)




# The runs on a paper's own data that its table judges (the others are stand-ins).
REAL_DATA = {"fofedavg": "the real MNIST, Tables II–IV and Tables V–VI's K = 10 column, "
                         "CPU, `results/fofedavg_mnist_cpu.md`"}

# Paper -> (tables, what our data is, our numbers).
PAPERS = {
    "kuramoto": (("Table 1",), "scikit-learn digits with label shards "
                 "(results/kuramoto_digits.md) stand in for MNIST; CIFAR-10 and FMNIST "
                 "were not run", kuramoto_ours),
    "fofedavg": (("Table II", "Table III", "Table IV", "Table V", "Table VI"),
                 "the real MNIST for the cells of Tables II–IV and of Tables V–VI's K = 10 "
                 "column whose runs have finished "
                 "(`results/fofedavg_mnist_cpu.md`); scikit-learn digits and, for Table IV, "
                 "a reduced run on the real Fashion-MNIST stand in for MNIST; the MNIST "
                 "commands are in REPRODUCTION.md", fofedavg_ours),
    "fo_ri_fedavg": (("Table X", "Table XI", "Table XII", "Table XIII", "Table XIV",
                      "Table XV", "Table XX", "Table XXI", "Table XXVI"),
                     "a synthetic BEV fleet replaces VED/eVED (which we do not have); "
                     "its RMSE scale differs from the paper's", bev_ours),
}


def table_cells(body):
  """[(row, column, published value, places)] of every printed cell of a table
  (a dict cell such as {"max_accuracy", "round"} gives one cell per entry)."""
  rows = body["rows"]
  out = []
  for row, cols in rows.items():
    for col, value in cols.items():
      if value is None:
        continue
      if isinstance(value, dict) and "mean" not in value:
        for sub, v in value.items():
          out.append((row, f"{col} · {sub}", v, common.places(v)))
      else:
        out.append((row, col, value, common.column_places(rows, col)))
  return out


def table_rows(name, body, ours):
  """[(label, published, Ours or None, comparison)] for every printed cell of one
  table, a row per number of ours."""
  out = []
  for row, col, value, places in table_cells(body):
    label = f"{row} · {col}"
    entries = ours.get((name, row, col)) or [None]
    for o in entries:
      if o is not None and o.real:      # the paper's own data: judged by the rule
        out.append((label, value, places, o, o.comparison))
      elif o is None or o.mean is None:
        c = verdicts.judge(value, None, None, 0, verdicts.ACCURACY)
        out.append((label, value, places, o, c._replace(
            verdict=verdicts.STAND_IN if o is not None else verdicts.NOT_RUN)))
      else:
        c = verdicts.judge(value, o.mean, o.std, o.n, verdicts.ACCURACY, stand_in=True)
        out.append((label, value, places, o, c))
  return out


def _ours_text(o, digits):
  if o is None:
    return "–"
  if o.mean is None:
    return o.text
  std = "" if o.std is None else f" ± {o.std:.{digits}f}"
  return f"{o.mean:.{digits}f}{std} (n = {o.n})"


def _real_digits(o, digits):
  """The decimals a row of ours shows: the table's ``digits``, or for a number on the
  paper's own data as many as three significant figures need (at most 4), so a
  mean of 4.33 rounds or 0.757 MB beside a table of whole numbers is not shown as
  4 or 1."""
  if o is None or not o.real or o.mean is None or o.mean == 0:
    return digits
  return max(digits, min(4, 2 - math.floor(math.log10(abs(o.mean)))))


def split_tally(rows):
  """({verdict: rows} of the rows run on the paper's own data, {verdict: rows} of
  the others: stand-ins and cells not run) of :func:`table_rows`' rows."""
  real = [c.verdict for _, _, _, o, c in rows if o is not None and o.real]
  rest = [c.verdict for _, _, _, o, c in rows if o is None or not o.real]
  return verdicts.tally(real), verdicts.tally(rest)


def _count_text(counts, real=None):
  text = (f"{counts[verdicts.STAND_IN]} rows of ours (*{verdicts.STAND_IN}*), "
          f"{counts[verdicts.NOT_RUN]} cells *{verdicts.NOT_RUN}*")
  if real and any(real.values()):
    text = (f"{sum(real.values())} rows on the paper's own data "
            f"({verdicts.tally_text(real)}), " + text)
  return text


def render_table(name, body, ours):
  """Markdown for one published table and its verdict counts."""
  rows = table_rows(name, body, ours)
  real, counts = split_tally(rows)
  cells = len(table_cells(body))
  with_ours = len({label for label, _, _, o, _ in rows if o is not None})
  lines = [f"### {name}: {body.get('caption', '')}", "",
           f"{cells} published cells, {with_ours} with a number of ours: "
           f"{_count_text(counts, real)}.", ""]
  if not rows:
    return "\n".join(lines + ["(no numeric cells)", ""])
  digits = min(max(p for _, _, p, _, _ in rows), 4)
  lines += ["| cell | published | ours: mean ± std (n seeds) | Δ (the table's units) | "
            f"verdict | our setting{'' if any(real.values()) else ' (stand-in)'} |",
            "|---|---|---|---|---|---|"]
  for label, value, _, o, c in rows:
    shown = _real_digits(o, digits)
    d = "–" if c.delta is None else f"{c.delta:+.{shown}f}"
    setting = "" if o is None else o.setting + (f"; {c.note}" if o.real and c.note else "")
    lines.append(f"| {label} | {common.fmt_value(value, digits)} | {_ours_text(o, shown)} "
                 f"| {d} | {verdicts.verdict_text(c)} | {setting} |")
  for note in body.get("notes", [])[:3]:
    lines.append(f"\n- Note (transcription): {note}")
  lines.append("")
  return "\n".join(lines)


def result_tables(paper):
  """[(table, printed cells)] of every table of ``paper``'s transcription that
  prints a number (its result tables; glossaries, settings and ranges aside),
  whether this command lists it or not."""
  doc = common.published_document(paper)
  out = []
  for name, body in doc["tables"].items():
    cells = table_cells(body) if isinstance(body, dict) and "rows" in body else []
    if any(verdicts.published_number(value) is not None for _, _, value, _ in cells):
      out.append((name, len(cells)))
  return out


def coverage_text(paper):
  """Which published cells a table of ``paper`` covers: "all of its 5 result
  tables", or "those of its 9 tables set beside ours (X, …, XXVI) out of 837 in
  its 25 result tables as transcribed"."""
  listed = PAPERS[paper][0]
  tables = result_tables(paper)
  every = sum(n for _, n in tables)
  here = sum(n for name, n in tables if name in listed)
  if here == every:
    return ("all of its only result table" if len(tables) == 1 else
            f"all of its {len(tables)} result tables")
  names = ", ".join(name.split(" ", 1)[1] for name in listed)
  return (f"those of its {len(listed)} tables set beside ours ({names}) out of {every} "
          f"in its {len(tables)} result tables as transcribed")


def counts(paper):
  """(published cells, cells with a number of ours, {verdict: rows}) over the
  tables of ``paper`` (what the docs quote)."""
  tables, _, ours_fn = PAPERS[paper]
  doc = common.published_document(paper)
  ours = ours_fn()
  cells = with_ours = 0
  tally = verdicts.tally([])
  for name in tables:
    rows = table_rows(name, doc["tables"][name], ours)
    cells += len(table_cells(doc["tables"][name]))
    with_ours += len({label for label, _, _, o, _ in rows if o is not None})
    for *_, c in rows:
      tally[c.verdict] += 1
  return cells, with_ours, tally


def real_counts(paper):
  """(cells with a number of ours on the paper's own data, {verdict: rows} of
  those rows, cells with only a stand-in number, {verdict: rows} of the other rows)
  over the tables of ``paper``."""
  tables, _, ours_fn = PAPERS[paper]
  doc = common.published_document(paper)
  ours = ours_fn()
  real_cells, standin_cells = set(), set()
  real, rest = verdicts.tally([]), verdicts.tally([])
  for name in tables:
    rows = table_rows(name, doc["tables"][name], ours)
    real_cells |= {(name, lb) for lb, _, _, o, _ in rows if o is not None and o.real}
    standin_cells |= {(name, lb) for lb, _, _, o, _ in rows
                      if o is not None and not o.real}
    r, s = split_tally(rows)
    for k in real:
      real[k] += r[k]
      rest[k] += s[k]
  return len(real_cells), real, len(standin_cells - real_cells), rest


def markdown(paper, command):
  tables, stand_in, ours_fn = PAPERS[paper]
  doc = common.published_document(paper)
  ours = ours_fn()
  cells, with_ours, _ = counts(paper)
  n_real, real, _, tally = real_counts(paper)
  if n_real:
    title = "beside ours (the paper's own data where run, else STAND-IN data)"
    judged = (f"A row run on the paper's own data ({REAL_DATA.get(paper, '')}) is listed "
              "first and judged by the rule below; a stand-in row is not: it reads "
              "*stand-in*, and a cell without ours *not run*. The stand-in numbers show "
              "the size of the gap, not a reproduction.")
  else:
    title = "beside ours (STAND-IN data)"
    judged = ("Because the data is a stand-in no cell is judged: a cell with ours reads "
              "*stand-in*, one without *not run*. The numbers show the size of the gap, "
              "not a reproduction.")
  lines = [f"# {doc.get('paper', paper)}: the published cells of its result tables "
           f"{title}", "",
           f"Produced by `{command}` from the committed results (no runs).", "",
           f"Tables: {', '.join(tables)}. Data: {stand_in}. Published values as "
           f"transcribed in fedfrac_lab/reproduce/published/{paper}.json, printed to the "
           "paper's precision; ours = mean ± std over seeds where a results file holds "
           "a number for the cell (a row per source), Δ = ours − published in the "
           f"table's units, and the setting our number really comes from. {judged}", "",
           verdicts.RULE, "",
           f"Summary: {cells} published cells ({coverage_text(paper)}), {with_ours} "
           f"with a number of ours: {_count_text(tally, real)}.", ""]
  for name in tables:
    lines.append(render_table(name, doc["tables"][name], ours))
  return "\n".join(lines)


def main(argv=None):
  p = argparse.ArgumentParser(prog="fedfrac-reproduce published",
                              description=__doc__.split("\n\n")[0])
  p.add_argument("--paper", required=True, choices=sorted(PAPERS))
  p.add_argument("--out", type=common.output_path("--out"), default="")
  argv = sys.argv[1:] if argv is None else list(argv)
  args = p.parse_args(argv)
  out = args.out or f"results/published_{args.paper}.md"
  common.write_text(out, markdown(args.paper, common.command_line("published", argv)))
  print(f"wrote {out}", file=sys.stderr)
