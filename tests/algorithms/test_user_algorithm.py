"""Your own algorithm: ``ff.algorithms.register`` / ``ff.run(config,
algorithms=...)``, the contract check before compiling, and shipping to worker
processes (or running in this process, saying why)."""
from __future__ import annotations

import sys
import types

import jax
import ml_collections
import numpy as np
import pytest

import fedfrac as ff
from fedfrac import algorithms
from fedfrac import config as config_lib
from fedfrac import data as data_lib
from fedfrac.algorithms import contract, local_training, tasks
from fedfrac.runner import factories, parallel
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
    return contract.ServerUpdate(
        {"params": jax.tree.map(lambda p, d: p + d, server["params"], mean)}, clients)

  return contract.FedAlgorithm("mean_of_deltas", contract.init_global_model,
                               contract.broadcast_params, client_update, aggregate,
                               contract.eval_global_params)


@pytest.fixture(autouse=True)
def _clean_registry():
  before, models_before = dict(algorithms.REGISTRY), dict(ff.models.USER_MODELS)
  yield
  algorithms.REGISTRY.clear()
  algorithms.REGISTRY.update(before)
  ff.models.USER_MODELS.clear()
  ff.models.USER_MODELS.update(models_before)


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
        update = good.aggregate(*a)
        return contract.ServerUpdate({"params": update.server["params"], "step": 0.0},
                                     update.clients)
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
    ("aggregate", r"aggregate returned \{params: .*expected ServerUpdate\(server_state, "
                  r"client_states, metrics\)"),
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


def test_aggregate_returning_the_old_tuples_warns_and_runs_the_same():
  """``(server_state, client_states)`` and the 3-tuple with metrics, the shapes
  before ServerUpdate, still run for one release, with a DeprecationWarning,
  and give the numbers of the same algorithm returning a ServerUpdate."""
  def as_tuple(ctx, hp):
    good = build_mean_of_deltas(ctx, hp)
    return good._replace(aggregate=lambda *a: tuple(good.aggregate(*a))[:2])

  def as_triple(ctx, hp):
    good = build_mean_of_deltas(ctx, hp)
    return good._replace(aggregate=lambda *a: (*tuple(good.aggregate(*a))[:2],
                                               {"seen": a[4].sum()}))
  new = ff.run(_config("mean_of_deltas"), algorithms={"mean_of_deltas": build_mean_of_deltas})
  for build in (as_tuple, as_triple):
    with pytest.warns(DeprecationWarning, match=r"aggregate returned a tuple of [23]; "
                                                r"return .*ServerUpdate"):
      old = ff.run(_config("old"), algorithms={"old": build})
    for a, b in zip(jax.tree.leaves(old.final_params("mine")),
                    jax.tree.leaves(new.final_params("mine"))):
      np.testing.assert_array_equal(a, b)
  assert "server/seen" in old.round_rows[0]


def test_a_function_that_raises_while_traced_is_named():
  def build(ctx, hp):
    good = build_mean_of_deltas(ctx, hp)
    return good._replace(eval_params=lambda server, cs: server["weights"])
  with pytest.raises(config_lib.ConfigError,
                     match=r"eval_params\(server_state, client_state\) raised KeyError"):
    ff.run(_config("build"), algorithms={"build": build})


def test_run_registers_its_algorithms_for_the_config():
  res = ff.run(_config("mine_avg"), algorithms={"mine_avg": build_mean_of_deltas})
  assert res.methods() == ["mine"] and res.records[0].algorithm == "mine_avg"
  rounds, accuracy = res.record("mine", 0).curve("accuracy")
  assert list(rounds) == [2] and accuracy[-1] > 0.15   # it trains (chance: 0.1)


def test_registered_algorithms_reach_worker_processes():
  """The old code's workers did not see a hand-registered name ("did you mean
  'fedavg'?"); they now register what the parent packed."""
  algorithms.register(build_mean_of_deltas, name="shipped")
  blob, problem = parallel.pack_extensions()
  assert problem is None and blob is not None
  from fedfrac.runner import points
  got = []
  points.work_queue(["shipped", "fedavg"], "tests.algorithms.test_user_algorithm:_known",
                    1, lambda index, payload: got.append(payload))
  assert sorted(got) == [("fedavg", True), ("shipped", True)]


