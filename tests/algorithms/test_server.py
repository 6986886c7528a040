"""Server-side combination of updates: robust rules selected by config, through the engine."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from fedfrac import algorithms
from fedfrac import config as config_lib
from fedfrac import data as data_lib
from fedfrac import sim as sim_lib
from fedfrac import models, runner
from fedfrac.algorithms import contract, server, tasks
from fedfrac.ops import aggregate as agg
from tests import helpers


def _stacked(seed=0, s=7):
  r = np.random.default_rng(seed)
  return {"w": jnp.asarray(r.normal(size=(s, 3, 4)), jnp.float32),
          "b": jnp.asarray(r.normal(size=(s, 4)), jnp.float32)}


def _close(a, b, **kw):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), **kw)


def test_combine_deltas_dispatches_to_the_rules():
  x = _stacked()
  w = jnp.asarray([3.0, 1.0, 2.0, 5.0, 1.0, 4.0, 2.0])
  mask = jnp.asarray([1, 1, 1, 0, 1, 1, 1], bool)
  mean, info = server.combine_deltas(x, w, mask, None, server.AggregatorSpec())
  assert info == {}
  for a, b in zip(jax.tree.leaves(mean), jax.tree.leaves(agg.weighted_mean(x, w, mask))):
    np.testing.assert_array_equal(a, b)       # the default is exactly weighted_mean
  med, _ = server.combine_deltas(x, w, mask, None, server.AggregatorSpec("median"))
  keep = np.asarray(mask)
  _close(med, jax.tree.map(lambda v: np.median(np.asarray(v)[keep], axis=0), x), atol=1e-6)
  tm, _ = server.combine_deltas(x, w, mask, None,
                                server.AggregatorSpec("trimmed_mean", trim_beta=0.2))
  from scipy import stats
  _close(tm, jax.tree.map(lambda v: stats.trim_mean(np.asarray(v)[keep], 0.2, axis=0), x),
         atol=1e-6)
  k1, info = server.combine_deltas(x, w, mask, None,
                                   server.AggregatorSpec("krum", num_byzantine=1))
  sel = np.asarray(info["krum_selected"])
  assert sel.sum() == 1 and keep[sel].all()
  _close(k1, jax.tree.map(lambda v: np.asarray(v)[sel][0], x), atol=0)
  # multi_krum with multi = 0 averages the S - f lowest-scoring participants.
  mk, info = server.combine_deltas(x, w, mask, None,
                                   server.AggregatorSpec("multi_krum", num_byzantine=1))
  sel = np.asarray(info["krum_selected"])
  assert sel.sum() == 6 and keep[sel].all()
  _close(mk, jax.tree.map(lambda v: np.asarray(v)[sel].mean(0), x), atol=1e-6)


@pytest.mark.parametrize("spec,cohort,match", [
    (server.AggregatorSpec("mode"), None, "aggregator='mode'"),
    (server.AggregatorSpec("trimmed_mean", trim_beta=0.5), None, "trim_beta=0.5"),
    (server.AggregatorSpec("krum", num_byzantine=-1), None, "num_byzantine=-1"),
    (server.AggregatorSpec("krum", num_byzantine=3), 8, "more than 2f\\+2 = 8"),
    (server.AggregatorSpec("multi_krum", multi=11), 10, "multi=11"),
])
def test_aggregator_spec_rejects_bad_options(spec, cohort, match):
  with pytest.raises(ValueError, match=match):
    spec.check(cohort)


def _config(**server_options):
  c = helpers.tiny_config()
  c.data.num_clients = 8
  for k, v in server_options.items():
    c.server[k] = v
  return c


@pytest.mark.parametrize("section,key,value,match", [
    ("server", "aggregator", "mode", "config.server.aggregator='mode'"),
    ("server", "trim_beta", 0.7, "config.server.trim_beta=0.7"),
    ("server", "num_byzantine", 3, "config.server.num_byzantine=3: krum needs"),
    ("attack", "kind", "backdoor", "config.attack.kind='backdoor'"),
    ("attack", "fraction", 1.5, "config.attack.fraction=1.5"),
    ("attack", "std", -1.0, "config.attack.std=-1.0"),
])
def test_config_validation_of_server_and_attack_sections(section, key, value, match):
  c = _config(aggregator="krum")
  c[section][key] = value
  with pytest.raises(config_lib.ConfigError, match=match):
    config_lib.validate(c)


def test_config_per_method_overrides_and_unsupported_algorithms():
  c = _config()
  c.methods.median = ml_collections.ConfigDict(
      dict(name="fedavg", server=dict(aggregator="median"), attack=dict(kind="none")))
  config_lib.validate(c)
  assert config_lib.aggregator_spec(c, "median").name == "median"
  assert config_lib.aggregator_spec(c, "fedavg").name == "mean"
  assert config_lib.method_options(c.methods.median) == {}
  c.methods.median.server.trim = 0.1
  with pytest.raises(config_lib.ConfigError, match="methods.median.server.trim"):
    config_lib.validate(c)
  # An algorithm that does not combine through server.combine_deltas is refused.
  c = _config()
  c.methods.dp = ml_collections.ConfigDict(dict(name="dp_fedavg",
                                                server=dict(aggregator="median")))
  with pytest.raises(config_lib.ConfigError,
                     match="methods.dp.server.aggregator='median'.*robust aggregators work"):
    config_lib.validate(c)
  assert algorithms.supports_robust_aggregation("fedavg")
  assert not algorithms.supports_robust_aggregation("dp_fedavg")


# ----------------------------------------------------------------- through the engine


def identical_clients(num_clients=5, size=24):
  """Every client owns the same rows (identical data, equal sizes)."""
  ds = data_lib.sklearn_digits()
  rows = np.arange(size)
  test_parts = data_lib.split_iid(60, num_clients, 0)
  small = data_lib.Dataset(ds.name, ds.x_train, ds.y_train, ds.x_test[:60],
                           ds.y_test[:60], ds.num_classes)
  return data_lib.federate(small, [rows] * num_clients, test_parts)


def robust_simulation(fed, spec, rounds=2, attack=None, batch_size=32, local_epochs=1,
                      lr=0.1, name="fedavg", **options):
  c = config_lib.base_config()
  c.client.batch_size = batch_size
  c.client.local_epochs = local_epochs
  c.client.lr = lr
  c.model.hidden = (16,)
  task = tasks.classification_task()
  model = models.build(c.model, fed.input_shape, fed.num_classes, fed.input_scale)
  training = runner.make_training(c.client, fed.client_size, rounds, 1)
  ctx = contract.BuildContext(model, task, training, fed.info(), rounds, c.client,
                          aggregator=spec)
  cfg = sim_lib.EngineConfig(client_parallelism="vmap", attack=attack)
  return sim_lib.Simulation(algorithms.make(name, ctx, **options), fed, model, task,
                               training, cfg)


@pytest.mark.parametrize("name,options", [
    ("fedavg", {}), ("fofedavg", {"alpha": 0.9}),
    ("fo_ri_fedavg", {"num_directions": 2, "grid": 4, "probe_batch": 8})])
def test_robust_rules_of_identical_updates_equal_the_mean(name, options):
  # Identical data and full-batch steps: every client computes the same update
  # (up to the summation order of its shuffled batch), so every rule returns it.
  assert algorithms.supports_robust_aggregation(name)
  fed = identical_clients()
  specs = [server.AggregatorSpec(), server.AggregatorSpec("median"),
           server.AggregatorSpec("trimmed_mean", trim_beta=0.2),
           server.AggregatorSpec("krum", num_byzantine=1)]
  finals = []
  for spec in specs:
    sim = robust_simulation(fed, spec, name=name, **options)
    state, _ = sim.run_chunk(sim.init(0), 2)
    finals.append(state.server["params"])
  start = sim.init(0).server["params"]
  moved = max(float(jnp.max(jnp.abs(a - b))) for a, b in
              zip(jax.tree.leaves(finals[0]), jax.tree.leaves(start)))
  assert moved > 1e-2           # the model did train
  for other in finals[1:]:
    _close(other, finals[0], atol=2e-6, rtol=1e-5)


def test_krum_selects_only_honest_clients_under_attack():
  fed = helpers.unequal_digits(sizes=(30,) * 8)
  attack = sim_lib.AttackConfig(kind="gaussian", fraction=0.25, std=3.0)
  krum = robust_simulation(fed, server.AggregatorSpec("krum", num_byzantine=2), rounds=3,
                           attack=attack, batch_size=16)
  multi = robust_simulation(fed, server.AggregatorSpec("multi_krum", num_byzantine=2),
                            rounds=3, attack=attack, batch_size=16)
  state = krum.init(0)
  byz = np.asarray(state.byzantine)
  assert byz.sum() == 2
  _, m = krum.run_chunk(state, 3)
  sel = np.asarray(m["server/krum_selected"])            # [rounds, S]
  ids = np.asarray(m["clients/ids"])
  np.testing.assert_array_equal(np.asarray(m["clients/byzantine"]), byz[ids])
  assert (sel.sum(1) == 1).all()
  assert not (sel & byz[ids]).any()
  # Multi-Krum with multi = S - f keeps exactly the honest clients.
  _, m = multi.run_chunk(multi.init(0), 3)
  np.testing.assert_array_equal(np.asarray(m["server/krum_selected"]), ~byz[ids])
  # The same rule behind a fractional-order method's server.
  fo = robust_simulation(fed, server.AggregatorSpec("multi_krum", num_byzantine=2),
                         rounds=3, attack=attack, batch_size=16, name="fofedavg",
                         alpha=0.9)
  _, m = fo.run_chunk(fo.init(0), 3)
  np.testing.assert_array_equal(np.asarray(m["server/krum_selected"]), ~byz[ids])
