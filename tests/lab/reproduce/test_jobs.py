"""fedfrac_lab.reproduce.jobs: reproductions' ``run_many`` calls as sweep points.

What the point runner gives back must be what ``ff.run_many`` gives: the robust
table and the Kuramoto numbers are compared exactly against the direct path on
tiny configs (2 rounds). A resumed run recomputes only the missing point and
equals the first; a changed config is refused by a directory of old points.
"""
from __future__ import annotations

import json
import math
import os
import pickle

import numpy as np
import pytest

import fedfrac as ff
from fedfrac_lab.reproduce import common, jobs, kuramoto, robust, stragglers
from fedfrac.runner import points as points_lib
from fedfrac.runner.records import RunRecord


@pytest.fixture
def compile_cache(tmp_path):
  """A persistent compilation cache for one test: the direct path and the point
  runner compile the same programs, so the second finds the first's (equal
  results still need equal programs: a different program misses the cache)."""
  import jax
  keys = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
          "jax_persistent_cache_min_entry_size_bytes")
  old = {k: getattr(jax.config, k) for k in keys}
  jax.config.update(keys[0], str(tmp_path / "xla_cache"))
  jax.config.update(keys[1], 0.0)
  jax.config.update(keys[2], 0)
  yield
  for k, v in old.items():
    jax.config.update(k, v)


def tiny_robust_config(rounds=2):
  """The robust table's config, 2 rounds, 2 seeds, one method, a small MLP."""
  config = robust.load_config(robust.CONFIGS[0])[0]
  config.rounds = rounds
  config.seeds = (0, 1)
  config.progress = False
  config.only = "median"
  config.model.hidden = (16,)
  config.client.local_epochs = 1
  return config


def untimed(rows):
  """``rows`` without their wall-clock column."""
  return [{k: v for k, v in r.items() if k != "wall_s"} for r in rows]


def same(a, b):
  """Equal, with NaN equal to NaN (nested dicts, lists and floats)."""
  if isinstance(a, dict):
    return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
  if isinstance(a, (list, tuple)):
    return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
  if isinstance(a, float) and math.isnan(a):
    return isinstance(b, float) and math.isnan(b)
  return a == b


def test_a_record_survives_its_json_point_file_exactly(tmp_path):
  arrays = {"clients/client_accuracy": np.asarray([0.1, 1 / 3, 0.7], np.float32),
            "clients/count": np.arange(6, dtype=np.int32).reshape(2, 3)}
  rows = [{"round": 1, "accuracy": 1 / 3, "loss": float("nan"), "eps": float("inf")}]
  rec = RunRecord("m[alpha=0.5]", "fofedavg", 3, rows, rows, "ok", 1.25, 2.5, arrays,
                  ("eps",))
  store = points_lib.PointStore(str(tmp_path), {"x": 1})
  store.write("p", jobs.encode_record(rec))
  back = jobs.decode_record(store.load("p"))
  assert (back.method, back.algorithm, back.seed, back.status) == (
      "m[alpha=0.5]", "fofedavg", 3, "ok")
  assert same(back.rows, rows) and back.nonfinite_allowed == ("eps",)
  assert (back.compile_s, back.wall_s) == (1.25, 2.5)
  for k, a in arrays.items():
    assert back.client_arrays[k].dtype == a.dtype
    np.testing.assert_array_equal(back.client_arrays[k], a)
  assert back.stopped is None and "stopped" not in jobs.encode_record(rec)
  # A run that stopped at its target keeps where and why.
  stopped = {"round": 1, "reason": "target_accuracy 0.3 reached at round 1",
             "rounds_to_target": 1, "bytes_up_to_target": 1024.0}
  rec.stopped = stopped
  store.write("q", jobs.encode_record(rec))
  assert jobs.decode_record(store.load("q")).stopped == stopped


def test_a_job_config_crosses_to_a_worker_unchanged():
  config = stragglers.study_config("none", ("fedavg",))
  back = pickle.loads(pickle.dumps(config))
  assert back.to_json_best_effort(sort_keys=True) == config.to_json_best_effort(
      sort_keys=True)
  assert back.model.hidden == (64,) and isinstance(back.seeds, tuple)
  assert back.system.deadline == float("inf")
  assert jobs.config_key(back) == jobs.config_key(config)


def test_point_ids_follow_what_defines_a_run():
  config = tiny_robust_config()
  ids = [p[3] for p in jobs.job_points("robust", jobs.Job(config))]
  assert len(ids) == len(set(ids)) == 2
  renamed = config.copy_and_resolve_references()
  renamed.name = "another title"
  assert [p[3] for p in jobs.job_points("robust", jobs.Job(renamed))] == ids
  both = config.copy_and_resolve_references()
  both.only = "fedavg,median"          # another method leaves median's runs alone
  assert [p[3] for p in jobs.job_points("robust", jobs.Job(both))][2:] == ids
  longer = tiny_robust_config(rounds=3)
  assert not set(p[3] for p in jobs.job_points("robust", jobs.Job(longer))) & set(ids)
  # A grid applies to the methods that have the option, in run_many's order.
  k = kuramoto.setting_config(kuramoto.load_digits_config(), 3, (0.1, 0.3), 2, 0.01,
                              only="fedavg,kuramoto_coupled")
  pts = jobs.job_points("kuramoto", jobs.Job(k, seeds=(0, 1), grid={"kappa0": [0.1, 0.3]}))
  assert [(p[0], p[1], p[2]) for p in pts] == [
      ("fedavg", None, 0), ("fedavg", None, 1),
      ("kuramoto_coupled", 0.1, 0), ("kuramoto_coupled", 0.3, 0),
      ("kuramoto_coupled", 0.1, 1), ("kuramoto_coupled", 0.3, 1)]


