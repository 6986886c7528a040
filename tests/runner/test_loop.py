"""ff.run end to end: outputs, resume, chunk invariance, divergence, validation, CLI."""
from __future__ import annotations

import json
import os

import ml_collections
import numpy as np
import pytest

import fedfrac as ff
from fedfrac import config as config_lib
from tests import helpers

VOLATILE = ("wall_s", "executed_steps")   # timing / work done, not results


def _strip(rows):
  return [{k: v for k, v in r.items() if k not in VOLATILE} for r in rows]


def test_run_writes_outputs(tmp_path):
  c = helpers.tiny_config(seeds=(0, 1))
  res = ff.run(c, workdir=str(tmp_path))
  assert len(res.rows) == 2 * 2   # 2 seeds x (4 rounds / eval_every 2)
  assert len(res.round_rows) == 2 * 4
  for name in ("metrics.csv", "metrics.jsonl", "rounds.csv", "summary.json",
               "config.json", "accuracy.png", "summary.md"):
    assert os.path.getsize(tmp_path / name) > 0
  header = (tmp_path / "metrics.csv").read_text().splitlines()[0].split(",")
  assert header[:4] == ["method", "algorithm", "seed", "round"]
  assert "accuracy" in header and "cum_bytes_up" in header
  summary = json.loads((tmp_path / "summary.json").read_text())
  fedavg = summary["methods"]["fedavg"]
  assert set(fedavg["seeds"]) == {"0", "1"} and fedavg["mean"]["accuracy"]["n"] == 2
  assert all(np.isfinite(r["accuracy"]) for r in res.rows)


def test_resume_from_workdir_matches_uninterrupted_run(tmp_path):
  c = helpers.tiny_config(rounds=6, eval_every=2)
  full = ff.run(c, workdir=str(tmp_path / "full"))
  part = ff.run(c, workdir=str(tmp_path / "part"), stop_after_round=2)
  assert [r["round"] for r in part.rows] == [2]
  resumed = ff.run(c, workdir=str(tmp_path / "part"))
  assert _strip(resumed.rows) == _strip(full.rows)
  assert _strip(resumed.round_rows) == _strip(full.round_rows)


def test_eval_every_does_not_change_numbers():
  a = ff.run(helpers.tiny_config(rounds=4, eval_every=1))
  b = ff.run(helpers.tiny_config(rounds=4, eval_every=4))
  assert _strip(a.round_rows) == _strip(b.round_rows)
  assert _strip(a.rows)[-1] == _strip(b.rows)[-1]


def test_divergence_is_reported_not_silent():
  c = helpers.tiny_config(rounds=6, eval_every=1)
  c.client.lr = 1e6
  with pytest.warns(UserWarning, match="diverged"):
    res = ff.run(c)
  status = res.summary()["methods"]["fedavg"]["seeds"]["0"]["status"]
  assert status.startswith("diverged at round")
  c.on_divergence = "error"
  with pytest.raises(FloatingPointError, match="fedavg"):
    ff.run(c)


@pytest.mark.parametrize("key,value,match", [
    ("client.lr", -1.0, "config.client.lr=-1.0"),
    ("data.partition", "random", "config.data.partition='random'"),
    ("participation", 0.0, "config.participation=0.0"),
    ("model.name", "vgg", "config.model.name='vgg'"),
    ("rounds", 0, "config.rounds=0"),
    ("data.alpha", -0.5, "config.data.alpha=-0.5"),
    ("only", "fedx", "config.only='fedx'"),
])
def test_validation_names_key_value_and_allowed(key, value, match):
  c = helpers.tiny_config()
  with c.unlocked():
    c_key = c
    parts = key.split(".")
    for p in parts[:-1]:
      c_key = c_key[p]
    c_key[parts[-1]] = value
  with pytest.raises(config_lib.ConfigError, match=match.replace("(", r"\(")):
    ff.run(c)


