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


def test_overwrite_deletes_only_the_point_files_fedfrac_wrote(tmp_path):
  # Before: --overwrite removed the whole points/ folder, files of one's own too.
  store = _store(tmp_path)
  store.write("a1", _record(0.5))
  store.write("b2", _record(0.75))
  points = tmp_path / "points"
  (points / "notes.txt").write_text("mine")
  (points / "c3.json").write_text("mine too, shaped like a point")
  (points / "plots").mkdir()
  (points / "a1.json.tmp77").write_text("{")      # a point write cut short
  before = sorted(p.name for p in points.iterdir())
  other = {"config": {"rounds": 3}}
  with pytest.raises(points_lib.SweepMismatch) as e:
    points_lib.PointStore(str(tmp_path), other, overwrite=True)
  assert str(e.value) == (f"--overwrite: {points} holds files fedfrac did not write "
                          f"(c3.json, notes.txt, plots/); move them out of the way "
                          f"(nothing was deleted)")
  assert sorted(p.name for p in points.iterdir()) == before
  for name in ("notes.txt", "c3.json"):
    (points / name).unlink()
  (points / "plots").rmdir()
  assert points_lib.PointStore(str(tmp_path), other, overwrite=True).done() == set()
  assert list(points.iterdir()) == []


@pytest.mark.parametrize("content,age_s,reason", [
    ("garbage", 0, "not a claim (garbage)"),
    ("", 60, "not a claim (empty or incomplete)"),
    ('{"x": 1}', 0, "not a claim (empty or incomplete)"),
    (None, -86400, "its heartbeat is dated 86400 s in the future"),
])
def test_a_claim_file_that_is_not_a_claim_is_taken_over(tmp_path, content, age_s, reason):
  # Before: an empty, garbage or future-dated claim held its batch for the
  # claim timeout (600 s) while every shard exited 0 without running it.
  import os
  import time

  from fedfrac.runner import claims as claims_lib
  other = claims_lib.Claims(str(tmp_path), "1/2")
  held = other.acquire("k")
  assert held is not None
  path = held.path
  if content is not None:
    with open(path, "w") as f:
      f.write(content)
  os.utime(path, (time.time() - age_s, time.time() - age_s))
  mine = claims_lib.Claims(str(tmp_path), "0/2")
  with open(path) as f:
    text = f.read()
  try:
    record = json.loads(text or "{}")
  except ValueError:
    record = None
  why = mine.stale(record, time.time() - os.stat(path).st_mtime)
  assert why is not None and why.startswith(reason.split(" 86400")[0]), why
  assert mine.acquire("k") is not None     # taken over at once


def test_a_fresh_empty_claim_file_is_left_to_its_writer(tmp_path):
  from fedfrac.runner import claims as claims_lib
  (tmp_path / "claims").mkdir()
  (tmp_path / "claims" / "k.claim").write_text("")
  assert claims_lib.Claims(str(tmp_path), "0/2").acquire("k") is None


@pytest.mark.parametrize("damage", ["truncate", "garbage", "other settings"])
def test_a_damaged_layout_file_is_replaced_in_one_line(tmp_path, damage):
  # Before: a truncated layout-<sweep>.json stopped every shard with a
  # JSONDecodeError until it was removed by hand.
  from fedfrac.runner import claims as claims_lib
  path = tmp_path / "layout-x.json"
  proposal = {"workers": 4, "memory_bytes": 123}
  text = {"truncate": '{"workers": 4, "mem', "garbage": "\x00\x01",
          "other settings": '{"batch": 2}'}[damage]
  path.write_text(text)
  lines = []
  assert claims_lib.agree(str(path), proposal, log=lines.append) == proposal
  assert len(lines) == 1 and lines[0].startswith(f"{path} was unreadable (")
  assert json.loads(path.read_text()) == proposal
  assert claims_lib.agree(str(path), {"workers": 8, "memory_bytes": 1}) == proposal


def test_a_file_of_ones_own_among_the_points_is_left_alone(tmp_path, capsys):
  # Before: a user's points/notes.json was "1 failed verification (no checksum);
  # running it again", a file of one's own called a point to run.
  store = _store(tmp_path)
  store.write("a", _record(0.5))
  (tmp_path / "points" / "notes.json").write_text('{"my": "notes"}')
  capsys.readouterr()
  assert _store(tmp_path).done() == {"a"}
  assert capsys.readouterr().err == ""
  assert (tmp_path / "points" / "notes.json").read_text() == '{"my": "notes"}'


def test_an_unreadable_sweep_file_names_removing_it_as_a_way_out(tmp_path):
  # Before: the only ways out were another folder or --overwrite, which abandon
  # or delete intact points; removing sweep.json writes it again and keeps them.
  _store(tmp_path).write("a", _record(0.5))
  manifest = tmp_path / "sweep.json"
  manifest.write_text("garbage{")
  with pytest.raises(points_lib.SweepMismatch) as e:
    _store(tmp_path)
  assert f"remove {manifest} to write it again for this sweep" in str(e.value)
  manifest.unlink()
  assert _store(tmp_path).done() == {"a"}
