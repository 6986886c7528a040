"""``engine.matmul_precision``: the setting reaches every traced product of the
engine (the compiled round says HIGHEST for ``highest`` and not for
``bfloat16``), ``highest`` changes no number on a CPU (bit-identical to the
engine without any precision setting), and a bad value gets one line."""
from __future__ import annotations

import contextlib

import jax
import numpy as np
import pytest

from fedfrac import config as config_lib
from fedfrac import data as data_lib
from fedfrac import runner
from fedfrac.sim import precision
from tests import helpers


def _sim(**overrides):
  c = helpers.tiny_config(rounds=2, **overrides)
  c.only = "fedavg"
  c.methods = type(c.methods)({"fedavg": type(c.methods)(dict(name="fedavg"))})
  fed = data_lib.build(c.data, 0)
  return runner.build_simulation(c, "fedavg", fed)


def test_the_setting_reaches_the_compiled_round():
  state = None
  for value, highest in (("highest", True), ("bfloat16", False)):
    sim = _sim(**{"engine.matmul_precision": value})
    state = state or sim.init(0)
    text = sim._run_chunk_jit.lower(sim.arrays, state, None, 1).as_text()
    assert ("precision = [HIGHEST, HIGHEST]" in text) is highest, value
    assert "dot_general" in text


def test_highest_changes_nothing_on_a_cpu(monkeypatch):
  sim = _sim()              # the default: highest
  state = sim.init(0)
  want = jax.device_get(sim.run_chunk(state, 1))
  monkeypatch.setattr(precision, "scope", lambda value: contextlib.nullcontext())
  got = jax.device_get(_sim().run_chunk(state, 1))   # as before the setting existed
  for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
    np.testing.assert_array_equal(a, b)


def test_a_bad_precision_gets_one_line():
  c = helpers.tiny_config(**{"engine.matmul_precision": "fp8"})
  with pytest.raises(config_lib.ConfigError) as e:
    config_lib.validate(c)
  assert str(e.value) == ("config.engine.matmul_precision='fp8': allowed values are "
                          "highest, tensorfloat32, bfloat16")
  with pytest.raises(ValueError, match="engine.matmul_precision='tf32'"):
    precision.check_matmul_precision("tf32")
