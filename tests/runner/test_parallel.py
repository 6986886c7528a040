"""``fedfrac.runner.parallel`` (``config.workers``): (method, seed) runs spread
over worker processes give the same results as one process, keep the workdir
contract, and re-raise a divergence with ``on_divergence="error"``."""
from __future__ import annotations

import json

import ml_collections
import pytest

import fedfrac as ff
from tests import helpers

VOLATILE = {"wall_s", "compile_s", "round_s", "eval_s"}


def _strip(rows):
  return [{k: v for k, v in r.items() if k not in VOLATILE} for r in rows]


def _two_methods(**overrides):
  c = helpers.tiny_config(rounds=3, eval_every=1, seeds=(0,), **overrides)
  c.methods.scaffold = ml_collections.ConfigDict(dict(name="scaffold"))
  return c


def test_workers_give_the_same_results_as_one_process(tmp_path):
  one = ff.run(_two_methods(), workdir=str(tmp_path / "one"))
  two = ff.run(_two_methods(workers=2), workdir=str(tmp_path / "two"))
  key = lambda r: (r["method"], r["seed"], r["round"])   # noqa: E731
  assert len(two.rows) == len(one.rows) == 2 * 3
  assert _strip(sorted(two.rows, key=key)) == _strip(sorted(one.rows, key=key))
  assert (_strip(sorted(two.round_rows, key=key))
          == _strip(sorted(one.round_rows, key=key)))
  summary = json.loads((tmp_path / "two" / "summary.json").read_text())
  assert set(summary["methods"]) == {"fedavg", "scaffold"}
  assert all(set(m["seeds"]) == {"0"} for m in summary["methods"].values())
  # The workdir is the same experiment whatever the worker count: a rerun with
  # one process finds every run finished and computes nothing new.
  again = ff.run(_two_methods(), workdir=str(tmp_path / "two"))
  assert _strip(sorted(again.rows, key=key)) == _strip(sorted(two.rows, key=key))


def test_divergence_in_a_worker_is_raised_after_the_others_finish(tmp_path):
  c = helpers.diverging_config(rounds=2, eval_every=1, workers=2)
  with pytest.raises(FloatingPointError, match="'wild' seed 0 diverged"):
    ff.run(c, workdir=str(tmp_path))
  summary = json.loads((tmp_path / "summary.json").read_text())
  assert summary["methods"]["fedavg"]["seeds"]["0"]["status"] == "ok"
  assert summary["methods"]["wild"]["seeds"]["0"]["status"].startswith("diverged")


@pytest.mark.parametrize("key,value,match", [
    ("workers", -1, "config.workers=-1: must be an integer >= 0"),
    ("engine.cpu_devices", 2, "config.workers=2: .*engine.cpu_devices needs workers=1"),
])
def test_bad_worker_settings_are_rejected(key, value, match):
  c = helpers.tiny_config(workers=2)
  target = c
  for part in key.split(".")[:-1]:
    target = target[part]
  target[key.split(".")[-1]] = value
  with pytest.raises(ff.ConfigError, match=match):
    ff.run(c)


_SCRIPT = '''
import numpy as np
import fedfrac as ff
from fedfrac.runner import extensions
{guard_probe}
x = np.random.default_rng(0).normal(size=(2000, 20)).astype(np.float32)   # > a pipe
y = np.argmax(x[:, :3], axis=1)
c = ff.base_config()
c.rounds, c.progress, c.workers = 1, False, 2
c.data.num_clients, c.model.hidden = 3, (8,)
c.data.min_client_size = 8
c.methods = {{"fedavg": {{"name": "fedavg"}}, "fedprox": {{"name": "fedprox"}}}}
r = ff.run(c, data=(x, y))
print("finished", r.methods())
'''


def _run_script(tmp_path, text, timeout=300):
  import os
  import signal
  import subprocess
  import sys
  path = tmp_path / "experiment.py"
  path.write_text(text)
  env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(helpers.__file__)))
  proc = subprocess.Popen([sys.executable, str(path)], cwd=tmp_path, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          start_new_session=True)
  try:
    out, err = proc.communicate(timeout=timeout)
  except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)   # the script and the workers it started
    proc.communicate()
    pytest.fail(f"the script did not finish in {timeout} s")
  return proc.returncode, out, err


def test_a_script_without_a_main_guard_runs_in_this_process_instead_of_hanging(tmp_path):
  """``workers > 1`` with ``data=`` from a script without ``if __name__ ==
  "__main__":`` never finished: each spawned worker imports the script again,
  runs its experiment and waits on its own workers (still alive after 11 min;
  with less data than a pipe holds: "every worker exited with 2 tasks left")."""
  code, out, err = _run_script(tmp_path, _SCRIPT.format(guard_probe=""))
  assert code == 0, err[-2000:]
  assert "finished ['fedavg', 'fedprox']" in out
  lines = [l for l in err.splitlines() if "running in this process" in l]
  assert len(lines) == 1, err[-2000:]
  assert lines[0].startswith("config.workers=2: running in this process: experiment.py "
                             "runs this at its top level (line 13) without an `if "
                             "__name__ == \"__main__\":` guard")


