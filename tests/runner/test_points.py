"""Sweep point files are verified (fedfrac.runner.points.PointStore): a
truncated, edited or foreign point is named in one line and run again, never
tabulated nor a JSONDecodeError; a damaged sweep.json is one line. No compute."""
from __future__ import annotations

import json

import pytest

from fedfrac.runner import points as points_lib


def _store(root, overwrite=False):
  return points_lib.PointStore(str(root), {"config": {"rounds": 2}}, overwrite)


def _record(accuracy):
  return {"metrics": {"accuracy": accuracy}, "status": "ok", "seed": 0}


@pytest.mark.parametrize("damage,reason", [
    ("truncate", "truncated or not JSON"), ("edit", "checksum mismatch"),
    ("move", "not this point's file")])
def test_a_damaged_point_is_run_again_with_one_line(tmp_path, capsys, damage, reason):
  store = _store(tmp_path)
  store.write("a", _record(0.5))
  store.write("b", _record(0.75))
  path = tmp_path / "points" / "a.json"
  if damage == "truncate":      # before: json.JSONDecodeError stopped the sweep
    path.write_text(path.read_text()[:40])
  elif damage == "edit":        # before: the table showed 0.99
    saved = json.loads(path.read_text())
    saved["record"]["metrics"]["accuracy"] = 0.99
    path.write_text(json.dumps(saved))
  else:                         # another point's file under this name
    path.write_text((tmp_path / "points" / "b.json").read_text())
  capsys.readouterr()
  assert _store(tmp_path).done() == {"b"}
  err = capsys.readouterr().err.splitlines()
  assert err == [f"sweep points in {tmp_path}/points: 1 failed verification (1 {reason}: "
                 f"a.json); running it again"]
  with pytest.raises(points_lib.SweepMismatch, match=f"a.json' failed verification "
                     rf"\({reason}\); rerun the same command"):
    store.load("a")
  store.write("a", _record(0.5))            # run again: verified
  assert store.load("a") == _record(0.5) and store.done() == {"a", "b"}


def test_a_damaged_sweep_file_is_one_line(tmp_path):
  _store(tmp_path).write("a", _record(0.5))
  manifest = tmp_path / "sweep.json"
  manifest.write_text(manifest.read_text()[:10])
  with pytest.raises(points_lib.SweepMismatch, match=r"sweep.json is unreadable .*use a "
                     r"new directory, or pass overwrite"):
    _store(tmp_path)
  assert _store(tmp_path, overwrite=True).done() == set()
