"""SIGTERM is handled like Ctrl-C (fedfrac.runner.signals): a run stops after its
chunk with a checkpoint and its rows, a sweep stops at once keeping its finished
points, and either resumes bit-identically to an uninterrupted one.

The signal is sent by the process to itself at a known point (a patched hook),
so the tests are deterministic; a fallback handler installed first keeps a
missing handler from killing the test session (the run then simply finishes,
and the test fails)."""
from __future__ import annotations

import csv
import os
import signal

import pytest

import fedfrac as ff
from fedfrac import sweep
from fedfrac.runner import log as log_lib
from fedfrac.runner import points as points_lib
from tests import helpers

VOLATILE = ("wall_s", "executed_steps")


def _strip(rows):
  return [{k: v for k, v in r.items() if k not in VOLATILE} for r in rows]


@pytest.fixture
def fallback_sigterm():
  """A SIGTERM handler that only notes the signal (restored afterwards)."""
  seen = []
  previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
  yield seen
  signal.signal(signal.SIGTERM, previous)


def test_sigterm_stops_a_run_after_its_chunk_and_the_resume_is_bit_identical(
    tmp_path, monkeypatch, fallback_sigterm):
  # checkpoint_every=0, as in the quickstart: before, SIGTERM kept nothing.
  c = helpers.tiny_config(rounds=5, eval_every=1, checkpoint_every=0)
  full = ff.run(c)
  real_add = log_lib.RunLog.add_chunk

  def add_chunk(self, first_round, *args):
    row = real_add(self, first_round, *args)
    if first_round == 1:        # the chunk of round 2 has run
      os.kill(os.getpid(), signal.SIGTERM)
    return row
  monkeypatch.setattr(log_lib.RunLog, "add_chunk", add_chunk)
  handler = signal.getsignal(signal.SIGTERM)
  with pytest.raises(ff.runner.RunInterrupted) as e:
    ff.run(c, workdir=str(tmp_path))
  assert signal.getsignal(signal.SIGTERM) is handler      # restored
  assert e.value.signum == signal.SIGTERM and not fallback_sigterm
  assert e.value.message == (f"interrupted: fedavg seed 0 stopped after round 2 of 5 "
                             f"(SIGTERM); call it again with the same "
                             f"workdir='{tmp_path}' to resume")
  assert os.listdir(tmp_path / "checkpoints" / "fedavg" / "seed_0") == ["step_2"]
  with open(tmp_path / "metrics.csv") as f:
    rows = list(csv.DictReader(f))
  assert [(r["round"], r["status"]) for r in rows] == [("1", "partial"), ("2", "partial")]
  monkeypatch.undo()
  resumed = ff.run(c, workdir=str(tmp_path))
  assert _strip(resumed.records[0].rows) == _strip(full.records[0].rows)
  assert _strip(resumed.records[0].round_rows) == _strip(full.records[0].round_rows)


def test_sigterm_stops_a_sweep_keeping_its_points_and_the_resume_is_bit_identical(
    tmp_path, monkeypatch, fallback_sigterm):
  base = helpers.tiny_config(rounds=2, eval_every=1)
  axes = [("data.alpha", [0.1, 1.0])]
  quiet = dict(workers=1, progress=False, log=lambda *a, **k: None)
  whole = sweep.run_sweep(base, axes, [0], ["accuracy"], directory=str(tmp_path / "a"),
                          **quiet)
  real_write = points_lib.PointStore.write

  def write(self, pid, record):
    real_write(self, pid, record)
    os.kill(os.getpid(), signal.SIGTERM)      # after the first point is kept
  monkeypatch.setattr(points_lib.PointStore, "write", write)
  cut = tmp_path / "b"
  with pytest.raises(KeyboardInterrupt) as e:     # fedfrac.runner.signals.Interrupted
    sweep.run_sweep(base, axes, [0], ["accuracy"], directory=str(cut), **quiet)
  assert getattr(e.value, "signum", None) == signal.SIGTERM and not fallback_sigterm
  assert e.value.message == (f"interrupted (SIGTERM): 1 of 2 points finished and kept in "
                             f"{cut}; rerun the same command to run the rest")
  monkeypatch.undo()
  resumed = sweep.run_sweep(base, axes, [0], ["accuracy"], directory=str(cut), **quiet)
  assert (resumed.ran, resumed.skipped) == (1, 1)
  assert resumed.points == whole.points


def test_the_resume_line_quotes_a_workdir_with_spaces():
  # Before: --workdir=/tmp/my runs, which a shell splits in two.
  from fedfrac import _validation
  from fedfrac.runner import chunked
  _validation.name_flags()    # as fedfrac.main does
  try:
    assert chunked.resume_hint("/tmp/my runs") == ("rerun the same command with "
                                                   "--workdir='/tmp/my runs' to resume")
    assert chunked.resume_hint("/tmp/w") == "rerun the same command with --workdir=/tmp/w " \
                                            "to resume"
    assert chunked.resume_hint(None) == "no --workdir was given, so nothing was kept"
  finally:
    _validation.name_flags(False)