def test_a_script_read_from_standard_input_runs_in_this_process_saying_why(tmp_path):
  """``python - <<EOF`` with ``workers=2`` and ``data=``: every spawned worker died
  importing ``<stdin>`` and the run ended "their worker process died (killed, or out
  of memory?)" (or, with more data than a pipe holds, waited until killed)."""
  import os
  import subprocess
  import sys
  env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(helpers.__file__)))
  proc = subprocess.run([sys.executable, "-"], input=_SCRIPT.format(guard_probe=""),
                        cwd=tmp_path, env=env, text=True, capture_output=True, timeout=60)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "finished ['fedavg', 'fedprox']" in proc.stdout
  lines = [l for l in proc.stderr.splitlines() if "running in this process" in l]
  assert lines == ["config.workers=2: running in this process: this script's __main__ is "
                   "'<stdin>' (read from standard input, or its file is gone), which a "
                   "spawned worker process imports first and cannot; save the script to a "
                   "file to use worker processes"], proc.stderr[-2000:]


def test_a_worker_that_fails_at_start_up_is_said_at_once_in_its_own_words():
  import time

  from fedfrac.runner import work_queue
  t0 = time.monotonic()
  with pytest.raises(work_queue.WorkersLost) as e:
    work_queue.work_queue([1, 2], "fedfrac.runner.no_such_module:task", 1,
                          lambda i, p: None, pin=False)
  assert e.value.reason == ("a worker process failed at start-up: ModuleNotFoundError: "
                            "No module named 'fedfrac.runner.no_such_module'")
  assert time.monotonic() - t0 < 60


def test_workers_gone_before_any_task_are_not_said_to_be_killed():
  from types import SimpleNamespace

  from fedfrac.runner.work_queue import lost_reason
  exited = [SimpleNamespace(exitcode=1), SimpleNamespace(exitcode=1)]
  assert lost_reason(exited, False, None).startswith(
      "every worker process exited at start-up with exit code 1 before taking a task")
  killed = [SimpleNamespace(exitcode=-9)]
  assert lost_reason(killed, True, None) == "killed, or out of memory?"


def test_only_a_call_outside_the_main_guard_counts_as_unguarded(tmp_path):
  probe = '''
def where():
  return extensions.unguarded_main()
print("top:", where() is not None)
if __name__ == "__main__":
  print("guarded:", where() is None)
raise SystemExit(0)'''
  code, out, err = _run_script(tmp_path, _SCRIPT.format(guard_probe=probe))
  assert code == 0, err[-2000:]
  assert "top: True" in out and "guarded: True" in out
  assert extensions_problem_here() is None   # pytest's own entry point is guarded


def extensions_problem_here():
  from fedfrac.runner import extensions
  return extensions.unguarded_main()


def test_a_config_workers_cannot_receive_runs_here_saying_why(capsys):
  """An optax object as the server optimizer has local functions, which the
  worker queue's pickle cannot send: the runs use this process, saying why."""
  import optax
  from fedfrac.runner import parallel
  c = helpers.tiny_config(workers=2)
  c.methods = ml_collections.ConfigDict(
      {"a": {"name": "fedavg", "server_optimizer": optax.adam(1e-2)}})
  assert parallel.worker_count(c, 2) == 1
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith(
      "config.workers=2: running in this process: the config cannot be sent to worker "
      "processes (")
  c.methods = ml_collections.ConfigDict(   # by name it travels
      {"a": {"name": "fedavg", "server_optimizer": "adam(0.01)"}})
  assert parallel.worker_count(c, 2) == 2


def test_workers_lost_from_python_without_a_workdir_point_at_e_results(monkeypatch):
  # Before: "nothing was kept (no workdir)" while e.results held what finished.
  from fedfrac.runner import parallel, work_queue

  def lose_every_worker(items, target, workers, on_message, **kw):
    raise work_queue.WorkersLost(range(len(items)))
  monkeypatch.setattr(parallel.work_queue, "work_queue", lose_every_worker)
  c = helpers.tiny_config(rounds=1, seeds=(0, 1), workers=2)
  with pytest.raises(parallel.RunsLost) as e:
    ff.run(c)
  message = str(e.value)
  assert message.startswith("2 of 2 runs did not finish (fedavg seed 0, ...)")
  assert message.endswith("the 0 that finished are in e.results; nothing was written to "
                          "disk, as no workdir= was given")
  assert "--workdir" not in message and e.value.results.records == []
