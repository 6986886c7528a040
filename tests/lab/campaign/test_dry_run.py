"""The GPU window's command, ``benchmarks/gpu/campaign.sh``, run on the CPU with a
tiny plan (a logistic model on IDX files the test writes): a window logs a failing
plan entry and goes on, and SIGTERM packs what finished; collect puts it into a
checkout and re-renders the table with the device in its title; the next window
skips what is committed and stops an item that outlasts its budget at the
deadline; the window after that knows it and does not start it; a tampered
archive is refused; without the wheels' modules the command says so."""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import time

import pytest

from fedfrac_lab.campaign import collect, files, plan as plan_lib
from tests.lab.campaign.test_plan import off_image
from tests.data.test_files import write_mnist_idx

CHECKOUT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 3))
SCRIPT = os.path.join(CHECKOUT, "benchmarks", "gpu", "campaign.sh")

TINY_CONFIG = '''
from fedfrac.config import base_config


def get_config(arg=None):
  c = base_config()
  c.name = "tiny logistic on IDX files"
  c.seeds = (0,)
  c.rounds = 2
  c.eval_every = 1
  c.checkpoint_every = 0
  c.data.source = "files"
  c.data.num_clients = 3
  c.data.partition = "iid"
  c.model.name = "logistic"
  c.client.lr = 0.1
  c.client.batch_size = 16
  c.engine.unroll = 1
  c.methods = type(c.methods)({"fedavg": dict(name="fedavg"),
                               "fedprox": dict(name="fedprox")})
  return c
'''


def _plan(tmp_path):
  config = tmp_path / "tiny.py"
  config.write_text(TINY_CONFIG)
  group = {"table": "tiny", "kind": "jobs", "config": str(config),
           "set": {"data.dir": "{data}/idx"}, "seeds": [0, 1], "estimate_s": 1}
  plan = {"tables": {"tiny": {"kind": "jobs", "out": "results/tiny.md",
                              "title": "Tiny logistic", "metrics": ["accuracy"]}},
          "groups": [dict(group, labels=["nope", "fedavg"]),
                     # runs until it is stopped: 100,000 rounds
                     dict(group, labels=["fedprox"], seeds=[2],
                          set=dict(group["set"], rounds=100000))]}
  path = tmp_path / "plan.json"
  path.write_text(json.dumps(plan))
  return str(path)


def _window(tmp_path, name, root, plan, budget):
  out = tmp_path / name
  env = dict(os.environ, PYTHON=sys.executable, CAMPAIGN_WHEELS=str(tmp_path / "no_wheels"))
  argv = ["bash", SCRIPT, "--out", str(out), "--plan", plan, "--root", str(root),
          "--data", str(tmp_path / "data"), "--budget", str(budget), "--reserve", "3"]
  return out, subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)


def _finish(proc, budget):
  t0 = time.time()
  text = proc.communicate(timeout=budget + 60)[0]
  return text, time.time() - t0


