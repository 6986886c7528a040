"""The command line reports bad input in one line with exit status 2 (fedfrac.main).

Each test runs the command line with one class of bad input and checks: status
2, the last stderr line is ``error: ...`` naming what is wrong, no traceback;
with ``--debug`` the traceback is shown. Most run it in this process, as
``python -m fedfrac.main`` does (absl's ``app.run`` with fedfrac's flag parser,
stdout and stderr captured, the exit status from ``SystemExit``); a few run the
real ``python -m fedfrac.main`` in a subprocess, for what only a process shows
(its exit status, a traceback on stderr, signals).
"""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICKSTART = "--config=configs/quickstart.py"


def _cli(*args, process=False):
  """The command line with ``args``, from the repository root: in this process
  (``process=False``), or as ``python -m fedfrac.main`` in a subprocess."""
  if process:
    env = dict(os.environ,
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "fedfrac.main", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=900)
  return helpers.run_cli_in_process(args)


def _error_line(out):
  """The one ``error:`` line of a failed run; checks status and the absence of a traceback."""
  assert out.returncode == 2, (out.returncode, out.stderr[-3000:])
  assert "Traceback" not in out.stderr, out.stderr[-3000:]
  errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
  assert len(errors) == 1, out.stderr[-3000:]
  assert out.stderr.rstrip().splitlines()[-1] == errors[0]
  return errors[0]


def test_bad_value():
  line = _error_line(_cli(QUICKSTART, "--config.rounds=0", process=True))
  assert line == "error: config.rounds=0: must be an integer >= 1"


def test_rounds_beyond_the_int32_round_counter():
  line = _error_line(_cli(QUICKSTART, "--config.rounds=99999999999999999999"))
  assert line == ("error: config.rounds=99999999999999999999: must be at most 2147483647 "
                  "(2**31 - 1): rounds are counted in int32")


def test_bad_value_inside_a_method():
  line = _error_line(_cli(QUICKSTART, "--config.client.lr=-3.0"))
  assert line.startswith("error: config.client.lr=-3.0:")


def test_unknown_key_names_the_key_and_its_siblings():
  line = _error_line(_cli(QUICKSTART, "--config.data.num_clientz=4"))
  assert line.startswith("error: config.data.num_clientz: unknown key 'num_clientz'")
  assert "num_clients" in line  # lists what config.data does have
  line = _error_line(_cli(QUICKSTART, "--config.nosuch.deeper=1"))
  assert line.startswith("error: config.nosuch.deeper: unknown key 'nosuch'")


@pytest.mark.parametrize("override, fragment", [
    ("--config.rounds=abc", "--config.rounds=abc"),   # value of the wrong type
    ("--config.rounds", "--config.rounds"),           # no value at all
    ("--no_such_flag=1", "no_such_flag"),             # not a flag of this program
])
def test_bad_override(override, fragment):
  assert fragment in _error_line(_cli(QUICKSTART, override))


def test_the_config_file_is_read_once(tmp_path):
  calls = tmp_path / "calls"
  path = tmp_path / "counted.py"
  path.write_text(f"from fedfrac.config import base_config\n"
                  f"open({str(calls)!r}, 'a').write('module ')\n\n\n"
                  f"def get_config():\n"
                  f"  open({str(calls)!r}, 'a').write('get_config ')\n"
                  f"  return base_config()\n")
  line = _error_line(_cli(f"--config={path}", "--config.rounds=0"))
  assert line == "error: config.rounds=0: must be an integer >= 1"
  assert calls.read_text().split() == ["module", "get_config"]


def test_overrides_parse_like_the_key_they_set():
  from fedfrac import config_files
  argv, overrides = config_files.split_overrides(
      ["fedfrac-run", "--config=x.py", "--config.rounds", "5", "--config.progress",
       "--config.only=fedavg", "--config.system.deadline=inf", "--config.seeds=0,1",
       "--config.data.input_mean=0.5", "--workdir=w"])
  assert argv == ["fedfrac-run", "--config=x.py", "--workdir=w"]
  from fedfrac.config import base_config
  c = config_files.apply_overrides(base_config(), overrides)
  assert (c.rounds, c.progress, c.only, c.system.deadline, c.seeds,
          c.data.input_mean) == (5, True, "fedavg", float("inf"), (0, 1), (0.5,))


