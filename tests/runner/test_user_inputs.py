"""What a notebook brings to ``ff.run`` / ``ff.run_many`` besides the config
(arrays, a flax module) and what it takes out (final parameters), and inputs
that were silently ignored: an unknown metric name, a misspelt grid option."""
from __future__ import annotations

import flax.linen as nn
import jax
import ml_collections
import numpy as np
import pytest

import fedfrac as ff
from fedfrac import config as config_lib
from fedfrac.runner.records import RunRecord, UnknownMetric
from tests import helpers


class TwoLayer(nn.Module):
  @nn.compact
  def __call__(self, x):
    return nn.Dense(3, name="head")(nn.relu(nn.Dense(8)(x)))


@pytest.fixture(autouse=True)
def _forget_registered_models():
  before = dict(ff.models.USER_MODELS)
  yield
  ff.models.USER_MODELS.clear()
  ff.models.USER_MODELS.update(before)


def _arrays(n=240, d=6, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, d)).astype(np.float32)
  return x, np.argmax(x[:, :3], axis=1)   # 3 classes, learnable


def test_an_unknown_metric_name_raises_with_the_names_there_are():
  """The old ``curve("test_accuracy")`` returned all NaN (the key is ``accuracy``)."""
  rows = [{"method": "a", "algorithm": "fedavg", "seed": 0, "round": r, "accuracy": 0.5,
           "loss": 1.0} for r in (1, 2)]
  rec = RunRecord("a", "fedavg", 0, rows, rows)
  with pytest.raises(UnknownMetric, match=r"metric 'test_accuracy': no evaluated row "
                                          r"holds it; did you mean 'accuracy'\? the "
                                          r"metrics are accuracy, loss"):
    rec.curve("test_accuracy")
  assert isinstance(UnknownMetric("x"), KeyError)
  assert rec.curve("accuracy")[1].tolist() == [0.5, 0.5]
  assert np.isnan(rec.curve("test_accuracy", default=np.nan)[1]).all()   # asked for
  assert rec.metric_names() == ["accuracy", "loss"]


def test_a_sweep_metric_of_other_methods_is_an_empty_curve_not_an_error():
  """A sweep's metric another method writes (DP's epsilon beside FedAvg) is asked
  for explicitly as missing: the point's curve is empty, its value None."""
  from fedfrac import sweep
  rows = [{"method": "a", "algorithm": "fedavg", "seed": 0, "round": 1, "accuracy": 0.5}]
  point = sweep.point_record(RunRecord("a", "fedavg", 0, rows, rows), ["accuracy", "epsilon"],
                             {"axes": {}, "label": "a"}, None)
  assert point["metrics"]["epsilon"] is None
  assert point["curves"]["epsilon"]["value"] == [None]
  assert point["metrics"]["accuracy"] == 0.5


@pytest.mark.parametrize("grid,match", [
    ({"aplha": [0.5, 0.9]}, r"grid=\{'aplha': \.\.\.\}: no selected method \(fedavg, "
                            r"fofedavg\) has the option 'aplha'; did you mean 'alpha'\?"),
    ({"alpha": []}, "give a non-empty list of values"),
    ({"client.lr": [0.1, -1.0]}, r"grid.client.lr=-1.0: must be > 0"),
])
def test_a_grid_option_no_selected_method_has_is_refused(grid, match):
  """The old ``run_many(grid={"aplha": ...})`` ran every method once, without a grid."""
  c = helpers.tiny_config(rounds=2)
  c.methods = ml_collections.ConfigDict({"fedavg": {"name": "fedavg"},
                                         "fofedavg": {"name": "fofedavg"}})
  with pytest.raises(config_lib.ConfigError, match=match):
    ff.run_many(c, grid=grid)


