"""A GPU window of FIRMA columns, run on the CPU (``benchmarks/gpu/campaign.sh``
with a tiny plan on IDX files the test writes): one item runs FibFL and FibFL+
over two seeds in one compiled program, a second process compiles it ahead, the
window packs its compilation cache, collect unpacks it and renders the table
with the programs named, and the next window starts with the cache and has
nothing left to do. Beside it: the cache's packing rules and the claim-or-wait
protocol of the two processes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import threading
import time

from fedfrac_lab.campaign import carried_cache, collect, files, plan as plan_lib, precompile
from tests.data.test_files import write_mnist_idx

CHECKOUT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 3))
SCRIPT = os.path.join(CHECKOUT, "benchmarks", "gpu", "campaign.sh")


def _window(tmp_path, name, root, plan, extra=()):
  out = tmp_path / name
  env = dict(os.environ, PYTHON=sys.executable, CAMPAIGN_WHEELS=str(tmp_path / "none"))
  argv = ["bash", SCRIPT, "--out", str(out), "--plan", plan, "--root", str(root),
          "--data", str(tmp_path / "data"), "--budget", "300", "--reserve", "3",
          *extra]
  run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=400)
  return out, run


def test_a_firma_column_window_compiles_ahead_and_carries_its_cache(tmp_path):
  (tmp_path / "data" / "fm").mkdir(parents=True)
  write_mnist_idx(tmp_path / "data" / "fm", n_train=1000, n_test=100, gz=True)
  plan = {"tables": {"fm": {"kind": "firma", "dataset": "fashion_mnist",
                            "out": "results/fm.md", "include": []}},
          "groups": [{"table": "fm", "kind": "firma", "item": "column",
                      "dataset": "fashion_mnist", "data": "{data}/fm",
                      "modes": ["reference_code"], "inputs": "authors",
                      "scenarios": ["iid"], "methods": [["fibfl", "fibfl_plus"]],
                      "seeds": 2, "rounds": 1, "estimate_s": 60}]}
  path = tmp_path / "plan.json"
  path.write_text(json.dumps(plan))
  item, = plan_lib.load(str(path)).items
  root = tmp_path / "checkout"
  out, run = _window(tmp_path, "out1", root, str(path), ["--compile-ahead", "on"])
  log = (out / "campaign.log").read_text()
  assert run.returncode == 0, log + run.stderr
  assert "compile cache: none carried" in log
  assert "compile-ahead: a second process compiles" in log
  assert f"done   {item.label}" in log and "part   " in log
  # One program for both methods and both seeds; one of the two processes
  # waited for the other's compilation.
  assert "fibfl+fibfl_plus N=10: 4 runs in 1 batch of 4" in log
  assert "for the other process to compile" in log
  timings = (out / "timings.md").read_text()
  assert f"| {item.label} | done | 4 | 1 |" in timings
  _, blobs = files.read_archive(str(out / files.ARCHIVE))
  obj = json.loads(blobs[f"items/fm/{item.id}.json"])
  assert not obj["campaign"].get("partial") and obj["column"]["timing"]["flops"] > 0
  assert set(obj["scenarios"]["iid"]["results"]["reference_code"]) == {
      "iid/fibfl", "iid/fibfl_plus"}
  with tarfile.open(out / carried_cache.TAR) as tar:
    names = tar.getnames()
  assert carried_cache.MANIFEST in names and any(n.endswith("-cache") for n in names)
  collect.collect(str(out / files.ARCHIVE), str(path), str(root), log=lambda m: None)
  table = (root / "results" / "fm.md").read_text()
  assert "one compiled program each: FibFL and FibFL+ at N = 10 (IID): 4 runs in 1 " \
         "batch of 4" in table
  assert (root / carried_cache.FOLDER / carried_cache.MANIFEST).exists()
  # The next window starts with the cache this one left, and nothing to do.
  out2, run2 = _window(tmp_path, "out2", root, str(path), ["--stages", "b"])
  log2 = (out2 / "campaign.log").read_text()
  assert run2.returncode == 0, log2
  assert "the same jax and device, its programs load instead of compiling" in log2
  assert "to do: 0 items" in log2


def _entries(folder, sizes):
  folder.mkdir(parents=True, exist_ok=True)
  for i, (name, size) in enumerate(sizes.items()):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    os.utime(path, (1000 + i, 1000 + i))


def test_the_packed_cache_puts_the_next_windows_programs_first_within_its_cap(tmp_path):
  cache = tmp_path / "c"
  _entries(cache, {"old-cache": 400, "next-cache": 500, "newest-cache": 300,
                   "autotune/a.textproto": 50, "k-atime": 8})
  out = tmp_path / carried_cache.TAR
  got = carried_cache.pack(str(cache), str(out), {"jax": "1", "device": "G"},
                           first=["next-cache"], cap=900)
  with tarfile.open(out) as tar:
    names = tar.getnames()
  # next first, then the autotuning results, then the newest that fit.
  assert names == [carried_cache.MANIFEST, "xla/next-cache", "xla/autotune/a.textproto",
                   "xla/newest-cache"]
  assert got == {"files": 3, "bytes": 850, "left_out": 1}
  root = tmp_path / "root"
  man = carried_cache.unpack(str(out), str(root))
  assert man["files"] == 3 and man["jax"] == "1"
  assert (root / ".gpu-cache" / "xla" / "next-cache").stat().st_size == 500
  assert "the same jax and device" in carried_cache.describe(str(root), "1", "G")
  assert "JAX will not find them" in carried_cache.describe(str(root), "2", "G")
  bad = tmp_path / "bad.tar"
  with tarfile.open(bad, "w") as tar:
    tar.add(str(cache / "old-cache"), arcname="../evil")
  try:
    carried_cache.unpack(str(bad), str(root))
  except ValueError as e:
    assert "not a cache entry" in str(e)
  else:
    raise AssertionError("a tar reaching outside was unpacked")
  assert (root / ".gpu-cache" / "xla" / "next-cache").exists()   # untouched


def test_the_second_process_waits_for_the_first_ones_compilation(tmp_path):
  sync_dir, cache = tmp_path / "sync", tmp_path / "cache"
  cache.mkdir()
  lines = []
  first = precompile.CompileSync(str(sync_dir), str(cache), lines.append, who="a")
  second = precompile.CompileSync(str(sync_dir), str(cache), lines.append, who="b")
  before_a, after_a = first.for_item("item1")
  before_b, _ = second.for_item("item1")
  before_a("p:N=10")
  waited = []

  def other():
    t0 = time.time()
    before_b("p:N=10")
    waited.append(time.time() - t0)
  t = threading.Thread(target=other)
  t.start()
  time.sleep(0.8)
  assert t.is_alive()                  # b waits while a compiles
  (cache / "jit_p-1234-cache").write_bytes(b"x")
  after_a("p:N=10")
  t.join(5)
  assert waited and waited[0] >= 0.7
  assert precompile.item_entries(str(sync_dir)) == {"item1": ["jit_p-1234-cache"]}
  assert any("for the other process to compile item1:p:N=10" in line for line in lines)
