"""Faults in what a workdir or a sweep directory holds, and signals, on the
command line (the damaged workdirs through ``fedfrac-run`` in this process, the
signals to ``python -m fedfrac.main`` / ``fedfrac-sweep`` in processes of their
own): each ends in one line (or recovers), never a traceback, never a lost
record or a wrong number. The generated configs and the faults that stop before
compute are tests/test_fuzz.py.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests import helpers

ROOT = helpers.ROOT


def _run(args, workdir):
  return helpers.run_quickstart_cli(args, workdir)


FAULT_ARGS = ["--config.only=fedavg,fedprox", "--config.rounds=2", "--config.progress=False",
              "--config.model.hidden=(8,)", "--config.eval_every=1",
              "--config.data.num_clients=4", "--config.workers=1"]


def _env():
  return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
              JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")


def _values(workdir, method):
  import csv
  with open(os.path.join(workdir, "metrics.csv")) as f:
    return [(r["round"], r["accuracy"], r["loss"]) for r in csv.DictReader(f)
            if r["method"] == method]


def _files(root, sub=""):
  out = {}
  for folder, _, names in os.walk(os.path.join(root, sub)):
    for n in names:
      path = os.path.join(folder, n)
      with open(path, "rb") as f:
        out[os.path.relpath(path, root)] = f.read()
  return out


@pytest.fixture(scope="module")
def finished_workdir(tmp_path_factory):
  """fedavg and fedprox run to the end (2 rounds) by the command line."""
  work = str(tmp_path_factory.mktemp("faults") / "w")
  out = _run(FAULT_ARGS, work)
  assert out.returncode == 0, out.stderr[-3000:]
  return work


def _flip_record(work):
  path = os.path.join(work, "runs", "fedprox", "seed_0.json")
  text = open(path).read()
  i = text.index('"accuracy": 0.') + len('"accuracy": 0.')
  open(path, "w").write(text[:i] + chr(ord(text[i]) ^ 1) + text[i + 1:])


def _truncate(work, rel, keep=100):
  path = os.path.join(work, rel)
  data = open(path, "rb").read()
  open(path, "wb").write(data[:keep])


def _foreign(work):
  os.makedirs(os.path.join(work, "checkpoints", "other"))
  open(os.path.join(work, "checkpoints", "other", "model.pt"), "w").write("mine")
  os.makedirs(os.path.join(work, "runs", "x"))


# name -> (damage, extra arguments, exit status, what the one stderr line holds)
FAULTS = {
    "run record bit flip": (_flip_record, ["--config.only=fedavg"], 0,
                            "runs/fedprox/seed_0.json failed verification (checksum "
                            "mismatch); recomputed it from its checkpoint at round 2"),
    "experiment file truncated": (lambda w: _truncate(w, "experiment.json"),
                                  ["--config.only=fedavg"], 0,
                                  "--workdir={w}: experiment.json failed verification "
                                  "(truncated or not JSON); rebuilt it from the 2 runs "
                                  "kept there"),
    "foreign files under --overwrite": (_foreign, ["--overwrite"], 2,
                                        "error: --overwrite: {w} holds files fedfrac did not "
                                        "write (checkpoints/other/model.pt, runs/x/)"),
    "shorter rounds": (None, ["--config.rounds=1"], 2,
                       "error: --workdir={w}: fedavg seed 0 already ran 2 rounds, more than "
                       "config.rounds=1"),
    "empty --workdir": (None, ["--workdir="], 2, "error: --workdir='' is empty"),
    "--overwrite one method": (None, ["--overwrite=fedavg", "--config.only=fedavg"], 0, None),
    "disk full during a checkpoint": ("enospc", ["--config.only=fedavg", "--config.rounds=3"],
                                      1, "error: --workdir={w}: no space left on the device "
                                      "to write {w}/checkpoints/fedavg/seed_0/step_3"),
}


def _no_space(path, data):
  import errno
  raise OSError(errno.ENOSPC, "No space left on device", path)


@pytest.mark.parametrize("name", list(FAULTS))
def test_a_fault_ends_in_one_line_or_recovers(finished_workdir, tmp_path, name,
                                              monkeypatch):
  # The command line in this process (tests/helpers.run_cli_in_process); the
  # finished workdir and the signals below are real processes.
  damage, extra, status, line = FAULTS[name]
  work = str(tmp_path / "w")
  shutil.copytree(finished_workdir, work)
  if callable(damage):
    damage(work)
  before = _files(work)
  fedprox = {k: v for k, v in before.items() if "fedprox" in k}
  args = FAULT_ARGS + extra
  if damage == "enospc":
    from fedfrac.runner import checkpoint
    monkeypatch.setattr(checkpoint, "write_file", _no_space)
  out = helpers.run_cli_in_process(["--config=configs/quickstart.py", f"--workdir={work}",
                                    *args])
  lines = [l for l in out.stderr.splitlines() if l.strip()]
  context = (name, out.returncode, out.stderr[-3000:])
  assert out.returncode == status and "Traceback" not in out.stderr, context
  if line is None:
    assert not lines, context
  else:   # one line, after the resume line of a run that went on
    assert lines and line.format(w=work) in lines[-1], context
    assert all(l.startswith("resuming fedavg seed 0 from round ") for l in lines[:-1]), context
  if status == 2:        # refused before compute: nothing changed
    assert _files(work) == before, context
  elif status == 0:      # recovered: fedprox's numbers are the finished run's
    assert _values(work, "fedprox") == _values(finished_workdir, "fedprox"), context
    assert _values(work, "fedavg") == _values(finished_workdir, "fedavg"), context
  if damage != _flip_record:   # every other method's files are kept byte for byte
    assert {k: v for k, v in _files(work).items() if "fedprox" in k} == fedprox, context


def _children(pid):
  """Ids of the live child processes of ``pid`` (Linux /proc)."""
  kids = []
  for entry in os.listdir("/proc"):
    if entry.isdigit():
      try:
        with open(f"/proc/{entry}/stat") as f:
          fields = f.read().rsplit(")", 1)[1].split()
      except OSError:
        continue
      if int(fields[1]) == pid and fields[0] != "Z":
        kids.append(int(entry))
  return kids


def _sigterm_when(proc, ready, timeout=600):
  """Send SIGTERM to ``proc`` once ``ready()``; returns its stderr and whether
  every child process it had then (its workers) is gone 10 s after it exits."""
  import signal
  import time
  deadline = time.time() + timeout
  while time.time() < deadline and not ready() and proc.poll() is None:
    time.sleep(0.5)
  assert proc.poll() is None, proc.communicate()[1][-3000:]
  kids = _children(proc.pid)
  proc.send_signal(signal.SIGTERM)
  _, stderr = proc.communicate(timeout=timeout)
  deadline = time.time() + 10
  while time.time() < deadline and any(os.path.exists(f"/proc/{k}") for k in kids):
    time.sleep(0.2)
  return stderr, kids and not any(os.path.exists(f"/proc/{k}") for k in kids)


def test_sigterm_mid_run_in_workers_checkpoints_and_resumes_bit_identically(tmp_path):
  """SIGTERM to ``fedfrac-run`` with two worker processes (the quickstart's
  ``workers=0`` path): every worker finishes its chunk and checkpoints, the
  rows so far are written, one line says how to resume, exit 143, no worker is
  left; the resumed runs equal uninterrupted ones bit for bit."""
  work = tmp_path / "w"
  args = ["--config.only=fedavg", "--config.seeds=(0, 1)", "--config.rounds=100000",
          "--config.progress=False", "--config.model.hidden=(8,)", "--config.eval_every=1",
          "--config.checkpoint_every=1", "--config.data.num_clients=4",
          "--config.workers=2"]
  proc = subprocess.Popen([sys.executable, "-m", "fedfrac.main",
                           "--config=configs/quickstart.py", f"--workdir={work}", *args],
                          cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
  runs = [work / "checkpoints" / "fedavg" / f"seed_{s}" for s in (0, 1)]
  stderr, workers_gone = _sigterm_when(proc, lambda: all(d.is_dir() and os.listdir(d)
                                                         for d in runs))
  assert proc.returncode == 143 and "Traceback" not in stderr, stderr[-3000:]
  # the checkpoint-cost note (fedfrac.runner.chunked.checkpoint_cost_line) is
  # information beside the one line, shown when this machine writes slowly
  lines = [l for l in stderr.splitlines() if l.strip() and not (
      l.startswith("note: ") and "checkpoints took" in l)]
  assert len(lines) == 1 and lines[0].startswith("interrupted: 0 of 2 runs finished, 2 "
                                                 "stopped after a chunk and checkpointed "
                                                 "(SIGTERM); rerun the same command"), lines
  assert workers_gone
  done = [max(int(n[len("step_"):]) for n in os.listdir(d)) for d in runs]
  with open(work / "metrics.csv") as f:
    rows = f.read().splitlines()
  assert len(rows) == 1 + sum(done) and all(",partial," in r for r in rows[1:])
  # Resume seed 0 to one round past the furthest, in this process; compare with
  # a run that was never interrupted.
  import importlib.util
  import fedfrac as ff
  spec = importlib.util.spec_from_file_location("qs", os.path.join(ROOT, "configs",
                                                                   "quickstart.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  c = module.get_config()
  c.only, c.seeds, c.rounds, c.progress = "fedavg", (0,), max(done) + 1, False
  c.model.hidden, c.eval_every, c.checkpoint_every = (8,), 1, 1
  c.data.num_clients, c.workers = 4, 1
  resumed, whole = ff.run(c, workdir=str(work)), ff.run(c)
  strip = lambda rows: [{k: v for k, v in r.items() if k != "wall_s"} for r in rows]
  assert strip(resumed.records[0].round_rows) == strip(whole.records[0].round_rows)
  assert strip(resumed.records[0].rows) == strip(whole.records[0].rows)


def test_sigterm_mid_sweep_keeps_its_points_and_stops_its_workers(tmp_path):
  out = tmp_path / "t.md"
  points = tmp_path / "t.points" / "points"
  proc = subprocess.Popen(
      [sys.executable, "-c", "from fedfrac.sweep import cli; cli()",
       "--config=configs/quickstart.py",
       "--set=only=fedavg", "--set=rounds=2", "--set=model.hidden=(8,)",
       "--set=data.num_clients=4", "--seeds=0", "--sweep=data.alpha=0.1,0.5,1.0,2.0",
       "--workers=2", "--no_progress", f"--out={out}"],
      cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  stderr, workers_gone = _sigterm_when(proc, lambda: points.is_dir() and any(
      n.endswith(".json") for n in os.listdir(points)))
  assert proc.returncode == 143 and "Traceback" not in stderr, stderr[-3000:]
  # the checkpoint-cost note (fedfrac.runner.chunked.checkpoint_cost_line) is
  # information beside the one line, shown when this machine writes slowly
  lines = [l for l in stderr.splitlines() if l.strip() and not (
      l.startswith("note: ") and "checkpoints took" in l)]
  assert len(lines) == 1, stderr[-3000:]
  last = lines[0]
  assert last.startswith("interrupted (SIGTERM): ") and " of 4 points finished and kept " \
      "in " in last, stderr[-3000:]
  kept = int(last.split(": ")[1].split()[0])
  from fedfrac.runner import sealed
  files = [n for n in os.listdir(points) if n.endswith(".json")]
  assert len(files) == kept >= 1
  for name in files:   # every kept point verifies
    sealed.read(str(points / name))
  assert workers_gone and not out.exists()


# A SIGTERM that arrives while the outputs are written waits for them: before,
# the process died with no line and figures missing.
TERM_WHILE_WRITING = (
    "import os, signal, sys\n"
    "from fedfrac.runner import overview\n"
    "import fedfrac.sweep as sweep\n"
    "from fedfrac.sweep import tables as sweep_tables\n"
    "def terminated(real):\n"
    "  def wrapper(*args, **kwargs):\n"
    "    os.kill(os.getpid(), signal.SIGTERM)\n"
    "    return real(*args, **kwargs)\n"
    "  return wrapper\n"
    "overview.results_figures = terminated(overview.results_figures)\n"
    "sweep_tables.plot = terminated(sweep_tables.plot)\n"
    "if sys.argv[1] == 'sweep':\n"
    "  sys.argv = ['fedfrac-sweep'] + sys.argv[2:]\n"
    "  sweep.cli()\n"
    "else:\n"
    "  from fedfrac import main\n"
    "  sys.argv = ['fedfrac-run'] + sys.argv[2:]\n"
    "  main.cli()\n")


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_sigterm_while_writing_outputs_finishes_them_then_one_line(tmp_path, command):
  work = tmp_path / "w"
  if command == "run":
    args = ["--config=configs/quickstart.py", f"--workdir={work}", *FAULT_ARGS[:1],
            "--config.rounds=1", *FAULT_ARGS[2:]]
    files = [work / n for n in ("metrics.csv", "summary.md", "accuracy.png",
                                "ranking.png")]
    said = (f"interrupted (SIGTERM) while writing the outputs: every run had finished, "
            f"and the outputs are written in full in {work}")
  else:
    out = tmp_path / "t.md"
    args = ["--config=configs/quickstart.py", "--set=only=fedavg", "--set=rounds=1",
            "--set=model.hidden=(8,)", "--set=data.num_clients=4", "--seeds=0",
            "--workers=1", "--no_progress", f"--out={out}"]
    files = [out, out.with_suffix(".csv"), out.with_suffix(".png"),
             tmp_path / "t_rounds.png", tmp_path / "t_ranking.png"]
    said = (f"interrupted (SIGTERM) while writing the table: every point had finished, "
            f"and {out} and its files are written in full")
  proc = subprocess.run([sys.executable, "-c", TERM_WHILE_WRITING, command, *args],
                        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)
  lines = [l for l in proc.stderr.splitlines() if l.strip()]
  assert proc.returncode == 143 and lines == [said], (proc.returncode, proc.stderr[-3000:])
  assert all(f.exists() for f in files), [f for f in files if not f.exists()]


def test_a_killed_sweep_parent_takes_its_workers_with_it(tmp_path):
  # Before: `kill -9` of fedfrac-sweep left its worker processes running every
  # batch to the end.
  import signal
  import time
  proc = subprocess.Popen(
      [sys.executable, "-c", "from fedfrac.sweep import cli; cli()",
       "--config=configs/quickstart.py", "--set=only=fedavg", "--set=rounds=100000",
       "--set=model.hidden=(8,)", "--set=data.num_clients=4", "--seeds=0",
       "--sweep=data.alpha=0.1,0.5,1.0,2.0", "--workers=2", "--no_progress",
       f"--dir={tmp_path / 'points'}"],
      cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  def workers():   # the spawned ones (not the resource tracker, not a look-up)
    out = []
    for k in _children(proc.pid):
      try:
        with open(f"/proc/{k}/cmdline", "rb") as f:
          if b"spawn_main" in f.read():
            out.append(k)
      except OSError:
        pass
    return out
  kids = []
  try:
    deadline = time.time() + 300
    while time.time() < deadline and len(kids) < 2 and proc.poll() is None:
      time.sleep(0.5)
      kids = workers()
    if len(kids) != 2:
      proc.kill()
    assert len(kids) == 2, proc.communicate(timeout=60)[1][-3000:]
    time.sleep(3)           # the workers are importing, or running their batches
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    deadline = time.time() + 15
    while time.time() < deadline and any(os.path.exists(f"/proc/{k}") for k in kids):
      time.sleep(0.2)
    assert not any(os.path.exists(f"/proc/{k}") for k in kids)
  finally:
    for k in kids:           # never leave them behind, whatever happened
      try:
        os.kill(k, signal.SIGKILL)
      except ProcessLookupError:
        pass


def test_a_killed_worker_leaves_what_finished_written_and_one_line(tmp_path):
  # Before: "RuntimeError: every worker exited..." as a traceback, and nothing
  # written for the runs that had finished.
  import signal
  import time
  work = tmp_path / "w"
  # 1,000 rounds (about 10 s a run here), so that a worker that started a few seconds
  # before the other is still running when both have checkpointed.
  args = ["--config.only=fedavg", "--config.seeds=(0, 1)", "--config.rounds=1000",
          "--config.progress=False", "--config.model.hidden=(8,)", "--config.eval_every=5",
          "--config.checkpoint_every=1", "--config.data.num_clients=4",
          "--config.workers=2"]
  proc = subprocess.Popen([sys.executable, "-m", "fedfrac.main",
                           "--config=configs/quickstart.py", f"--workdir={work}", *args],
                          cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
  runs = [work / "checkpoints" / "fedavg" / f"seed_{s}" for s in (0, 1)]
  deadline = time.time() + 300
  while time.time() < deadline and proc.poll() is None and not all(
      d.is_dir() and os.listdir(d) for d in runs):
    time.sleep(0.2)
  kids = [k for k in _children(proc.pid) if b"spawn_main" in open(f"/proc/{k}/cmdline",
                                                                   "rb").read()]
  assert proc.poll() is None and len(kids) == 2, proc.communicate()[1][-3000:]
  os.kill(kids[0], signal.SIGKILL)    # the out-of-memory killer's way
  _, stderr = proc.communicate(timeout=600)
  # the checkpoint-cost note (fedfrac.runner.chunked.checkpoint_cost_line) is
  # information beside the one line, shown when this machine writes slowly
  lines = [l for l in stderr.splitlines() if l.strip() and not (
      l.startswith("note: ") and "checkpoints took" in l)]
  assert proc.returncode == 1 and "Traceback" not in stderr, stderr[-3000:]
  assert len(lines) == 1 and lines[0].startswith("error: 1 of 2 runs did not finish ("), lines
  assert "their worker process died (killed, or out of memory?)" in lines[0]
  import csv
  with open(work / "metrics.csv") as f:
    statuses = {(r["seed"], r["status"]) for r in csv.DictReader(f)}
  assert len({s for s, status in statuses if status == "ok"}) == 1, statuses
  assert len(list((work / "runs" / "fedavg").iterdir())) >= 1
