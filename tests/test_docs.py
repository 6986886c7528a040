"""README.md, REPRODUCTION.md, docs/design.md and the guide's reproductions page
(docs/api/guide/reproducing.md) against the committed results
(``fedfrac-reproduce docs --check``): every generated span equals its rendering
from the results files, every registered block is in its doc, no result figure
sits outside a generated span, and every results table that has a JSON equals its
rendering. These tests read the committed docs and results on purpose: they fail
when a number in a doc and the results it quotes part."""
from __future__ import annotations

import os
import shutil

import pytest

from fedfrac_lab.reproduce import docs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _doc(name):
  with open(os.path.join(ROOT, name), encoding="utf-8") as f:
    return f.read()


@pytest.mark.parametrize("name", docs.DOCS)
def test_committed_doc_agrees_with_the_committed_results(name):
  problems = docs.check_doc(name, _doc(name))
  assert not problems, "\n".join(problems)


def test_committed_results_tables_agree_with_their_json():
  problems = docs.check_tables()
  assert not problems, "\n".join(problems)


def _span(text, name):
  return next(s for s in docs.spans(text) if s[0] == name)


def test_a_changed_figure_a_lost_block_and_a_stray_figure_are_reported():
  text = _doc("REPRODUCTION.md")
  name, start, end, content = _span(text, "fo_ri_t10")
  assert "SCAFFOLD best on the fleet" in content
  # A figure edited by hand inside its span no longer matches the results.
  edited = text[:start] + text[start:end].replace("SCAFFOLD best", "FedAvg best") + text[end:]
  problems = docs.check_doc("REPRODUCTION.md", edited)
  assert len(problems) == 1 and "block 'fo_ri_t10' differs" in problems[0]
  # Re-rendering restores it.
  assert docs.render_doc("REPRODUCTION.md", edited) == text
  # A figure typed into the "ours vs published" column outside a span, and a span
  # removed with its markers.
  typed = text[:start] + "FO-RI-FedAvg 117.4 vs 41.92 Wh" + text[end:]
  problems = docs.check_doc("REPRODUCTION.md", typed)
  assert any("block 'fo_ri_t10' is missing" in p for p in problems)
  assert any("a figure in column 'ours vs published'" in p and "117.4" in p
             for p in problems)


def test_mean_std_and_agreement_counts_outside_spans_are_reported():
  text = ("# t\n\nIn prose: 21 of 30 cells agree; RMSE 117.5 ± 6.9 Wh.\n\n"
          "```\n0.5 ± 0.1 in code is fine\n```\n")
  problems = docs.stray_figures("README.md", text)
  assert len(problems) == 2
  assert {p.split(": ")[1] for p in problems} == {"a mean ± std outside a generated span",
                                                 "an agreement count outside a generated span"}
  measured = "# t\n\n## Two commands\n\nFedAvg 0.9248 ± 0.0100.\n"
  assert docs.stray_figures("README.md", measured) == []
  # The guide's reproductions page is checked as the README is.
  assert len(docs.stray_figures(docs.GUIDE_REPRODUCING, text)) == 2


def test_cli_check_exits_one_on_a_stale_doc(tmp_path, capsys):
  for name in docs.DOCS:
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text(_doc(name), encoding="utf-8")
  images = "docs/images/reproduction"      # the figures --check covers as well
  shutil.copytree(os.path.join(ROOT, images), tmp_path / images)
  assert docs.main(["--check", f"--root={tmp_path}"]) == 0
  stale = _doc("REPRODUCTION.md").replace("SCAFFOLD best on the fleet", "FedAvg best", 1)
  (tmp_path / "REPRODUCTION.md").write_text(stale, encoding="utf-8")
  assert docs.main(["--check", f"--root={tmp_path}"]) == 1
  assert "block 'fo_ri_t10' differs" in capsys.readouterr().err
  # Without --check the doc is rewritten from the results.
  assert docs.main([f"--root={tmp_path}"]) == 0
  assert (tmp_path / "REPRODUCTION.md").read_text(encoding="utf-8") == _doc("REPRODUCTION.md")


