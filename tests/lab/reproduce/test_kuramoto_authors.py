"""``fedfrac-reproduce kuramoto_authors``: the authors' code beside fedfrac. The
real authors' code needs their checkout and torch, so here a tiny fake of it
that the test writes (their layout: ``src/main.py``, ``src/config/*.json``,
``src/algorithms/BaseServer.py`` with ``update_csv``; no torch) shows the
plumbing: the flags and JSON their main.py gets, the wandb stub, their data
root, the recorded curves; fedfrac's side runs for real on tiny IDX files."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import textwrap

import pytest

from fedfrac_lab.reproduce import PAPERS, kuramoto_authors
from fedfrac_lab.reproduce import kuramoto_authors_report as report_lib
from tests.data.test_files import write_mnist_idx

FAKE_MAIN = '''
import argparse, json, os, sys, time
import wandb                        # must be the stub: the package is not installed
from algorithms.BaseServer import BaseServer
p = argparse.ArgumentParser()
for flag in ("config_path", "dataset_name", "model_name", "partition_method", "device"):
  p.add_argument("--" + flag)
for flag in ("n_clients", "partition_s", "batch_size", "n_rounds", "local_epochs", "seed"):
  p.add_argument("--" + flag, type=int)
p.add_argument("--sample_ratio", type=float)
a = p.parse_args()
opt = json.load(open(a.config_path))
wandb.init(config=opt, **opt["wandb_setups"])
wandb.config.log_interval = 10
root = os.path.join(opt["data_setups"]["root"], a.dataset_name, "FashionMNIST", "raw")
assert os.path.getsize(os.path.join(root, "train-labels-idx1-ubyte")) > 8, root
assert (a.dataset_name, a.model_name, a.partition_method) == ("mnist", "fedavg_mnist",
                                                              "sharding")
assert a.device == "cpu" and a.sample_ratio == 1.0 and a.batch_size == 64
server = BaseServer()
algo = opt["train_setups"]["algo"]
for r in range(a.n_rounds):
  # an accuracy that encodes what this process was given
  acc = (0.5 + 0.01 * (r + 1) + 0.001 * a.seed + 0.1 * algo["sync"]
         + 0.02 * (algo["name"] == "kuramoto") + 0.03 * a.local_epochs
         + 0.0001 * a.n_clients + 0.00001 * a.partition_s)
  server.update_csv(acc * 100, 0.5)
  time.sleep(float(os.environ.get("FAKE_ROUND_S", "0")))
print("done")
'''
FAKE_SERVER = '''
class BaseServer:
  def update_csv(self, acc, var):
    raise RuntimeError("writes /home/$USER/Kuramoto-FedAvg/evaluation/...: must be replaced")
'''


def fake_authors(tmp_path):
  src = tmp_path / "Kuramoto-FedAvg" / "src"
  (src / "config").mkdir(parents=True)
  (src / "algorithms").mkdir()
  (src / "main.py").write_text(textwrap.dedent(FAKE_MAIN))
  (src / "algorithms" / "__init__.py").write_text("")
  (src / "algorithms" / "BaseServer.py").write_text(textwrap.dedent(FAKE_SERVER))
  for name, algo in (("fedavg", "fedavg"), ("kuramoto", "kuramoto"), ("scaffold", "scaffold")):
    (src / "config" / f"{name}.json").write_text(json.dumps({
        "data_setups": {"root": "./data", "dataset_name": "cifar10"},
        "train_setups": {"algo": {"name": algo, "sync": 0}},
        "wandb_setups": {"project": "p", "group": "g", "name": "n"}}))
  return tmp_path / "Kuramoto-FedAvg"


def expected(seed, round_, sync, kuramoto_json, local_epochs=2, clients=10, shards=3):
  return round(0.5 + 0.01 * round_ + 0.001 * seed + 0.1 * sync + 0.02 * kuramoto_json
               + 0.03 * (local_epochs - 1) + 0.0001 * clients + 0.00001 * shards, 6)


@pytest.fixture(scope="module")
def idx_dir(tmp_path_factory):
  folder = tmp_path_factory.mktemp("fmnist")
  write_mnist_idx(str(folder), n_train=120, n_test=30, gz=True)
  return folder


def test_authors_and_fedfrac_curves_side_by_side(tmp_path, idx_dir):
  authors = fake_authors(tmp_path)
  out, work = tmp_path / "out", tmp_path / "work"
  argv = ["run", f"--authors={authors}", f"--data={idx_dir}", f"--out={out}",
          f"--work={work}", "--methods=fedavg,kuramoto_reference_code",
          "--seeds=0,1", "--rounds=2", "--device=cpu", "--parallel=2",
          "--set=model.name=mlp", "--set=model.hidden=(8,)", "--set=data.augment=flip",
          "--set=client.batch_size=8"]    # 12 examples a client: a batch of 64 is refused
  assert kuramoto_authors.main(argv) == 0
  assert sorted(os.listdir(out)) == ["kuramoto_authors.json", "kuramoto_authors.log",
                                     "kuramoto_authors.md", "kuramoto_authors_runs.tar.gz"]
  doc = json.loads((out / "kuramoto_authors.json").read_text())
  sync = {"fedavg": (0, 0), "kuramoto_reference_code": (1, 0)}
  for method, (s, kjson) in sync.items():
    theirs = doc["curves"][method]["authors"]
    assert theirs == {str(seed): [expected(seed, r, s, kjson) for r in (1, 2)]
                      for seed in (0, 1)}
    ours = doc["curves"][method]["fedfrac"]
    assert sorted(ours) == ["0", "1"] and all(len(c) == 2 for c in ours.values())
    assert all(0.0 <= a <= 1.0 for c in ours.values() for a in c)
    assert doc["comparison"][method]["rounds_compared"] == 2
  assert all(r["status"] == "ok" and r["rounds"] == 2 for r in doc["runs"])
  assert len(doc["runs"]) == 8
  # their JSON with the root and sync changed, the rest theirs; the data unpacked
  config = json.loads((work / "runs" / "authors_kuramoto_reference_code_seed1.json"
                       ".config.json").read_text())
  assert config["train_setups"]["algo"] == {"name": "fedavg", "sync": 1}
  assert config["data_setups"]["root"] == str(work / "data")
  md = (out / "kuramoto_authors.md").read_text()
  assert "| fedavg | " in md and "## kuramoto_reference_code" in md
  assert "| authors | fedavg | 1 | 2 | ok" in md
  with tarfile.open(out / "kuramoto_authors_runs.tar.gz") as tar:
    names = set(tar.getnames())
  assert {"setting.json", "authors_fedavg_seed0.json", "authors_fedavg_seed0.log",
          "fedfrac_kuramoto_reference_code_seed1.json"} <= names
  # report: the same document from the archive
  again = tmp_path / "again"
  assert kuramoto_authors.main(["report", f"--runs={out / 'kuramoto_authors_runs.tar.gz'}",
                                f"--out={again}"]) == 0
  doc2 = json.loads((again / "kuramoto_authors.json").read_text())
  assert doc2["curves"] == doc["curves"] and doc2["comparison"] == doc["comparison"]


def test_the_window_script_runs_the_command_with_the_carried_folders(tmp_path, idx_dir):
  """benchmarks/gpu/kuramoto_authors.sh: the authors' checkout and the data from
  KURAMOTO_AUTHORS / KURAMOTO_DATA (.authors/kuramoto, .gpu-data/fashion-mnist in a
  window), flags passed on; without the checkout, one error line."""
  checkout = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 3))
  script = os.path.join(checkout, "benchmarks", "gpu", "kuramoto_authors.sh")
  authors, out = fake_authors(tmp_path), tmp_path / "out"
  (authors / "COMMIT").write_text("0123abc\n")
  env = dict(os.environ, PYTHON=sys.executable, CAMPAIGN_WHEELS=str(tmp_path / "none"),
             KURAMOTO_AUTHORS=str(authors), KURAMOTO_DATA=str(idx_dir))
  done = subprocess.run(["bash", script, "--out", str(out), "--sides=authors",
                         "--methods=fedavg,kuramoto_scaffold,scaffold", "--seeds=4",
                         "--rounds=1", "--device=cpu"],
                        env=env, capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-2000:]
  doc = json.loads((out / "kuramoto_authors.json").read_text())
  assert doc["curves"]["fedavg"]["authors"] == {"4": [expected(4, 1, 0, 0)]}
  # their kuramoto.json (the SCAFFOLD server) with sync on; scaffold.json as shipped
  assert doc["curves"]["kuramoto_scaffold"]["authors"] == {"4": [expected(4, 1, 1, 1)]}
  assert doc["curves"]["scaffold"]["authors"] == {"4": [expected(4, 1, 0, 0)]}
  assert doc["authors_commits"] == ["0123abc"]
  assert "--budget=540" in doc["setting"]["commands"][0]
  env["KURAMOTO_AUTHORS"] = str(tmp_path / "none")
  done = subprocess.run(["bash", script, "--out", str(out)], env=env, capture_output=True,
                        text=True, timeout=60)
  assert done.returncode == 2 and "run 'make authors-kuramoto'" in done.stderr


def test_the_budget_stops_the_authors_runs_with_the_rounds_they_finished(
    tmp_path, idx_dir, monkeypatch):
  monkeypatch.setenv("FAKE_ROUND_S", "1.0")
  authors, out = fake_authors(tmp_path), tmp_path / "out"
  assert kuramoto_authors.main([
      "run", f"--authors={authors}", f"--data={idx_dir}", f"--out={out}",
      "--methods=fedavg", "--seeds=0,1,2", "--parallel=2", "--rounds=30", "--device=cpu",
      "--sides=authors", "--budget=4"]) == 0
  doc = json.loads((out / "kuramoto_authors.json").read_text())
  runs = {r["seed"]: r for r in doc["runs"]}
  assert sorted(runs) == [0, 1]                     # seed 2 never started
  for r in runs.values():
    assert r["status"].startswith("stopped (exit") and 1 <= r["rounds"] < 30
  log = (out / "kuramoto_authors.log").read_text()
  assert "authors fedavg seed 2: not started (budget)" in log


def test_a_failing_authors_run_is_reported_and_the_rest_goes_on(tmp_path, idx_dir):
  authors = fake_authors(tmp_path)
  (authors / "src" / "config" / "kuramoto.json").write_text("{not json")
  out = tmp_path / "out"
  assert kuramoto_authors.main([
      "run", f"--authors={authors}", f"--data={idx_dir}", f"--out={out}",
      "--methods=fedavg,kuramoto_scaffold", "--seeds=3", "--rounds=1", "--device=cpu",
      "--sides=authors"]) == 0
  doc = json.loads((out / "kuramoto_authors.json").read_text())
  status = {r["method"]: r["status"] for r in doc["runs"]}
  assert status["fedavg"] == "ok" and doc["curves"]["fedavg"]["authors"] == {
      "3": [expected(3, 1, 0, 0)]}
  assert "kuramoto_scaffold" not in status or status["kuramoto_scaffold"] != "ok"
  log = (out / "kuramoto_authors.log").read_text()
  assert "authors kuramoto_scaffold seed 3: exit 1" in log and "JSONDecodeError" in log


def test_compare_round_by_round():
  authors = {0: [0.50, 0.60, 0.70], 1: [0.54, 0.70, 0.72]}
  ours = {0: [0.52, 0.80], 1: [0.50, 0.76]}
  rows = report_lib.compare(authors, ours, 3)
  assert [r["round"] for r in rows] == [1, 2]          # round 3: no fedfrac run
  assert [r["within"] for r in rows] == [True, False]
  assert rows[1]["outside_pp"] == pytest.approx(8.0)   # mean 0.78 against max 0.70
  assert (rows[0]["authors_min"], rows[0]["authors_max"]) == (0.50, 0.54)


@pytest.mark.parametrize("argv,message", [
    (["run", "--out=X", "--sides=authors"], "--authors: the authors' side needs a checkout"),
    (["run", "--out=X", "--methods=fedprox"], "--methods: 'fedprox' is not one of"),
    (["run", "--out=X", "--seeds=0,a"], "--seeds='0,a': comma-separated integers"),
    (["run", "--out=X", "--seeds=1,1"], "--seeds=[1, 1]: distinct integers >= 0"),
    (["run", "--out=X", "--rounds=0"], "--rounds=0: must be an integer >= 1"),
    (["run", "--out=X", "--sides=torch"], "--sides='torch': one or both of authors, fedfrac"),
    (["run", "--out=X", "--clients=3", "--shards=4"], "--clients/--shards: "),
    (["run", "--out=X", "--data=/nowhere"], "--data='/nowhere': no train-images-idx3-ubyte"),
    (["run", "--out=X", "--authors=/nowhere"], "--authors='/nowhere': no src/main.py"),
    (["run", "--out=X", "--sides=fedfrac", "--set=model.init=jax"], "--set: "),
    (["run", "--out=X", "--sides=fedfrac", "--set=model"], "--set='model': expected KEY=VALUE"),
    (["report", "--runs=/nowhere", "--out=X"], "--runs='/nowhere': does not exist"),
])
def test_bad_input_is_one_error_line_before_any_work(argv, message, capsys, idx_dir,
                                                     tmp_path):
  if not any(a.startswith("--data") for a in argv) and argv[0] == "run":
    argv = argv + [f"--data={idx_dir}"]
  argv = [a.replace("--out=X", f"--out={tmp_path / 'out'}") for a in argv]
  with pytest.raises(SystemExit) as e:
    kuramoto_authors.main(argv)
  assert e.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()[-1]
  assert err.startswith("fedfrac-reproduce kuramoto_authors") and message in err, err
  assert not (tmp_path / "out").exists()
  assert PAPERS["kuramoto_authors"] is kuramoto_authors
