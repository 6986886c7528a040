"""The committed campaign plan (benchmarks/gpu/plan.json) and what a window needs
on the GPU image: the plan loads in its priority order, every config it names
loads with its arguments, settings and labels, bad plans get one line, estimates
come from measured times once there are some, and every module fedfrac imports is
in the image's package list or the wheel list."""
from __future__ import annotations

import ast
import json
import os
import pathlib

import pytest

from fedfrac import sweep
from fedfrac_lab import campaign
from fedfrac_lab.campaign import environment, files, plan as plan_lib, supervisor
from fedfrac_lab.reproduce import common

ROOT = pathlib.Path(__file__).resolve().parents[3]
PLAN = ROOT / "benchmarks" / "gpu" / "plan.json"
# Imported by fedfrac, but not on a campaign's path (and not on the image): the
# tfds data source (the campaign reads local files), config.log.tensorboard, and
# IPython, which only Jupyter's display hook of the results' figures imports (so it is
# present whenever that code runs), and the FIRMA authors' own code (`fibfl`), which
# only `fedfrac-reproduce firma_authors` imports, from a folder given on its command line,
# and the Kuramoto authors' `algorithms` package, which only the driver of
# `fedfrac-reproduce kuramoto_authors` imports, from their checkout.
NOT_ON_CAMPAIGN_PATH = {"tensorflow_datasets", "tensorboardX", "IPython", "fibfl",
                        "algorithms"}
# Distribution of a module when it is not installed here (e.g. torch on CI).
KNOWN = {"sklearn": "scikit-learn", "absl": "absl-py", "yaml": "pyyaml",
         "orbax": "orbax-checkpoint", "ml_collections": "ml-collections",
         "dp_accounting": "dp-accounting", "tree": "dm-tree", "PIL": "pillow"}


def test_the_committed_plan_runs_firma_then_kuramoto_then_fofedavg():
  from fedfrac_lab.bench import accelerator
  plan = plan_lib.load(str(PLAN))
  assert tuple(accelerator.MEASUREMENTS) == campaign.MEASUREMENT_NAMES
  assert [m.table for m in plan.measurements] == [
      "vs_torch", "conv_forms", "precision", "points_per_hour", "fibfl_seeds", "peaks",
      "step_scaling", "profile", "masked_steps", "papers_vs_torch", "fibfl_pp_replay"]
  assert [m.table for m in plan.measurements if m.late] == [
      "profile", "masked_steps", "papers_vs_torch", "fibfl_pp_replay"]
  tables = [i.table for i in plan.items]
  order = list(dict.fromkeys(tables))
  assert order == ["firma_fashion_mnist", "firma_mnist", "kuramoto_fashion_mnist_reference",
                   "kuramoto_fashion_mnist", "kuramoto_mnist_reference", "kuramoto_mnist",
                   "fofedavg_mnist"]
  firma = [i for i in plan.items if i.kind == "firma"]
  assert firma[0].spec["mode"] == "reference_code" and firma[0].spec["seeds"] == 3
  seeds = [i.spec["seeds"] for i in firma]
  assert seeds == sorted(seeds)            # every 3-seed cell before any 5-seed one
  for n in (3, 5):                         # both data sets, modes, all of Tables 7-10
    cells = {(i.spec["dataset"], i.spec["mode"], *c) for i in firma
             if i.spec["seeds"] == n for c in i.cells}
    assert len(cells) == 2 * 2 * 7 * 6
  # One item per column of the tables; FibFL and FibFL+ in one item (one program).
  assert all(i.column and len(i.spec["scenarios"]) == 7 for i in firma)
  assert [i.spec["methods"] for i in firma[:3]] == [["fedavg", "rdfl", "fedrep"],
                                                    ["fibfl", "fibfl_plus"], ["fibfl_pp"]]
  assert len({i.id for i in plan.items}) == len(plan.items)
  for name, table in plan.tables.items():
    assert table["out"].startswith("results/") and name in tables


def test_every_jobs_item_of_the_plan_has_its_config_setting_and_label():
  plan = plan_lib.load(str(PLAN))
  seen = {}
  for item in [i for i in plan.items if i.kind == "jobs"]:
    s = item.spec
    key = (s["config"], s["arg"])
    if key not in seen:
      module = common.load_module(s["config"])
      config = module.get_config(s["arg"]) if s["arg"] else module.get_config()
      for k, v in plan_lib.resolve(s["set"], "/data").items():
        sweep.set_key(config, k, v)
      assert config.data.source == "files" and config.data.dir.startswith("/data/")
      from fedfrac import config as config_lib
      seen[key] = set(config_lib.method_labels(config))
    assert s["label"] in seen[key], (key, s["label"])
  assert ("configs/fofedavg/mnist_cnn.py", "severe,1000") in seen