def test_missing_config_flag():
  assert "--config" in _error_line(_cli())


def test_missing_config_file(tmp_path):
  path = str(tmp_path / "absent.py")
  assert _error_line(_cli(f"--config={path}")) == f"error: --config={path}: no such file"


def test_config_file_that_raises(tmp_path):
  path = tmp_path / "broken.py"
  path.write_text("def get_config():\n  raise RuntimeError('broken on purpose')\n")
  line = _error_line(_cli(f"--config={path}"))
  assert str(path) in line and "RuntimeError: broken on purpose" in line
  # A KeyError inside the file is the file's fault, not an unknown override key.
  path.write_text("def get_config():\n  return {}['missing']\n")
  line = _error_line(_cli(f"--config={path}", "--config.rounds=3"))
  assert "the config file raised KeyError" in line


def test_missing_tfds_dataset(tmp_path):
  line = _error_line(_cli(QUICKSTART, "--config.data.source=tfds",
                          f"--config.data.tfds.data_dir={tmp_path}",
                          "--config.model.name=cnn_mnist", "--config.progress=False"))
  assert "tfds dataset 'mnist' is not available" in line and "download=True" in line


def test_missing_ved_files(tmp_path):
  missing = str(tmp_path / "ved")
  line = _error_line(_cli(QUICKSTART, "--config.data.source=ved_csv",
                          "--config.data.partition=natural", "--config.data.num_clients=0",
                          "--config.model.name=window_mlp", "--config.task.loss=mse",
                          f"--config.data.bev.ved_path={missing}",
                          "--config.progress=False"))
  assert line.startswith(f"error: data.bev.ved_path='{missing}':")


def test_debug_shows_the_traceback():
  out = _cli(QUICKSTART, "--config.rounds=0", "--debug", process=True)
  assert out.returncode != 0
  assert "Traceback" in out.stderr and "ConfigError" in out.stderr
  out = _cli(QUICKSTART, "--config.nosuch=1", "--debug", process=True)
  assert out.returncode != 0 and "Traceback" in out.stderr


SMALL = ("--config.only=fedavg", "--config.rounds=2", "--config.progress=False",
         "--config.model.hidden=(16,)")


OPTIONS_ABSENT_FROM_THE_FILE = [
    "--config.methods.fofedavg.alpha=0.9",
    "--config.methods.fofedavg.delta=0.5",
    "--config.methods.fibfl_pp.passes=2",
    "--config.methods.fedavg.client.lr=0.05",
]


def _stored(tree, override):
  path, value = override[len("--config."):].split("=")
  node = tree
  for part in path.split("."):
    node = node[part]
  return node, float(value) if "." in value else int(value)


@pytest.mark.parametrize("override", OPTIONS_ABSENT_FROM_THE_FILE)
def test_method_options_absent_from_the_config_file_can_be_set(override):
  # Row 1: three chained tracebacks ending in AttributeError before, while the
  # overrides were applied to the loaded file (the parse, before any compute).
  from absl import flags
  from fedfrac import main as main_lib
  label = override.split(".")[2]
  try:
    main_lib.parse_flags(["fedfrac-run", QUICKSTART.replace("configs/", ROOT + "/configs/"),
                          *SMALL[1:], f"--config.only={label}", override])
    node, value = _stored(main_lib._LOADED["config"].to_dict(), override)
    assert node == value
  finally:
    flags.FLAGS.unparse_flags()


def test_a_method_option_absent_from_the_config_file_runs_and_is_recorded(tmp_path):
  override = OPTIONS_ABSENT_FROM_THE_FILE[0]
  out = _cli(QUICKSTART, *SMALL[1:], "--config.only=fofedavg", override,
             f"--workdir={tmp_path}")
  assert out.returncode == 0, out.stderr[-3000:]
  node, value = _stored(json.loads((tmp_path / "config.json").read_text()), override)
  assert node == value


