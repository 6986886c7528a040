"""Files written by a run: the status column, no NaN in any metrics file, and
optional TensorBoard events."""
from __future__ import annotations

import csv
import json
import math
import warnings

import ml_collections
import pytest

import fedfrac as ff
from fedfrac.runner import outputs, tensorboard
from fedfrac.runner.records import nonfinite_keys
from tests import helpers


def _diverging_config():
  """fedavg with a huge learning rate (diverges) beside a stable fedavg."""
  c = helpers.tiny_config(rounds=6, eval_every=1, seeds=(0,))
  c.client.lr = 1e6
  c.methods.stable = ml_collections.ConfigDict(
      dict(name="fedavg", client=dict(lr=0.1)))
  return c


def _csv_rows(path):
  with open(path) as f:
    return list(csv.DictReader(f))


def _no_nan_json(value):
  if isinstance(value, float):
    return not math.isnan(value)
  if isinstance(value, dict):
    return all(_no_nan_json(v) for v in value.values())
  if isinstance(value, list):
    return all(_no_nan_json(v) for v in value)
  return True


def test_diverged_run_writes_last_finite_row_with_status_and_no_nan(tmp_path):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    res = ff.run(_diverging_config(), workdir=str(tmp_path))
  bad = res.record("fedavg", 0)
  assert bad.diverged and not res.record("stable", 0).diverged
  # In memory the diverged evaluation is kept (it is what tripped the check).
  assert nonfinite_keys(bad.rows[-1])

  rows = _csv_rows(tmp_path / "metrics.csv")
  assert list(rows[0])[:5] == ["method", "algorithm", "seed", "round", "status"]
  by_method = {m: [r for r in rows if r["method"] == m] for m in ("fedavg", "stable")}
  # Every row of the diverged run names the round it diverged at.
  assert {r["status"] for r in by_method["fedavg"]} == {bad.status}
  assert bad.status.startswith("diverged at round ")
  assert {r["status"] for r in by_method["stable"]} == {"ok"}
  assert len(by_method["stable"]) == 6
  finite = bad.finite_rows()
  if finite:   # the diverged run stops at its last finite evaluation
    assert [int(r["round"]) for r in by_method["fedavg"]] == [r["round"] for r in finite]
  else:        # diverged at once: one row naming the run, no metric values
    [only] = by_method["fedavg"]
    assert int(only["round"]) == bad.rows[0]["round"]
    assert only["accuracy"] == "" and only["loss"] == ""
  for name in ("metrics.csv", "rounds.csv"):
    for row in _csv_rows(tmp_path / name):
      assert all(v.lower() != "nan" for v in row.values()), (name, row)
  for line in (tmp_path / "metrics.jsonl").read_text().splitlines():
    row = json.loads(line)   # strict JSON: NaN would not parse as a number
    assert _no_nan_json(row) and row["status"] in ("ok", bad.status)
  text = (tmp_path / "summary.json").read_text()
  assert "NaN" not in text and "Infinity" not in text
  assert _no_nan_json(json.loads(text))


def _row(r, acc, loss, method="m"):
  return {"method": method, "algorithm": "fedavg", "seed": 0, "round": r,
          "accuracy": acc, "loss": loss}


def test_written_rows_end_at_last_finite_row():
  ok = ff.runner.RunRecord("ok", "fedavg", 0, [_row(1, 0.5, 1.0, "ok"), _row(2, 0.6, 0.9, "ok")],
                           [], "ok")
  bad = ff.runner.RunRecord("m", "fedavg", 0,
                            [_row(1, 0.5, 1.0), _row(2, 0.4, 3.0),
                             _row(3, 0.1, float("inf"))], [], "diverged at round 3")
  rows = outputs.written_rows(ff.Results(None, [ok, bad]))
  # The diverged run's rows end at round 2 and carry the round it diverged at (3);
  # before, they said only "diverged".
  assert [(r["method"], r["round"], r["status"]) for r in rows] == [
      ("ok", 1, "ok"), ("ok", 2, "ok"), ("m", 1, "diverged at round 3"),
      ("m", 2, "diverged at round 3")]
  assert rows[-1]["loss"] == 3.0


def test_csv_writes_nan_as_empty_cell():
  text = outputs.csv_text([{"method": "m", "algorithm": "a", "seed": 0, "round": 1,
                            "x": float("nan"), "y": 1.5}])
  row = next(csv.DictReader(text.splitlines()))
  assert row["x"] == "" and row["y"] == "1.5"


def test_tensorboard_events_round_trip(tmp_path):
  pytest.importorskip("tensorboardX",
                      reason=f"optional extra fedfrac[{tensorboard.EXTRA}] not installed")
  c = helpers.tiny_config(rounds=4, eval_every=2, seeds=(0,))
  c.log.tensorboard = True
  res = ff.run(c, workdir=str(tmp_path))
  rec = res.record("fedavg", 0)
  scalars = tensorboard.read_scalars(tensorboard.run_logdir(str(tmp_path), "fedavg", 0))
  assert [step for step, _ in scalars["accuracy"]] == [r["round"] for r in rec.rows]
  for (_, got), row in zip(scalars["accuracy"], rec.rows):
    assert got == pytest.approx(row["accuracy"], rel=1e-6)
  assert [step for step, _ in scalars["round/train_loss"]] == [1, 2, 3, 4]
  assert scalars["round/train_loss"][-1][1] == pytest.approx(
      rec.round_rows[-1]["train_loss"], rel=1e-6)


def test_tensorboard_off_by_default(tmp_path):
  ff.run(helpers.tiny_config(rounds=2, seeds=(0,)), workdir=str(tmp_path))
  assert not (tmp_path / "tensorboard").exists()


def test_the_summary_of_a_run_diverged_at_once_holds_no_final_value(tmp_path):
  # Before: summary.md showed accuracy 0.1003 for a run whose only metrics.csv row
  # is empty (its round-1 evaluation was not finite).
  import re
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    res = ff.run(_diverging_config(), workdir=str(tmp_path))
  bad = res.record("fedavg", 0)
  assert bad.status == "diverged at round 1" and not bad.finite_rows()
  [only] = [r for r in _csv_rows(tmp_path / "metrics.csv") if r["method"] == "fedavg"]
  assert only["accuracy"] == ""
  summary = json.loads((tmp_path / "summary.json").read_text())["methods"]["fedavg"]
  assert summary["seeds"]["0"]["final"] == {} and summary["mean"]["accuracy"]["mean"] is None
  row = next(l for l in (tmp_path / "summary.md").read_text().splitlines()
             if l.startswith("| fedavg |"))
  assert re.match(r"\| fedavg \| \w+ \| n/a \| n/a \| n/a \|", row), row


def test_a_full_disk_names_the_figure_it_could_not_write(tmp_path, monkeypatch):
  # Before: a disk that filled while writing ranking.png named accuracy.png.
  import errno

  from fedfrac.runner import checkpoint, plots
  real = plots.Figure.savefig

  def savefig(self, path, *args, **kwargs):
    if "ranking" in str(path):
      raise OSError(errno.ENOSPC, "No space left on device", str(path))
    return real(self, path, *args, **kwargs)
  monkeypatch.setattr(plots.Figure, "savefig", savefig)
  c = helpers.tiny_config(rounds=1, eval_every=1)
  with pytest.raises(checkpoint.DiskFullError) as e:
    ff.run(c, workdir=str(tmp_path))
  assert str(e.value).startswith(f"no space left on the device to write "
                                 f"{tmp_path}/ranking.png ("), str(e.value)
  assert not list(tmp_path.glob("*.tmp*"))
