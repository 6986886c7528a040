"""fedfrac-sweep speaks like fedfrac-run (fedfrac.sweep.checks): bad input is
one ``error:`` line with exit status 2, before any point runs (no point
directory, no table) and without a traceback."""
from __future__ import annotations

import os

import pytest

from fedfrac import sweep
from fedfrac.sweep import checks as sweep_checks
from fedfrac.config import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICKSTART = os.path.join(ROOT, "configs", "quickstart.py")
SMALL = ["--set=rounds=1", "--set=model.hidden=(8,)", "--set=data.num_clients=4",
         "--workers=1", "--no_progress"]


def _refused(tmp_path, capsys, *flags, only="fedavg"):
  """The one ``error:`` line of a sweep refused before compute."""
  out = tmp_path / "t.md"
  argv = [f"--config={QUICKSTART}", f"--set=only={only}", *SMALL, *flags]
  if not any(f.startswith("--out") for f in flags):
    argv.append(f"--out={out}")
  capsys.readouterr()
  with pytest.raises(SystemExit) as stopped:
    sweep.main(argv)
  err = capsys.readouterr().err
  assert stopped.value.code == 2, err
  lines = [l for l in err.splitlines() if l.strip()]
  assert len(lines) == 1 and lines[0].startswith("error: "), lines
  assert "Traceback" not in err
  assert not out.exists() and not (tmp_path / "t.points").exists()
  return lines[0]


# flags -> a fragment of the error line (each exited 1 with a traceback, or ran
# and lost or misreported values, before).
CASES = [
    (["--grid=alpha=abc"], "--grid=alpha=abc: 'abc' is not a number"),
    (["--grid=alpha=5,0.9"], "config.methods.fofedavg.alpha=5"),
    (["--grid=alhpa=0.5"], "no method of the sweep (fofedavg) has option 'alhpa'; did "
                           "you mean 'alpha'?"),
    (["--grid_methods=fedavgg", "--grid=alpha=0.9"], "unknown method label 'fedavgg'"),
    (["--seeds=-1"], "--seeds=-1: '-1' is not a seed"),
    (["--seeds=0,x"], "'x' is not a seed"),
    (["--seeds=1,1"], "seed 1 is listed twice"),
    (["--sweep=client.lr=-1,0.1"], "sweep point client.lr=-1: config.client.lr=-1.0: "
                                   "must be > 0"),
    (["--set=client.lr=nan"], "config.client.lr=nan: is not finite"),
    (["--set=client.lr=1e308"], "config.client.lr=1e+308: is not finite in float32"),
    (["--set=eval_every=abc"], "config.eval_every holds int values"),
    (["--set=rounds=2"], "rounds is already set by --set=rounds=1; give it once"),
    (["--set=data.alhpa=0.05"], "unknown key 'alhpa'; did you mean 'alpha'?"),
    (["--sweep=data.alpha=0.1", "--sweep=data.alpha=0.5"],
     "data.alpha is already an axis (--sweep=data.alpha=0.1)"),
    (["--set=data.alpha=0.1", "--sweep=data.alpha=0.5,1.0"],
     "data.alpha is also fixed by --set=data.alpha=0.1"),
    (["--sweep=data.alpha=0.5,0.5"], "the sweep names the same point twice"),
    (["--metrics=acuracy"], "'acuracy': no method of the sweep writes this column; did "
                            "you mean 'accuracy'?"),
    (["--metrics=mean:train_los"], "no method of the sweep writes a per-round column "
                                   "'train_los'; did you mean 'train_loss'?"),
    (["--set=noequals"], "--set=noequals: expected KEY=VALUE"),
    (["--workers=abc"], "argument --workers: invalid int value: 'abc'"),
    (["--batch_size=-1"], "--batch_size=-1: need 0 (auto) or more"),
    (["--no_batch", "--grid=alpha=0.5,0.9"], "--grid needs batched runs"),
    (["--out="], "--out=: empty; give a file path for the tables"),
    (["--metrics="], "--metrics=: empty; give metric names"),
    (["--metrics=,"], "--metrics=,: no metric names"),
    (["--sweep=client.lr=0.1,,1.0"], "--sweep=client.lr=0.1,,1.0: value 2 of 3 is empty"),
    (["--grid=alpha=0.5,"], "--grid=alpha=0.5,: value 2 of 2 is empty"),
    (["--sweep=client.local_steps=1,99999999999999999999"],
     "config.client.local_steps=99999999999999999999: must be at most 2147483647"),
]


