"""fedfrac.sweep: argument parsing, config axes × a vmapped grid, packing into
batches, the point directory (resume, refusal of a different sweep), a killed
sweep resumed, and the table outputs."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from fedfrac import sweep as sweep_module
from fedfrac.sweep import checks as sweep_checks
from fedfrac.config import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def sweep():
  return sweep_module


def test_parse_values_and_assignments(sweep):
  assert sweep.parse_assignment("rounds=5", "--set") == ("rounds", 5)
  assert sweep.parse_assignment("client.schedule=inv_sqrt", "--set") == (
      "client.schedule", "inv_sqrt")
  assert sweep.parse_assignment("alpha=0.5,1.0", "--grid", many=True) == (
      "alpha", [0.5, 1.0])
  assert sweep.parse_assignment("model.hidden=(8,);(16, 8)", "--sweep", many=True) == (
      "model.hidden", [(8,), (16, 8)])
  with pytest.raises(sweep_checks.UsageError, match="KEY=VALUE"):
    sweep.parse_assignment("rounds", "--set")


def test_axes_times_grid_table(sweep, tmp_path):
  out = tmp_path / "table.md"
  points = sweep.main([
      "--config", os.path.join(ROOT, "configs", "quickstart.py"),
      "--set=rounds=1", "--set=model.hidden=(8,)", "--set=only=fedavg",
      "--set=data.num_clients=4", "--sweep=client.lr=0.05,0.2",
      "--grid=server_lr=0.5,1.0", "--seeds=0,1", "--workers=1", f"--out={out}"])
  assert [p for p, _ in points] == [{"client.lr": 0.05}, {"client.lr": 0.2}]
  for _, summary in points:
    assert list(summary) == ["fedavg[server_lr=0.5]", "fedavg[server_lr=1.0]"]
    assert all(entry["accuracy"]["n"] == 2 for entry in summary.values())
  acc = [s["fedavg[server_lr=1.0]"]["accuracy"]["mean"] for _, s in points]
  assert acc[0] != acc[1]
  text = out.read_text()
  assert "| client.lr | method | final accuracy |" in text
  # The header comes from the resolved config (the --set overrides), not its name.
  assert text.startswith("# Sweep: digits, Dirichlet α=0.5, 4 clients, ")
  assert "1 rounds" in text.splitlines()[0] and "set rounds=1" in text.splitlines()[0]
  assert "2 seeds" in text.splitlines()[0]   # --seeds, not the config file's one seed
  assert text.count("| fedavg[server_lr=") == 4 and " ± " in text
  for suffix in (".json", ".csv", ".png", "_rounds.png", "_ranking.png"):
    assert (tmp_path / f"table{suffix}").exists()
  csv_lines = (tmp_path / "table.csv").read_text().splitlines()
  assert csv_lines[0].startswith("client.lr,method,accuracy mean,accuracy std")
  assert len(csv_lines) == 5
  # 2 config points x 2 grid values x 2 seeds, one file each.
  assert len(os.listdir(tmp_path / "table.points" / "points")) == 8


def test_header_and_progress_over_points(sweep, capsys):
  config = sweep.load_config(os.path.join(ROOT, "configs", "quickstart.py"))
  sweep.set_key(config, "data.alpha", 0.1)
  assert "Dirichlet α=0.1, 10 clients" in sweep.header(config)
  bar = sweep.progress_bar(True, 3, 0)
  for _ in range(3):
    bar.update(1)
  bar.close()
  err = capsys.readouterr().err
  assert "sweep" in err and "3/3" in err


def test_load_config_rejects_a_file_that_is_not_python(sweep, tmp_path):
  with pytest.raises(ConfigError, match="missing.txt: no such file"):
    sweep.load_config(str(tmp_path / "missing.txt"))
  (tmp_path / "notes.txt").write_text("")
  with pytest.raises(ConfigError, match="not a Python file"):
    sweep.load_config(str(tmp_path / "notes.txt"))


def test_python_dash_m_sweep_writes_its_table(tmp_path):
  """``python -m fedfrac.sweep`` (= ``fedfrac-sweep``) end to end, 1 round."""
  out = tmp_path / "t.md"
  env = dict(os.environ, PYTHONPATH=ROOT)
  proc = subprocess.run(
      [sys.executable, "-m", "fedfrac.sweep",
       f"--config={os.path.join(ROOT, 'configs', 'quickstart.py')}", "--set=rounds=1",
       "--set=model.hidden=(8,)", "--set=only=fedavg", "--set=data.num_clients=4",
       "--seeds=0", "--workers=1", f"--out={out}"],
      cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-2000:]
  text = out.read_text()
  assert "Command: `fedfrac-sweep --config=" in text and "| fedfrac |" not in text
  assert [line.split(" | ")[0] for line in text.splitlines()
          if line.startswith("| fedavg")] == ["| fedavg"]


# A 2-axis x 3-seed digits sweep, a few seconds per batch.
SMALL = ["--set=rounds=2", "--set=model.hidden=(8,)", "--set=only=fedavg",
         "--set=data.num_clients=4", "--sweep=client.lr=0.05,0.2",
         "--sweep=client.batch_size=16,32", "--seeds=0,1,2", "--batch_size=3",
         "--no_progress"]


def _table_lines(path):
  return [line for line in path.read_text().splitlines() if line.startswith("|")]


def test_killed_sweep_reruns_only_missing_points_and_its_table_equals_a_whole_one(
    tmp_path, capsys, sweep):
  """SIGKILL a ``python -m fedfrac.sweep`` after its first batch; the rerun runs
  only the points without a file, leaves the finished files alone, and writes
  the same table (markdown, CSV, JSON) as an uninterrupted sweep on 2 workers."""
  config = os.path.join(ROOT, "configs", "quickstart.py")
  killed_out = tmp_path / "killed" / "t.md"
  points_dir = tmp_path / "killed" / "t.points" / "points"
  env = dict(os.environ, PYTHONPATH=ROOT)
  proc = subprocess.Popen(
      [sys.executable, "-m", "fedfrac.sweep", f"--config={config}", *SMALL,
       "--workers=1", f"--out={killed_out}"], cwd=tmp_path, env=env,
      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
  deadline = time.time() + 600
  try:
    while time.time() < deadline and proc.poll() is None:
      if points_dir.is_dir() and len([f for f in os.listdir(points_dir)
                                       if f.endswith(".json")]) >= 3:
        break
      time.sleep(0.05)
    assert proc.poll() is None, "the sweep ended before it could be killed"
  finally:
    if proc.poll() is None:
      os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
  assert proc.returncode == -signal.SIGKILL
  assert not killed_out.exists()
  finished = {f: os.stat(points_dir / f).st_mtime_ns for f in os.listdir(points_dir)
              if f.endswith(".json")}
  assert 3 <= len(finished) < 12
  for name in finished:   # every file there is a whole point
    assert json.loads((points_dir / name).read_text())["record"]["status"] == "ok"

  capsys.readouterr()
  sweep.main([f"--config={config}", *SMALL, "--workers=1", f"--out={killed_out}"])
  printed = capsys.readouterr().out
  assert f"ran {12 - len(finished)} of 12 points ({len(finished)} already done)" in printed
  files = [f for f in os.listdir(points_dir) if f.endswith(".json")]
  assert len(files) == 12
  assert {f: os.stat(points_dir / f).st_mtime_ns for f in finished} == finished

  whole_out = tmp_path / "whole" / "t.md"
  sweep.main([f"--config={config}", *SMALL, "--workers=2", f"--out={whole_out}"])
  assert "ran 12 of 12 points (0 already done) with 2 workers" in capsys.readouterr().out
  assert _table_lines(killed_out) == _table_lines(whole_out)
  assert len(_table_lines(whole_out)) == 2 + 4
  for suffix in (".csv", ".json"):
    assert (killed_out.with_suffix(suffix).read_text()
            == whole_out.with_suffix(suffix).read_text())

  # The same directory with a changed config refuses to mix its points.
  capsys.readouterr()
  with pytest.raises(SystemExit) as stopped:
    sweep.main([f"--config={config}", *SMALL, "--set=client.local_epochs=3",
                "--workers=1", f"--out={killed_out}"])
  assert stopped.value.code == 2
  assert re.search(r"^error: .*different sweep .*differs in: config",
                   capsys.readouterr().err, re.M)
  assert len(os.listdir(points_dir)) == 12


def test_point_store_refuses_a_different_sweep_unless_overwritten(tmp_path):
  from fedfrac.runner import points as points_lib
  store = points_lib.PointStore(tmp_path, {"config": {"rounds": 2}})
  store.write("a", {"x": 1.5})
  assert store.done() == {"a"} and store.load("a") == {"x": 1.5}
  again = points_lib.PointStore(tmp_path, {"config": {"rounds": 2}})
  assert again.done() == {"a"}
  with pytest.raises(points_lib.SweepMismatch, match="differs in: config"):
    points_lib.PointStore(tmp_path, {"config": {"rounds": 3}})
  replaced = points_lib.PointStore(tmp_path, {"config": {"rounds": 3}}, overwrite=True)
  assert replaced.done() == set()
  assert not [f for f in os.listdir(tmp_path / "points") if ".tmp" in f]


def test_pack_skips_done_points_groups_by_program_and_fills_workers(sweep):
  base = sweep.load_config(os.path.join(ROOT, "configs", "quickstart.py"))
  for key, value in (("rounds", 1), ("only", "fedavg"), ("data.num_clients", 4)):
    sweep.set_key(base, key, value)
  points = sweep.expand(base, [("client.lr", [0.1, 0.2])], [0, 1, 2, 3],
                        grid={"server_lr": [0.5, 1.0]})
  assert len(points) == 2 * 2 * 4 and len({p["id"] for p in points}) == 16
  # Same point, same id, whatever else the sweep holds.
  again = sweep.expand(base, [("client.lr", [0.2])], [3], grid={"server_lr": [1.0]})
  assert again[0]["id"] == points[-1]["id"]
  done = {p["id"] for p in points if p["axes"]["client.lr"] == 0.1}
  done.add(next(p["id"] for p in points if p["axes"]["client.lr"] == 0.2
                and p["seed"] == 0 and p["grid"] == 0.5))
  batches = sweep.pack(points, done, ["accuracy"], workers=1)
  # The batches are the whole sweep's: lr=0.1 is done and skipped; lr=0.2 runs
  # whole (seed 0 at server_lr=0.5 again, so every run keeps its vmap width) and
  # writes its 7 missing points.
  assert [(b.spec["seeds"], b.spec["values"]) for b in batches] == [
      ([0, 1, 2, 3], [0.5, 1.0])]
  assert sorted(pid for b in batches for pid in b.point_ids) == sorted(
      p["id"] for p in points if p["id"] not in done)
  # With 4 workers the whole sweep splits into 4 batches of 2 seeds; the two of
  # lr=0.1 are done.
  split = sweep.pack(points, done, ["accuracy"], workers=4)
  assert sorted(b.spec["seeds"] for b in split) == [[0, 1], [2, 3]]
  assert sum(len(b.point_ids) for b in split) == 7
  capped = sweep.pack(points, set(), ["accuracy"], batch_size=2, workers=1)
  assert all(len(b.point_ids) <= 2 for b in capped) and len(capped) == 8


def test_local_workers_on_a_cpu_host_are_one_per_core(monkeypatch):
  from fedfrac.runner import points as points_lib
  monkeypatch.setenv("JAX_PLATFORMS", "cpu")
  workers = points_lib.local_workers()
  assert len(workers) == len(os.sched_getaffinity(0))
  assert {kind for kind, _ in workers} == {"cpu"}
  assert sorted(int(env["FEDFRAC_CPU_CORE"]) for _, env in workers) == sorted(
      os.sched_getaffinity(0))
  assert all("--xla_force_host_platform_device_count=1" in env["XLA_FLAGS"]
             for _, env in workers)


def test_sweep_plot_keeps_the_callers_backend(sweep, tmp_path):
  import matplotlib
  stats = {"mean": 0.8, "std": 0.01, "ci95": 0.0, "n": 2}
  points = [({"data.alpha": a}, {"fedavg": {"accuracy": stats}}) for a in (0.1, 1.0)]
  previous = matplotlib.get_backend()
  matplotlib.use("pdf")
  try:
    sweep.plot(points, ["data.alpha"], ["accuracy"], str(tmp_path / "s.png"))
    assert matplotlib.get_backend() == "pdf"
  finally:
    matplotlib.use(previous)
  assert (tmp_path / "s.png").stat().st_size > 0


def test_overview_groups_one_per_config_point_with_curves_and_finals(sweep, tmp_path):
  from fedfrac.runner import overview
  stats = {"mean": 0.8, "std": 0.01, "ci95": 0.0, "n": 2}
  points = [({"data.alpha": a}, {"fedavg": {"accuracy": stats, "statuses": ["ok"]},
                                 "fofedavg[alpha=0.5]": {"accuracy": stats,
                                                         "statuses": ["partial"]}})
            for a in (0.1, 1.0)]
  records = [{"axes_index": i, "run_label": label, "algorithm": label.split("[")[0],
              "curves": {"accuracy": {"round": [1, 2, 3], "value": [0.3, 0.6, v]}}}
             for i in (0, 1) for label in ("fedavg", "fofedavg[alpha=0.5]")
             for v in (0.79, 0.81)]
  curves, finals = overview.sweep_groups(points, records, ["data.alpha"], "accuracy")
  assert list(curves) == ["data.alpha=0.1", "data.alpha=1.0"]
  fo = curves["data.alpha=0.1"][1]
  assert (fo.label, fo.algorithm, fo.values.shape) == ("fofedavg[alpha=0.5]", "fofedavg",
                                                      (2, 3))
  assert finals["data.alpha=1.0"][1].statuses == ("partial",)
  overview.save_sweep_figures(points, records, ["data.alpha"], "accuracy", "t", str(tmp_path / "s"))
  # Points without per-round values (an older sweep's) still give the ranking.
  for r in records:
    del r["curves"]
  overview.save_sweep_figures(points, records, ["data.alpha"], "accuracy", "t", str(tmp_path / "o"))
  assert sorted(p.name for p in tmp_path.iterdir()) == ["o_ranking.png", "s_ranking.png",
                                                        "s_rounds.png"]


def test_a_point_rerun_on_resume_is_bit_identical_to_the_uninterrupted_one(
    tmp_path, sweep):
  """Delete one finished point of a 2-seed x 2-value batch: the rerun runs the
  batch whole (same vmap width) and writes a record equal to the deleted one in
  every metric, not only to float tolerance."""
  config = os.path.join(ROOT, "configs", "quickstart.py")
  args = [f"--config={config}", "--set=rounds=2", "--set=model.hidden=(8,)",
          "--set=only=fedavg", "--set=data.num_clients=4", "--seeds=0,1",
          "--grid=server_lr=0.5,1.0", "--workers=1", "--no_progress",
          "--metrics=accuracy,train_loss_var,mean:train_loss",
          f"--out={tmp_path / 't.md'}"]
  sweep.main(args)
  points_dir = tmp_path / "t.points" / "points"
  files = sorted(os.listdir(points_dir))
  assert len(files) == 4
  victim = points_dir / files[0]
  before = json.loads(victim.read_text())["record"]
  victim.unlink()
  sweep.main(args)
  after = json.loads(victim.read_text())["record"]
  def untimed(record):   # wall and compile seconds are the only clocks in a record
    out = {k: v for k, v in record.items() if k not in ("wall_s", "compile_s")}
    out["final"] = {k: v for k, v in record["final"].items() if k != "wall_s"}
    return out
  assert untimed(after) == untimed(before)
  assert after["final"]["train_loss_var"] == before["final"]["train_loss_var"]


def test_a_disk_filling_while_the_figures_are_drawn_is_one_line_and_keeps_the_points(
    tmp_path, monkeypatch, capsys):
  """The disk filling while the sweep draws its figures ended in a raw
  ``OSError: [Errno 28]`` traceback: one line naming the figure, exit status 1,
  every point kept, and a rerun writes the table without running one."""
  import errno

  from fedfrac.runner import plots
  real = plots.Figure.savefig

  def savefig(self, path, *args, **kwargs):
    if "_ranking" in str(path):
      raise OSError(errno.ENOSPC, "No space left on device", str(path))
    return real(self, path, *args, **kwargs)
  out = tmp_path / "t.md"
  argv = ["fedfrac-sweep", f"--config={os.path.join(ROOT, 'configs', 'quickstart.py')}",
          "--set=rounds=1", "--set=model.hidden=(8,)", "--set=only=fedavg",
          "--set=data.num_clients=4", "--seeds=0", "--workers=1", "--no_progress",
          f"--out={out}"]
  monkeypatch.setattr(sys, "argv", argv)
  monkeypatch.setattr(plots.Figure, "savefig", savefig)
  with pytest.raises(SystemExit) as e:
    sweep_module.cli()
  assert e.value.code == 1
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith(
      f"error: no space left on the device to write {tmp_path}/t_ranking.png ("), err
  assert len(list((tmp_path / "t.points" / "points").glob("*.json"))) == 1
  assert not list(tmp_path.glob("*.tmp*"))
  monkeypatch.setattr(plots.Figure, "savefig", real)
  sweep_module.cli()
  assert "ran 0 of 1 points (1 already done)" in capsys.readouterr().out
  assert (tmp_path / "t_ranking.png").stat().st_size > 0


def test_a_ctrl_c_while_the_sweep_starts_is_one_line_not_a_traceback(monkeypatch, capsys):
  """Before the sweep installs its handler (checking its inputs, loading its
  config), Ctrl-C ended in Python's KeyboardInterrupt traceback."""
  import importlib
  cli_module = importlib.import_module("fedfrac.sweep.cli")   # the package exports cli()

  def interrupted(args):
    raise KeyboardInterrupt
  monkeypatch.setattr(cli_module, "checked_inputs", interrupted)
  monkeypatch.setattr(sys, "argv", ["fedfrac-sweep", "--config=c.py"])
  with pytest.raises(SystemExit) as e:
    cli_module.cli()
  assert e.value.code == 130
  assert capsys.readouterr().err == (
      "interrupted (SIGINT); the points finished are kept in the point directory: rerun "
      "the same command to run the rest\n")


