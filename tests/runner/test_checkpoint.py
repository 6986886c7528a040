"""Verified checkpoints (fedfrac.runner.checkpoint): named items, one commit
point, fallback to the previous intact step, pruning with history (issue row 5),
a run killed at a random point of a checkpoint write, and a disk that fills
during one (simulated everywhere with ENOSPC; for real on a tiny tmpfs where one
can be mounted)."""
from __future__ import annotations

import errno
import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

import fedfrac as ff
from fedfrac.runner import checkpoint
from fedfrac.runner.checkpoint import Checkpointer, CheckpointError
from tests import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOLATILE = ("wall_s", "executed_steps")


def _strip(rows):
  return [{k: v for k, v in r.items() if k not in VOLATILE} for r in rows]


def _state():
  return {"server": {"params": {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}},
          "round": np.int32(3)}


def test_items_are_named_and_history_is_pruned_with_its_step(tmp_path):
  ck = Checkpointer(str(tmp_path), keep=2)
  for step in (1, 2, 3):
    ck.save(step, _state(), {"rows": [step]})
  assert ck.steps() == [2, 3]
  assert sorted(os.listdir(tmp_path)) == ["step_2", "step_3"]   # no stray history
  with np.load(tmp_path / "step_3" / "state.npz") as z:
    assert sorted(z.files) == ["round", "server/params/w"]
  step, state, history = ck.restore_latest(_state())
  assert step == 3 and history == {"rows": [3]}
  np.testing.assert_array_equal(state["server"]["params"]["w"],
                                _state()["server"]["params"]["w"])


@pytest.mark.parametrize("where", ["pruned step", "damaged step", "resaved step",
                                   "leftover-like name"])
def test_pruning_deletes_only_the_files_fedfrac_wrote(tmp_path, capsys, where):
  # Before: whole step_N folders (and any name holding ".old") were deleted,
  # files of one's own in them included.
  ck = Checkpointer(str(tmp_path), keep=2)
  ck.save(1, _state(), {"rows": [1]})
  ck.save(2, _state(), {"rows": [2]})
  if where == "leftover-like name":
    mine = tmp_path / "backup.old" / "mine.txt"
    mine.parent.mkdir()
  else:
    mine = tmp_path / ("step_1" if where == "pruned step" else "step_2") / "mynote.txt"
  mine.write_text("mine")
  if where == "damaged step":
    (tmp_path / "step_2" / "state.npz").write_bytes(b"garbage")
    assert ck.restore_latest(_state())[0] == 1
  ck.save(2 if where == "resaved step" else 3, _state(), {"rows": [3]})
  ck.save(4, _state(), {"rows": [4]})
  assert mine.read_text() == "mine"
  if where in ("pruned step", "damaged step"):
    assert sorted(os.listdir(mine.parent)) == ["mynote.txt"]   # fedfrac's files gone
    assert mine.parent.name not in [f"step_{s}" for s in ck.steps()]
    lines = [l for l in capsys.readouterr().err.splitlines() if mine.parent.name in l
             and "kept the folder" in l]
    assert len(lines) == 1 and lines[0].endswith("(mynote.txt)"), lines
  assert ck.steps()[-2:] == [3, 4] if where != "resaved step" else ck.steps() == [2, 4]


def test_a_method_label_that_is_a_path_stays_inside_the_workdir(tmp_path):
  # Before: checkpoints/<label> with label "/abs/dir" was /abs/dir itself, and
  # pruning there deleted a folder of one's own.
  import ml_collections
  outside = tmp_path / "outside"
  (outside / "seed_0" / "step_1").mkdir(parents=True)
  (outside / "seed_0" / "step_1" / "mine.txt").write_text("mine")
  c = helpers.tiny_config(rounds=4, eval_every=1, checkpoint_every=1)
  c.methods = ml_collections.ConfigDict({str(outside): dict(name="fedavg")})
  work = tmp_path / "w"
  ff.run(c, workdir=str(work))
  assert sorted(str(p.relative_to(outside)) for p in outside.rglob("*")) == [
      "seed_0", "seed_0/step_1", "seed_0/step_1/mine.txt"]
  folder = str(outside).replace(os.sep, "_")
  assert sorted(os.listdir(work / "checkpoints" / folder / "seed_0")) == ["step_3", "step_4"]
  assert os.listdir(work / "runs") == [folder]