def _known(name, emit):
  """Worker target: whether ``name`` is an algorithm in that process."""
  emit((name, name in algorithms.REGISTRY))


def test_notebook_algorithms_that_cannot_be_sent_run_in_this_process(monkeypatch, capsys):
  """A function defined in a notebook (``__main__`` without a file) cannot be
  pickled by reference: without cloudpickle the run uses this process and says
  why in one line."""
  main = types.ModuleType("__main__")
  def notebook_build(ctx, hp):
    return build_mean_of_deltas(ctx, hp)
  notebook_build.__module__ = "__main__"
  notebook_build.__qualname__ = "notebook_build"
  main.notebook_build = notebook_build   # type: ignore[attr-defined]
  monkeypatch.setitem(sys.modules, "__main__", main)
  monkeypatch.setitem(sys.modules, "cloudpickle", None)   # as if not installed
  algorithms.register(notebook_build)
  c = _config("notebook_build")
  c.workers = 2
  c.seeds = (0, 1)
  assert parallel.worker_count(c, 2) == 1
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1
  assert err[0].startswith("config.workers=2: running in this process: 'notebook_build' "
                           "is defined in this process's __main__ (a notebook)")


def _own_heads(personalized):
  """A FedPer-style algorithm: the extractor averaged on the server, each
  client's head kept in its ``[K]`` client state and evaluated with it."""
  def build(ctx, hp):
    loss_fn = tasks.supervised_loss(ctx.model, ctx.task)

    def init(key, params0, num_clients, data_info):
      heads = jax.tree.map(lambda h: jax.numpy.stack([h] * num_clients), params0["head"])
      return {"extractor": params0["extractor"]}, {"head": heads}

    def client_update(extractor, cs, view, key, round_index):
      params = {"extractor": extractor, "head": cs["head"]}
      new, _, metrics = local_training.local_train(
          params, ctx.training.optimizer.init(params), view, key,
          ctx.training.lr_schedule(round_index), loss_fn, ctx.training)
      delta = jax.tree.map(lambda a, b: a - b, new["extractor"], extractor)
      return delta, {"head": new["head"]}, metrics

    def aggregate(server, cs, deltas, weights, mask, key):
      mean = ff.ops.weighted_mean(deltas, weights, mask)
      return contract.ServerUpdate(
          {"extractor": jax.tree.map(lambda p, d: p + d, server["extractor"], mean)}, cs)

    return contract.FedAlgorithm(
        "own_heads", init, lambda server: server["extractor"], client_update, aggregate,
        lambda server, cs: {"extractor": server["extractor"], "head": cs["head"]},
        personalized=personalized)
  return build


def test_eval_params_that_read_the_client_state_need_personalized():
  """Without ``personalized=True`` every client was evaluated with client 0's
  model (0.42 instead of 0.92 accuracy), status ok."""
  with pytest.raises(algorithms.ContractError,
                     match=r"^config\.methods\.mine: algorithm 'heads': eval_params\("
                           r"server_state, client_state\) returns parameters that depend "
                           r"on the client state \(at \['head'\]\['Dense_0'\]\['bias'\], "
                           r".*pass personalized=True to FedAlgorithm\(\.\.\.\); nothing "
                           r"has run yet$") as info:
    ff.run(_config("heads"), algorithms={"heads": _own_heads(False)})
  assert isinstance(info.value, config_lib.ConfigError)   # one line on the command line
  algorithms.register(_own_heads(True), name="heads_ok")
  _check(_config("heads_ok"))                             # the same, flagged, passes
  _check(_config("build_mean_of_deltas") if algorithms.register(
      build_mean_of_deltas) else None)                    # a global method passes


def test_check_algorithm_and_contract_error_are_exported():
  from fedfrac.algorithms import check
  assert ff.algorithms.check_algorithm is check.check_algorithm
  assert ff.algorithms.ContractError is check.ContractError
  algorithms.register(_broken("aggregate"), name="broken")
  with pytest.raises(ff.algorithms.ContractError, match="aggregate returned"):
    _check(_config("broken"))