@pytest.mark.parametrize("change, message", [
    ({"groups": [{"table": "t", "kind": "nope"}]},
     "plan groups[0].kind='nope': table 't' is of kind 'firma'"),
    ({"groups": [{"table": "x", "kind": "firma"}]}, "plan groups[0].table='x': must name"),
    ({"measurements": [{"name": "warp"}]}, "plan measurements[0].name='warp': allowed"),
    ({"groups": [{"table": "t", "kind": "firma", "modes": ["paper"], "scenarios": ["iid"],
                  "methods": ["fedavg"], "seeds": 0}]}, "plan groups[0].seeds=0: must be"),
    ({"groups": [{"table": "t", "kind": "firma", "modes": ["paper"], "scenarios": ["iid"],
                  "methods": ["fedavg"], "seeds": 1}] * 2}, "the same item is planned twice"),
])
def test_a_bad_plan_gets_one_line(tmp_path, change, message):
  plan = {"tables": {"t": {"kind": "firma", "out": "results/t.md"}}, **change}
  (tmp_path / "p.json").write_text(json.dumps(plan))
  with pytest.raises(plan_lib.PlanError) as e:
    plan_lib.load(str(tmp_path / "p.json"))
  assert message in str(e.value) and "\n" not in str(e.value)


def test_estimates_and_what_is_left_to_do(tmp_path):
  plan = plan_lib.load(str(PLAN))
  first, second = plan.items[0], plan.items[1]
  rows = [{"key": first.timing_key, "device": "GPU X", "seconds": 10.0},
          {"key": first.timing_key, "device": "GPU X", "seconds": 20.0},
          {"key": first.timing_key, "device": "GPU Y", "seconds": 99.0}]
  assert plan_lib.estimate(first, "GPU X", rows, {}) == pytest.approx(20 * plan_lib.SAFETY)
  assert plan_lib.estimate(first, "GPU Z", rows, {}) == first.estimate_s
  assert plan_lib.estimate(first, "GPU Z", rows, {first.timing_key: 4.0}) == pytest.approx(
      4 * plan_lib.SAFETY)
  # Committed: a measurement in results_<slug>.json and a verified item file; an
  # edited item file does not count.
  (tmp_path / "benchmarks").mkdir()
  (tmp_path / "benchmarks" / "results_x.json").write_text(json.dumps(
      {"accelerator": {"vs_torch": {}}}))
  folder = tmp_path / "results" / "campaign" / first.table
  files.write_item(str(folder / f"{first.id}.json"), {"campaign": {"item": first.id}})
  files.write_item(str(folder / f"{second.id}.json"), {"campaign": {"item": second.id}})
  text = (folder / f"{second.id}.json").read_text()
  (folder / f"{second.id}.json").write_text(text.replace(second.id, second.id[::-1], 1))
  args = supervisor.parse_args(["--out", str(tmp_path / "o"), "--plan", str(PLAN),
                                "--root", str(tmp_path)])
  todo = supervisor.to_do(plan, args, {"slug": "x"})
  assert [t.table for t in todo[:6]] == ["conv_forms", "precision", "points_per_hour",
                                         "fibfl_seeds", "peaks", "step_scaling"]
  assert todo[6] is second and first not in todo
  # The late measurements come after stage b's items.
  assert [t.table for t in todo[-4:]] == ["profile", "masked_steps", "papers_vs_torch",
                                          "fibfl_pp_replay"]
  # Another accelerator does not repeat what one has measured, unless
  # --remeasure; a CPU dry run measures for itself.
  names = lambda t: [m.table for m in t if m.stage == "a"]
  assert names(supervisor.to_do(plan, args, {"slug": "y"})) == names(todo)
  again = supervisor.parse_args(["--out", str(tmp_path / "o"), "--plan", str(PLAN),
                                 "--root", str(tmp_path), "--remeasure"])
  assert names(supervisor.to_do(plan, again, {"slug": "y"}))[0] == "vs_torch"
  assert names(supervisor.to_do(plan, args, {"slug": "cpu"}))[0] == "vs_torch"


