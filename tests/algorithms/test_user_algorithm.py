"""Your own algorithm: ``ff.algorithms.register`` and the contract check before
compiling."""
from __future__ import annotations

import jax
import ml_collections
import pytest

import fedfrac as ff
from fedfrac import algorithms
from fedfrac import config as config_lib
from fedfrac import data as data_lib
from fedfrac.algorithms import contract, local_training, tasks
from fedfrac.runner import factories
from tests import helpers


def build_mean_of_deltas(ctx, hp):
  """FedAvg written as a user would: local deltas, weighted mean, step."""
  loss_fn = tasks.supervised_loss(ctx.model, ctx.task)

  def client_update(payload, client_state, view, key, round_index):
    delta, metrics = local_training.local_delta(payload, view, key, round_index, loss_fn,
                                                ctx.training)
    return delta, client_state, metrics

  def aggregate(server, clients, deltas, weights, mask, key):
    mean = ff.ops.weighted_mean(deltas, weights, mask)
    return {"params": jax.tree.map(lambda p, d: p + d, server["params"], mean)}, clients

  return contract.FedAlgorithm("mean_of_deltas", contract.init_global_model,
                               contract.broadcast_params, client_update, aggregate,
                               contract.eval_global_params)


@pytest.fixture(autouse=True)
def _clean_registry():
  before = dict(algorithms.REGISTRY)
  yield
  algorithms.REGISTRY.clear()
  algorithms.REGISTRY.update(before)


def _config(name):
  c = helpers.tiny_config(rounds=2, eval_every=2)
  c.methods = ml_collections.ConfigDict({"mine": {"name": name}})
  return c


def _check(config):
  """The pre-compile check of every method of ``config`` (no compute)."""
  fed = data_lib.build(config.data, 0)
  factories.check_methods(config, fed)


def test_register_makes_a_name_usable_and_guards_builtins():
  entry = algorithms.register(build_mean_of_deltas)
  assert entry.name == "build_mean_of_deltas" and "build_mean_of_deltas" in algorithms.names()
  assert "build_mean_of_deltas" in algorithms.user_entries()
  assert not algorithms.is_builtin("build_mean_of_deltas") and algorithms.is_builtin("fedavg")
  with pytest.raises(ValueError, match="name='fedavg' is a built-in algorithm"):
    algorithms.register(build_mean_of_deltas, name="fedavg")
  with pytest.raises(ValueError, match="must be a Python identifier"):
    algorithms.register(build_mean_of_deltas, name="my algo")
  with pytest.raises(TypeError, match="expected an AlgorithmEntry or a build"):
    algorithms.register(42, name="x")
  algorithms.register(build_mean_of_deltas, name="fedavg", replace=True)
  assert not algorithms.is_builtin("fedavg")
  algorithms.unregister("fedavg")
  assert algorithms.is_builtin("fedavg")
  _check(_config("build_mean_of_deltas"))   # a correct algorithm passes the check


def _broken(kind):
  """``build_mean_of_deltas`` with one contract mistake of ``kind``."""
  def build(ctx, hp):
    good = build_mean_of_deltas(ctx, hp)
    if kind == "client_update":      # forgets the client state
      def client_update(payload, cs, view, key, r):
        delta, _, metrics = good.client_update(payload, cs, view, key, r)
        return delta, metrics
      return good._replace(client_update=client_update)
    if kind == "aggregate":          # returns only the server state
      return good._replace(aggregate=lambda *a: good.aggregate(*a)[0])
    if kind == "server_state":       # changes the carried state's structure
      def aggregate(*a):
        server, clients = good.aggregate(*a)
        return {"params": server["params"], "step": 0.0}, clients
      return good._replace(aggregate=aggregate)
    if kind == "init":               # client state without a row per client
      def init(key, params0, num_clients, info):
        return {"params": params0}, {"count": jax.numpy.zeros(())}
      return good._replace(init=init)
    raise AssertionError(kind)
  return build


@pytest.mark.parametrize("kind,match", [
    ("client_update", r"client_update returned a tuple of 2 .*expected \(message, "
                      r"client_state, metrics\)"),
    ("aggregate", r"aggregate returned \{params: .*expected \(server_state, "
                  r"client_states\)"),
    ("server_state", r"aggregate returned a server_state \{params: .*step: float32\[\]\} "
                     r"where \{params: .*\} was expected"),
    ("init", r"init returned client_states with float32\[\] at \['count'\]; expected a "
             r"leading axis of num_clients=6"),
])
def test_contract_mistakes_are_named_before_compiling(kind, match):
  """On the old code these surfaced inside the engine (an IndexError in the
  cohort's vmap, KeyError: 0 after aggregate, a scan-carry mismatch)."""
  algorithms.register(_broken(kind), name="broken")
  with pytest.raises(config_lib.ConfigError, match=match) as info:
    _check(_config("broken"))
  assert str(info.value).startswith("config.methods.mine: algorithm 'broken': ")
  assert "\n" not in str(info.value)