def test_own_arrays_and_flax_module_give_final_parameters_out():
  """FedAvg (one model) and FedRep (a head per client) on numpy arrays with a
  plain flax module; the final parameters come back in the module's structure."""
  x, y = _arrays()
  c = helpers.tiny_config(rounds=2, eval_every=2, **{"data.partition": "iid"})
  c.data.num_clients = 3
  c.methods = ml_collections.ConfigDict({"fedavg": {"name": "fedavg"},
                                         "fedrep": {"name": "fedrep"}})
  module = TwoLayer()
  res = ff.run_many(c, data=(x, y), model=ff.models.flax_model(module, head="head"))
  assert res.config.model.name == "TwoLayer"
  shared = res.final_params("fedavg")
  assert jax.tree.map(np.shape, shared) == {
      "Dense_0": {"kernel": (6, 8), "bias": (8,)}, "head": {"kernel": (8, 3), "bias": (3,)}}
  logits = module.apply({"params": shared}, x[:5])
  assert logits.shape == (5, 3) and np.isfinite(logits).all()
  per_client = res.final_params("fedrep")
  assert per_client["head"]["kernel"].shape == (3, 8, 3)   # [K] stacked heads
  one = res.final_params("fedrep", client=1)
  np.testing.assert_array_equal(one["head"]["kernel"], per_client["head"]["kernel"][1])
  with pytest.raises(ValueError, match="'fedavg' is not personalised"):
    res.final_params("fedavg", client=0)
  with pytest.raises(KeyError, match="no such run; the methods are 'fedavg', 'fedrep'"):
    res.final_params("fedprox")


def test_final_parameters_of_run_match_its_evaluation_and_no_parameters_kept():
  x, y = _arrays()
  c = helpers.tiny_config(rounds=2, eval_every=2)
  c.data.num_clients = 3
  res = ff.run(c, data={"x_train": x[:200], "y_train": y[:200], "x_test": x[200:],
                        "y_test": y[200:]}, model=TwoLayer())
  params = res.final_params("fedavg")
  predicted = np.argmax(TwoLayer().apply({"params": params}, x[200:]), axis=1)
  # data.test_split="like_train" spreads the 40 test rows over the clients;
  # the evaluated accuracy is the sample-weighted mean over them: the test set's
  assert res.record("fedavg", 0).curve("accuracy")[1][-1] == pytest.approx(
      float(np.mean(predicted == y[200:])), abs=1e-6)
  kept_none = ff.Results(res.config, [RunRecord("fedavg", "fedavg", 0, [], [])])
  with pytest.raises(ValueError, match="no parameters kept .*keep_params=False"):
    kept_none.final_params("fedavg")   # keep_params=False, or read from a workdir


def test_a_client_lr_grid_runs_every_method_at_each_rate():
  """``client.lr`` is every method's option; the old run_many ran it without a grid."""
  c = helpers.tiny_config(rounds=2, eval_every=2)
  res = ff.run_many(c, grid={"client.lr": [1e-6, 0.5]})
  assert res.methods() == ["fedavg[client.lr=1e-06]", "fedavg[client.lr=0.5]"]
  still, trained = (res.record(m, 0).curve("train_update_norm")[1][-1]
                    for m in res.methods())
  assert trained > 1e4 * still > 0   # the update scales with the rate


@pytest.mark.parametrize("entry", ["run", "run_many", "sweep"])
@pytest.mark.parametrize("section,key,value,match", [
    ("client", "learning_rate", 0.5,
     r"^config\.client\.learning_rate=0\.5: unknown key 'learning_rate'; did you mean "
     r"'lr'\? config\.client has keys: "),
    ("data", "alhpa", 0.05,
     r"^config\.data\.alhpa=0\.05: unknown key 'alhpa'; did you mean 'alpha'\? "),
])
def test_a_misspelt_key_of_a_config_built_in_python_is_refused(entry, section, key, value,
                                                                match, monkeypatch):
  """``c.client.learning_rate = 0.5; ff.run(c)`` ran with the default lr (and
  ``c.data.alhpa`` with α 0.5), status ok; the command line refuses the same
  keys. Nothing compiles: the check comes first."""
  from fedfrac import sweep
  from fedfrac.runner import chunked
  monkeypatch.setattr(chunked, "run_one", lambda *a, **k: pytest.fail("a run started"))
  c = helpers.tiny_config(rounds=1)
  with c[section].unlocked():
    c[section][key] = value
  call = {"run": ff.run, "run_many": ff.run_many,
          "sweep": lambda c: sweep.run(c, [], (0,), ["accuracy"], progress=False,
                                       log=lambda *a, **k: None)}[entry]
  with pytest.raises(config_lib.ConfigError, match=match):
    call(c)