def test_cells_that_committed_files_hold_are_not_rerun(tmp_path):
  """A FIRMA column skips the cells a file its table includes holds with as many
  seeds and the same rounds (the CPU campaign's cells), and is not run at all
  when it holds every cell; fewer seeds, other rounds, other inputs or
  --rerun-covered leave the cell to do."""
  plan = plan_lib.load(PLAN)
  item = next(i for i in plan.items if i.table == "firma_mnist" and i.kind == "firma"
              and i.spec["mode"] == "reference_code"
              and i.spec["methods"] == ["fibfl_pp"] and i.spec["seeds"] == 3)
  five = next(i for i in plan.items if i.table == "firma_mnist" and i.spec.get("seeds") == 5
              and i.spec["mode"] == "reference_code" and i.spec["methods"] == ["fibfl_pp"])
  folder = tmp_path / "results" / "firma_mnist_cpu"
  folder.mkdir(parents=True)

  def write(scenarios, runs=3, rounds=30, inputs="authors", name="cell.json"):
    (folder / name).write_text(json.dumps({
        "args": {"inputs": inputs, "rounds": rounds, "seeds": runs},
        "scenarios": {s: {"results": {"reference_code": {f"{s}/fibfl_pp": {
            "runs": [{"accuracy": 0.85}] * runs}}}} for s in scenarios}}))
  (tmp_path / "results" / "unrelated.json").write_text("[1, 2]")
  argv = ["--out", str(tmp_path / "o"), "--plan", str(PLAN), "--root", str(tmp_path),
          "--stages", "b"]
  args = supervisor.parse_args(argv)
  again = supervisor.parse_args(argv + ["--rerun-covered"])
  gpu = {"slug": "x"}
  write(["dir0.5"])
  cov = plan_lib.coverage(plan, str(tmp_path))
  assert cov[item.id] == {"cells": [("dir0.5", "fibfl_pp")],
                          "paths": [os.path.join("results", "firma_mnist_cpu", "cell.json")]}
  assert item.request(cov[item.id]["cells"])["skip"] == [["dir0.5", "fibfl_pp"]]
  assert item in supervisor.to_do(plan, args, gpu)     # six cells left
  every = ["iid", "dir0.8", "dir0.5", "dir0.1", "ls1", "ls2", "ls3"]
  write(every)
  assert plan_lib.covered_items(plan, str(tmp_path)) == {
      item.id: os.path.join("results", "firma_mnist_cpu", "cell.json")}
  todo = supervisor.to_do(plan, args, gpu)
  assert item not in todo and five in todo and len(todo) == len(plan.items) - 1
  assert item in supervisor.to_do(plan, again, gpu)
  for runs, rounds, inputs in ((2, 30, "authors"), (3, 29, "authors"), (3, 30, "unit")):
    write(every, runs, rounds, inputs)
    assert item in supervisor.to_do(plan, args, gpu), (runs, rounds, inputs)
  # A file of the cells at other rounds, read first, does not hide the one at its rounds.
  write(every, 3, 29, name="a_cells_at_29_rounds.json")
  write(every, 3, 30, name="z_cells.json")
  assert plan_lib.covered_items(plan, str(tmp_path)) == {
      item.id: os.path.join("results", "firma_mnist_cpu", "z_cells.json")}


def test_a_window_stopped_inside_a_column_leaves_a_partial_file_the_next_goes_on_from(
    tmp_path):
  """A partial item file covers its cells (they are skipped and carried into the
  next file of the item), does not count as done, and a later file of the same
  item holding more replaces it on collect; a complete file is kept."""
  from fedfrac_lab.campaign import collect
  plan = plan_lib.load(PLAN)
  item = next(i for i in plan.items if i.column and i.spec["mode"] == "paper"
              and i.spec["methods"] == ["fibfl_pp"] and i.table == "firma_mnist")
  folder = tmp_path / "results" / "campaign" / item.table

  def payload(scenarios, partial):
    entry = {"item": item.id, "table": item.table}
    return {"args": {"inputs": "authors", "rounds": 30, "seeds": 3},
            "scenarios": {s: {"results": {"paper": {f"{s}/fibfl_pp": {
                "runs": [{"accuracy": 0.5}] * 3}}}} for s in scenarios},
            "campaign": dict(entry, partial=True) if partial else entry}
  path = str(folder / f"{item.id}.json")
  files.write_item(path, payload(["iid", "dir0.8"], partial=True))
  assert item.id not in files.done_items(str(tmp_path / "results" / "campaign"))
  assert files.partial_items(str(tmp_path)) == {
      item.id: os.path.relpath(path, tmp_path)}
  assert plan_lib.coverage(plan, str(tmp_path))[item.id]["cells"] == [
      ("iid", "fibfl_pp"), ("dir0.8", "fibfl_pp")]
  args = supervisor.parse_args(["--out", str(tmp_path / "o"), "--plan", str(PLAN),
                                "--root", str(tmp_path), "--stages", "b"])
  assert item in supervisor.to_do(plan, args, {"slug": "x"})
  # The next window's file of the item holds the earlier cells too: it replaces it.
  more = files.canonical(files.write_item(str(tmp_path / "more.json"),
                                          payload(["iid", "dir0.8", "dir0.5"], False)))
  fewer = files.canonical(files.write_item(str(tmp_path / "fewer.json"),
                                           payload(["dir0.5"], False)))
  assert collect._write_new(path, fewer) == "kept"      # it would lose two cells
  assert collect._write_new(path, more) == "more"
  assert item.id in files.done_items(str(tmp_path / "results" / "campaign"))
  assert collect._write_new(path, fewer) == "kept"      # complete files stay


