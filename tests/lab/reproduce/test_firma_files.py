"""``fedfrac-reproduce firma_files``: FIRMA Tables 7–10 on local files — the
table beside every published cell, one section per (mode, inputs), and a run on
IDX files a test wrote that keeps finished scenarios on a rerun."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from fedfrac_lab.reproduce import firma_files, firma_notes
from tests.data.test_files import write_mnist_idx


def _cell(accs, ginis):
  return {"num_clients": 10, "runs": [{"accuracy": a, "gini": g}
                                      for a, g in zip(accs, ginis)]}


def test_table_has_every_published_cell_per_mode_and_inputs(tmp_path):
  published = firma_files.published_table(firma_files.PUBLISHED, "Table 7")
  paper_iid = published["FibFL"]["IID"]
  unit = {"args": {"seeds": 2, "rounds": 30, "device": "GPU X", "inputs": "unit"},
          "scenarios": {"iid": {"results": {"reference_code": {
              "iid/fibfl": _cell([paper_iid - 0.10, paper_iid - 0.08], [0.01, 0.02])}}}}}
  authors = {"args": {"seeds": 1, "rounds": 30, "device": "cpu", "inputs": "authors",
                      "note": "a check"},
             "scenarios": {"iid": {"results": {
                 "reference_code": {"iid/fibfl": _cell([paper_iid + 0.01], [0.01])},
                 "paper": {"iid/fedavg": _cell([0.5], [0.2])}}}}}
  paths = []
  for name, d in (("a.json", unit), ("b.json", authors)):
    (tmp_path / name).write_text(json.dumps(d))
    paths.append(str(tmp_path / name))
  out = tmp_path / "t.md"
  firma_files.write_table(paths, str(out))
  text = out.read_text()
  sections = [ln for ln in text.splitlines() if ln.startswith("## compat")]
  assert sections == [
      "## compat = reference_code, inputs (x − 0.5) / 0.5 as the authors' code "
      "(torchvision Normalize)",
      "## compat = reference_code, inputs in [0, 1]",
      "## compat = paper, inputs in [0, 1]"]
  # Two seeds 0.09 under the paper and one seed 0.01 over: too few seeds for a
  # verdict either way (the old rule called them "differs" and "agrees").
  head = f"| FibFL | IID | 10 | {paper_iid:.4f} | "
  assert (head + f"{paper_iid - 0.09:.4f} ± 0.0141 (n = 2) | GPU X | -0.0900 | – | "
          "±0.0200 | too few seeds |") in text
  assert (head + f"{paper_iid + 0.01:.4f} ± 0.0000 (n = 1) | cpu | +0.0100 | – | "
          "±0.0200 | too few seeds |") in text
  # Every published cell has a row in every section (6 methods × 7 scenarios × 2
  # tables); FedAvg and FedRep of reference_code are marked as reconstructed.
  rows = [ln for ln in text.splitlines() if ln.startswith("| FedAvg") or
          ln.startswith("| FibFL++ |")]
  assert len(rows) == 3 * 2 * 2 * 7
  assert sum(ln.startswith("| FedAvg (reconstructed) |") for ln in rows) == 2 * 2 * 7
  assert ("| reference_code | inputs in [0, 1] | GPU X | methods of the authors' code "
          "(RDFL, FibFL, FibFL+, FibFL++) | agrees 0 · differs 0 · inconclusive 0 · "
          "too few seeds 1 | agrees 0 · differs 0 · inconclusive 0 · too few seeds 1 |"
          ) in text
  assert "- FibFL IID: 2 seeds, R = 30, GPU X" in text
  assert "- FibFL IID: 1 seed, R = 30, cpu; a check" in text
  # The same cell from a second file (another device) gets its own row.
  (tmp_path / "c.json").write_text(json.dumps({**unit, "args": {**unit["args"],
                                                                "device": "cpu"}}))
  firma_files.write_table(paths + [str(tmp_path / "c.json")], str(out))
  assert out.read_text().count(head) == 3   # [0, 1]: GPU X and cpu; authors
  assert out.read_text().count(f"| FibFL | IID | – | {paper_iid:.4f} | – |") == 1  # paper
  mnist = tmp_path / "m.md"
  firma_files.write_table(paths, str(mnist), dataset="mnist")
  assert mnist.read_text().startswith("# FIRMA Tables 9–10 on the real MNIST-60k")


def test_fashion_mnist_table_has_the_fibfl_note_under_its_title(tmp_path):
  run = {"args": {"seeds": 1, "rounds": 30, "device": "cpu", "inputs": "unit"},
         "scenarios": {"iid": {"results": {"reference_code": {
             "iid/fibfl": _cell([0.72], [0.02])}}}}}
  run["scenarios"]["iid"]["results"]["reference_code"]["iid/fibfl"]["runs"][0]["curve"] = [
      0.6, 0.75, 0.72]
  path = tmp_path / "a.json"
  path.write_text(json.dumps(run))
  groups, _ = firma_files.json_groups([str(path)])
  note = firma_notes.note("fashion_mnist", groups)
  assert "FibFL / FibFL+" in note and "fedfrac-reproduce firma_authors" in note
  assert "FibFL++ runs at chance" in note
  # Its figures are those of the runs it is rendered with, not typed.
  assert "FibFL IID has 1 runs below (1 with [0, 1] inputs (1 on cpu))" in note
  assert "best at round 2 in 1 of 1 runs (rounds 2), final 0.720" in note
  assert "None of the 0 FibFL++ runs below ended at chance" in note
  assert firma_notes.note("mnist", groups) == ""
  block = [""] + note.split("\n") + [""]
  for dataset, name in (("fashion_mnist", "f.md"), ("mnist", "m.md")):
    firma_files.write_table([str(path)], str(tmp_path / name), dataset=dataset)
  lines = (tmp_path / "f.md").read_text().splitlines()
  assert lines[0].startswith("# FIRMA Tables 7–8") and lines[1:1 + len(block)] == block
  assert note not in (tmp_path / "m.md").read_text()
  # The committed table carries the note under its title (its figures, from its
  # own runs, are checked by tests/test_docs.py with the rest of the table).
  root = pathlib.Path(__file__).resolve().parents[3]
  committed = (root / "results" / "firma_fashion_mnist.md").read_text().splitlines()
  assert committed[2].startswith("**FibFL / FibFL+ below the paper.**")


def test_a_run_on_idx_files_is_kept_per_scenario_and_resumed(tmp_path, capsys):
  data = tmp_path / "fmnist"
  data.mkdir()
  write_mnist_idx(data, n_train=1400, n_test=300, gz=True)
  out = tmp_path / "f.json"
  argv = [f"--dir={data}", "--modes=reference_code", "--scenarios=iid",
          "--methods=fedavg", "--seeds=1", "--rounds=1", f"--json={out}"]
  firma_files.main(argv)
  d = json.loads(out.read_text())
  assert d["args"]["inputs"] == "authors" and d["args"]["device"]
  assert d["args"]["parallelism"] == "map"    # auto on a CPU; run in a worker process
  cell = d["scenarios"]["iid"]["results"]["reference_code"]["iid/fedavg"]
  assert cell["num_clients"] == 10      # the files' protocol, not digits' N = 5
  run = cell["runs"][0]
  assert np.isfinite(run["accuracy"]) and 0 <= run["accuracy"] <= 1
  capsys.readouterr()
  firma_files.main(argv)   # same flags: the finished scenario is kept, nothing runs
  assert "iid: already in" in capsys.readouterr().out
  assert json.loads(out.read_text()) == d
  firma_files.main(["--table", str(out), "--out", str(tmp_path / "t.md")])
  assert "| FedAvg (reconstructed) | IID |" in (tmp_path / "t.md").read_text()


def test_cpu_defaults_are_map_and_one_pinned_process_per_core(monkeypatch):
  from fedfrac_lab.reproduce import firma_forms
  monkeypatch.setattr(firma_forms, "cpu_backend", lambda: True)
  monkeypatch.setattr(firma_forms.os, "cpu_count", lambda: 2)
  assert firma_files.parallelism("auto") == "map"
  assert firma_files.workers(0) == 2
  assert (firma_files.parallelism("vmap"), firma_files.workers(1)) == ("vmap", 1)
  monkeypatch.setattr(firma_forms, "cpu_backend", lambda: False)
  assert (firma_files.parallelism("auto"), firma_files.workers(0)) == ("vmap", 1)


def test_a_negative_worker_count_is_one_error_line(tmp_path, capsys):
  with pytest.raises(SystemExit) as stopped:
    firma_files.main([f"--dir={tmp_path}", f"--json={tmp_path / 'f.json'}", "--workers=-1"])
  assert stopped.value.code == 2
  assert "--workers=-1: allowed values are 0" in capsys.readouterr().err


def test_campaign_form_gives_every_scenario_one_program_and_the_same_numbers(tmp_path):
  """The GPU campaign's FIRMA items (fedfrac_lab.campaign.items.run_firma): tables
  padded to the widths of every scenario and one step bucket make the programs
  of scenarios with equal client counts identical (so the compilation cache
  serves the next scenario), without changing a run's numbers beyond float
  rounding."""
  import argparse
  from fedfrac import runner
  from fedfrac_lab.reproduce import firma, firma_program
  data = tmp_path / "fmnist"
  data.mkdir()
  write_mnist_idx(data, n_train=1400, n_test=300, gz=True)

  def args(scenario, step_buckets, out=""):
    return argparse.Namespace(
        dataset="fashion_mnist", dir=str(data), modes="reference_code", scenarios=scenario,
        methods="fedavg", seeds=1, rounds=1, parallelism="vmap", workers=1,
        step_buckets=step_buckets, inputs="authors", note="", json=out, table="", out="",
        published=firma_files.PUBLISHED)

  widths = firma_files.dataset_widths(args("iid", 1))
  module = firma.config_module(firma_files.files_spec(args("iid", 1)))
  texts = {}
  for scenario in ("iid", "dir0.8"):
    feds = firma.common_shapes({"reference_code": firma.build_feds(
        module, "reference_code", [scenario], (0,))}, widths)["reference_code"]
    cfg, fs = feds[scenario]
    assert fs[0].client_index.shape[1] == widths["n_max"]
    sim = runner.build_simulation(cfg, "fedavg", fs[0])
    texts[scenario] = firma_program.make_program(sim, cfg.rounds).lower(
        firma_program.stack_arrays(fs, sim.training),
        firma_program.stack_states(sim, (0,), fs)).as_text()
  # Dirichlet 0.8 has unequal clients (10 here), IID equal ones: one program.
  assert texts["iid"] == texts["dir0.8"]

  # The campaign's items (fedfrac_lab.campaign.items.run_firma): the second scenario
  # loads the first one's program from the window's cache, and its numbers are
  # those of the engine's default form (other step buckets, unpadded tables).
  import jax
  from jax.experimental.compilation_cache import compilation_cache
  from fedfrac_lab.campaign import items
  hits = []
  listener = lambda event, **_: hits.append(event) if event.endswith("cache_hits") else None
  jax.monitoring.register_event_listener(listener)
  before = jax.config.jax_compilation_cache_dir
  try:
    cells = {}
    for scenario in ("iid", "dir0.8"):
      spec = {"dataset": "fashion_mnist", "data": str(data), "mode": "reference_code",
              "scenario": scenario, "method": "fedavg", "seeds": 1, "rounds": 1,
              "inputs": "authors"}
      count = len(hits)
      d = items.run_firma(spec, "", log=lambda m: None)
      cells[scenario] = (d, len(hits) - count)
  finally:
    jax.monitoring.unregister_event_listener(listener)
    jax.config.update("jax_compilation_cache_dir", before)
    compilation_cache.reset_cache()
    items._CACHE.clear()
  assert cells["dir0.8"][1] >= 1                 # the round program came from the cache
  campaign = cells["dir0.8"][0]
  assert campaign["args"]["step_buckets"] == 1
  b = campaign["scenarios"]["dir0.8"]["results"]["reference_code"]["dir0.8/fedavg"]["runs"][0]
  d = firma_files.run_scenarios(args("dir0.8", None, str(tmp_path / "default.json")),
                                log=lambda m: None)
  assert "step_buckets" not in d["args"]
  a = d["scenarios"]["dir0.8"]["results"]["reference_code"]["dir0.8/fedavg"]["runs"][0]
  assert 0.1 < a["accuracy"] <= 1
  np.testing.assert_allclose(a["curve"], b["curve"], atol=1e-5)
  np.testing.assert_allclose(a["gini"], b["gini"], atol=1e-5)


def test_step_buckets_below_one_is_one_error_line(tmp_path, capsys):
  with pytest.raises(SystemExit) as stopped:
    firma_files.main([f"--dir={tmp_path}", f"--json={tmp_path / 'f.json'}",
                      "--step-buckets=0"])
  assert stopped.value.code == 2
  assert "--step-buckets=0: allowed values are integers >= 1" in capsys.readouterr().err


def test_runs_that_end_at_chance_make_the_cell_collapsed_in_both_tables(tmp_path):
  d = {"args": {"seeds": 3, "rounds": 30, "device": "GPU X", "inputs": "authors"},
       "scenarios": {"iid": {"results": {"reference_code": {
           "iid/fibfl_pp": _cell([0.1028, 0.8788, 0.1024], [0.03, 0.01, 0.03]),
           "iid/rdfl": _cell([0.85, 0.86, 0.121], [0.01, 0.01, 0.01])}}}}}
  (tmp_path / "a.json").write_text(json.dumps(d))
  out = tmp_path / "t.md"
  firma_files.write_table([str(tmp_path / "a.json")], str(out))
  text = out.read_text()
  rows = [ln for ln in text.splitlines() if ln.startswith("| FibFL++ | IID |")]
  assert len(rows) == 2 and all(r.endswith("| collapsed: 2 of 3 at chance |") for r in rows)
  assert all("(n = 3) | GPU X |" in r for r in rows)
  rdfl = [ln for ln in text.splitlines() if ln.startswith("| RDFL | IID |")]
  assert not any("collapsed" in r for r in rdfl)    # 0.121 is above the margin
  assert text.count("*collapsed: k of n at chance*: k runs ended") == 2
  # Counted apart, not as inconclusive, in the summary and the verdict lines.
  counts = firma_files.tables([str(tmp_path / "a.json")])[("reference_code", "authors")]
  authors = counts["Table 7"]["methods of the authors' code (RDFL, FibFL, FibFL+, FibFL++)"]
  assert authors["collapsed"] == 1 and authors["inconclusive"] + authors["agrees"] + \
      authors["differs"] == 1
  assert "too few seeds 0 · collapsed 1 |" in text


def test_a_record_carries_its_own_at_chance_flag_and_old_ones_are_read_by_the_rule():
  old = [{"accuracy": 0.103}, {"accuracy": 0.5}]
  assert firma_files.at_chance(old) == 1
  # A record's own flag wins (a record of another number of classes, say).
  assert firma_files.at_chance([{"accuracy": 0.103, "at_chance": False},
                                {"accuracy": 0.5, "at_chance": True}]) == 1
  assert firma_files.at_chance([{"accuracy": 0.103, "at_chance": False}]) == 0


def _file(tmp_path, name, device, seeds, cells):
  d = {"args": {"seeds": seeds, "rounds": 30, "device": device, "inputs": "authors"},
       "scenarios": {}}
  for key, cell in cells.items():
    d["scenarios"].setdefault(key.split("/")[0], {"results": {"reference_code": {}}})[
        "results"]["reference_code"][key] = cell
  (tmp_path / name).write_text(json.dumps(d))
  return str(tmp_path / name)


def test_a_cell_run_twice_counts_once_with_the_less_favourable_verdict(tmp_path):
  paper = firma_files.published_table(firma_files.PUBLISHED, "Table 7")
  def near(p):                                               # agrees
    return _cell([p - 0.001, p, p + 0.001], [0.01] * 3)
  p, q = paper["RDFL"]["IID"], paper["RDFL"]["Dir 0.8"]
  far = _cell([p - 0.101, p - 0.1, p - 0.099], [0.01] * 3)   # differs
  one = _cell([q - 0.3], [0.01])                             # too few seeds
  paths = [_file(tmp_path, "a.json", "cpu", 3, {"iid/rdfl": near(p),
                                                 "dir0.8/rdfl": near(q)}),
           _file(tmp_path, "b.json", "GPU X", 3, {"iid/rdfl": far}),
           _file(tmp_path, "c.json", "cpu", 1, {"dir0.8/rdfl": one})]
  t = firma_files.tables(paths)[("reference_code", "authors")]["Table 7"]
  authors = t["methods of the authors' code (RDFL, FibFL, FibFL+, FibFL++)"]
  # IID: agrees on the CPU, differs on the GPU -> one cell, differs. Dir 0.8: a
  # 1-seed run beside a 3-seed one adds no verdict -> one cell, agrees.
  assert (authors["agrees"], authors["differs"], authors["too few seeds"]) == (1, 1, 0)
  text = firma_files.markdown(paths, "t.md")
  assert text.count("| RDFL | IID | 10 |") == 4          # the rows stay, one per run


def test_title_and_rows_carry_the_clients_each_run_kept(tmp_path):
  cells = {"iid/fedavg": _cell([0.8] * 3, [0.01] * 3),
           "ls2/fedavg": {**_cell([0.9] * 3, [0.01] * 3), "num_clients": 9},
           "ls3/fedavg": {**_cell([0.9] * 3, [0.01] * 3), "num_clients": 5}}
  path = _file(tmp_path, "a.json", "cpu", 3, cells)
  text = firma_files.markdown([path], "t.md")
  assert text.splitlines()[0].startswith(
      "# FIRMA Tables 7–8 on the real Fashion-MNIST (60,000 / 10,000), N = 10 "
      "(9 at LS K=2, 5 at LS K=3) (devices: cpu)")
  assert "| FedAvg (reconstructed) | LS K=3 | 5 | " in text
  assert "| FedAvg (reconstructed) | LS K=2 | 9 | " in text
  assert "| FedAvg (reconstructed) | IID | 10 | " in text
  only_ten = _file(tmp_path, "b.json", "cpu", 3, {"iid/fedavg": cells["iid/fedavg"]})
  assert ", N = 10 (devices: cpu)" in firma_files.markdown([only_ten], "t.md")


def test_the_note_reads_runs_shorter_than_the_rounds_it_quotes(tmp_path):
  cell = _cell([0.7], [0.02])
  cell["runs"][0]["curve"] = [0.7]                          # a 1-round run
  path = _file(tmp_path, "a.json", "cpu", 1, {"iid/fibfl": cell})
  note = firma_notes.note("fashion_mnist", firma_files.json_groups([path])[0])
  assert "accuracy 0.700 at round 1, best at round 2 in 0 of 1 runs" in note
