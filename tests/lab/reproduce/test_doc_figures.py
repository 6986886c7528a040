"""The reproduction figures of the user guide's pages (``docs/images/reproduction``,
``fedfrac-reproduce docs``): their data is what the committed results tables
print, cell for cell (published value, ours, Δ, interval, margin, verdict); the
PNG carries the digest of that data, so ``--check`` reports a figure as stale once
a result changes and ``docs`` redraws it; the pages' tallies are the tables'
summaries; and the one committed run of the authors' code is the one docs/design.md
records."""
from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from fedfrac_lab.reproduce import (common, doc_pages, docs, figure_data, figure_data_firma,
                               figure_draw, figure_files, verdicts)

ROOT = common.CHECKOUT_DIR


@pytest.fixture(scope="module")
def figures():
  docs.registry()
  return {fig.name: fig for fig, _ in figure_files.registered()}


def _rows(path, heading, which=0):
  """The ``which``-th markdown table under ``heading`` in a committed results file."""
  tables = [rows for head, rows in common.markdown_tables(path) if head == heading]
  return tables[which]


def _cell(fig, panel, label):
  cells = [c for c in fig.panels[panel].cells if c.label == label]
  assert len(cells) == 1, [c.label for c in fig.panels[panel].cells]
  return cells[0]


def _interval(c, scale, digits):
  lo, hi = (c.delta - c.half_width) * scale, (c.delta + c.half_width) * scale
  return f"[{lo:+.{digits}f}, {hi:+.{digits}f}]"


@pytest.mark.parametrize("panel,mode_table,label,row", [
    (0, 0, "FibFL · Dir 0.1", "FibFL · Dir α=0.1"),              # beyond the axis
    (0, 0, "FedAvg · Dir 0.8", "FedAvg · Dir α=0.8"),            # inconclusive
    (1, 1, "FibFL+ · Dir 0.1", "FibFL+ · Dir α=0.1"),            # reference_code
    (1, 1, "FedAvg (reconstructed) · IID", "FedAvg (reconstructed) · IID"),
])
def test_digits_accuracy_figure_is_table_11(figures, panel, mode_table, label, row):
  """MNIST-1797 Table 11, paper and reference_code: the figure's row is the
  table's (values to the table's precision, Δ and its interval in pp)."""
  c = _cell(figures["firma_11"], panel, label)
  t = next(r for r in _rows("results/firma_digits.md", "Table 11: mean per-client accuracy",
                            mode_table) if r["cell"] == row)
  assert f"{c.published:.4f}" == t["published"]
  assert f"{c.ours:.4f} ± {c.std:.4f} (n = {c.n})" == t["ours: mean ± std (n seeds)"]
  assert f"{c.delta * 100:+.1f}" == t["Δ (pp)"]
  assert _interval(c, 100, 1) == t["90 % interval of Δ"]
  assert f"±{c.margin * 100:.1f}" == t["margin"] and c.verdict == t["verdict"]
  assert c.scale == 100.0 and figures["firma_11"].panels[panel].unit == "pp"


def test_digits_gini_figure_is_table_12(figures):
  """A Gini row: its margin is 25 % of the published value (at least 0.005)."""
  c = _cell(figures["firma_12"], 1, "RDFL · Dir 0.1")
  t = next(r for r in _rows("results/firma_digits.md", "Table 12: Gini of per-client accuracy",
                            1) if r["cell"] == "RDFL · Dir α=0.1")
  assert f"{c.published:.4f}" == t["published"] and c.verdict == t["verdict"]
  assert f"{c.delta:+.4f}" == t["Δ (Gini)"] and f"±{c.margin:.4f}" == t["margin"]
  assert c.margin == pytest.approx(max(0.25 * c.published, 0.005))


