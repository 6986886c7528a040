"""A run kept in a workdir is continued only at a length whose rounds are its own
(fedfrac.runner.lengths): extending a finished run, or finishing a partial one
at another length, is refused before compute when the method's program depends
on ``rounds`` (cosine schedule, FibFL++ warm-up), and gives the uninterrupted
run's numbers when it does not."""
from __future__ import annotations

import json
import os

import ml_collections
import pytest

import fedfrac as ff
from fedfrac.config import ConfigError
from tests import helpers


def _config(method="fedavg", schedule="constant", rounds=3):
  c = helpers.tiny_config(rounds=rounds, eval_every=1, checkpoint_every=1)
  c.client.schedule = schedule
  if method != "fedavg":
    c.methods = ml_collections.ConfigDict({method: dict(name=method)})
  return c


def _tree(root):
  return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _strip(rows):
  return [{k: v for k, v in r.items() if k != "wall_s"} for r in rows]


# (method, schedule, first command's rounds and stop, second command's rounds)
CASES = {
    "cosine extended 3 -> 6": ("fedavg", "cosine", 3, None, 6),
    "cosine partial 2 of 4 rerun as 2": ("fedavg", "cosine", 4, 2, 2),
    "fibfl_pp warm-up extended 6 -> 12": ("fibfl_pp", "constant", 6, None, 12),
    "constant extended 3 -> 6": ("fedavg", "constant", 3, None, 6),
    "constant partial 2 of 4 rerun as 2": ("fedavg", "constant", 4, 2, 2),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_run_continues_only_where_its_rounds_are_its_own(tmp_path, case):
  # Before: every case continued the kept run and reported it as "ok" at the
  # new length (cosine 3 -> 6: not the 6-round run's numbers).
  method, schedule, rounds, stop, again = CASES[case]
  work = tmp_path / "w"
  ff.run(_config(method, schedule, rounds), workdir=str(work), stop_after_round=stop)
  config = _config(method, schedule, again)
  depends = schedule == "cosine" or method == "fibfl_pp"
  if depends:
    before = _tree(work)
    with pytest.raises(ConfigError) as e:
      ff.run(config, workdir=str(work))
    message = str(e.value)
    ran = (f"ran {rounds} rounds of a {rounds}-round run" if stop is None else
           f"stopped at round {stop} of a {rounds}-round run")
    assert message.startswith(f"workdir='{work}': {method} seed 0 {ran}, and {method}'s "
                              f"program depends on config.rounds"), message
    assert f"overwrite='{method}' to run it for {again} rounds" in message
    assert "\n" not in message and _tree(work) == before
    return
  kept = ff.run(config, workdir=str(work))
  whole = ff.run(config)
  assert _strip(kept.records[0].rows) == _strip(whole.records[0].rows)
  assert kept.records[0].status == "ok"
  summary = json.loads((work / "summary.json").read_text())
  assert summary["methods"][method]["seeds"]["0"]["rounds_done"] == again
  assert os.path.exists(work / "runs" / method / "seed_0.json")
