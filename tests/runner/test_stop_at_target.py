"""``config.stop_at_target``: a run ends after the chunk whose evaluation first
reaches its target, with the rows of the full run up to there, and stays
finished when resumed or extended."""
from __future__ import annotations

import json
import os

import jax
import numpy as np
import pytest

import fedfrac as ff
from fedfrac import config as config_lib
from tests import helpers
from tests.data.test_bev_federated import bev_config

ROUNDS, EVAL_EVERY, TARGET = 12, 2, 0.6


def _config(**overrides):
  c = helpers.tiny_config(rounds=ROUNDS, eval_every=EVAL_EVERY, **overrides)
  c.target_accuracy = overrides.get("target_accuracy", TARGET)
  return c


def _stop(c):
  c = c.copy_and_resolve_references()
  c.stop_at_target = True
  return c


def _strip(rows):
  return [{k: v for k, v in r.items() if k != "wall_s"} for r in rows]


def _steps(workdir):
  return sorted(os.listdir(os.path.join(workdir, "checkpoints", "fedavg", "seed_0")))


def test_stopped_run_is_the_full_run_up_to_its_target():
  c = _config()
  full = ff.run(c)
  stopped = ff.run(_stop(c))
  rec, whole = stopped.records[0], full.records[0]
  reached = full.summary()["methods"]["fedavg"]["seeds"]["0"]["rounds_to_target"]
  assert reached is not None and reached < ROUNDS   # the target is met before the end
  # It stopped within one chunk after the target round, before its last round.
  assert rec.stopped["round"] - reached in range(EVAL_EVERY)
  assert rec.stopped["round"] < ROUNDS
  assert rec.stopped["reason"] == f"target_accuracy {TARGET:g} reached at round {reached}"
  assert rec.status == "ok"
  # Bit for bit the full run's rows up to the round it stopped at.
  n = rec.stopped["round"]
  assert rec.rows[-1]["round"] == rec.round_rows[-1]["round"] == n
  assert _strip(rec.rows) == _strip([r for r in whole.rows if r["round"] <= n])
  assert _strip(rec.round_rows) == _strip(whole.round_rows[:n])
  at = next(r for r in whole.rows if r["round"] == reached)
  assert rec.stopped["rounds_to_target"] == reached
  assert rec.stopped["bytes_up_to_target"] == at["cum_bytes_up"] > 0
  entry = stopped.summary()["methods"]["fedavg"]["seeds"]["0"]
  assert entry["rounds_to_target"] == reached and entry["rounds_done"] == n
  assert entry["bytes_up_to_target"] == at["cum_bytes_up"]
  assert entry["stopped"] == {"round": n, "reason": rec.stopped["reason"]}
  assert entry["status"] == "ok"
  assert f"ok, stopped at target (round {n})" in stopped.table()
  # The full run's summary has the same bytes to its target and no stop.
  full_entry = full.summary()["methods"]["fedavg"]["seeds"]["0"]
  assert full_entry["bytes_up_to_target"] == at["cum_bytes_up"]
  assert "stopped" not in full_entry and whole.stopped is None


def test_stopped_run_resumes_and_stays_finished(tmp_path, capfd):
  c = _stop(_config())
  alone = ff.run(c, workdir=str(tmp_path / "alone")).records[0]
  n = alone.stopped["round"]
  assert n > EVAL_EVERY     # so that the first chunk leaves it running
  cut = str(tmp_path / "cut")
  part = ff.run(c, workdir=cut, stop_after_round=EVAL_EVERY).records[0]
  assert part.status == "partial" and part.stopped is None
  resumed = ff.run(c, workdir=cut).records[0]
  assert _strip(resumed.round_rows) == _strip(alone.round_rows)
  assert _strip(resumed.rows) == _strip(alone.rows)
  assert resumed.stopped == alone.stopped and resumed.status == "ok"
  kept = json.loads((tmp_path / "cut" / "runs" / "fedavg" / "seed_0.json").read_text())
  assert kept["stopped"] == alone.stopped and kept["status"] == "ok"
  summary = json.loads((tmp_path / "cut" / "summary.json").read_text())
  assert summary["methods"]["fedavg"]["seeds"]["0"]["stopped"]["round"] == n
  # Run again, and with more rounds: finished by reason of its target, no round runs.
  steps = _steps(cut)
  capfd.readouterr()
  for rounds in (ROUNDS, 2 * ROUNDS):
    c.rounds = rounds
    again = ff.run(c, workdir=cut).records[0]
    assert "resuming" not in capfd.readouterr().err
    assert _strip(again.round_rows) == _strip(alone.round_rows)
    assert again.stopped == alone.stopped and again.status == "ok"
    assert _steps(cut) == steps
  # A record lost is rebuilt from the checkpoint as stopped, not partial.
  os.remove(tmp_path / "cut" / "runs" / "fedavg" / "seed_0.json")
  rebuilt = ff.run(c, workdir=cut).records[0]
  assert rebuilt.status == "ok" and rebuilt.stopped == alone.stopped
  assert "recomputed it from its checkpoint" in capfd.readouterr().err
  # Without stop_at_target the run goes on from where it stopped, as the full run.
  c.rounds, c.stop_at_target = ROUNDS, False
  on = ff.run(c, workdir=cut).records[0]
  whole = ff.run(c).records[0]
  assert on.stopped is None and on.round_rows[-1]["round"] == ROUNDS
  assert _strip(on.round_rows) == _strip(whole.round_rows)
  assert _strip(on.rows) == _strip(whole.rows)