@pytest.mark.parametrize("flags, fragment", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_bad_input_is_one_line_before_compute(tmp_path, capsys, flags, fragment):
  line = _refused(tmp_path, capsys, *flags, only="fofedavg")
  assert fragment in line, line


def test_outputs_that_cannot_be_written_are_refused(tmp_path, capsys):
  blocker = tmp_path / "file"
  blocker.write_text("")
  line = _refused(tmp_path, capsys, f"--out={blocker}/t.md")
  assert line == f"error: --out={blocker}/t.md: {blocker} is a file, so nothing can " \
                 f"be written under it"
  line = _refused(tmp_path, capsys, f"--out={tmp_path}")
  assert "is a directory; give a file name" in line
  line = _refused(tmp_path, capsys, f"--dir={blocker}")
  assert line == f"error: --dir={blocker}: is a file; give a directory"


def test_a_metric_some_method_writes_passes_the_check():
  config = sweep.load_config(QUICKSTART)
  config.only = "fofedavg"
  config.model.hidden = (8,)
  config.data.num_clients = 4
  final, per_round = sweep_checks.metric_names(config, "fofedavg")
  assert {"accuracy", "server/drift_mean", "wall_s", "train_loss"} <= set(final)
  assert "train_loss" in per_round and "accuracy" not in per_round
  sweep_checks.check_metrics([config], ["accuracy", "server/drift_mean",
                                        "mean:train_loss"], {"accuracy"})


def test_set_key_checks_keys_and_types():
  config = sweep.load_config(QUICKSTART)
  sweep.set_key(config, "methods.fedavg.client.lr", 0.01)     # absent until set
  assert config.methods.fedavg.client.lr == 0.01
  sweep.set_key(config, "client.lr", "inf")                     # text of a float
  assert config.client.lr == float("inf")
  with pytest.raises(ConfigError, match="did you mean 'lr'"):
    sweep.set_key(config, "methods.fedavg.client.lrr", 0.1)
  with pytest.raises(ConfigError, match="holds tuple values"):
    sweep.set_key(config, "model.hidden", "big")


def test_a_grid_of_the_client_learning_rate_is_accepted_as_run_many_accepts_it(
    tmp_path, capsys):
  # Before: "--grid=client.lr=...: no method of the sweep has option 'client.lr'",
  # while ff.run_many(grid={"client.lr": ...}) ran it.
  base = sweep.load_config(QUICKSTART)
  base.only = "fedavg,fedprox"
  sweep_checks.check_grid(base, {"client.lr": [0.05, 0.2]}, [])
  assert sweep.grid_targets(base, {"client.lr": [0.05]}, []) == ["fedavg", "fedprox"]
  line = _refused(tmp_path, capsys, "--grid=client.lr=0.05,-1")
  assert "--grid=client.lr=0.05,-1: " in line and "must be > 0" in line, line
  out = tmp_path / "ok.md"
  points = sweep.main([f"--config={QUICKSTART}", "--set=only=fedavg", *SMALL,
                       "--grid=client.lr=0.05,0.2", "--seeds=0", f"--out={out}"])
  labels = [label for _, summary in points for label in summary]
  assert labels == ["fedavg[client.lr=0.05]", "fedavg[client.lr=0.2]"]


def test_a_point_directory_whose_layout_is_in_the_way_is_refused(tmp_path, capsys):
  """Each ended in a traceback once the sweep wrote there (``FileExistsError``
  for claims/, ``IsADirectoryError`` renaming a point over a folder) or ran
  with nothing kept (a --dir that cannot be created)."""
  pts = tmp_path / "pts"
  (pts / "claims").parent.mkdir()
  (pts / "claims").write_text("not a folder")
  line = _refused(tmp_path, capsys, f"--dir={pts}", "--shard=0/2")
  assert line == (f"error: --dir={pts}: {pts}/claims is a file where the sweep keeps its "
                  f"claims folder; move it away")
  (pts / "claims").unlink()
  (pts / "points" / "0524e326f6e55376.json").mkdir(parents=True)
  line = _refused(tmp_path, capsys, f"--dir={pts}")
  assert line == (f"error: --dir={pts}: {pts}/points/0524e326f6e55376.json is a folder "
                  f"where a point file goes; move it away")
  line = _refused(tmp_path, capsys, "--dir=/proc/fedfrac_no_such/pts")
  assert line.startswith("error: --dir=/proc/fedfrac_no_such/pts: cannot "), line
  # Checking that a --dir can be created leaves nothing behind.
  sweep_checks.check_output("--dir", str(tmp_path / "a" / "b"), directory=True)
  assert not (tmp_path / "a").exists()
