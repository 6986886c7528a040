"""A workdir belongs to one experiment (fedfrac.runner.workdir): refusal of a
different config, --overwrite, every method's results kept, unwritable workdirs,
partial runs and the resume line (issue rows 2, 3, 4, 13; run status)."""
from __future__ import annotations

import csv
import json
import os

import ml_collections
import pytest

import fedfrac as ff
from fedfrac.config import ConfigError
from fedfrac.runner import workdir as workdir_lib
from tests import helpers


def _config(**overrides):
  return helpers.tiny_config(**{"rounds": 2, "eval_every": 1, **overrides})


def _metrics(path):
  with open(path / "metrics.csv") as f:
    return list(csv.DictReader(f))


def test_a_different_config_is_refused_before_compute(tmp_path):
  ff.run(_config(), workdir=str(tmp_path))
  before = (tmp_path / "metrics.csv").read_text()
  config_before = (tmp_path / "config.json").read_text()
  # Row 2: another learning rate. Row 3: another model shape.
  for key, value, shown in [("client.lr", 0.01, "client.lr 0.1 -> 0.01"),
                            ("model.hidden", (8,), "model.hidden [16] -> [8]")]:
    with pytest.raises(ConfigError, match="holds results of a different config") as e:
      ff.run(_config(**{key: value}), workdir=str(tmp_path))
    assert shown in str(e.value) and "--overwrite" in str(e.value)
    assert "\n" not in str(e.value)
  # Nothing was touched: the old results and config stay as they were.
  assert (tmp_path / "metrics.csv").read_text() == before
  assert (tmp_path / "config.json").read_text() == config_before


def test_a_method_option_change_is_refused_and_overwrite_starts_afresh(tmp_path):
  ff.run(_config(), workdir=str(tmp_path))
  c = _config()
  c.methods.fedavg.server_lr = 0.5
  with pytest.raises(ConfigError, match="methods.fedavg.options.server_lr 1.0 -> 0.5"):
    ff.run(c, workdir=str(tmp_path))
  res = ff.run(c, workdir=str(tmp_path), overwrite=True)
  rows = _metrics(tmp_path)
  assert len(rows) == 2
  assert float(rows[-1]["accuracy"]) == pytest.approx(res.rows[-1]["accuracy"])
  stored = json.loads((tmp_path / "experiment.json").read_text())
  assert stored["methods"]["fedavg"]["options"]["server_lr"] == 0.5


def test_output_settings_and_extending_rounds_are_allowed(tmp_path):
  ff.run(_config(), workdir=str(tmp_path))
  res = ff.run(_config(rounds=4, eval_every=2, progress=False, name="other"),
               workdir=str(tmp_path))
  assert [r["round"] for r in res.record("fedavg", 0).round_rows] == [1, 2, 3, 4]


def test_every_method_and_seed_is_kept(tmp_path):
  # Row 4: a second method (and a second seed) in the same workdir adds rows.
  c = _config()
  c.methods.fedprox = ml_collections.ConfigDict(dict(name="fedprox"))
  c.only = "fedavg"
  ff.run(c, workdir=str(tmp_path))
  c.only = "fedprox"
  ff.run(c, workdir=str(tmp_path))
  c.only = "fedavg"
  c.seeds = (1,)
  ff.run(c, workdir=str(tmp_path))
  rows = _metrics(tmp_path)
  assert sorted({(r["method"], r["seed"]) for r in rows}) == [
      ("fedavg", "0"), ("fedavg", "1"), ("fedprox", "0")]
  summary = json.loads((tmp_path / "summary.json").read_text())
  assert set(summary["methods"]) == {"fedavg", "fedprox"}
  assert set(summary["methods"]["fedavg"]["seeds"]) == {"0", "1"}


def test_run_many_checks_the_fingerprint_and_keeps_every_run(tmp_path):
  ff.run(_config(), workdir=str(tmp_path))
  with pytest.raises(ConfigError, match="client.lr 0.1 -> 0.01"):
    ff.run_many(_config(**{"client.lr": 0.01}), seeds=(0, 1), workdir=str(tmp_path))
  res = ff.run_many(_config(), seeds=(1, 2), workdir=str(tmp_path))
  rows = _metrics(tmp_path)
  # The earlier ``run`` (seed 0) and the batched seeds 1 and 2 are all kept.
  assert sorted({r["seed"] for r in rows}) == ["0", "1", "2"]
  last = [r for r in rows if r["seed"] == "2"][-1]
  assert float(last["accuracy"]) == pytest.approx(res.record("fedavg", 2).rows[-1]["accuracy"])


def test_results_without_a_fingerprint_are_not_mixed(tmp_path):
  (tmp_path / "metrics.csv").write_text("method\n")
  with pytest.raises(ConfigError, match="without experiment.json"):
    ff.run(_config(), workdir=str(tmp_path))


@pytest.mark.parametrize("kind", ["file_in_place", "under_a_file"])
def test_unwritable_workdir_is_one_line(tmp_path, kind):
  # Row 13: raw OS tracebacks before; now a ConfigError naming the workdir.
  blocker = tmp_path / "file"
  blocker.write_text("x")
  target = blocker if kind == "file_in_place" else blocker / "sub"
  with pytest.raises(ConfigError, match=f"--workdir={target}: cannot write there"):
    ff.run(_config(), workdir=str(target))


def test_overwrite_removes_only_what_runs_write(tmp_path):
  ff.run(_config(), workdir=str(tmp_path))
  (tmp_path / "notes.txt").write_text("mine")
  workdir_lib.clear(str(tmp_path))
  assert sorted(os.listdir(tmp_path)) == ["notes.txt"]


def test_stop_after_round_is_partial_and_resume_says_so(tmp_path, capsys):
  c = _config(rounds=4, eval_every=1)
  res = ff.run(c, workdir=str(tmp_path), stop_after_round=2)
  assert res.records[0].status == "partial"
  assert "partial" in res.table()
  summary = json.loads((tmp_path / "summary.json").read_text())
  assert summary["methods"]["fedavg"]["seeds"]["0"]["status"] == "partial"
  assert {r["status"] for r in _metrics(tmp_path)} == {"partial"}
  capsys.readouterr()
  res = ff.run(c, workdir=str(tmp_path))
  err = capsys.readouterr().err
  assert "resuming fedavg seed 0 from round 2" in err.splitlines()
  assert res.records[0].status == "ok"
  assert {r["status"] for r in _metrics(tmp_path)} == {"ok"}


def test_negative_stop_after_round_is_rejected(tmp_path):
  with pytest.raises(ConfigError, match="stop_after_round=-1: must be an integer >= 1"):
    ff.run(_config(), workdir=str(tmp_path), stop_after_round=-1)
  assert not (tmp_path / "metrics.csv").exists()