def test_a_misspelt_method_option_says_did_you_mean():
  line = _error_line(_cli(QUICKSTART, *SMALL, "--config.methods.fofedavg.alpah=0.9"))
  assert "did you mean 'alpha'" in line
  line = _error_line(_cli(QUICKSTART, *SMALL, "--config.methods.fedavg.client.lrr=0.1"))
  assert "unknown client option 'lrr'; did you mean 'lr'" in line
  line = _error_line(_cli(QUICKSTART, *SMALL[1:], "--config.only=fofedavg",
                          "--config.methods.fofedavg.alpha=abc"))
  assert line.startswith("error: config.methods.fofedavg.alpha='abc'")


def test_workdir_of_another_config_is_one_line_and_overwrite_reruns(tmp_path):
  assert _cli(QUICKSTART, *SMALL, f"--workdir={tmp_path}").returncode == 0
  line = _error_line(_cli(QUICKSTART, *SMALL, f"--workdir={tmp_path}",
                          "--config.client.lr=0.01"))
  assert "client.lr 0.1 -> 0.01" in line and "--overwrite" in line
  out = _cli(QUICKSTART, *SMALL, f"--workdir={tmp_path}", "--config.client.lr=0.01",
             "--overwrite")
  assert out.returncode == 0, out.stderr[-2000:]
  assert json.loads((tmp_path / "config.json").read_text())["client"]["lr"] == 0.01


def test_negative_stop_after_round_and_unwritable_workdir(tmp_path):
  line = _error_line(_cli(QUICKSTART, *SMALL, "--stop_after_round=-1"))
  assert line == "error: --stop_after_round=-1: must be an integer >= 1"
  blocker = tmp_path / "file"
  blocker.write_text("")
  line = _error_line(_cli(QUICKSTART, *SMALL, f"--workdir={blocker}/sub"))
  assert line.startswith(f"error: --workdir={blocker}/sub: cannot write there")


def test_ctrl_c_checkpoints_writes_rows_and_exits_130(tmp_path):
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  args = [sys.executable, "-m", "fedfrac.main", QUICKSTART, "--config.only=fedavg",
          "--config.rounds=100000", "--config.progress=False", "--config.eval_every=1",
          "--config.checkpoint_every=1", "--config.model.hidden=(16,)",
          f"--workdir={tmp_path}"]
  proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
  run_dir = tmp_path / "checkpoints" / "fedavg" / "seed_0"
  deadline = time.time() + 600
  while time.time() < deadline and not (run_dir.is_dir() and os.listdir(run_dir)):
    time.sleep(0.5)
  proc.send_signal(signal.SIGINT)
  stdout, stderr = proc.communicate(timeout=600)
  assert proc.returncode == 130, stderr[-3000:]
  assert "Traceback" not in stderr
  last = stderr.rstrip().splitlines()[-1]
  assert last.startswith("interrupted: fedavg seed 0 stopped after round ")
  assert f"rerun the same command with --workdir={tmp_path} to resume" in last
  done = int(last.split("stopped after round ")[1].split()[0])
  assert os.path.isdir(run_dir / f"step_{done}")
  rows = (tmp_path / "metrics.csv").read_text().splitlines()
  assert len(rows) == 1 + done and rows[-1].split(",")[4] == "partial"
  # The rerun says where it resumes.
  out = _cli(*args[3:], f"--stop_after_round={done + 1}", process=True)
  assert out.returncode == 0, out.stderr[-2000:]
  assert f"resuming fedavg seed 0 from round {done}" in out.stderr.splitlines()


def test_a_second_parse_in_one_process_starts_from_the_defaults():
  # absl keeps what an earlier parse set: `--list` parsed after a run's flags in
  # the same process (a notebook, a test session) must not read that run's file.
  from absl import flags
  from fedfrac import main as main_lib
  try:
    main_lib.parse_flags(["fedfrac-run", "--config=" + os.path.join(ROOT, "configs",
                                                                      "quickstart.py"),
                          "--workdir=/tmp/unused"])
    assert "config" in main_lib._LOADED and flags.FLAGS.workdir == "/tmp/unused"
    main_lib.parse_flags(["fedfrac-run", "--list"])
    assert "config" not in main_lib._LOADED
    assert flags.FLAGS.config is None and flags.FLAGS.workdir is None
  finally:
    flags.FLAGS.unparse_flags()