def test_an_inline_block_may_not_break_its_table_cell(monkeypatch):
  block = docs.Block("x", "README.md", True, lambda: "a | b", ())
  with pytest.raises(ValueError, match="inline block 'x'"):
    docs.rendered(block)


def test_design_doc_quotes_the_fibfl_runs_through_generated_spans():
  """design.md's FibFL notes quote the committed runs in spans the check keeps in
  step (its own measurements beside them are not checked for stray figures)."""
  text = _doc("docs/design.md")
  names = {s[0] for s in docs.spans(text)}
  assert {"design_fibfl_gap", "design_fibfl_runs", "design_fibfl_ends"} <= names
  assert docs.stray_figures("docs/design.md", "In prose: 0.5 ± 0.1 and 3 of 4 agree.") == []
  stale = text.replace("are best at round 2 in", "are best at round 3 in", 1)
  assert stale != text
  assert any("design_fibfl" in p for p in docs.check_doc("docs/design.md", stale))


def test_fo_ri_table_x_says_where_the_methods_it_does_not_run_stand():
  """FedEL is in fedfrac (a stand-in) though the fleet suite does not run it; the
  line is computed from the registry, not typed."""
  blocks, _ = docs.registry()
  text = blocks["fo_ri_t10_methods"].render()
  assert "the suite runs 10 of the table's 11 methods" in text
  assert "FedEL is in fedfrac (`fedfrac/algorithms/fedel.py`, a stand-in" in text
  assert "not in fedfrac" not in text


def test_the_fractional_finding_names_orders_above_one_and_the_tuned_grid():
  """"No fractional order beats FedAvg" holds below α = 1 only: the summary says
  what the α-factor table shows above 1 and that the tuned study has no α > 1."""
  from fedfrac_lab.reproduce import doc_blocks_fractional
  assert doc_blocks_fractional.tuned_alphas() == [0.5, 0.8, 0.97]
  text = docs.registry()[0]["readme_fractional"].render()
  assert "no fractional order α < 1 beat FedAvg here" in text
  assert "Orders above 1 lie above FedAvg's mean" in text and "α 1.5 0.910" in text
  assert "the learning-rate-tuned study has no α > 1 (its grid: α 0.5, 0.8, 0.97)" in text


def test_a_guide_page_keeps_its_blocks_between_rest_comments():
  """The reproduction pages (reST) mark a span with comments on lines of their
  own, the block set off by blank lines; a figure edited there is reported and
  re-rendering restores it."""
  name = "docs/api/guide/reproductions/firma.rst"
  text = _doc(name)
  assert name in docs.DOCS and docs.spans(text) == []     # not markdown's markers
  _, start, end, content = _span_of(text, name, "firma_page_tables")
  assert text[start:].startswith(".. BEGIN generated: fedfrac-reproduce docs "
                                 "--block=firma_page_tables\n\n")
  assert content.endswith("\n\n") and text[:end].endswith("\n\n.. END generated")
  assert ".. figure:: ../../../images/reproduction/firma_11.png" in content
  stale = text[:start] + text[start:end].replace("images/reproduction/firma_11.png",
                                                 "images/reproduction/old.png") + text[end:]
  problems = docs.check_doc(name, stale)
  assert len(problems) == 1 and "block 'firma_page_tables' differs" in problems[0]
  assert docs.render_doc(name, stale) == text


def _span_of(text, doc, name):
  return next(s for s in docs.spans(text, doc) if s[0] == name)