@pytest.mark.parametrize("damage", ["flip_state", "flip_history", "truncate",
                                    "no_history", "no_manifest"])
def test_a_damaged_step_falls_back_to_the_previous_one(tmp_path, damage, capsys):
  ck = Checkpointer(str(tmp_path))
  ck.save(1, _state(), {"rows": [1]})
  ck.save(2, _state(), {"rows": [2]})
  d = tmp_path / "step_2"
  if damage.startswith("flip"):
    path = d / ("state.npz" if damage == "flip_state" else "history.json")
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
  elif damage == "truncate":
    path = d / "state.npz"
    path.write_bytes(path.read_bytes()[:40])
  else:
    os.remove(d / ("history.json" if damage == "no_history" else "manifest.json"))
  step, _, history = ck.restore_latest(_state())
  assert step == 1 and history == {"rows": [1]}
  lines = [l for l in capsys.readouterr().err.splitlines() if "step_2" in l]
  assert len(lines) == 1 and "failed verification" in lines[0]


def test_no_intact_step_stops_with_one_line(tmp_path):
  ck = Checkpointer(str(tmp_path))
  ck.save(1, _state(), {"rows": []})
  (tmp_path / "step_1" / "state.npz").write_bytes(b"garbage")
  with pytest.raises(CheckpointError, match="no intact step.*overwrite=") as e:
    ck.restore_latest(_state())
  assert "\n" not in str(e.value)


def test_a_state_of_another_shape_is_one_line(tmp_path):
  ck = Checkpointer(str(tmp_path))
  ck.save(1, _state(), {})
  other = _state()
  other["server"]["params"]["w"] = np.zeros((3, 3), np.float32)
  with pytest.raises(CheckpointError, match=r"server/params/w is float32\[2, 3\]"):
    ck.restore_latest(other)


def test_flipped_bit_in_a_run_checkpoint_resumes_from_the_previous_step(tmp_path):
  # Row 5 end to end: the damaged last step is not restored silently.
  c = helpers.tiny_config(rounds=4, eval_every=1, checkpoint_every=1)
  full = ff.run(c)
  ff.run(c, workdir=str(tmp_path), stop_after_round=3)
  run_dir = tmp_path / "checkpoints" / "fedavg" / "seed_0"
  assert sorted(os.listdir(run_dir)) == ["step_2", "step_3"]
  path = run_dir / "step_3" / "state.npz"
  data = bytearray(path.read_bytes())
  data[-200] ^= 0x10
  path.write_bytes(bytes(data))
  resumed = ff.run(c, workdir=str(tmp_path))
  assert _strip(resumed.records[0].round_rows) == _strip(full.records[0].round_rows)


def test_a_step_copied_from_another_seed_is_not_continued(tmp_path, capsys):
  """seed 1's last step copied into seed 0's folder, seed 0's record removed: the
  rerun says so in one line and runs seed 0 from round 0, not from seed 1's state."""
  import shutil
  c = helpers.tiny_config(rounds=2, eval_every=1, checkpoint_every=1, seeds=(0, 1))
  first = ff.run(c, workdir=str(tmp_path))
  runs = tmp_path / "checkpoints" / "fedavg"
  shutil.rmtree(runs / "seed_0")
  shutil.copytree(runs / "seed_1", runs / "seed_0")
  os.remove(tmp_path / "runs" / "fedavg" / "seed_0.json")
  capsys.readouterr()
  again = ff.run(c, workdir=str(tmp_path))
  err = capsys.readouterr().err
  assert (f"checkpoints in {runs / 'seed_0'} are of seed 1, not seed 0; restarting "
          f"fedavg seed 0 from round 0") in err
  seed0 = [r for r in again.records if r.seed == 0][0]
  assert seed0.status == "ok"
  want = [r for r in first.records if r.seed == 0][0]
  assert _strip(seed0.round_rows) == _strip(want.round_rows)


