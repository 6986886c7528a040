"""EngineConfig: the engine's settings."""
import warnings

import pytest

from fedfrac.sim.state import EngineConfig


def test_engine_config_needs_no_rounds():
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    cfg = EngineConfig(participation=0.5)
  assert cfg.rounds is None and cfg.participation == 0.5


def test_engine_config_rounds_is_deprecated_and_ignored():
  with pytest.warns(DeprecationWarning, match=r"EngineConfig\(rounds=\.\.\.\) is deprecated"):
    cfg = EngineConfig(rounds=10)
  assert cfg.rounds == 10 and cfg.participation == 1.0
