"""The algorithm protocol: registry entries, the hyper-parameter schema, the one
α range rule, and ``python -m fedfrac.main --list`` generated from the registries."""
from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

import fedfrac as ff
from fedfrac import algorithms, catalog
from fedfrac import config as config_lib
from fedfrac._validation import concrete_scalar
from fedfrac.algorithms import contract, schema

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# fedfrac.optim re-exports a function named ``fractional``; this is the module.
fractional_lib = importlib.import_module("fedfrac.optim.fractional")
_SHARED = {"contract", "client_view", "schema", "local_training", "tasks", "trees", "server",
           "server_optimizer", "families",
           "firma", "check", "asynchronous",
           "fedbuff", "fedasync"}  # asynchronous servers (algorithms.async_server)


def _lr_below_10_with_samples(hp):
  """A cross-option check; like every check it passes traced values."""
  lr = concrete_scalar(hp["server_lr"])
  if lr is None or lr < 10 or hp["weighting"] == "uniform":
    return None
  return f"server_lr={hp['server_lr']!r}: must be < 10 with 'samples'"


def _toy_schema():
  return schema.HParamSchema({
      "server_lr": schema.HParam(1.0, schema.positive, "must be > 0"),
      "weighting": schema.HParam("samples", schema.one_of("samples", "uniform"),
                                 "allowed values are 'samples', 'uniform'"),
  }, checks=(_lr_below_10_with_samples,))


def test_unknown_option_suggests_the_closest_name_in_one_line():
  with pytest.raises(ValueError) as info:
    _toy_schema().resolve("toy", {"server_lrr": 0.5}, prefix="methods.a.")
  message = str(info.value)
  assert "\n" not in message
  assert message.startswith("methods.a.server_lrr: unknown option for algorithm 'toy'")
  assert "did you mean 'server_lr'?" in message
  assert "server_lr, weighting" in message


def test_unknown_option_without_a_close_name_lists_the_options():
  with pytest.raises(ValueError) as info:
    algorithms.hparams("fedprox", {"zzzz": 1})
  assert "did you mean" not in str(info.value)
  assert "allowed options are mu" in str(info.value)


def test_registered_algorithm_suggests_close_option_name():
  with pytest.raises(ValueError, match=r"did you mean 'temperature'\?"):
    algorithms.hparams("moon", {"temprature": 0.1})


@pytest.mark.parametrize("given, expected", [
    ({"server_lr": -1.0}, "server_lr=-1.0: must be > 0"),
    ({"weighting": "size"}, "weighting='size': allowed values are 'samples', 'uniform'"),
    ({"server_lr": 20.0}, "server_lr=20.0: must be < 10 with 'samples'"),
])
def test_bad_value_is_one_line_with_key_value_and_allowed(given, expected):
  with pytest.raises(ValueError) as info:
    _toy_schema().resolve("toy", given)
  assert str(info.value) == expected


def test_defaults_fill_missing_options_and_given_values_win():
  hp = _toy_schema().resolve("toy", {"weighting": "uniform"})
  assert hp == {"server_lr": 1.0, "weighting": "uniform"}


def test_traced_values_outside_their_range_become_nan():
  """A traced value cannot raise; outside its range it becomes NaN, so the run
  diverges visibly instead of training with a value the algorithm does not define."""
  s = _toy_schema()

  @jax.jit
  def f(lr):
    return s.resolve("toy", {"server_lr": lr})["server_lr"] * 2

  assert float(f(jnp.float32(3.0))) == 6.0
  assert jnp.isnan(f(jnp.float32(-3.0)))   # a concrete -3 is refused
  with pytest.raises(ValueError):
    s.resolve("toy", {"server_lr": -3.0})


@pytest.mark.parametrize("heuristic,alphas,expected", [
    (False, [0.5, 1.0, 1.5, 3.0, -0.2], [0.5, 1.0, None, None, None]),
    (True, [0.5, 1.5, 2.0], [0.5, 1.5, None]),
])
def test_a_vmapped_fractional_alpha_out_of_range_is_nan(heuristic, alphas, expected):
  """The old code trained an α of 3 traced under vmap to ~10 % accuracy, like a
  plausible bad run; now such an α is NaN and the run diverges."""
  def alpha(a):
    return algorithms.hparams("fofedavg", {"alpha": a,
                                           "allow_heuristic_alpha": heuristic})["alpha"]
  got = jax.vmap(alpha)(jnp.asarray(alphas, jnp.float32))
  for g, e in zip(got.tolist(), expected):
    assert (g != g) if e is None else g == pytest.approx(e)


def test_with_defaults_sets_a_preset_and_refuses_unknown_names():
  preset = _toy_schema().with_defaults(weighting="uniform")
  assert preset.defaults() == {"server_lr": 1.0, "weighting": "uniform"}
  assert _toy_schema().defaults()["weighting"] == "samples"
  with pytest.raises(ValueError, match="nope"):
    _toy_schema().with_defaults(nope=1)


def test_every_registered_algorithm_has_an_entry_with_a_schema():
  assert len(algorithms.names()) >= 21
  for name in algorithms.names():
    entry = algorithms.entry(name)
    assert isinstance(entry, contract.AlgorithmEntry)
    assert entry.name == name and callable(entry.build) and entry.summary
    assert isinstance(entry.schema, schema.HParamSchema)
    for key, hp in entry.schema.items():
      assert isinstance(hp, schema.HParam), (name, key)
    assert entry.hparams() == entry.schema.defaults()   # defaults pass their checks
    if entry.decentralised:
      assert entry.full_participation