FAULT_SCRIPT = r"""
import os, sys
sys.path.insert(0, {root!r})
from fedfrac.runner import checkpoint
from tests import helpers
import fedfrac as ff

kill_at, mode = int(sys.argv[1]), sys.argv[2]
calls = [0]
real_write, real_commit = checkpoint.write_file, checkpoint.commit

def write_file(path, data):
  calls[0] += 1
  if calls[0] == kill_at and mode == "write":
    with open(path, "wb") as f:       # half a file, then the process dies
      f.write(data[: len(data) // 2])
    os._exit(9)
  real_write(path, data)

def commit(tmp, final):
  if calls[0] >= kill_at and mode == "commit":
    os._exit(9)
  real_commit(tmp, final)

checkpoint.write_file, checkpoint.commit = write_file, commit
c = helpers.tiny_config(rounds=4, eval_every=1, checkpoint_every=1)
ff.run(c, workdir=sys.argv[3])
"""


def test_kill_during_a_checkpoint_write_then_rerun_matches(tmp_path):
  """A process killed at a random point of a checkpoint write (inside one of
  the three files, or just before the commit rename) leaves a workdir whose rerun
  reaches the uninterrupted run's final metrics."""
  c = helpers.tiny_config(rounds=4, eval_every=1, checkpoint_every=1)
  full = ff.run(c)
  script = tmp_path / "fault.py"
  script.write_text(FAULT_SCRIPT.format(root=ROOT))
  rng = random.Random(14)
  # 4 checkpoint steps x 3 files: kill at one of the 12 writes.
  for trial, mode in enumerate(("write", "commit")):
    kill_at = rng.randint(2, 12)
    work = tmp_path / f"w{trial}"
    out = subprocess.run([sys.executable, str(script), str(kill_at), mode, str(work)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode != 0, (kill_at, mode, out.stderr[-2000:])
    resumed = ff.run(c, workdir=str(work))
    got, want = resumed.records[0].rows[-1], full.records[0].rows[-1]
    assert _strip([got]) == _strip([want]), (kill_at, mode)
    assert json.loads((work / "summary.json").read_text())["methods"]["fedavg"][
        "seeds"]["0"]["status"] == "ok"


def _no_space(path, *args, **kwargs):
  raise OSError(errno.ENOSPC, "No space left on device", path)


def test_a_full_disk_during_a_checkpoint_is_one_line_and_the_rerun_resumes(
    tmp_path, monkeypatch):
  # Before: an OSError traceback (the rerun did resume).
  c = helpers.tiny_config(rounds=4, eval_every=1, checkpoint_every=1)
  full = ff.run(c)
  calls = [0]
  real_write = checkpoint.write_file

  def write_file(path, data):
    calls[0] += 1
    if calls[0] == 5:       # the second step's history.json
      _no_space(path)
    real_write(path, data)
  monkeypatch.setattr(checkpoint, "write_file", write_file)
  with pytest.raises(checkpoint.DiskFullError) as e:
    ff.run(c, workdir=str(tmp_path))
  run_dir = tmp_path / "checkpoints" / "fedavg" / "seed_0"
  message = str(e.value)
  assert message.startswith(f"no space left on the device to write {run_dir}/step_2 (")
  assert " KiB needed" in message and "\n" not in message
  assert sorted(os.listdir(run_dir)) == ["step_1"]    # no half-written step left
  monkeypatch.undo()
  resumed = ff.run(c, workdir=str(tmp_path))
  assert _strip(resumed.records[0].rows) == _strip(full.records[0].rows)


def test_a_full_disk_during_a_file_write_keeps_the_old_file(tmp_path, monkeypatch):
  path = tmp_path / "summary.md"
  path.write_text("old")
  monkeypatch.setattr(checkpoint, "open", _no_space, raising=False)
  with pytest.raises(checkpoint.DiskFullError, match=r"to write .*summary.md \(\d+ KiB needed"):
    checkpoint.atomic_write(str(path), "new" * 100)
  monkeypatch.undo()
  assert path.read_text() == "old" and os.listdir(tmp_path) == ["summary.md"]


def test_a_tiny_tmpfs_fills_during_a_checkpoint_one_line_exit_1(tmp_path):
  """The disk really full: a 64 KiB tmpfs in a private mount namespace (skipped
  where one cannot be mounted; the ENOSPC tests above cover the path)."""
  import shutil
  unshare = shutil.which("unshare")
  mount_point = tmp_path / "tmpfs"
  mount_point.mkdir()
  probe = [unshare, "--user", "--map-root-user", "--mount", "sh", "-c",
           f"mount -t tmpfs -o size=64k tmpfs {mount_point}"] if unshare else None
  if not probe or subprocess.run(probe, capture_output=True).returncode != 0:
    pytest.skip("cannot mount a tmpfs here (needs unshare and user namespaces)")
  work = mount_point / "w"
  command = (f"mount -t tmpfs -o size=64k tmpfs {mount_point} && exec {sys.executable} "
             f"-m fedfrac.main --config=configs/quickstart.py --config.only=fedavg "
             f"--config.rounds=2 --config.progress=False --config.workers=1 "
             f"--config.checkpoint_every=1 --config.eval_every=1 "
             f"--config.data.num_clients=4 '--config.model.hidden=(256,)' --workdir={work}")
  env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
  out = subprocess.run([unshare, "--user", "--map-root-user", "--mount", "sh", "-c",
                        command], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
  lines = [l for l in out.stderr.splitlines() if l.strip()]
  assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-3000:]
  assert len(lines) == 1 and lines[0].startswith(f"error: --workdir={work}: no space left "
                                                 f"on the device to write {work}/"), lines
  assert "needed" in lines[0] and "rerun the same command to resume" in lines[0]


def test_checkpoints_that_take_longer_than_the_rounds_are_said_in_one_line(
    tmp_path, monkeypatch, capsys):
  """The record's wall_s leaves checkpoint writing out; when writing took longer
  than the rounds, one line says how long and which key spaces it out."""
  import time
  from fedfrac.runner import chunked
  slow_save = Checkpointer.save

  def save(self, step, state, history):
    time.sleep(0.3)
    slow_save(self, step, state, history)
  monkeypatch.setattr(Checkpointer, "save", save)
  monkeypatch.setattr(chunked, "CHECKPOINT_NOTE_S", 0.5)
  c = helpers.tiny_config(rounds=4, eval_every=1)
  c.methods = {"fedavg": {"name": "fedavg"}}
  record = ff.run(c, workdir=str(tmp_path / "w")).records[0]
  said = [l for l in capsys.readouterr().err.splitlines() if "checkpoints took" in l]
  assert len(said) == 1, said
  assert said[0].startswith("note: fedavg seed 0: writing 4 checkpoints took "), said
  assert f"more than its {record.wall_s:.1f} s of rounds" in said[0]
  assert "config.checkpoint_every=1 writes one every 1 chunk(s) of eval_every=1" in said[0]
  monkeypatch.setattr(chunked, "CHECKPOINT_NOTE_S", 60.0)   # under the floor: no word
  ff.run(c, workdir=str(tmp_path / "v"))
  assert "checkpoints took" not in capsys.readouterr().err


def test_compile_time_is_summed_over_sittings_and_kept_when_a_run_is_found_again(
    tmp_path):
  """A resumed run's compile seconds are those of every sitting (kept in its
  checkpoints beside its wall time); a finished run found again by a rerun keeps
  the compile seconds of its record instead of the rerun's none."""
  c = helpers.tiny_config(rounds=4, eval_every=1, checkpoint_every=1)
  first = ff.run(c, workdir=str(tmp_path), stop_after_round=2).records[0].compile_s
  assert first > 0
  resumed = ff.run(c, workdir=str(tmp_path)).records[0].compile_s
  assert resumed >= first
  again = ff.run(c, workdir=str(tmp_path)).records[0]
  assert again.compile_s == resumed
  from fedfrac.runner.workdir import Workdir
  assert Workdir(str(tmp_path)).read_record("fedavg", 0).compile_s == resumed


def test_a_checkpoint_without_compile_time_takes_it_from_the_runs_record(tmp_path,
                                                                         monkeypatch):
  """Checkpoints written before compile time was kept in them: a finished run
  found again keeps its record's compile seconds (its results are rewritten)."""
  from fedfrac.runner.log import RunLog
  c = helpers.tiny_config(rounds=2, eval_every=1, checkpoint_every=1)
  history = RunLog.history
  monkeypatch.setattr(RunLog, "history", lambda self: {
      k: v for k, v in history(self).items() if k != "compile_s"})
  first = ff.run(c, workdir=str(tmp_path)).records[0].compile_s
  assert first > 0
  monkeypatch.setattr(RunLog, "history", history)
  assert ff.run(c, workdir=str(tmp_path)).records[0].compile_s == first
