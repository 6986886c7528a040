"""Round-indexed schedules and unit-rate client optimizers."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from fedfrac.optim import client_optimizer, lr_schedule


def test_schedules():
  assert float(lr_schedule("constant", 0.1, 10)(7)) == pytest.approx(0.1)
  assert float(lr_schedule("inv_sqrt", 0.1, 10)(3)) == pytest.approx(0.05)
  cos = lr_schedule("cosine", 0.1, 10)
  assert float(cos(0)) == pytest.approx(0.1) and float(cos(10)) == pytest.approx(0.0, abs=1e-8)
  assert float(cos(5)) == pytest.approx(0.05)
  assert float(lr_schedule("exponential", 1.0, 10, decay=0.5)(2)) == pytest.approx(0.25)
  with pytest.raises(ValueError, match="client.schedule='linear'"):
    lr_schedule("linear", 0.1, 10)


@pytest.mark.parametrize("name,ref", [
    ("sgd", lambda lr: optax.sgd(lr)),
    ("momentum", lambda lr: optax.sgd(lr, momentum=0.9)),
    ("adam", lambda lr: optax.adam(lr)),
])
def test_unit_rate_optimizer_times_lr_equals_optax(name, ref):
  lr = 0.03
  params = {"w": jnp.array([1.0, -2.0, 0.5])}
  tx, ref_tx = client_optimizer(name), ref(lr)
  s, rs = tx.init(params), ref_tx.init(params)
  p, rp = params, params
  for i in range(4):
    g = {"w": jnp.sin(p["w"] * (i + 1))}
    rg = {"w": jnp.sin(rp["w"] * (i + 1))}
    u, s = tx.update(g, s, p)
    p = jax.tree.map(lambda a, b: a + lr * b, p, u)
    ru, rs = ref_tx.update(rg, rs, rp)
    rp = optax.apply_updates(rp, ru)
  np.testing.assert_allclose(p["w"], rp["w"], rtol=1e-6, atol=1e-7)


def test_unknown_optimizer():
  with pytest.raises(ValueError, match="client.optimizer='lbfgs'"):
    client_optimizer("lbfgs")