def test_unknown_method_and_option_are_rejected():
  c = helpers.tiny_config()
  c.methods.fedavg.name = "fedmagic"
  with pytest.raises(config_lib.ConfigError, match="methods.fedavg.name='fedmagic'"):
    ff.run(c)
  c = helpers.tiny_config()
  c.methods.fedavg.server_lr = -2.0
  with pytest.raises(config_lib.ConfigError, match="methods.fedavg.server_lr=-2.0"):
    ff.run(c)
  c = helpers.tiny_config()
  c.methods.fedavg.mu = 0.1
  with pytest.raises(config_lib.ConfigError, match="unknown option"):
    ff.run(c)


def test_options_of_methods_not_selected_are_checked_before_compute():
  c = helpers.tiny_config()
  c.methods.fp = ml_collections.ConfigDict(dict(name="fedprox", muu=0.1))
  c.only = "fedavg"
  with pytest.raises(config_lib.ConfigError, match=r"methods.fp.muu=0.1: unknown option.*'mu'"):
    config_lib.validate(c)
  c.methods.fp = ml_collections.ConfigDict(dict(name="fedproxx"))
  with pytest.raises(config_lib.ConfigError, match="methods.fp.name='fedproxx'"):
    config_lib.validate(c)
  # A valid unselected method does not bring its participation rules along.
  c.methods.fp = ml_collections.ConfigDict(dict(name="fibfl"))
  c.participation = 0.5
  config_lib.validate(c)


def test_cli_with_overrides(tmp_path):
  cmd = ["--config=configs/quickstart.py",
         f"--workdir={tmp_path}", "--config.rounds=2", "--config.only=fedavg",
         "--config.progress=False", "--config.model.hidden=(16,)"]
  out = helpers.run_cli_in_process(cmd)
  assert out.returncode == 0, out.stderr[-2000:]
  assert "| fedavg |" in out.stdout
  rows = (tmp_path / "metrics.csv").read_text().splitlines()
  assert len(rows) == 1 + 2
  bad = helpers.run_cli_in_process(cmd[:-1] + ["--config.client.lr=-3.0"])
  assert bad.returncode != 0 and "config.client.lr=-3.0" in bad.stderr


def _close_rows(a, b, atol=1e-5):
  assert len(a) == len(b)
  for ra, rb in zip(_strip(a), _strip(b)):
    assert ra.keys() == rb.keys()
    for k in ra:
      if isinstance(ra[k], float):
        assert ra[k] == pytest.approx(rb[k], abs=atol, rel=1e-5), k
      else:
        assert ra[k] == rb[k], k


def test_run_many_over_seeds_equals_separate_runs():
  c = helpers.tiny_config(rounds=3, eval_every=1, seeds=(0, 1, 2))
  many = ff.run_many(c)
  assert [(r.method, r.seed) for r in many.records] == [("fedavg", s) for s in (0, 1, 2)]
  for seed in (0, 1, 2):
    single = ff.run(helpers.tiny_config(rounds=3, eval_every=1, seeds=(seed,)))
    _close_rows(many.record("fedavg", seed).rows, single.records[0].rows)


def test_run_many_over_an_option_grid_equals_separate_runs():
  c = helpers.tiny_config(rounds=2, eval_every=1, seeds=(0,))
  many = ff.run_many(c, grid={"server_lr": [0.5, 1.0]})
  assert many.methods() == ["fedavg[server_lr=0.5]", "fedavg[server_lr=1.0]"]
  for value in (0.5, 1.0):
    single_cfg = helpers.tiny_config(rounds=2, eval_every=1, seeds=(0,))
    single_cfg.methods.fedavg.server_lr = value
    single = ff.run(single_cfg)
    got = many.record(f"fedavg[server_lr={value}]", 0).rows
    want = [dict(r, method=f"fedavg[server_lr={value}]") for r in single.records[0].rows]
    _close_rows(got, want)
  with pytest.raises(config_lib.ConfigError, match="server_lr=-1"):
    ff.run_many(c, grid={"server_lr": [-1.0]})