def _fails_on_the_host(ctx, hp):
  """FedAvg whose host-side metrics raise after its first chunk has run: a
  failure no check before compute can see."""
  def host_metrics(rounds_done):
    raise RuntimeError(f"boom after {rounds_done} rounds")
  return build_mean_of_deltas(ctx, hp)._replace(host_metrics=host_metrics)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_method_that_fails_keeps_the_finished_methods_results(workers, capsys):
  """A method failing inside ff.run lost every finished method's results (the
  exception propagated; with workers: "task 1 failed in a worker")."""
  c = helpers.tiny_config(rounds=1, eval_every=1, workers=workers)
  c.methods = ml_collections.ConfigDict({"fedavg": {"name": "fedavg"},
                                         "broken": {"name": "fails"},
                                         "fedprox": {"name": "fedprox"}})
  res = ff.run(c, algorithms={"fails": _fails_on_the_host})
  assert res.methods() == ["fedavg", "fedprox"]
  assert all(r.status == "ok" for r in res.records)
  assert list(res.failed) == [("broken", 0)]
  assert "boom after 1 rounds" in str(res.failed[("broken", 0)])
  lines = [l for l in capsys.readouterr().err.splitlines() if "failed" in l]
  assert lines == ["method 'broken' seed 0 failed: RuntimeError: boom after 1 rounds; the "
                   "other runs go on and are kept (results.failed has the error)"]
  assert "failed: broken seed 0: RuntimeError: boom after 1 rounds" in res.table()
  with pytest.raises(KeyError, match="method 'broken' seed 0 failed: "):
    res.record("broken", 0)
  with pytest.raises(RuntimeError, match="boom"):
    res.raise_failed()


def test_build_without_hp_is_refused_when_registered():
  def build(ctx):
    return build_mean_of_deltas(ctx, {})
  with pytest.raises(TypeError, match=r"algorithm 'mine': build\(ctx, hp\) takes \(ctx, hp\)"
                                      r".*got build\(ctx\)"):
    algorithms.register(build, name="mine")
  assert "mine" not in algorithms.names()


def test_build_returning_none_is_named_before_compiling():
  def build(ctx, hp):
    build_mean_of_deltas(ctx, hp)             # the return forgotten
  algorithms.register(build, name="mine")
  with pytest.raises(config_lib.ConfigError,
                     match="algorithm 'mine': build.* returned None, expected a FedAlgorithm"):
    _check(_config("mine"))


def test_build_reading_an_undeclared_option_names_it():
  def build(ctx, hp):
    return build_mean_of_deltas(ctx, hp) if hp["mu"] else None
  algorithms.register(contract.AlgorithmEntry(
      "mine", build, algorithms.HParamSchema({"lr_scale": algorithms.HParam(1.0)})))
  with pytest.raises(config_lib.ConfigError,
                     match=r"algorithm 'mine': build\(ctx, hp\) reads hp\['mu'\] but its "
                           r"schema declares no 'mu' \(declared: lr_scale\)"):
    _check(_config("mine"))


def test_a_key_error_of_the_builds_own_dicts_is_left_alone():
  def build(ctx, hp):
    return {}["lr_scale"]                     # a name hp holds: not the schema's fault
  algorithms.register(contract.AlgorithmEntry(
      "mine", build, algorithms.HParamSchema({"lr_scale": algorithms.HParam(1.0)})))
  with pytest.raises(KeyError):
    _check(_config("mine"))


def test_an_error_in_a_host_callback_is_named_by_its_own_type_and_message(caplog):
  """JAX reports a callback's exception as "CpuCallback error calling callback:
  Traceback ..." with the exception on its last line: the one line shows it, and
  JAX's logged copy of the traceback is left out."""
  from fedfrac.runner import chunked, log
  log.quiet_callback_tracebacks()

  def boom(x):
    raise ValueError("boom from my callback")

  @jax.jit
  def f(x):
    jax.debug.callback(boom, x)
    return x + 1
  with pytest.raises(Exception) as caught:
    jax.block_until_ready(f(np.ones(2, np.float32)))
  line = chunked.failure_line("m", 0, caught.value)
  assert "\n" not in line
  assert line.startswith("method 'm' seed 0 failed: ValueError: boom from my callback "
                         "(raised in a host callback: boom, "), line
  assert "test_user_algorithm.py line " in line and "Traceback" not in line, line
  assert not [r for r in caplog.records if "callback failed" in r.getMessage()]