def test_readme_is_a_front_page_of_small_generated_tables():
  """README.md stays a front page: at most 250 lines, none over 300 characters,
  the two commands shown literally, and its generated parts are the two tables
  (what reproduces, speed) while the summaries behind them are on the guide's
  reproductions page."""
  text = _doc("README.md")
  lines = text.splitlines()
  assert len(lines) <= 250
  assert max(len(line) for line in lines) <= 300
  assert "make run" in text and "make test" in text
  names = [s[0] for s in docs.spans(text)]
  assert names == ["readme_reproduces", "readme_sensitivity", "readme_firma_shared",
                   "readme_speed"]
  guide = {s[0] for s in docs.spans(_doc(docs.GUIDE_REPRODUCING))}
  assert {"readme_firma_fmnist", "readme_firma_digits", "readme_fractional", "readme_bev",
          "readme_kuramoto", "readme_robust", "readme_published_cells"} <= guide


def test_the_readme_tally_is_the_guides_tally_in_a_table():
  """Each FIRMA row of the README's table counts what the guide's sentence on
  the same runs counts; the stand-in papers get no verdict."""
  from fedfrac_lab.reproduce import doc_blocks_readme, verdicts
  blocks, _ = docs.registry()
  rows = {(r[1], r[2].split(" (")[0], r[2].split("`")[1]): r
          for r in doc_blocks_readme.reproduces_rows() if r[0] == "firma"}
  fmnist = rows[("7–8", "Fashion-MNIST", "reference_code")][4]
  assert verdicts.tally_text(fmnist) in blocks["readme_firma_fmnist"].render()
  mnist = rows[("9–10", "MNIST-60k", "reference_code")][4]
  assert verdicts.tally_text(mnist) in blocks["readme_firma_mnist"].render()
  table = blocks["readme_reproduces"].render()
  for line in table.splitlines()[2:]:
    assert len(line.split(" | ")) == 12, line
  assert "[FIRMA](docs/api/guide/reproductions/firma.rst)" in table


def _published_cells(paper, tables):
  """Cells the paper prints in ``tables``, counted from published/<paper>.json
  directly (a dict cell without a mean is one cell per entry)."""
  import json
  import os
  with open(os.path.join(ROOT, "fedfrac_lab", "reproduce", "published",
                         f"{paper}.json")) as f:
    doc = json.load(f)
  doc = doc.get("tables", doc)
  n = 0
  for name in tables:
    for cols in doc[name]["rows"].values():
      for v in cols.values():
        if isinstance(v, dict) and "mean" not in v:
          n += sum(x is not None for x in v.values())
        else:
          n += v is not None
  return n


def test_each_readme_row_counts_every_published_cell_exactly_once():
  """Every row of the README's reproduction table adds up to the cells the paper
  publishes in its tables: each cell has one verdict (the best-evidenced), is a
  stand-in number or is not run, never two of these."""
  from fedfrac_lab.reproduce import doc_blocks_readme, published_tables
  firma = {"7–8": ("Table 7", "Table 8"), "9–10": ("Table 9", "Table 10"),
           "11–12": ("Table 11", "Table 12")}
  rows = doc_blocks_readme.reproduces_rows()
  assert len(rows) == 7
  for paper, tables, _, published, tally, _ in rows:
    names = firma[tables] if paper == "firma" else published_tables.PAPERS[paper][0]
    expected = _published_cells(paper, names)
    assert published == expected, (paper, tables)
    assert sum(tally.values()) == expected, (paper, tables, tally)
  table = docs.registry()[0]["readme_reproduces"].render()
  for line in table.splitlines()[2:]:
    cells = [c.strip() for c in line.strip("|").split("|")]
    counts = [int(c.split(":")[0]) for c in cells[4:]]
    assert sum(counts) == int(cells[3]), line


def test_the_readme_speed_table_quotes_the_benchmark_files():
  from fedfrac_lab.reproduce import common
  table = docs.registry()[0]["readme_speed"].render()
  h200 = common.load_results_json("benchmarks/results_h200.json")
  rows = h200["accelerator"]["vs_torch"]["result"]["rows"]
  slower = next(r for r in rows if r["speedup_vs_torch_batched"] < 1)
  assert f"{1 / slower['speedup_vs_torch_batched']:.2f}× slower" in table
  cpu = common.load_results_json("benchmarks/results.json")
  first = next(r for r in cpu["results"] if r.get("speedup_vs_torch"))
  assert f"{first['speedup_vs_torch']:.2f}× faster" in table
  assert "NVIDIA H200" in table and "CPU, 2-core" in table


