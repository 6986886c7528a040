"""The one-pass Adam step (fedfrac.optim.fused_adam, ``engine.fused_adam``)
gives the optax path's numbers bit for bit in a loop of local steps with masked
steps, alone, vmapped or mapped over clients; whole engine runs (FedAvg,
FedProx, FedRep, FIRMA's FibFL) with it on and off agree to float rounding."""
from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

import fedfrac as ff
from fedfrac.algorithms import trees
from fedfrac.optim import fused_adam
from tests import helpers

pytestmark = pytest.mark.skipif(not fused_adam.available(),
                                reason=f"one-pass Adam not built here: {fused_adam.why_not()}")


def _mlp_loss(p, x, y):
  h = jax.nn.relu(x @ p["w1"] + p["b1"])
  return optax.softmax_cross_entropy_with_integer_labels(h @ p["w2"] + p["b2"], y).mean()


def _params(seed):
  r = np.random.default_rng(seed)
  return {"w1": jnp.asarray(r.standard_normal((20, 16)) * 0.3, jnp.float32),
          "b1": jnp.zeros((16,), jnp.float32),
          "w2": jnp.asarray(r.standard_normal((16, 5)) * 0.3, jnp.float32),
          "b2": jnp.zeros((5,), jnp.float32)}


def _loop(step, steps, b1=0.9, b2=0.999, eps=1e-8):
  """``steps`` local steps on 64 fixed samples (rolled each step), every third
  one masked, learning rate 0.05/sqrt(t + 1); returns (params, state)."""
  r = np.random.default_rng(1)
  x = jnp.asarray(r.standard_normal((64, 20)), jnp.float32)
  y = jnp.asarray(r.integers(0, 5, 64))
  tx = optax.adam(1.0, b1=b1, b2=b2, eps=eps)

  def run(params):
    def body(i, carry):
      p, s = carry
      g = jax.grad(_mlp_loss)(p, jnp.roll(x, i, 0), jnp.roll(y, i))
      return step(tx, g, s, p, 0.05 / jnp.sqrt(i + 1.0), i % 3 != 1)
    return jax.lax.fori_loop(0, steps, body, (params, tx.init(params)))
  return run


def _optax_step(tx, g, s, p, lr, active):
  u, new_s = tx.update(g, s, p)
  new_p = jax.tree.map(lambda a, b: a + lr * b, p, u)
  return trees.select_tree(active, new_p, p), trees.select_tree(active, new_s, s)


def _fused_step(b1=0.9, b2=0.999, eps=1e-8):
  fused = fused_adam.FusedAdam(b1, b2, eps)
  return lambda tx, g, s, p, lr, active: fused(g, s, p, lr, active)


def _assert_trees_equal(a, b):
  la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
  assert len(la) == len(lb)
  for u, v in zip(la, lb):
    np.testing.assert_array_equal(np.asarray(u), np.asarray(v))


@pytest.mark.parametrize("b1,b2,eps", [(0.9, 0.999, 1e-8), (0.5, 0.9, 1e-3)])
def test_local_steps_equal_optax_bit_for_bit(b1, b2, eps):
  want = jax.jit(_loop(_optax_step, 20, b1, b2, eps))(_params(0))
  got = jax.jit(_loop(_fused_step(b1, b2, eps), 20, b1, b2, eps))(_params(0))
  _assert_trees_equal(got, want)
  assert int(got[1][0].count) == 20 - 7    # the 7 masked steps did not count


def test_vmapped_and_mapped_clients_equal_optax_bit_for_bit():
  stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *[_params(s) for s in range(3)])
  for form in (jax.vmap, lambda f: lambda p: jax.lax.map(f, p)):
    want = jax.jit(form(_loop(_optax_step, 12)))(stacked)
    _assert_trees_equal(jax.jit(form(_loop(_fused_step(), 12)))(stacked), want)


def _config(methods, optimizer="adam"):
  c = helpers.tiny_config(rounds=2, eval_every=1, **{"data.partition": "dirichlet"})
  c.client.optimizer = optimizer
  c.client.lr = 0.01
  c.methods = ml_collections.ConfigDict({m: {"name": m} for m in methods})
  return c


def test_engine_runs_agree_with_the_one_pass_step_on_and_off():
  """Unequal clients (Dirichlet), so masked steps run; FedRep trains a head
  and a body phase with their own Adam states; clients vmapped (FIRMA's test
  below maps them). Not bit for bit: XLA compiles the optax step with the
  gradient's last operations (module docstring)."""
  methods = ("fedprox", "fedrep")
  c = _config(methods)
  c.engine.client_parallelism = "vmap"
  off = ff.run_many(c)
  c.engine.fused_adam = True
  on = ff.run_many(c)
  for m in methods:
    for a, b in zip(jax.tree.leaves(on.final_params(m)), jax.tree.leaves(off.final_params(m))):
      np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
      assert not np.array_equal(np.asarray(a), np.zeros_like(a))


def test_make_training_takes_the_one_pass_step_only_when_asked():
  c = _config(("fedavg",))
  assert ff.runner.factories.make_training(c.client, np.array([10, 30]), 2).fused_step is None
  training = ff.runner.factories.make_training(c.client, np.array([10, 30]), 2, 0, True, True)
  assert training.fused_step == fused_adam.FusedAdam()
  c.client.optimizer = "sgd"
  assert ff.runner.factories.make_training(c.client, np.array([10]), 2, 0, True,
                                           True).fused_step is None


def test_firma_fibfl_agrees_with_the_one_pass_step_on_and_off(monkeypatch):
  """FIRMA's CPU campaign form (clients and seeds mapped), two rounds."""
  from fedfrac.reproduce import firma
  from tests.reproduce.test_firma_cpu_form import _module, _runs
  off = _runs("map", batch_runs=2)
  make = _module("map").firma_config

  def with_fused(parallelism):
    module = _module(parallelism)

    def firma_config(mode, scenario):
      c = make(mode, scenario)
      c.engine.fused_adam = True
      return c
    module.firma_config = firma_config
    return module
  monkeypatch.setattr(sys.modules["tests.reproduce.test_firma_cpu_form"], "_module",
                      with_fused)
  on = _runs("map", batch_runs=2)
  assert firma is not None
  for a, b in zip(on, off):
    np.testing.assert_allclose(a["curve"], b["curve"], atol=0.02)
    assert abs(a["gini"] - b["gini"]) < 0.02


def test_other_optimizers_and_weight_decay_keep_the_optax_path():
  assert fused_adam.for_client("sgd") is None
  assert fused_adam.for_client("adamw") is None
  assert fused_adam.for_client("adam", weight_decay=1e-4) is None
  assert fused_adam.for_client("adam", b1=0.5) == fused_adam.FusedAdam(0.5, 0.999, 1e-8)
  assert not fused_adam.FusedAdam.applies_to({"w": jnp.zeros(3, jnp.bfloat16)})


def test_engine_fused_adam_must_be_a_bool():
  from fedfrac.config import ConfigError
  c = _config(("fedavg",))
  c.engine = ml_collections.ConfigDict({**c.engine.to_dict(), "fused_adam": "yes"})
  with pytest.raises(ConfigError, match="engine.fused_adam='yes': must be True or False"):
    ff.run_many(c)


def test_a_failed_build_says_why_and_keeps_the_optax_path(tmp_path, monkeypatch):
  monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
  with pytest.raises(RuntimeError, match="no-such-compiler could not run"):
    fused_adam.build(str(tmp_path / "x.so"))
  assert not (tmp_path / "x.so").exists()
