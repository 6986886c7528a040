"""fedfrac-sweep --shard: hosts sharing one point directory. Two processes on
this machine write the one-process sweep's table bit for bit, each batch run
once; claims are atomic, kept alive by a heartbeat and taken over when stale;
``--table`` writes the table afterwards; bad ``--shard`` values are one line."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from fedfrac import sweep
from fedfrac.sweep import checks as sweep_checks
from fedfrac.runner import claims as claims_lib
from fedfrac.runner.points import Batch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "configs", "quickstart.py")
# 2 config points x 2 seeds, one batch each: a few seconds per batch.
TINY = [f"--config={CONFIG}", "--set=rounds=2", "--set=model.hidden=(8,)",
        "--set=only=fedavg", "--set=data.num_clients=4", "--sweep=client.lr=0.05,0.2",
        "--seeds=0,1", "--batch_size=2", "--workers=1", "--no_progress"]


def _tables(out):
  """The command and table rows of ``out`` and its whole CSV and JSON, with
  ``out``'s directory written as ``OUT`` (the runs compared write to two)."""
  def text(path):
    return path.read_text().replace(str(out.parent), "OUT")
  rows = [line for line in text(out).splitlines() if line.startswith(("|", "Command"))]
  return rows, text(out.with_suffix(".csv")), text(out.with_suffix(".json"))