def test_a_misspelt_method_option_from_python_is_refused_like_on_the_command_line():
  c = helpers.tiny_config(rounds=1)
  c.methods = ml_collections.ConfigDict({"m": {"name": "fedavgm", "momentun": 0.5}})
  with pytest.raises(config_lib.ConfigError,
                     match=r"config\.methods\.m\.momentun=0\.5: unknown option for "
                           r"algorithm 'fedavgm'; did you mean 'momentum'\?"):
    ff.run(c)


def _check_per_client_accuracy(res, label, module):
  """Each client's personalised parameters, evaluated on its own test split of
  ``res.federated_data()``, give the per-client accuracy the run reported."""
  fed = res.federated_data()
  assert fed.num_clients == 3 and res.federated_data(0) is fed
  reported = res.record(label, 0).client_arrays["clients/client_accuracy"]
  for k in range(fed.num_clients):
    x_k, y_k = fed.client_test_arrays(k)
    logits = module.apply({"params": res.final_params(label, client=k)}, x_k)
    assert float(np.mean(np.argmax(logits, 1) == y_k)) == pytest.approx(
        float(reported[k]), abs=1e-6)
  with pytest.raises(KeyError, match="seed 5: no runs used it; the seeds are 0"):
    res.federated_data(5)


class NoHead(nn.Module):
  @nn.compact
  def __call__(self, x):
    return nn.Dense(3)(nn.relu(nn.Dense(8)(x)))


def test_personalised_methods_run_with_a_plain_module_whose_last_layer_is_head():
  """``model=TwoLayer()`` (its last layer ``name="head"``, no ``flax_model``):
  FedRep crashed after the earlier methods ran ("vmap wrapped function must be
  passed at least one argument"); a module with no head at all is refused in
  one line before compute for every method that needs one."""
  x, y = _arrays()
  c = helpers.tiny_config(rounds=1, eval_every=1, **{"data.partition": "iid"})
  c.data.num_clients = 3
  c.methods = ml_collections.ConfigDict({"fedrep": {"name": "fedrep"}})
  res = ff.run(c, data=(x, y), model=TwoLayer())
  assert res.record("fedrep", 0).status == "ok"
  heads = res.final_params("fedrep")["head"]["kernel"]
  assert heads.shape == (3, 8, 3) and not np.allclose(heads[0], heads[1])   # per client
  _check_per_client_accuracy(res, "fedrep", TwoLayer())
  for name in ("fedrep", "fibfl_pp", "moon"):
    c.methods = ml_collections.ConfigDict({"m": {"name": name}})
    with pytest.raises(config_lib.ConfigError,
                       match=rf"^config\.methods\.m: algorithm '{name}' uses the model's "
                             r"head .* model 'NoHead' has none: name its head with "
                             r"ff\.models\.flax_model\(module, head='\.\.\.'\) \(its "
                             r"top-level submodules are 'Dense_0', 'Dense_1'\)"):
      ff.run(c, data=(x, y), model=NoHead())


