"""Up-front checks: every selected method is built before any method runs."""
from __future__ import annotations

import ml_collections
import pytest

from fedfrac.config import ConfigError
from fedfrac.runner import factories, loop
from tests import helpers


def _adamw_config():
  """fedavg (fine with AdamW) first, fednova (needs SGD-like steps) second."""
  c = helpers.tiny_config(rounds=2, eval_every=1, seeds=(0,))
  c.client.optimizer = "adamw"
  c.methods = ml_collections.ConfigDict({
      "fedavg": dict(name="fedavg"), "fednova": dict(name="fednova")})
  return c


@pytest.mark.parametrize("entry", ["run", "run_many"])
def test_incompatible_optimizer_stops_before_the_first_method(monkeypatch, tmp_path, entry):
  calls = []
  monkeypatch.setattr(loop, "run_one", lambda *a, **k: calls.append(a))
  monkeypatch.setattr(loop, "chunk_loop", lambda *a, **k: calls.append(a))
  with pytest.raises(ConfigError, match=r"client\.optimizer='adamw'.*method 'fednova'"):
    if entry == "run":
      loop.run(_adamw_config(), workdir=str(tmp_path))
    else:
      loop.run_many(_adamw_config())
  assert calls == [], "no method may run before every method is checked"


def test_check_methods_accepts_compatible_methods():
  c = _adamw_config()
  c.client.optimizer = "momentum"
  from fedfrac import data as data_lib
  factories.check_methods(c, data_lib.build(c.data, 0))