def test_fashion_mnist_figure_has_a_row_per_run_as_table_7(figures):
  """Fashion-MNIST Table 7: a cell run on two devices has a row per run, named
  by its device and seeds, with the table's verdict (a 1-seed run: too few
  seeds, no interval); a cell with runs at chance is collapsed."""
  fig = figures["firma_7"]
  assert "authors' inputs" in fig.panels[0].title and "NVIDIA H200" in fig.panels[0].title
  table = [r for r in _rows("results/firma_fashion_mnist.md",
                            "Table 7: mean per-client test accuracy")
           if r["method"] == "FibFL" and r["scenario"] == "IID"]
  rows = [c for c in fig.panels[0].cells if c.label.startswith("FibFL · IID (")]
  assert len(rows) == len(table) == 2
  for c, t in zip(rows, table):
    assert t["device"].startswith("NVIDIA H200" if "H200" in c.label else "CPU")
    assert f"{c.ours:.4f} ± {c.std:.4f} (n = {c.n})" == t["ours: mean ± std (n seeds)"]
    assert f"{c.delta:+.4f}" == t["Δ"] and c.verdict == t["verdict"]
    assert (t["90 % interval of Δ"] == "–" if c.half_width is None
            else _interval(c, 1, 4) == t["90 % interval of Δ"])
  assert {c.verdict for c in rows} == {verdicts.TOO_FEW, verdicts.DIFFERS}
  pp = _cell(fig, 0, "FibFL++ · IID")
  t = next(r for r in _rows("results/firma_fashion_mnist.md",
                            "Table 7: mean per-client test accuracy")
           if r["method"] == "FibFL++" and r["scenario"] == "IID")
  assert pp.verdict == verdicts.COLLAPSED and t["verdict"].startswith("collapsed")
  assert abs(pp.delta * pp.scale) > fig.panels[0].limit      # drawn at the axis' edge


def test_standin_figure_is_the_published_table(figures):
  """FOFedAvg Table II on digits: published, ours (mean ± std, n) and Δ as
  results/published_fofedavg.md prints them (its stand-in row: the real MNIST row
  comes first and is not drawn); a stand-in has no interval, no margin and no
  verdict but *stand-in*."""
  fig = figures["fofedavg_ii"]
  assert fig.kind == figure_data.VALUES and "STAND-IN" in fig.title
  c = _cell(fig, 0, "FOFedAvg")
  t = next(r for r in _rows("results/published_fofedavg.md",
                            "Table II: Mean, variance and standard deviation of test "
                            "accuracy of eleven algorithms on MNIST, IID split.")
           if r["cell"] == "FOFedAvg · Mean" and r["verdict"] == verdicts.STAND_IN)
  assert f"{c.published:.4f}" == t["published"]
  assert f"{c.ours:.4f} ± {c.std:.4f} (n = {c.n})" == t["ours: mean ± std (n seeds)"]
  assert f"{c.delta:+.4f}" == t["Δ (the table's units)"]
  assert (c.half_width, c.margin, c.verdict) == (None, None, verdicts.STAND_IN)
  # A cell with two numbers of ours has a row each, tagged by its setting.
  iv = [c.label for c in figures["fofedavg_iv"].panels[0].cells]
  assert "alpha=0.5 (scikit-learn digits)" in iv
  assert "alpha=0.5 (real Fashion-MNIST, reduced)" in iv


def test_every_table_with_ours_has_a_figure_and_no_other(figures):
  assert {"firma_7", "firma_8", "firma_9", "firma_10", "firma_11", "firma_12", "firma_13",
          "firma_fibfl_iid_authors", "fofedavg_ii", "fofedavg_iii", "fofedavg_iv",
          "fo_ri_fedavg_x", "kuramoto_1"} <= set(figures)
  # FOFedAvg Tables V-VI and FO-RI-FedAvg Table XI have no number of ours.
  assert not {"fofedavg_v", "fofedavg_vi", "fo_ri_fedavg_xi"} & set(figures)


def test_the_page_tallies_are_the_tables_summaries():
  """The tally rows of the FIRMA page come from the counts its results tables
  print in their summaries."""
  text = doc_pages.firma_page_tables()
  summary = _rows("results/firma_digits.md", "Summary")
  row = next(r for r in summary if r["mode"] == "`paper`")
  counts = dict(part.rsplit(" ", 1) for part in row["Table 11 (accuracy)"].split(" · "))
  assert (f'"MNIST-1797, compat = paper", "all six methods", {counts["agrees"]}, '
          f'{counts["differs"]}, {counts["inconclusive"]}, {counts["too few seeds"]}, 0'
          in text)
  assert ":download:`results/firma_fashion_mnist.md <../../../../results/" in text