MAX_LINE = 500


def test_no_line_of_the_reproduction_pages_and_the_guide_is_over_500_characters():
  """Every line of REPRODUCTION.md and of the guide's pages (Markdown and reST,
  generated or typed) is at most 500 characters as a reader sees it (the block
  markers, HTML comments, left out): a table row whose cells grew long links to
  its cells in full under the table or in its results file instead."""
  import glob
  import re
  guide = os.path.join(ROOT, "docs", "api", "guide")
  pages = ["REPRODUCTION.md"] + sorted(
      os.path.relpath(p, ROOT) for ext in ("md", "rst")
      for p in glob.glob(os.path.join(guide, "**", f"*.{ext}"), recursive=True))
  assert "docs/api/guide/reproductions/firma.rst" in pages
  long = []
  for page in pages:
    for n, line in enumerate(_doc(page).splitlines(), 1):
      seen = re.sub(r"<!-- (BEGIN|END) generated[^>]*-->", "", line)
      if len(seen) > MAX_LINE:
        long.append(f"{page}:{n}: {len(seen)}")
  assert not long, long


def test_the_shared_start_paragraph_quotes_its_files():
  """README and REPRODUCTION.md carry the same generated paragraph on the
  shared-initial-model variant, its numbers those of the variant's files."""
  from fedfrac_lab.reproduce import doc_blocks_firma_files as blocks
  from fedfrac_lab.reproduce import firma_files_table
  text = blocks.shared_variant_text()
  groups, _ = firma_files_table.json_groups(list(blocks.FMNIST_JSONS))
  shared = groups[("reference_code", "authors+shared")]
  assert len(shared) == 3
  for cell, _ in (e for entries in shared.values() for e in entries):
    accs = [r["accuracy"] for r in cell["runs"]]
    assert f"{sum(accs) / len(accs):.4f}" in text
  assert "does not say" in text and "chosen after" in text
  readme = " ".join(_doc("README.md").split())
  assert " ".join(text.split()) in readme
  assert " ".join(text.split()) in " ".join(_doc("REPRODUCTION.md").split())


def test_a_shortened_row_shows_what_its_text_in_full_says():
  """The FOFedAvg and Kuramoto rows of REPRODUCTION.md show counts and times
  whose full text (cells, inputs) stands under the table: the row's counts and
  every "≈" figure it shows are the full text's."""
  import re
  from fedfrac_lab.reproduce import doc_blocks_estimates as est
  from fedfrac_lab.reproduce import doc_blocks_fractional as fractional
  from fedfrac_lab.reproduce import doc_blocks_other as other
  from fedfrac_lab.reproduce import fofedavg_mnist
  tally = fofedavg_mnist.t2_tally_text()
  if tally:
    assert tally in fractional.fofedavg_t2_row() and tally in fractional.fofedavg_t2()
  row, full = other.kuramoto_t1_row(), " ".join(other.kuramoto_t1().split())
  for mode in ("coupled", "paper", "reference_code"):
    shown = re.search(rf"`{mode}` ([^;(]+)", row).group(1).strip()
    assert f"`{mode}` {shown}" in full
  for short, long in ((est.fofedavg_t2_time_row, est.fofedavg_t2_time),
                      (est.fofedavg_t4_time_row, est.fofedavg_t4_time),
                      (est.fofedavg_t5_time_row, est.fofedavg_t5_time),
                      (est.kuramoto_t1_time_row, est.kuramoto_t1_time)):
    figures = re.findall(r"≈ [\d.,]+ (?:h|min)", short())
    # A row whose cells have all run shows no estimate; one with cells left does.
    assert figures or " left" not in short(), short()
    assert all(f in long() for f in figures), (short(), figures)
