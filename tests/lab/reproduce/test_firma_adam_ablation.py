"""fedfrac-reproduce firma_adam_ablation: each (variant, seed) is one firma_authors
fedfrac command, run in its own process and kept with its command and its printed
output; a run already in the file with the same command is not run again."""
from __future__ import annotations

import json
import os

import pytest

from fedfrac_lab.reproduce import PAPERS
from fedfrac_lab.reproduce import firma_adam_ablation as faa
from tests.data.test_files import write_mnist_idx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


@pytest.mark.parametrize("argv,message", [
    (["--runs=keep:0,keep:7"], "--runs: 'keep:7' is not a run; allowed: keep:0"),
    (["--runs=zero:0"], "--runs: 'zero:0' is not a run"),
    (["--rounds=6"], "--rounds: 6; allowed: 1 to 5"),
])
def test_bad_input_is_one_error_line_before_any_run(argv, message, tmp_path, capsys):
  with pytest.raises(SystemExit) as e:
    faa.main([f"--out={tmp_path / 'x.json'}", *argv])
  assert e.value.code == 2
  assert message in capsys.readouterr().err.strip().splitlines()[-1]
  assert not (tmp_path / "x.json").exists()


def test_a_tiny_run_is_written_with_its_command_and_kept_on_a_rerun(tmp_path, monkeypatch):
  """One real run (keep, seed 0) for 1 round on written IDX files, in its own
  process; then a rerun keeps it and runs only the run not yet in the file."""
  data = tmp_path / "idx"
  data.mkdir()
  write_mnist_idx(data, n_train=1400, n_test=300, gz=True)
  out = tmp_path / "ablation.json"
  assert faa.main([f"--out={out}", f"--data={data}", "--rounds=1", "--runs=keep:0"]) == 0
  doc = json.loads(out.read_text())
  assert doc["command"] == (f"fedfrac-reproduce firma_adam_ablation --out={out} "
                            f"--rounds=1 --data={data}")
  (run,) = doc["runs"]
  assert run["command"] == (
      "fedfrac-reproduce firma_authors fedfrac --method=fibfl_pp --rounds=1 "
      "--set=warmup_rounds=5 --set=warmup_optimizer=keep --seed=0 --live-units "
      f"--data={data}")
  assert (run["variant"], run["seed"]) == ("keep", 0)
  assert len(run["curve"]) == 1 and 0.0 <= run["curve"][0] <= 1.0
  (units,) = run["live_units"]
  assert len(units) == 10 and all(isinstance(u, int) and 0 <= u <= 128 for u in units)
  assert 0 < run["wall_s"] <= run["process_wall_s"]

  ran = []

  def fake(r, rounds, data_dir):
    ran.append(r.name)
    return {"variant": r.variant, "seed": r.seed, "command": r.command(rounds, data_dir),
            "curve": [0.1], "live_units": [[0] * 10], "wall_s": 1.0, "process_wall_s": 2.0}

  monkeypatch.setattr(faa, "run_one", fake)
  assert faa.main([f"--out={out}", f"--data={data}", "--rounds=1",
                   "--runs=reset:0,keep:0"]) == 0
  assert ran == ["reset:0"]                               # keep:0 kept
  doc = json.loads(out.read_text())
  assert [(r["variant"], r["seed"]) for r in doc["runs"]] == [("keep", 0), ("reset", 0)]
  assert doc["runs"][0] == run
  # more rounds is another command: that run goes again
  faa.main([f"--out={out}", f"--data={data}", "--rounds=2", "--runs=keep:0"])
  assert ran[-1] == "keep:0"


def test_the_committed_file_names_the_commands_that_remake_it():
  with open(os.path.join(ROOT, faa.OUT), encoding="utf-8") as f:
    doc = json.load(f)
  assert doc["command"] == f"fedfrac-reproduce firma_adam_ablation --out={faa.OUT}"
  assert [(r["variant"], r["seed"]) for r in doc["runs"]] == [
      (r.variant, r.seed) for r in faa.RUNS]
  for run in doc["runs"]:
    assert run["command"] == faa.Run(run["variant"], run["seed"]).command(
        faa.ROUNDS, faa.DATA)
    assert len(run["curve"]) == faa.ROUNDS == len(run["live_units"])
  assert PAPERS["firma_adam_ablation"] is faa


def test_the_firma_page_renders_the_ablation_from_its_file():
  """The FIRMA guide page quotes the ablation through its generated block, the
  same account design.md §3.3 renders, every accuracy read from the file."""
  from fedfrac_lab.reproduce import doc_blocks_design_runs as runs_doc
  text = runs_doc.firma_page_adam_ablation()
  runs = runs_doc.ablation_runs()
  escaped = [r["curve"][-1] for r in runs["keep"].values() if r["curve"][-1] > 0.2]
  assert escaped and all(f"{a:.3f}" in text for a in escaped)
  assert "``keep``" in text and "replay" not in text       # reST, and no file it lacks
  with open(os.path.join(ROOT, runs_doc.FIRMA_PAGE), encoding="utf-8") as f:
    page = " ".join(f.read().split())
  assert " ".join(text.split()) in page
