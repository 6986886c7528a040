"""All baselines: traced (vmappable) hyper-parameters, registry and configs."""
from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac import algorithms
from fedfrac import config as config_lib
from fedfrac import sim as sim_lib
from tests import helpers

BASELINES = ("fedavgm", "fedprox", "scaffold", "fednova", "fedadam", "fedyogi",
             "fedadagrad", "moon", "feddyn", "dp_sgd")
# Compared against in the papers' tables, run with their default options.
TABLE_BASELINES = ("fdse", "fedbm", "fedel")


def _continuous(name):
  entry = algorithms.entry(name)
  hp = entry.hparams()
  return {k: hp[k] for k, spec in entry.schema.items() if isinstance(spec.default, float)}


def _two_rounds_fn(name):
  """``(values, arrays) -> eval params`` after two engine rounds of ``name`` built
  with option ``values`` (possibly traced), on a tiny case; and the arrays."""
  fed = helpers.unequal_digits(sizes=(13, 30, 22), test_size=30)
  box = {}

  def capture(ctx):
    box["ctx"] = ctx
    return algorithms.make("fedavg", ctx)
  base_sim = helpers.simulation(fed, capture, {"local_steps": 2, "batch_size": 8},
                                hidden=(8,))
  ctx = box["ctx"]

  def two_rounds(values, arrays):
    alg = algorithms.make(name, ctx, **values)
    sim = sim_lib.Simulation(alg, fed, base_sim.model, base_sim.task, ctx.training,
                                sim_lib.EngineConfig(client_parallelism="vmap"))
    state, _ = jax.lax.scan(lambda st, _: sim.run_round(alg, arrays, st), sim.init(0),
                            None, length=2)
    return alg.eval_params(state.server, None)
  return two_rounds, base_sim.arrays


def _grid(name):
  plain = _continuous(name)
  return plain, {k: jnp.asarray([v, 0.5 * v], jnp.float32) for k, v in plain.items()}


@pytest.mark.parametrize("name", [n for n in BASELINES if _continuous(n)])
def test_continuous_hyperparameters_can_be_traced(name):
  """Every continuous option may be a tracer: a vmapped grid traces (no Python
  control flow on option values)."""
  two_rounds, arrays = _two_rounds_fn(name)
  _, grid = _grid(name)
  out = jax.eval_shape(jax.vmap(two_rounds, in_axes=(0, None)), grid, arrays)
  assert all(x.shape[0] == 2 for x in jax.tree.leaves(out))


def test_vmapped_option_grid_equals_plain_values():
  """A vmapped grid over SCAFFOLD's server learning rate runs as one program and
  its first entry equals the run with the plain Python value."""
  two_rounds, arrays = _two_rounds_fn("scaffold")
  plain, grid = _grid("scaffold")
  run = jax.jit(lambda g, a: (jax.vmap(two_rounds, in_axes=(0, None))(g, a),
                              two_rounds(plain, a)))
  vmapped, direct = run(grid, arrays)
  for v, d in zip(jax.tree.leaves(vmapped), jax.tree.leaves(direct)):
    np.testing.assert_allclose(v[0], d, atol=1e-6, rtol=1e-5)
  assert any(not np.array_equal(v[0], v[1]) for v in jax.tree.leaves(vmapped))


def test_every_baseline_is_registered_with_quickstart_options():
  for name in BASELINES:
    assert name in algorithms.names()
    assert name in algorithms.QUICKSTART
    algorithms.hparams(name, algorithms.QUICKSTART[name])   # valid options


@pytest.mark.parametrize("module", ["digits", "mnist_cnn"])
def test_baseline_configs_validate_and_cover_every_baseline(module):
  mod = importlib.import_module(f"configs.baselines.{module}")
  c = mod.get_config()
  config_lib.validate(c)
  names = {c.methods[label].name for label in c.methods}
  assert names == set(BASELINES) | set(TABLE_BASELINES) | {"fedavg"}
  assert c.participation == 0.2 and tuple(c.seeds) == (0, 1, 2)


def test_bad_option_in_a_config_names_the_key():
  c = helpers.tiny_config()
  c.methods.scaffold = type(c.methods)(dict(name="scaffold", server_lr=-1.0))
  with pytest.raises(config_lib.ConfigError, match=r"methods\.scaffold\.server_lr=-1.0"):
    config_lib.validate(c)
