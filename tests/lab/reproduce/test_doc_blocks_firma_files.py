"""fedfrac_lab.reproduce.doc_blocks_firma_files: the FIRMA real-data lines of the docs
take each figure from the runs it is about."""
from __future__ import annotations

import json

import pytest

from fedfrac_lab.reproduce import doc_blocks_firma_files as blocks
from fedfrac_lab.reproduce import firma_files_table, firma_notes, firma_tables


def _file(tmp_path, name, methods, seeds, wall, cpu, workers=1, device="CPU, 2 cores"):
  d = {"args": {"methods": methods, "seeds": seeds, "device": device},
       "scenarios": {"iid": {"wall_s": wall, "workers": workers,
                             "timings": {"reference_code": {"cpu_s": cpu}}}}}
  path = tmp_path / name
  path.write_text(json.dumps(d))
  return str(path)


def test_cpu_times_keep_fibfl_apart_from_the_three_baselines(tmp_path):
  # The line quoted FibFL's 42-49 min as "the three baselines" at 3 seeds.
  paths = [_file(tmp_path, "a.json", "fedavg,rdfl,fedrep", 3, 1800, 1790),
           _file(tmp_path, "b.json", "fibfl", 3, 2700, 2640),
           _file(tmp_path, "c.json", "fedavg,rdfl,fedrep", 3, 1000, 1900, workers=2),
           _file(tmp_path, "d.json", "fibfl", 1, 2760, 2640, workers=None),
           _file(tmp_path, "e.json", "fibfl", 3, 60, 60, device="NVIDIA H200")]
  times = blocks.cpu_times(paths)
  assert times == {(3, "the three baselines", 1): [1790 / 60],    # CPU time, one core
                   (3, "FibFL", 1): [2640 / 60],
                   (3, "the three baselines", 2): [1000 / 60],    # wall, two processes
                   (1, "FibFL", 0): [2760 / 60]}                  # wall, 1 seed


def test_table_13s_fashion_mnist_row_pairs_the_dir01_runs_by_seed():
  def cell(accs, n=10):
    return {"num_clients": n, "runs": [{"accuracy": a, "gini": 0.1} for a in accs]}
  group = {("dir0.1", "fibfl"): [(cell([0.30]), "CPU"), (cell([0.36, 0.38, 0.34]), "CPU")],
           ("dir0.1", "fibfl_plus"): [(cell([0.35, 0.37, 0.33]), "GPU")],
           ("dir0.1", "fibfl_pp"): [(cell([0.10, 0.45, 0.43]), "GPU")]}
  cells, devices = firma_files_table.best_cells(group)
  assert len(cells[("dir0.1", "fibfl")]["runs"]) == 3          # the run with most seeds
  rows = firma_tables.ablation_rows(cells, "Fashion-MNIST")
  labels = [label for label, _, _ in rows]
  assert labels[:3] == ["FibFL accuracy", "FibFL+ accuracy", "FibFL++ accuracy"]
  assert rows[2][1].verdict == "collapsed"      # one FibFL++ run at chance
  # A gain made of a collapsed cell is collapsed too; Δsel is paired by seed.
  assert rows[4][1].verdict == "collapsed"
  assert rows[3][1].mean == pytest.approx(-1.0) and rows[3][1].std == pytest.approx(0.0)


def test_a_labelled_variant_counts_apart_from_the_authors_code(tmp_path):
  def run_file(name, init=None):
    args = {"seeds": 3, "rounds": 30, "device": "cpu", "inputs": "authors"}
    if init:
      args["init"] = init
    runs = [{"accuracy": a, "gini": 0.02, "curve": [0.6, a]} for a in (0.70, 0.71, 0.72)]
    d = {"args": args, "scenarios": {"iid": {"results": {"reference_code": {
        "iid/fibfl": {"num_clients": 10, "runs": runs}}}}}}
    (tmp_path / name).write_text(json.dumps(d))
    return str(tmp_path / name)
  paths = [run_file("a.json"), run_file("b.json", init="shared")]
  plain, variant = blocks.tally(paths), blocks.tally(paths, variants=True)
  assert sum(plain.values()) == 84 and sum(variant.values()) == 84  # Tables 7 and 8
  assert plain["not run"] == variant["not run"] == 82               # all but FibFL IID
  groups, _ = firma_files_table.json_groups(paths)
  assert firma_notes.curve_summary(groups).runs == 3               # not the variant's
  assert "labelled variants of `reference_code`" in blocks._variants_text(paths)
  assert blocks._variants_text(paths[:1]) == ""


def _cell_file(tmp_path, name, accuracies, device="CPU, 2 cores", inputs="authors"):
  gini = firma_tables.published("Table 8")[("fibfl", "iid")]
  runs = [{"accuracy": a, "gini": gini, "curve": [0.6, a]} for a in accuracies]
  d = {"args": {"seeds": len(runs), "rounds": 30, "device": device, "inputs": inputs},
       "scenarios": {"iid": {"results": {"reference_code": {
           "iid/fibfl": {"num_clients": 10, "runs": runs}}}}}}
  (tmp_path / name).write_text(json.dumps(d))
  return str(tmp_path / name)


def test_a_cell_counts_once_with_the_verdict_of_its_most_seeded_runs(tmp_path):
  """A cell run at 1 seed with [0, 1] inputs and at 3 seeds with the authors'
  counts once, with the 3 seeds' verdict; two 3-seed runs of it count once,
  with the less favourable verdict; the paper's other cells are *not run*."""
  pub = firma_tables.published("Table 7")[("fibfl", "iid")]
  near = [pub - 0.001, pub, pub + 0.001]
  one = _cell_file(tmp_path, "one.json", [pub - 0.3], inputs="unit")
  three = _cell_file(tmp_path, "three.json", near)
  total = blocks.tally([one, three])
  assert sum(total.values()) == blocks.published_cells() == 84
  assert total["agrees"] == 2 and total["too few seeds"] == 0 and total["differs"] == 0
  far = _cell_file(tmp_path, "far.json", [pub - 0.1] * 2 + [pub - 0.11], device="GPU")
  total = blocks.tally([one, three, far])
  assert total["differs"] == 1 and total["agrees"] == 1 and total["not run"] == 82