def test_batch_stops_when_every_run_has_and_each_keeps_its_own_stop():
  c = _config(seeds=(0, 2), target_accuracy=0.7)
  full = ff.run_many(c)
  many = ff.run_many(_stop(c))
  stops = {}
  for seed in (0, 2):
    rec, whole = many.record("fedavg", seed), full.record("fedavg", seed)
    reached = whole.curve("accuracy")[0][whole.curve("accuracy")[1] >= 0.7][0]
    assert rec.stopped["rounds_to_target"] == reached
    assert rec.stopped["round"] - reached in range(EVAL_EVERY)
    stops[seed] = rec.stopped["round"]
    assert _strip(rec.round_rows) == _strip(whole.round_rows[:stops[seed]])
    assert _strip(rec.rows) == _strip([r for r in whole.rows if r["round"] <= stops[seed]])
  assert len(set(stops.values())) == 2    # the first to stop waited for the other
  # The parameters kept are those the run stopped with, as it would alone.
  first = min(stops, key=stops.get)
  alone = ff.run(_stop(_config(seeds=(first,), target_accuracy=0.7)))
  assert alone.records[0].stopped == many.record("fedavg", first).stopped
  for a, b in zip(jax.tree.leaves(alone.final_params("fedavg")),
                  jax.tree.leaves(many.final_params("fedavg", first))):
    np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)


def test_regression_run_stops_at_target_rmse():
  c = bev_config(rounds=6, eval_every=2, target_rmse=1e9, stop_at_target=True)
  rec = ff.run(c).records[0]
  assert rec.stopped["round"] == 2 and rec.round_rows[-1]["round"] == 2
  assert rec.stopped["reason"] == "target_rmse 1e+09 reached at round 2"


@pytest.mark.parametrize("overrides,match", [
    (dict(stop_at_target=1), r"^config.stop_at_target=1: must be True or False$"),
    (dict(stop_at_target=True, target_accuracy=0.0),
     r"^config.stop_at_target=True: needs a target: set target_accuracy in \(0, 1\]"),
    (dict(stop_at_target=True, eval_every=ROUNDS),
     r"^config.stop_at_target=True: needs an evaluation before the last round to stop "
     r"at: eval_every=12 evaluates only after round 12 of rounds=12; set eval_every < "
     r"rounds$"),
])
def test_bad_input_is_one_line_before_compute(overrides, match):
  c = _config()
  with c.unlocked():
    for k, v in overrides.items():
      del c[k]     # a value of another type too (a config built as a dict)
      c[k] = v
  with pytest.raises(config_lib.ConfigError, match=match) as e:
    ff.run(c)
  assert "\n" not in str(e.value)


def test_regression_without_target_rmse_is_refused():
  c = bev_config(stop_at_target=True)
  with pytest.raises(config_lib.ConfigError,
                     match=r"^config.stop_at_target=True: needs a target: set target_rmse "
                           r"> 0 \(target_rmse=0 is off\)$"):
    config_lib.validate(c)


def test_command_line_stops_at_target(tmp_path):
  cmd = ["--config=configs/quickstart.py",
         f"--workdir={tmp_path}", "--config.rounds=30", "--config.only=fedavg",
         "--config.progress=False", "--config.model.hidden=(16,)",
         "--config.target_accuracy=0.5", "--config.stop_at_target=True"]
  out = helpers.run_cli_in_process(cmd)
  assert out.returncode == 0, out.stderr[-2000:]
  assert "ok, stopped at target (round" in out.stdout
  entry = json.loads((tmp_path / "summary.json").read_text())["methods"]["fedavg"]
  stopped = entry["seeds"]["0"]["stopped"]
  assert stopped["round"] < 30 and stopped["round"] == entry["seeds"]["0"]["rounds_done"]
  bad = helpers.run_cli_in_process(cmd + ["--config.eval_every=30"])
  assert bad.returncode == 2
  assert bad.stderr.strip().splitlines() == [
      "error: config.stop_at_target=True: needs an evaluation before the last round to "
      "stop at: eval_every=30 evaluates only after round 30 of rounds=30; set eval_every "
      "< rounds"]


def test_sweep_points_and_table_say_which_runs_stopped():
  from fedfrac.runner.records import RunRecord
  from fedfrac.sweep import tables
  rows = [{"round": r, "accuracy": a, "cum_bytes_up": 10.0 * r}
          for r, a in ((2, 0.4), (4, 0.7))]
  stopped = [RunRecord("fedavg", "fedavg", s, rows[:n], rows[:n],
                       stopped={"round": 4, "reason": "target_accuracy 0.6 reached at "
                                "round 4", "rounds_to_target": 4, "bytes_up_to_target": b})
             for s, n, b in ((0, 2, 40.0), (1, 2, 60.0))]
  ran = RunRecord("fedavg", "fedavg", 2, rows, rows)
  entry = tables.summarize(stopped + [ran], ["accuracy"])["fedavg"]
  assert entry["statuses"] == ["ok", "ok, stopped at target"]
  assert entry["rounds_to_target"]["mean"] == 4 and entry["rounds_to_target"]["n"] == 2
  assert entry["bytes_up_to_target"]["mean"] == 50.0
  assert "stopped" not in tables.point_record(ran, ["accuracy"], {"axes": {}, "label": None},
                                              None)