def test_the_resume_line_from_python_names_the_keyword_not_the_flag():
  # Before: a Ctrl-C in a notebook said "no --workdir was given".
  from fedfrac.runner import chunked
  assert chunked.resume_hint("/tmp/my runs") == ("call it again with the same "
                                                 "workdir='/tmp/my runs' to resume")


def test_a_signal_in_python_without_a_workdir_says_the_runs_are_in_e_results(
    monkeypatch, fallback_sigterm):
  # Before: "no workdir was given, so nothing was kept" while e.results held the
  # finished run and the stopped one's rows.
  c = helpers.tiny_config(rounds=5, eval_every=1, checkpoint_every=0, seeds=(0, 1))
  real_add = log_lib.RunLog.add_chunk
  chunks = []

  def add_chunk(self, first_round, *args):
    row = real_add(self, first_round, *args)
    chunks.append(first_round)
    if len(chunks) == 7:        # seed 0 finished, seed 1 ran round 2
      os.kill(os.getpid(), signal.SIGTERM)
    return row
  monkeypatch.setattr(log_lib.RunLog, "add_chunk", add_chunk)
  with pytest.raises(ff.runner.RunInterrupted) as e:
    ff.run(c)
  assert e.value.message == (
      "interrupted: fedavg seed 1 stopped after round 2 of 5 (SIGTERM); the runs so far "
      "are in e.results (a stopped one as partial); nothing was written to disk, as no "
      "workdir= was given (give one to keep checkpoints and resume)")
  assert [(r.seed, r.status, len(r.round_rows)) for r in e.value.results.records] == [
      (0, "ok", 5), (1, "partial", 2)]


def test_a_warning_on_the_command_line_is_one_line(tmp_path):
  # Before: Python's two lines, the second "  warnings.warn(msg)" read as a
  # duplicated, broken line.
  import os
  import subprocess
  import sys
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  env = dict(os.environ, PYTHONPATH=root, JAX_PLATFORMS="cpu")
  out = subprocess.run(
      [sys.executable, "-m", "fedfrac.main", "--config=configs/quickstart.py",
       "--config.only=fedavg", "--config.rounds=1", "--config.workers=1",
       "--config.progress=False", "--config.model.hidden=(8,)",
       "--config.data.num_clients=4", "--config.client.lr=1e6", f"--workdir={tmp_path}"],
      cwd=root, env=env, capture_output=True, text=True, timeout=600)
  lines = [l for l in out.stderr.splitlines() if l.strip()]
  assert out.returncode == 0 and len(lines) == 1, out.stderr[-2000:]
  assert lines[0].startswith("warning: method 'fedavg' seed 0 diverged at round 1: "), lines


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_signal_swallowed_in_a_garbage_collection_callback_still_stops():
  """Python prints "Exception ignored" for an exception out of a gc callback
  (JAX registers one) and goes on: a Ctrl-C that landed there let a sweep run
  to its end and exit 0. Leaving the block raises it again."""
  import gc

  from fedfrac.runner import signals
  fired = []

  def callback(phase, info):
    if phase == "start" and not fired:
      fired.append(True)
      os.kill(os.getpid(), signal.SIGINT)
      for _ in range(10_000):   # the handler runs here, inside the callback
        pass
  previous = signal.signal(signal.SIGINT, lambda *a: None)   # a fallback, never used
  try:
    with pytest.raises(signals.Interrupted) as e:
      with signals.Signals(graceful=False):
        gc.callbacks.append(callback)
        try:
          gc.collect()
        finally:
          gc.callbacks.remove(callback)
    assert fired and e.value.signum == signal.SIGINT
  finally:
    signal.signal(signal.SIGINT, previous)


def test_a_swallowed_signal_stops_the_work_at_the_next_chunk_not_at_its_end():
  """The same swallowed Ctrl-C while a long batch computes: the run stops after
  the chunk it landed in (chunk_loop checks), not after its last round."""
  import gc

  from fedfrac.runner import signals
  c = helpers.tiny_config(rounds=40, eval_every=2, progress=False)
  fired = []

  def callback(phase, info):
    if phase == "start" and not fired:
      fired.append(True)
      os.kill(os.getpid(), signal.SIGINT)
      for _ in range(10_000):
        pass
  rounds = []
  previous = signal.signal(signal.SIGINT, lambda *a: None)
  try:
    with pytest.raises(signals.Interrupted):
      with signals.Signals(graceful=False):
        gc.callbacks.append(callback)
        try:
          gc.collect()          # the signal lands in the callback and is dropped
        finally:
          gc.callbacks.remove(callback)
        rounds.append(0)
        ff.run(c)               # its first chunk boundary raises it again
        rounds.append(c.rounds)
  finally:
    signal.signal(signal.SIGINT, previous)
  assert fired and rounds == [0]
  signals.raise_if_swallowed()  # nothing is left pending once it reached its caller