def test_divergence_round_does_not_depend_on_eval_every():
  # Row 6: with eval_every=5 the status said round 5 while the loss was NaN from
  # round 1; training-side metrics are per round, so the round is exact.
  from fedfrac.runner.records import nonfinite_keys
  records = []
  for eval_every in (1, 5):
    c = helpers.tiny_config(rounds=5, eval_every=eval_every)
    c.client.lr = 1e6
    with pytest.warns(UserWarning, match="diverged"):
      records.append(ff.run(c).records[0])
  first_bad = next(r["round"] for r in records[1].round_rows if nonfinite_keys(r))
  assert first_bad < 5
  assert [rec.status for rec in records] == [f"diverged at round {first_bad}"] * 2


def test_on_divergence_error_writes_what_finished(tmp_path):
  # Row 7: the method that completed keeps its metrics and summary.
  c = helpers.diverging_config(rounds=2, eval_every=1)
  with pytest.raises(FloatingPointError, match="'wild'"):
    ff.run(c, workdir=str(tmp_path))
  summary = json.loads((tmp_path / "summary.json").read_text())
  assert summary["methods"]["fedavg"]["seeds"]["0"]["status"] == "ok"
  assert summary["methods"]["wild"]["seeds"]["0"]["status"].startswith("diverged")
  methods = {line.split(",")[0] for line in
             (tmp_path / "metrics.csv").read_text().splitlines()[1:]}
  assert "fedavg" in methods


@pytest.mark.parametrize("key,value,match", [
    ("seeds", (0, 0), "config.seeds=(0, 0): seed 0 is listed twice"),
    ("only", ",", "config.only=',': names no method label"),
    ("task.loss", "mse", "config.task.loss='mse': data.source='sklearn_digits' has "
                         "class labels"),
    ("data.split_seed", -5, "config.data.split_seed=-5: must be an integer >= 0"),
])
def test_silently_accepted_inputs_are_rejected(key, value, match):
  # Row 8 (and split_seed of row 9): each stops before compute with one line.
  c = helpers.tiny_config()
  target = c
  parts = key.split(".")
  for p in parts[:-1]:
    target = target[p]
  target[parts[-1]] = value
  with pytest.raises(config_lib.ConfigError) as e:
    ff.run(c)
  assert str(e.value).startswith(match) and "\n" not in str(e.value)


def test_empty_cohort_reports_no_training_metrics():
  # Row 11: with every client gone, train loss and grad norm were 0.0.
  c = helpers.tiny_config(rounds=2, eval_every=1)
  c.churn.p_leave = 1.0
  c.churn.p_join = 0.0
  record = ff.run(c).records[0]
  empty = [r for r in record.round_rows if r["cohort"] == 0]
  assert empty, [r["cohort"] for r in record.round_rows]
  for r in empty:
    assert not [k for k in r if k.startswith("train_")], r
    assert r["executed_steps"] == 0, r    # nobody trained (before: every masked step)
  assert record.status == "ok"     # absent metrics are not a divergence


@pytest.mark.parametrize("key,value,match", [
    ("data.input_std", (0.0,), r"config.data.input_std=\(0.0,\): every value must be > 0"),
    ("data.input_mean", ("a",), r"config.data.input_mean=\('a',\): must be a tuple"),
    ("data.input_mean", (0.1, 0.2), r"config.data.input_mean=\(0.1, 0.2\): needs 1 value "
     r"or one per input channel \(1 for inputs"),
])
def test_input_normalisation_is_checked_before_compute(key, value, match):
  c = helpers.tiny_config()
  c.data.input_mean, c.data.input_std = (0.5,), (0.5,)
  c.data[key.split(".")[1]] = value
  if key == "data.input_mean" and len(value) == 2:
    c.data.input_std = (1.0, 1.0)
  with pytest.raises(config_lib.ConfigError, match=match):
    ff.run(c)