def test_own_algorithm_that_needs_the_head_of_a_headless_module_names_the_head():
  """An algorithm of your own built on FedRep, on a module without a head, was
  refused with the trace's words ("vmap wrapped function ... got empty")."""
  from fedfrac import algorithms
  x, y = _arrays()
  c = helpers.tiny_config(rounds=1, eval_every=1)
  c.data.num_clients = 3
  c.methods = ml_collections.ConfigDict({"m": {"name": "own_rep"}})
  algorithms.register(lambda ctx, hp: algorithms.make("fedrep", ctx), name="own_rep")
  try:
    with pytest.raises(config_lib.ConfigError,
                       match=r"^config\.methods\.m: algorithm 'own_rep' failed when traced "
                             r"on the model's parameters, whose \"head\" entry is empty .* "
                             r"model 'NoHead' has none: name its head with"):
      ff.run(c, data=(x, y), model=NoHead())
  finally:
    algorithms.unregister("own_rep")


def test_messages_for_the_usual_notebook_slips():
  """A misspelt run label was a bare ``KeyError: ('fofedav', 0)``, a misspelt
  algorithm name listed the names without a guess, and ``model=Net`` (the
  class) said "expected a flax.linen Module, got type"."""
  rec = RunRecord("fofedavg", "fofedavg", 0, [], [])
  res = ff.Results(helpers.tiny_config(), [rec, RunRecord("fedavg", "fedavg", 0, [], [])])
  with pytest.raises(KeyError, match=r"^method 'fofedav': no such run; did you mean "
                                     r"'fofedavg'\? the methods are 'fofedavg', 'fedavg'$"):
    res.record("fofedav", 0)
  with pytest.raises(KeyError, match=r"^method 'fedavg' has no seed 3; its seeds are 0$"):
    res.record("fedavg", 3)
  assert res.record("fofedavg", 0) is rec
  c = helpers.tiny_config(rounds=1)
  c.methods = ml_collections.ConfigDict({"a": {"name": "fedavgg"}})
  with pytest.raises(config_lib.ConfigError, match=r"^config\.methods\.a\.name='fedavgg': "
                                                   r"did you mean 'fedavg'\? allowed values"):
    ff.run(c)
  x, y = _arrays()
  with pytest.raises(TypeError, match=r"^model: TwoLayer is a flax\.linen Module class; "
                                      r"pass an instance, e.g\. TwoLayer\(\)$"):
    ff.run(helpers.tiny_config(rounds=1), data=(x, y), model=TwoLayer)
  with pytest.raises(ff.data.DataError, match=r"^data:y_train: has dtype float32 \(shape "
                                              r"\(192,\)\); expected integer class labels"):
    ff.run(helpers.tiny_config(rounds=1), data=(x, y.astype(np.float32)), model=TwoLayer())


_CACHE_SCRIPT = '''
import jax
import fedfrac as ff
from fedfrac.runner import compile_cache
from tests import helpers
c = helpers.tiny_config(rounds=1)
c.model.hidden = (8,)
ff.run(c)
print(jax.config.jax_compilation_cache_dir, compile_cache.counts()["hits"],
      compile_cache.counts()["misses"])
'''


def test_run_uses_the_persistent_compile_cache_as_the_command_line_does(tmp_path):
  """A re-run cell compiled every program again (2.4 s against 0.7 s with the
  cache); ff.run now loads them from the cache the command lines use, with
  ``FEDFRAC_COMPILE_CACHE`` as the switch."""
  import os
  import subprocess
  import sys
  root = os.path.dirname(os.path.dirname(helpers.__file__))

  def run(setting):
    env = dict(os.environ, PYTHONPATH=root, FEDFRAC_COMPILE_CACHE=setting)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    out = subprocess.run([sys.executable, "-c", _CACHE_SCRIPT], cwd=root,
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    directory, hits, misses = out.stdout.split()[-3:]
    return directory, int(hits), int(misses)
  cache = str(tmp_path / "cache")
  directory, hits, misses = run(cache)             # the first run fills the cache
  assert directory == cache and hits == 0 and misses > 0
  directory, hits, again = run(cache)              # the same cell in a new process
  assert directory == cache and hits == misses and again == 0
  assert run("off")[0] == "None"                   # the switch