def test_two_processes_sharing_one_directory_write_the_one_process_table_bit_for_bit(
    tmp_path, capsys):
  shared = tmp_path / "shared" / "t.md"
  env = dict(os.environ, PYTHONPATH=ROOT)
  procs = [subprocess.Popen([sys.executable, "-m", "fedfrac.sweep", *TINY,
                             f"--shard={i}/2", f"--out={shared}"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
           for i in range(2)]
  outputs = [p.communicate(timeout=600) for p in procs]
  for p, (out, err) in zip(procs, outputs):
    assert p.returncode == 0, err[-2000:]
  ran = [int(out.split(" ran ")[1].split(" of ")[0]) for out, _ in outputs]
  assert sum(ran) == 4, ran              # every point once: no batch ran on both
  points_dir = shared.with_suffix(".points")
  assert len(os.listdir(points_dir / "points")) == 4
  assert os.listdir(points_dir / "claims") == []      # each claim released
  assert any("wrote " in out for out, _ in outputs)   # the last shard wrote the table

  one = tmp_path / "one" / "t.md"
  sweep.main([*TINY, f"--out={one}"])
  assert _tables(shared) == _tables(one)

  # --table afterwards: the same table from the points, nothing run.
  os.remove(shared)
  capsys.readouterr()
  sweep.main([*TINY, "--table", f"--out={shared}"])
  assert " ran " not in capsys.readouterr().out
  assert _tables(shared) == _tables(one)


def _batches():
  """The batches of ``TINY`` as its shards pack them (2 shards x 1 worker)."""
  base = sweep.load_config(CONFIG)
  base.progress = False
  for key, value in (("rounds", 2), ("model.hidden", (8,)), ("only", "fedavg"),
                     ("data.num_clients", 4)):
    sweep.set_key(base, key, value)
  points = sweep.expand(base, [("client.lr", [0.05, 0.2])], [0, 1])
  return sweep.pack(points, set(), ["accuracy"], True, 2, 2)


def test_a_live_claim_is_left_alone_and_a_stale_one_taken_over(tmp_path, capsys):
  """Another host's fresh claim: the shard runs the other batch and writes no
  table; once that claim's heartbeat is older than --claim_timeout (the host
  died), the next run takes the batch over and writes the table."""
  out = tmp_path / "t.md"
  batches = _batches()
  assert len(batches) == 2
  claims_dir = tmp_path / "t.points" / "claims"
  claims_dir.mkdir(parents=True)
  held = claims_dir / f"{batches[1].key}.claim"
  held.write_text(json.dumps({"owner": "elsewhere:1:x", "host": "elsewhere", "pid": 1,
                              "shard": "1/2"}))
  args = [*TINY, "--shard=0/2", "--claim_timeout=60", f"--out={out}"]
  assert sweep.main(args) == []
  printed = capsys.readouterr().out
  assert "ran 2 of 4 points" in printed and "2 points are not finished yet" in printed
  assert not out.exists() and held.exists()

  old = time.time() - 61
  os.utime(held, (old, old))
  sweep.main(args)
  assert "ran 2 of 4 points (2 already done)" in capsys.readouterr().out
  assert out.exists() and not held.exists()


def test_claims_are_exclusive_beat_and_are_taken_over_only_when_stale(tmp_path):
  a = claims_lib.Claims(tmp_path, "0/2", timeout_s=60)
  b = claims_lib.Claims(tmp_path, "1/2", timeout_s=60)
  claim = a.acquire("k")
  assert claim is not None and b.acquire("k") is None     # O_EXCL: one owner
  path = a.path("k")
  old = time.time() - 30
  os.utime(path, (old, old))
  claim.beat()                                            # the heartbeat renews it
  assert time.time() - os.stat(path).st_mtime < 5 and b.acquire("k") is None
  old = time.time() - 61
  os.utime(path, (old, old))
  taken = b.acquire("k")                                  # no heartbeat for 61 s
  assert taken is not None
  assert json.loads(open(path).read())["owner"] == b.owner
  claim.release()                                         # the old owner's release
  assert os.path.exists(path)                             # leaves the new claim alone
  # A rerun of the same shard takes over its predecessor's claims at once.
  assert claims_lib.Claims(tmp_path, "0/2").acquire("k") is None
  again = claims_lib.Claims(tmp_path, "1/2").acquire("k")
  assert again is not None
  # A claim of a process of this host that is gone is stale at once.
  gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                        capture_output=True, text=True).stdout.strip()
  with open(a.path("dead"), "w") as f:
    json.dump({"owner": f"x:{gone}:y", "host": a.host, "pid": int(gone), "shard": "5/9"}, f)
  assert a.acquire("dead") is not None
  a.release_owned()                                       # only a's claims go
  assert not os.path.exists(a.path("dead")) and os.path.exists(path)
  taken.release()


def test_holding_beats_while_held_and_releases(tmp_path):
  claims = claims_lib.Claims(tmp_path, "0/1", heartbeat_s=0.05)
  path = claims.path("k")
  with claims_lib.holding(claims, "k") as held:
    assert held
    old = time.time() - 100
    os.utime(path, (old, old))
    deadline = time.time() + 10
    while os.stat(path).st_mtime < old + 50 and time.time() < deadline:
      time.sleep(0.02)
    assert os.stat(path).st_mtime > old + 50
    with claims_lib.holding(claims_lib.Claims(tmp_path, "1/2"), "k") as other:
      assert not other
  assert not os.path.exists(path)


def test_the_first_shard_sets_the_layout_every_shard_uses(tmp_path):
  path = str(tmp_path / "layout.json")
  assert claims_lib.agree(path, {"workers": 4}) == {"workers": 4}
  assert claims_lib.agree(path, {"workers": 64}) == {"workers": 4}
  assert sorted(os.listdir(tmp_path)) == ["layout.json"]


def test_each_shard_starts_with_its_own_share_then_the_next_shards():
  batches = [Batch("m:f", None, (str(i),), cost=c, position=i)
             for i, c in enumerate([1, 1, 5, 1, 3, 1])]
  order = sweep.shard_order(batches, 1, 3)
  assert [batches[i].position for i in order] == [4, 1, 2, 5, 0, 3]


@pytest.mark.parametrize("env, expected", [
    ({"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "4"}, (3, 4)),
    ({"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "4",
      "SLURM_ARRAY_TASK_MIN": "4"}, (1, 4)),
    ({"SLURM_ARRAY_TASK_ID": "8", "SLURM_ARRAY_TASK_COUNT": "4",
      "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_STEP": "4"}, (2, 4)),
])
def test_shard_auto_reads_the_slurm_job_array(env, expected):
  assert sweep_checks.parse_shard("auto", env) == expected
  assert sweep_checks.parse_shard("2/5", {}) == (2, 5)


@pytest.mark.parametrize("flags, fragment", [
    (["--shard=2/2"], "--shard=2/2: shard 2 of 2 does not exist; give I/N with 0 <= I < N"),
    (["--shard=0/0"], "--shard=0/0: shard 0 of 0 does not exist"),
    (["--shard=-1/2"], "--shard=-1/2: shard -1 of 2 does not exist"),
    (["--shard=1-2"], "--shard=1-2: not I/N or auto"),
    (["--shard=a/b"], "--shard=a/b: not I/N or auto"),
    (["--shard=auto"], "--shard=auto: SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT "
                       "not set (not a SLURM job array task)"),
    (["--shard=0/2", "--overwrite"], "--shard=0/2 with --overwrite: a shard would delete"),
    (["--shard=0/2", "--claim_timeout=0"], "--claim_timeout=0.0: need seconds > 0"),
])
def test_bad_shard_flags_are_one_line_before_compute(tmp_path, capsys, monkeypatch, flags,
                                                     fragment):
  for name in ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT"):
    monkeypatch.delenv(name, raising=False)
  out = tmp_path / "t.md"
  capsys.readouterr()
  with pytest.raises(SystemExit) as stopped:
    sweep.main([*TINY, *flags, f"--out={out}"])
  err = capsys.readouterr().err
  lines = [line for line in err.splitlines() if line.strip()]
  assert stopped.value.code == 2 and len(lines) == 1, err
  assert lines[0].startswith("error: ") and fragment in lines[0], lines[0]
  assert not (tmp_path / "t.points").exists()


def test_a_shard_needs_the_shared_directory(capsys):
  with pytest.raises(SystemExit) as stopped:
    sweep.main([*TINY, "--shard=0/2"])
  assert stopped.value.code == 2
  assert capsys.readouterr().err.startswith("error: --shard=0/2: needs --dir=DIR or --out")


def test_a_directory_another_sweep_created_at_the_same_moment_is_refused(tmp_path,
                                                                          monkeypatch):
  from fedfrac.runner import points as points_lib

  def created_first(manifest):   # another process's write_new won the race
    def write_new(path, text):
      with open(path, "w") as f:
        f.write(manifest(text))
      return False
    return write_new
  monkeypatch.setattr(claims_lib, "write_new", created_first(
      lambda text: json.dumps({"hash": "another sweep", "fingerprint": {}})))
  with pytest.raises(points_lib.SweepMismatch, match="another sweep started in it at the"):
    points_lib.PointStore(str(tmp_path / "a"), {"rounds": 2})
  monkeypatch.setattr(claims_lib, "write_new", created_first(lambda text: text))
  points_lib.PointStore(str(tmp_path / "b"), {"rounds": 2})   # the same sweep's shard


def test_figure_writers_never_share_a_temporary_file(tmp_path, monkeypatch):
  """Two writers of one figure each write their own temporary file (the shared
  ``<name>.tmp.png`` was renamed away by one shard under the other)."""
  from fedfrac.runner import checkpoint, plots
  names = []
  real = plots.Figure.savefig

  def savefig(self, path, *args, **kwargs):
    names.append(str(path))
    return real(self, path, *args, **kwargs)
  monkeypatch.setattr(plots.Figure, "savefig", savefig)
  for _ in range(2):
    plots.Figure(figsize=(1, 1)).save(str(tmp_path / "f.png"))
  assert len(set(names)) == 2 and all(".tmp" in n for n in names)
  assert checkpoint.unique_tmp("a") != checkpoint.unique_tmp("a")
  assert os.listdir(tmp_path) == ["f.png"]


@pytest.fixture(scope="module")
def one_process_sweep(tmp_path_factory):
  """``TINY`` run by one process: its table (and points)."""
  one = tmp_path_factory.mktemp("one") / "t.md"
  sweep.main([*TINY, f"--out={one}"])
  return one


@pytest.mark.parametrize("shards", [2, 4, 8])
def test_shards_finishing_together_write_the_one_process_table(tmp_path, shards,
                                                               one_process_sweep):
  """Every point done, ``shards`` shards started at once on one folder all write
  the table, CSV, JSON and figures at the same moment: each exits 0 and the
  table is the one process's."""
  import shutil
  one = one_process_sweep
  shared = tmp_path / "shared" / "t.md"
  shutil.copytree(one.with_suffix(".points"), shared.with_suffix(".points"))
  env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
  procs = [subprocess.Popen([sys.executable, "-m", "fedfrac.sweep", *TINY,
                             f"--shard={i}/{shards}", f"--out={shared}"], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
           for i in range(shards)]
  try:
    outputs = [p.communicate(timeout=240) for p in procs]
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
  for p, (out, err) in zip(procs, outputs):
    assert p.returncode == 0, err[-2000:]
    assert "ran 0 of 4 points" in out
  assert _tables(shared) == _tables(one)
  assert not [f for f in os.listdir(shared.parent) if ".tmp" in f]