def test_robust_table_through_points_equals_run_many_and_resumes(tmp_path,
                                                                  compile_cache):
  config = tiny_robust_config()
  direct = ff.run_many(config)
  directory = str(tmp_path / "points")
  first = jobs.run_jobs("robust", [jobs.Job(config)], workers=1, directory=directory)
  assert (first.total, first.ran, first.skipped) == (2, 2, 0)
  text, finals = robust.table(first.results[0], config)
  want_text, want_finals = robust.table(direct, config)
  assert text == want_text
  assert finals.keys() == want_finals.keys()
  for label in finals:
    np.testing.assert_array_equal(finals[label], want_finals[label])
  for a, b in zip(direct.records, first.results[0].records):
    assert (a.method, a.seed) == (b.method, b.seed)
    assert same(untimed(a.rows), untimed(b.rows)) and same(a.round_rows, b.round_rows)

  # Delete one finished point: a rerun runs only it, and the results are identical.
  pid = jobs.job_points("robust", jobs.Job(config))[1][3]
  os.remove(os.path.join(directory, "points", f"{pid}.json"))
  again = jobs.run_jobs("robust", [jobs.Job(config)], workers=1, directory=directory)
  assert (again.total, again.ran, again.skipped) == (2, 1, 1)
  for a, b in zip(first.results[0].records, again.results[0].records):
    assert same(untimed(a.rows), untimed(b.rows)) and same(a.round_rows, b.round_rows)
  # Nothing missing: nothing runs.
  assert jobs.run_jobs("robust", [jobs.Job(config)], workers=1,
                       directory=directory).ran == 0

  # A changed config is refused by the old points, before any run.
  with pytest.raises(points_lib.SweepMismatch, match="differs in: jobs"):
    jobs.run_jobs("robust", [jobs.Job(tiny_robust_config(rounds=3))], workers=1,
                  directory=directory)
  with pytest.raises(SystemExit, match="holds points of a different sweep"):
    robust.main(["--rounds=5", "--seeds=0,1", "--dir", directory, "--workers=1"])
  assert len(os.listdir(os.path.join(directory, "points"))) == 2


def test_overwrite_replaces_the_points_of_another_config(tmp_path, compile_cache):
  config = tiny_robust_config()
  config.seeds = (0,)
  directory = str(tmp_path / "points")
  old = jobs.run_jobs("robust", [jobs.Job(config)], workers=1, directory=directory)
  config.rounds = 3
  new = jobs.run_jobs("robust", [jobs.Job(config)], workers=1, directory=directory,
                      overwrite=True)
  assert (new.ran, new.skipped) == (1, 0)
  assert [r["round"] for r in new.results[0].records[0].rows] == [1, 2, 3]
  assert len(old.results[0].records[0].rows) == 2
  names = os.listdir(os.path.join(directory, "points"))
  assert names == [f"{jobs.job_points('robust', jobs.Job(config))[0][3]}.json"]
  with open(os.path.join(directory, points_lib.MANIFEST)) as f:
    assert json.load(f)["fingerprint"]["jobs"][0]["config"] == points_lib.digest(
        jobs.config_key(config))


def test_kuramoto_numbers_through_points_equal_run_many(tmp_path, compile_cache,
                                                       monkeypatch):
  setting_config = kuramoto.setting_config

  def small(*args, **kwargs):     # both paths build their config through this
    config = setting_config(*args, **kwargs)
    config.model.hidden = (16,)
    config.client.local_epochs = 1
    return config
  monkeypatch.setattr(kuramoto, "setting_config", small)
  module = kuramoto.load_digits_config()
  kw = dict(kappas=(0.1, 0.3), rounds=2, beta=0.01, only="kuramoto_coupled")
  direct = kuramoto.run_setting(module, 3, (0,), clients=10, **kw)
  all_stats, timing = kuramoto.run(shards=(3,), seeds=(0,), clients=(10,), workers=1,
                                   directory=str(tmp_path / "k"), **kw)
  assert list(all_stats) == [(10, 3)] and timing[(10, 3)] > 0
  stats = all_stats[(10, 3)]
  assert set(stats) == {"kuramoto_coupled[kappa0=0.1]", "kuramoto_coupled[kappa0=0.3]"}
  assert same(stats, direct)
  assert all(math.isfinite(s[0]["final"]) for s in stats.values())


def test_code_digest_changes_with_the_code(tmp_path):
  (tmp_path / "a.py").write_text("x = 1\n")
  before = jobs.code_digest([str(tmp_path)])
  (tmp_path / "a.py").write_text("x = 2\n")
  assert jobs.code_digest([str(tmp_path)]) != before
  assert len(jobs.code_digest()) == 16 and os.path.isdir(common.PACKAGE_DIR)