def test_a_sweep_addresses_the_asynchronous_servers_options(sweep):
  # A method's own clock.options replace the shared ones whole, so the study's
  # FedBuff options are swept as methods.fedbuff.clock.options.<key>; the speed
  # spread is the shared clock's. Each point's engine clock says what was swept.
  from fedfrac.runner import factories
  base = sweep.load_config(os.path.join(ROOT, "configs", "async", "fashion_mnist.py"))
  axes = [("methods.fedbuff.clock.options.buffer_size", [5, 10]),
          ("methods.fedbuff.clock.options.staleness", ["constant", "hinge"]),
          ("clock.speed_spread", [0.5, 1.5])]
  points = [p for p in sweep.expand(base, axes, [0]) if p["label"] == "fedbuff"]
  assert len(points) == 8
  for p in points:
    clock = factories.clock_config(p["config"], "fedbuff")
    assert clock.options.buffer_size == p["axes"][axes[0][0]]
    assert clock.speed_spread == p["axes"]["clock.speed_spread"]
    # The message of a 5-steps-stale delta of ones is s(5): constant 1, hinge
    # (a = 0.5, b = 4 by default) 1 / (0.5·(5 − 4) + 1).
    weight = clock.options.messages({"w": np.ones((1, 1), np.float32)}, None, None,
                                    np.array([5]))["w"][0, 0]
    want = 1.0 if p["axes"][axes[1][0]] == "constant" else 1 / 1.5
    np.testing.assert_allclose(weight, want, rtol=1e-6)