def test_windows_continue_the_plan_inside_their_budgets(tmp_path):
  (tmp_path / "data" / "idx").mkdir(parents=True)
  write_mnist_idx(tmp_path / "data" / "idx", n_train=240, n_test=60, gz=True)
  plan = _plan(tmp_path)
  root = tmp_path / "checkout"
  nope, fedavg, long = plan_lib.load(plan).items
  quiet = lambda msg: None
  # Window 1: a failing entry is logged and the window goes on; SIGTERM while the
  # long item runs packs what finished.
  out1, proc = _window(tmp_path, "out1", root, plan, 300)
  log1 = out1 / "campaign.log"
  t0 = time.time()
  while not (log1.exists() and f"start  {long.label}" in log1.read_text()):
    assert proc.poll() is None and time.time() - t0 < 120, proc.communicate()[0]
    time.sleep(0.2)
  proc.send_signal(signal.SIGTERM)
  text1, _ = _finish(proc, 0)
  assert proc.returncode == 143, text1
  assert "no wheels in" in text1 and "DRY RUN ON THE CPU" in text1
  text = log1.read_text()
  assert f"FAILED {nope.label}" in text and "unknown method label 'nope'" in text
  assert f"done   {fedavg.label}" in text
  assert "SIGTERM: stopping; packing what finished" in text
  manifest, blobs = files.read_archive(str(out1 / files.ARCHIVE))
  assert manifest["dry_run"] and manifest["device"]["platform"] == "cpu"
  assert {n for n in blobs if n.startswith("items/")} == {f"items/tiny/{fedavg.id}.json"}
  assert "campaign.log" in blobs and "timings.md" in blobs
  collect.collect(str(out1 / files.ARCHIVE), plan, str(root), log=quiet)
  table = (root / "results" / "tiny.md").read_text()
  assert table.startswith("# Tiny logistic (devices: CPU") and "| fedavg | 2 |" in table

  # Window 2 skips the committed item and stops the long one at its deadline.
  budget = 20
  out2, proc = _window(tmp_path, "out2", root, plan, budget)
  text2, wall = _finish(proc, budget)
  assert wall < budget, text2
  log2 = (out2 / "campaign.log").read_text()
  assert f"start  {fedavg.label}" not in log2
  assert f"start  {long.label}" in log2, log2
  assert "budget: 3 s left, stopping the worker mid-item" in log2
  _, blobs2 = files.read_archive(str(out2 / files.ARCHIVE))
  assert not [n for n in blobs2 if n.startswith("items/")]
  killed = json.loads(blobs2["timings.json"])
  assert [(r["item"], r["killed"]) for r in killed] == [(long.id, True)]
  collect.collect(str(out2 / files.ARCHIVE), plan, str(root), log=quiet)

  # Window 3 knows the long item outlasts what is left and does not start it: its
  # window (the budget less the 3 s reserve) fits the item's lower bound by at most
  # 1 s, so the item is not "longer than a window", and the start-up (importing jax,
  # the device check: always over 1 s) leaves it short.
  lower = killed[0]["seconds"] * plan_lib.SAFETY
  budget = int(lower) + 4
  out3, proc = _window(tmp_path, "out3", root, plan, budget)
  text3, wall = _finish(proc, budget)
  assert wall < budget, text3
  log3 = (out3 / "campaign.log").read_text()
  assert f"stop: the next item, {long.label}, needs about" in log3, log3
  # What the worker imported comes from the image or the wheels (test_plan).
  modules = files.read_archive(str(out3 / files.ARCHIVE))[0]["modules"]
  assert {"ml_collections", "jax"} <= set(modules)
  assert not off_image(modules), off_image(modules)

  # A tampered archive is refused before anything is written.
  bad = tmp_path / "bad.tar.gz"
  with tarfile.open(out1 / files.ARCHIVE) as src, tarfile.open(bad, "w:gz") as dst:
    for m in src.getmembers():
      data = src.extractfile(m).read()
      if m.name.startswith("items/"):
        data = data.replace(b'"accuracy"', b'"accuracy" ', 1)
        m.size = len(data)
      dst.addfile(m, io.BytesIO(data))
  assert collect.main([str(bad), "--plan", plan, "--root", str(tmp_path / "other")]) == 2
  assert not (tmp_path / "other").exists()


def test_the_worker_skips_what_no_window_fits_and_stops_at_what_this_one_does_not():
  from fedfrac_lab.campaign import worker
  item = lambda i, est: {"id": f"i{i}", "label": f"item {i}", "timing_key": f"k{i}",
                         "kind": "jobs", "stage": "b", "table": "t", "spec": {}}
  now = time.time()
  request = {"items": [item(0, 0), item(1, 0)], "estimates": {"i0": 1e4, "i1": 50.0},
             "deadline": now + 20, "window": 100.0}
  events = io.StringIO()
  assert worker.serve(events, io.StringIO(json.dumps(request) + "\n"), "/nonexistent",
                      "/nonexistent") == 0
  got = [json.loads(line) for line in events.getvalue().splitlines()]
  assert [e["event"] for e in got] == ["hello", "device", "skip", "stop", "end"]
  assert got[2]["item"] == "i0" and got[3]["item"] == "i1" and got[1]["platform"] == "cpu"


def test_without_the_wheels_modules_the_window_says_so_and_stops(tmp_path):
  python = tmp_path / "bare-python"      # no site-packages: no ml_collections
  python.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
  python.chmod(0o755)
  env = dict(os.environ, PYTHON=str(python), CAMPAIGN_WHEELS=str(tmp_path / "none"))
  out = tmp_path / "out"
  run = subprocess.run(["bash", SCRIPT, "--out", str(out)], env=env, capture_output=True,
                       text=True, timeout=60)
  assert run.returncode == 2
  log = (out / "campaign.log").read_text()
  assert "error: ml_collections or dp_accounting cannot be imported: run 'make " \
         "gpu-wheels'" in log
  assert "device check:" in log or "ModuleNotFoundError" in log


def test_collect_refuses_what_is_not_an_archive(tmp_path, capsys):
  (tmp_path / "x.tar.gz").write_text("not a tar")
  plan = _plan(tmp_path)
  assert collect.main([str(tmp_path / "x.tar.gz"), "--plan", plan]) == 2
  err = capsys.readouterr().err.strip()
  assert err.startswith("error: archive") and "not a readable tar.gz" in err
  assert len(err.splitlines()) == 1


if __name__ == "__main__":
  sys.exit(pytest.main([__file__]))
