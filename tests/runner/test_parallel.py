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