def test_every_algorithm_module_registers_all_its_entries():
  """A module with a ``build`` lists its entries in ENTRIES, all in the registry."""
  pkg = importlib.import_module("fedfrac.algorithms")
  modules = [m.name for m in pkgutil.iter_modules(pkg.__path__) if m.name not in _SHARED]
  assert len(modules) >= 16
  for module_name in modules:
    module = importlib.import_module(f"fedfrac.algorithms.{module_name}")
    assert hasattr(module, "build") and hasattr(module, "ENTRIES"), module_name
    for e in module.ENTRIES:
      assert algorithms.REGISTRY[e.name] is e
    for legacy in ("ROBUST_AGGREGATION", "FULL_PARTICIPATION"):
      assert not hasattr(module, legacy), (module_name, legacy)


def test_presets_are_schema_defaults():
  assert algorithms.hparams("ri_fedavg")["alpha"] == 1.0
  assert algorithms.hparams("fo_ri_fedavg")["alpha"] == 0.8
  assert algorithms.hparams("fibfl_plus")["gate"] == "accuracy"
  assert algorithms.hparams("fedadagrad")["server_lr"] == 0.1


def test_unknown_algorithm_name_suggests_one():
  with pytest.raises(ValueError, match=r"did you mean 'fedprox'\?"):
    algorithms.entry("fedprx")


def test_capabilities_drive_config_validation():
  c = config_lib.base_config()
  c.methods = {"r": {"name": "rdfl"}}
  c.participation = 0.5
  with pytest.raises(config_lib.ConfigError, match="participation=0.5"):
    config_lib.validate(c)
  c = config_lib.base_config()
  c.methods = {"d": {"name": "dp_fedavg"}}
  c.server.aggregator = "median"
  with pytest.raises(config_lib.ConfigError, match="robust aggregators work with fedavg"):
    config_lib.validate(c)


def test_config_method_option_errors_come_from_the_schema():
  c = config_lib.base_config()
  c.methods = {"p": {"name": "fedprox", "muu": 0.1}}
  with pytest.raises(config_lib.ConfigError) as info:
    config_lib.validate(c)
  assert str(info.value).startswith("config.methods.p.muu=0.1: unknown option")
  assert "did you mean 'mu'?" in str(info.value)
  c.methods = {"p": {"name": "fedprox", "mu": -1.0}}
  with pytest.raises(config_lib.ConfigError) as info:
    config_lib.validate(c)
  assert str(info.value) == "config.methods.p.mu=-1.0: proximal weight μ; must be >= 0"


@pytest.mark.parametrize("alpha, heuristic, ok", [
    (0.5, False, True), (1.0, False, True), (1.5, False, False), (1.5, True, True),
    (2.0, True, False), (0.0, False, False)])
def test_one_alpha_rule_for_fractional_and_the_algorithms(alpha, heuristic, ok):
  message = fractional_lib.alpha_range_error(alpha, heuristic)
  assert (message is None) == ok
  options = {"alpha": alpha, "allow_heuristic_alpha": heuristic}
  for name in ("fofedavg", "fo_ri_fedavg"):
    if ok:
      algorithms.hparams(name, options)
    else:
      with pytest.raises(ValueError) as info:
        algorithms.hparams(name, options)
      assert str(info.value).startswith(f"alpha={alpha!r}: ")
      assert "must be in (0, " in str(info.value) and "\n" not in str(info.value)
  if ok:
    fractional_lib.fractional(alpha, 1e-5, allow_heuristic_alpha=heuristic)
  else:
    with pytest.raises(ValueError, match=f"alpha={alpha!r}: " + "must be in"):
      fractional_lib.fractional(alpha, 1e-5, allow_heuristic_alpha=heuristic)


def test_public_names_stay_importable():
  assert ff.FedAlgorithm is contract.FedAlgorithm
  assert algorithms.FedAlgorithm is contract.FedAlgorithm
  assert algorithms.ClientView is contract.ClientView


def _run_main(*args):
  env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
  return subprocess.run([sys.executable, "-m", "fedfrac.main", *args], cwd=ROOT,
                        env=env, capture_output=True, text=True, timeout=300)


def _blocks(text):
  """Algorithm name -> its option lines, parsed from the --list output."""
  blocks, current = {}, None
  for line in text.split("\n\n")[0].splitlines()[1:]:
    if line.startswith("  ") and not line.startswith("      "):
      current = line.strip().split(":")[0]
      blocks[current] = []
    else:
      blocks[current].append(line.strip())
  return blocks


def test_list_names_every_algorithm_with_its_schema_options():
  out = _run_main("--list")
  assert out.returncode == 0, out.stderr
  blocks = _blocks(out.stdout)
  assert list(blocks) == list(algorithms.names())
  for name, lines in blocks.items():
    options = list(algorithms.entry(name).schema.items())
    expected = [catalog.option_line(k, hp) for k, hp in options] or ["(no options)"]
    assert lines == expected, name
  for key in ("iid", "dirichlet", "natural", "sklearn_digits", "ved_csv", "mlp",
              "window_lstm"):
    assert f"\n  {key} " in out.stdout
  assert "config.data.input_mean / config.data.input_std" in out.stdout


def test_option_lines_show_default_and_allowed_values():
  hp = algorithms.entry("scaffold").schema.options["weighting"]
  assert catalog.option_line("weighting", hp) == (
      "weighting = 'uniform'  (one of 'uniform', 'samples')")
  hp = algorithms.entry("fedprox").schema.options["mu"]
  assert catalog.option_line("mu", hp) == "mu = 0.01  (proximal weight μ; must be >= 0)"


def test_config_is_required_without_list():
  out = _run_main()
  assert out.returncode == 2
  assert out.stderr.startswith("error: ") and "config file is required" in out.stderr
