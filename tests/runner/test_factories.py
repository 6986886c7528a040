"""Up-front checks: every selected method is built before any method runs."""
from __future__ import annotations

import jax
import ml_collections
import numpy as np
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


@pytest.mark.parametrize("schedule", ["constant", "inv_sqrt", "cosine", "exponential"])
def test_client_lr_override_sets_the_rate_under_the_methods_schedule(schedule):
  c = helpers.tiny_config(**{"client.schedule": schedule, "client.lr_decay": 0.9})
  fed = helpers.unequal_digits()
  ctx = factories.build_context(c, "fedavg", fed)
  c.client.lr = 0.37
  want = factories.build_context(c, "fedavg", fed).training.lr_schedule
  got = jax.jit(lambda lr, t: factories.with_client_lr(ctx, lr).training.lr_schedule(t))
  for t in (0, 1, 3):
    np.testing.assert_allclose(got(0.37, t), want(t), rtol=1e-6)
  assert factories.with_client_lr(ctx, 0.37).training.max_steps == ctx.training.max_steps
  # the key is taken out before the algorithm sees its options
  algo = factories.make_with_overrides("fedavg", ctx, {}, {factories.CLIENT_LR: 0.37})
  assert algo is not None


def test_local_epochs_beyond_int32_steps_stop_before_any_method_runs(monkeypatch, tmp_path):
  calls = []
  monkeypatch.setattr(loop, "run_one", lambda *a, **k: calls.append(a))
  monkeypatch.setattr(loop, "chunk_loop", lambda *a, **k: calls.append(a))
  c = helpers.tiny_config(**{"client.local_epochs": 10**9})
  with pytest.raises(ConfigError, match=r"^config\.client\.local_epochs=1000000000: gives "
                     r"\d+ local steps on the largest client .*int32 step counters"):
    loop.run(c, workdir=str(tmp_path))
  assert calls == []