def test_a_sweep_over_options_no_method_reads_is_one_line(sweep):
  base = sweep.load_config(os.path.join(ROOT, "configs", "async", "fashion_mnist.py"))
  with pytest.raises(ConfigError, match=r"^sweep point clock.options.buffer_size=5: "
                     r"config.clock.options.buffer_size=5: no method reads it") as e:
    sweep.expand(base, [("clock.options.buffer_size", [5, 10])], [0])
  assert "\n" not in str(e.value)


TINY_ASYNC = """
from fedfrac.config import base_config

def get_config():
  c = base_config()
  c.data.source, c.data.num_clients = "sklearn_digits", 4
  c.model.hidden, c.rounds, c.eval_every, c.seeds = (8,), 2, 1, (0,)
  c.clock.server, c.clock.speed, c.clock.speed_spread = "fedbuff", "lognormal", 1.0
  c.clock.options = dict(concurrency=4, max_staleness=10)
  return c
"""


def test_a_sweep_over_buffer_size_runs_each_point(sweep, tmp_path):
  (tmp_path / "tiny_async.py").write_text(TINY_ASYNC)
  points = sweep.main([
      f"--config={tmp_path / 'tiny_async.py'}", "--sweep=clock.options.buffer_size=2,4",
      "--workers=1", "--no_progress", f"--out={tmp_path / 't.md'}"])
  assert [p for p, _ in points] == [{"clock.options.buffer_size": 2},
                                    {"clock.options.buffer_size": 4}]
  acc = [s["fedavg"]["accuracy"]["mean"] for _, s in points]
  assert acc[0] != acc[1]
