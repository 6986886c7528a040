"""What fedfrac wrote in a workdir (fedfrac.runner.written) and sealed records
(fedfrac.runner.sealed): --overwrite removes only fedfrac's files and names the
others; a sealed record finds truncation, bit flips and edits. No compute."""
from __future__ import annotations

import json
import os

import pytest

from fedfrac.config import ConfigError
from fedfrac.runner import sealed, written

RUN_FILES = ["experiment.json", "config.json", "metrics.csv", "summary.md",
             "runs/fedavg/seed_0.json", "runs/fedprox/seed_0.json",
             "checkpoints/fedavg/seed_0/step_2/state.npz",
             "checkpoints/fedavg/seed_0/step_2/history.json",
             "checkpoints/fedavg/seed_0/step_2/manifest.json",
             "checkpoints/fedprox/seed_0/step_2/state.npz",
             "checkpoints/fedprox/seed_0/step_2/history.json",
             "checkpoints/fedprox/seed_0/step_2/manifest.json"]


def _fake_workdir(root, register=True):
  """A workdir as a run of fedavg and fedprox leaves it (tiny files: sealed
  records and checkpoint steps that verify, as fedfrac writes them)."""
  import numpy as np

  from fedfrac.runner.checkpoint import Checkpointer
  if register:
    written.register(str(root), files=[f for f in RUN_FILES if "/" not in f
                                        or f.startswith("runs/")],
                     runs=["checkpoints/fedavg/seed_0", "checkpoints/fedprox/seed_0"])
  for rel in RUN_FILES:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if rel.startswith("runs/"):
      sealed.write(str(path), {"method": rel.split("/")[1], "seed": 0, "rows": []})
    elif rel.startswith("checkpoints/"):
      Checkpointer(str(path.parent.parent)).save(2, {"w": np.zeros(2)}, {"rows": []})
    elif rel == "experiment.json":
      sealed.write(str(path), {"shared": {}, "methods": {}, "rounds": 2})
    else:
      path.write_text("x")


def _files(root):
  return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("listed", [True, False], ids=["written.json", "older-layout"])
def test_overwrite_names_foreign_files_and_deletes_nothing(tmp_path, listed):
  _fake_workdir(tmp_path, register=listed)
  (tmp_path / "checkpoints/other").mkdir()
  (tmp_path / "checkpoints/other/model.pt").write_text("mine")
  (tmp_path / "runs/x").mkdir()
  (tmp_path / "checkpoints/fedavg/seed_0/notes.txt").write_text("mine")
  (tmp_path / "notes.txt").write_text("mine, not in the way")
  before = _files(tmp_path)
  with pytest.raises(ConfigError) as e:
    written.remove(str(tmp_path))
  message = str(e.value)
  assert "\n" not in message and "nothing was deleted" in message
  for foreign in ("checkpoints/fedavg/seed_0/notes.txt", "checkpoints/other/model.pt",
                  "runs/x/"):
    assert foreign in message, message
  assert _files(tmp_path) == before
  # Restarting fedprox only: nothing foreign in its directories, so it goes.
  written.remove(str(tmp_path), ["fedprox"])
  assert not (tmp_path / "runs/fedprox").exists()
  assert not (tmp_path / "checkpoints/fedprox").exists()
  assert (tmp_path / "runs/fedavg/seed_0.json").exists()
  # fedavg's directory holds a foreign file: refused, named.
  with pytest.raises(ConfigError, match="checkpoints/fedavg/seed_0/notes.txt"):
    written.remove(str(tmp_path), ["fedavg"])


def test_overwrite_removes_every_file_fedfrac_wrote_and_nothing_else(tmp_path):
  _fake_workdir(tmp_path)
  (tmp_path / "notes.txt").write_text("mine")
  (tmp_path / "metrics.csv.tmp123").write_text("a write cut short")
  written.remove(str(tmp_path))
  assert _files(tmp_path) == ["notes.txt"]


def test_a_directory_without_a_fingerprint_owns_nothing(tmp_path):
  # No experiment.json and no written.json: fedfrac wrote nothing here.
  (tmp_path / "metrics.csv").write_text("my own table")
  with pytest.raises(ConfigError, match=r"did not write \(metrics.csv\)"):
    written.remove(str(tmp_path))
  assert (tmp_path / "metrics.csv").read_text() == "my own table"


def test_an_older_workdir_is_adopted_by_its_content(tmp_path):
  _fake_workdir(tmp_path, register=False)
  (tmp_path / "runs/fedavg/seed_7.json").write_text("mine")
  written.register(str(tmp_path), files=["summary.json"])
  listed = written.load(str(tmp_path))
  assert "runs/fedprox/seed_0.json" in listed["files"]
  assert "checkpoints/fedavg/seed_0" in listed["runs"]
  assert "runs/fedavg/seed_7.json" not in listed["files"]


@pytest.mark.parametrize("manifest", ["deleted", "damaged"])
@pytest.mark.parametrize("mine", ["runs/fedavg/seed_7.json",
                                  "checkpoints/fedavg/seed_0/step_9/state.npz"])
def test_without_a_list_a_file_shaped_like_fedfracs_is_not_deleted(tmp_path, capsys,
                                                                   manifest, mine):
  # Before: judged by its name alone, --overwrite deleted it.
  _fake_workdir(tmp_path)
  (tmp_path / mine).parent.mkdir(parents=True, exist_ok=True)
  (tmp_path / mine).write_text("mine")
  if manifest == "deleted":
    (tmp_path / written.MANIFEST).unlink()
  else:
    (tmp_path / written.MANIFEST).write_text("{")
  before = _files(tmp_path)
  capsys.readouterr()
  with pytest.raises(ConfigError) as e:
    written.remove(str(tmp_path))
  assert mine in str(e.value) and "nothing was deleted" in str(e.value)
  assert "no usable written.json" in str(e.value) and "\n" not in str(e.value)
  assert _files(tmp_path) == before
  err = [l for l in capsys.readouterr().err.splitlines() if l.strip()]
  assert len(err) == (manifest == "damaged"), err   # said once, however often read
  (tmp_path / mine).unlink()
  if "step_9" in mine:
    (tmp_path / mine).parent.rmdir()
  written.remove(str(tmp_path))    # what verifies as fedfrac's goes
  assert _files(tmp_path) == []


@pytest.mark.parametrize("damage,reason", [
    ("truncate", "truncated or not JSON"), ("flip", "checksum mismatch"),
    ("edit", "checksum mismatch"), ("strip", "no checksum")])
def test_a_sealed_record_finds_damage(tmp_path, damage, reason):
  path = tmp_path / "r.json"
  content = {"rows": [{"round": 1, "accuracy": 0.8125, "loss": float("nan")}], "n": 3}
  sealed.write(str(path), content)
  assert json.dumps(sealed.read(str(path))) == json.dumps(content)
  text = path.read_text()
  if damage == "truncate":
    text = text[: len(text) // 2]
  elif damage == "flip":   # one bit of one digit: still valid JSON
    i = text.index("8125")
    text = text[:i] + chr(ord(text[i]) ^ 1) + text[i + 1:]
  elif damage == "edit":
    text = text.replace('"n": 3', '"n": 4')
  else:
    obj = json.loads(text)
    del obj["sha256"]
    text = json.dumps(obj)
  path.write_text(text)
  with pytest.raises(sealed.Damaged, match=reason):
    sealed.read(str(path))
  assert os.path.exists(path)