def _third_party_imports():
  """Top-level modules named by any import statement in fedfrac/ and
  fedfrac_lab/ (functions included; a window runs both) that are neither the
  standard library's nor the project's."""
  import sys
  names = set()
  for path in [*(ROOT / "fedfrac").rglob("*.py"), *(ROOT / "fedfrac_lab").rglob("*.py")]:
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, ast.Import):
        names |= {a.name.split(".")[0] for a in node.names}
      elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        names.add(node.module.split(".")[0])
  return {n for n in names
          if n not in sys.stdlib_module_names and n not in ("fedfrac", "fedfrac_lab")}


def off_image(modules) -> dict:
  """``{module: its distributions}`` of the ``modules`` that neither the GPU
  image's package list nor the wheel list provides."""
  image, wheels = environment.image_packages(), environment.wheel_pins()
  owners = environment.distributions_of(modules)
  missing = {}
  for m in sorted(modules):
    dists = owners.get(m) or [environment.normalise(KNOWN.get(m, m))]
    if not any(d in image or d in wheels for d in dists):
      missing[m] = dists
  return missing


def test_every_module_fedfrac_imports_is_on_the_image_or_in_the_wheels():
  wheels = environment.wheel_pins()
  modules = _third_party_imports() - NOT_ON_CAMPAIGN_PATH
  assert {"jax", "flax", "ml_collections", "dp_accounting", "torch"} <= modules
  assert not off_image(modules), off_image(modules)
  assert off_image({"tensorflow_datasets"})      # the check can fail
  # The wheels are the versions this checkout is tested with (constraints.txt).
  pins = {environment.normalise(line.split("==")[0]): line.split("==")[1].strip()
          for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line}
  for name in environment.WHEEL_MODULES:
    assert wheels[name] == pins[name], name
  assert set(environment.WHEEL_MODULES) <= set(wheels)


if __name__ == "__main__":
  raise SystemExit(pytest.main([os.path.abspath(__file__)]))


def test_the_campaign_command_line_says_its_usage_and_refuses_an_unusable_out(tmp_path,
                                                                             capsys):
  # Before: --help exited 2 as an error; --out under a regular file raised
  # NotADirectoryError with a traceback.
  from fedfrac_lab.campaign import __main__ as campaign_cli
  assert campaign_cli.main(["--help"]) == 0
  assert capsys.readouterr().out.startswith("usage: fedfrac-campaign run --out DIR")
  blocker = tmp_path / "file"
  blocker.write_text("")
  with pytest.raises(SystemExit) as stopped:
    campaign_cli.main(["run", f"--out={blocker}/out"])
  err = [l for l in capsys.readouterr().err.splitlines() if l.strip()]
  assert stopped.value.code == 2 and err == [
      f"error: --out={blocker}/out: cannot make that folder (Not a directory); give a "
      f"folder that can be created"], err


def test_fedfrac_reproduce_refusing_a_directory_says_error_and_exits_2(tmp_path, capsys):
  # Before: the refusal was printed without "error:" and the exit status was 1.
  from fedfrac_lab.reproduce import __main__ as reproduce_cli
  (tmp_path / "sweep.json").write_text(json.dumps({"hash": "x", "fingerprint": {}}))
  root = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 3))
  status = reproduce_cli.main(["robust", f"--config={root}/configs/robust/digits_signflip.py",
                               f"--dir={tmp_path}", "--rounds=1", "--seeds=0",
                               "--workers=1"])
  err = [l for l in capsys.readouterr().err.splitlines() if l.strip()]
  assert status == 2 and len(err) == 1 and err[0].startswith(
      f"error: point directory '{tmp_path}' holds points of a different sweep"), err