def test_the_authors_run_is_the_one_design_md_records():
  """results/firma_authors_fmnist.json transcribes the run docs/design.md §3.3
  reports; the two must not part."""
  run = figure_data_firma.authors_run()
  with open(os.path.join(ROOT, "docs", "design.md"), encoding="utf-8") as f:
    # the numbers are a generated span now: read the text without its markers
    design = " ".join(re.sub(r"\s*<!-- (BEGIN generated: [^>]*|END generated) -->\s*", " ",
                             f.read()).split())
  assert run["command"].replace("--rounds=6", "--rounds=R") in design
  values = ", ".join(f"{v:.3f}" for v in run["accuracy"])
  assert (f"the authors' code gives {values} at rounds {run['rounds'][0]}–"
          f"{run['rounds'][-1]}") in design


def test_drawing_is_deterministic_and_carries_the_digest():
  cell = figure_data.Cell("FedAvg · IID", 0.9, 0.88, 0.01, 3, -0.02, 0.01, 0.02,
                          verdicts.INCONCLUSIVE, 100.0)
  fig = figure_data.Figure("t", "firma", "Table 0", figure_data.DELTA, "a title",
                           (figure_data.Panel("p", "pp", (cell,), limit=5.0),), ())
  digest = figure_data.digest(fig, "code")
  one, two = figure_draw.draw(fig, digest), figure_draw.draw(fig, digest)
  assert one == two and one[:8] == b"\x89PNG\r\n\x1a\n"
  text = figure_draw.png_text(one)
  assert text == {figure_draw.PNG_KEY: digest}            # no software name, no time
  assert figure_data.digest(fig._replace(title="another"), "code") != digest


def _tmp_root(tmp_path):
  """A copy of the docs and the committed figures (the results stay the checkout's,
  save those copied under ``tmp_path/results``)."""
  for name in docs.DOCS:
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(os.path.join(ROOT, name), tmp_path / name)
  shutil.copytree(os.path.join(ROOT, figure_data.IMAGES), tmp_path / figure_data.IMAGES)
  return tmp_path


def test_a_changed_result_makes_its_figure_stale(tmp_path, monkeypatch, capsys):
  """One number of ours changes (a copy of the results file, read through the
  working directory): --check names the figures drawn from it as stale and exits
  1; ``docs`` redraws those two and leaves every other figure's bytes alone."""
  root = _tmp_root(tmp_path)
  assert figure_files.check(str(root)) == []
  src = "results/fofedavg_methods_digits.json"
  with open(os.path.join(ROOT, src), encoding="utf-8") as f:
    raw = json.load(f)
  raw[0]["summary"]["fofedavg"]["accuracy"]["mean"] += 0.01
  (root / "results").mkdir()
  (root / src).write_text(json.dumps(raw), encoding="utf-8")
  monkeypatch.chdir(root)                    # common.find_file: the copy comes first
  problems = figure_files.check(str(root))
  assert sorted(p.split(":")[0] for p in problems) == [
      f"{figure_data.IMAGES}/fofedavg_ii.png", f"{figure_data.IMAGES}/fofedavg_iii.png"]
  assert all(": stale: drawn from other data than results/published_fofedavg.md" in p
             for p in problems)
  assert docs.main(["--check", f"--root={root}"]) == 1
  assert "fofedavg_ii.png: stale" in capsys.readouterr().err
  before = {p.name: p.read_bytes() for p in (root / figure_data.IMAGES).iterdir()}
  written = figure_files.write(str(root))
  assert sorted(os.path.basename(w) for w in written) == ["fofedavg_ii.png", "fofedavg_iii.png"]
  assert figure_files.check(str(root)) == []
  after = {p.name: p.read_bytes() for p in (root / figure_data.IMAGES).iterdir()}
  assert {n for n in before if before[n] != after[n]} == {"fofedavg_ii.png",
                                                          "fofedavg_iii.png"}


def test_a_missing_and_a_stray_figure_are_reported(tmp_path):
  root = _tmp_root(tmp_path)
  (root / figure_data.IMAGES / "kuramoto_1.png").unlink()
  (root / figure_data.IMAGES / "old_figure.png").write_bytes(b"")
  problems = figure_files.check(str(root))
  assert any(p.startswith(f"{figure_data.IMAGES}/kuramoto_1.png: missing") for p in problems)
  assert f"{figure_data.IMAGES}/old_figure.png: no registered figure draws it" in problems
  assert len(problems) == 2
