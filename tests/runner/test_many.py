"""ff.run_many checkpoints its vmapped batches and resumes them bit for bit:
a grid stopped after a round, or killed between two runs' checkpoint saves,
then resumed, equals the uninterrupted grid (rows and final parameters)."""
from __future__ import annotations

import warnings

import jax
import ml_collections
import numpy as np
import pytest

import fedfrac as ff
from fedfrac.config import ConfigError
from fedfrac.runner import checkpoint, many
from tests import helpers

VOLATILE = ("wall_s", "executed_steps")   # timing / work done, not results
GRID = {"client.lr": [0.05, 0.1]}   # every method has it


def _config():
  """Two methods, 2 seeds x 2 client learning rates each, 3 rounds."""
  c = helpers.tiny_config(rounds=3, eval_every=1, seeds=(0, 1))
  c.methods.fedprox = ml_collections.ConfigDict(dict(name="fedprox"))
  return c


def _strip(rows):
  return [{k: v for k, v in r.items() if k not in VOLATILE} for r in rows]


def _assert_bit_identical(got, want):
  assert [(r.method, r.seed) for r in got.records] == [(r.method, r.seed)
                                                       for r in want.records]
  for a, b in zip(got.records, want.records):
    assert _strip(a.rows) == _strip(b.rows), a.method
    assert _strip(a.round_rows) == _strip(b.round_rows), a.method
    assert a.status == b.status
    la, lb = jax.tree.leaves(a.params), jax.tree.leaves(b.params)
    assert len(la) == len(lb) > 0
    assert all(np.array_equal(x, y) for x, y in zip(la, lb)), a.method


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
  return ff.run_many(_config(), workdir=str(tmp_path_factory.mktemp("full")), grid=GRID)


def test_stopped_grid_resumes_bit_identically(tmp_path, uninterrupted, capsys):
  part = ff.run_many(_config(), str(tmp_path), 1, grid=GRID)   # run's argument order
  assert {r.status for r in part.records} == {"partial"}
  assert {r.rows[-1]["round"] for r in part.records} == {1}
  resumed = ff.run_many(_config(), workdir=str(tmp_path), grid=GRID)
  assert "resuming fedavg x4 runs from round 1" in capsys.readouterr().err
  _assert_bit_identical(resumed, uninterrupted)
  assert len(resumed.records) == 8


def test_grid_killed_between_saves_resumes_bit_identically(tmp_path, uninterrupted,
                                                           monkeypatch, capsys):
  """Killed in the second method's batch, after 1 of its 4 runs saved round 2:
  fedavg's finished batch is not run again, fedprox resumes from round 1 (the
  newest step all its runs have)."""
  save, calls = checkpoint.Checkpointer.save, []

  def dying_save(self, step, state, history):
    calls.append(step)
    if len(calls) == 3 * 4 + 4 + 2:   # fedavg: 3 chunks x 4 runs; fedprox: 4, then 1
      raise KeyboardInterrupt("killed")
    save(self, step, state, history)
  monkeypatch.setattr(checkpoint.Checkpointer, "save", dying_save)
  with pytest.raises(KeyboardInterrupt):
    ff.run_many(_config(), workdir=str(tmp_path), grid=GRID)
  monkeypatch.setattr(checkpoint.Checkpointer, "save", save)
  looped = []
  chunk_loop = many.chunk_loop

  def counted(runner, state, logs, **kw):
    looped.append((logs[0].label, kw["start_round"]))
    return chunk_loop(runner, state, logs, **kw)
  monkeypatch.setattr(many, "chunk_loop", counted)
  capsys.readouterr()
  resumed = ff.run_many(_config(), workdir=str(tmp_path), grid=GRID)
  assert looped == [("fedprox[client.lr=0.05]", 1)]
  assert "resuming fedprox x4 runs from round 1" in capsys.readouterr().err
  _assert_bit_identical(resumed, uninterrupted)
  # The outputs hold every run of both batches, as the uninterrupted grid's.
  assert sorted(resumed.methods()) == sorted(uninterrupted.methods())


def test_old_argument_order_still_works_with_a_warning(tmp_path):
  c = helpers.tiny_config(seeds=(0,))
  bad = {"server_lr": [-1.0]}   # refused before any compute
  with pytest.warns(DeprecationWarning, match="run's order"):
    with pytest.raises(ConfigError, match="server_lr=-1"):
      ff.run_many(c, (0,), bad)
  with warnings.catch_warnings():
    warnings.simplefilter("error", DeprecationWarning)
    with pytest.raises(ConfigError, match="server_lr=-1"):
      ff.run_many(c, str(tmp_path), 2, grid=bad)
  with pytest.raises(TypeError, match="multiple values for argument 'grid'"):
    ff.run_many(c, (0,), bad, grid=bad)
