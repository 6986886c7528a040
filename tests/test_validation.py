"""Float hyper-parameters must be finite in float32 (fedfrac._validation): a
value such as client.lr=1e308 passed validation and became inf in the float32
arrays it is used in. The shared helpers refuse it wherever a number is checked:
config fields (fedfrac.config.is_num / fail), algorithm options
(fedfrac.algorithms.schema), the system section and function arguments
(fedfrac._validation.concrete_scalar)."""
from __future__ import annotations

import math

import ml_collections
import numpy as np
import pytest

from fedfrac import _validation
from fedfrac.algorithms import schema
from fedfrac.config import ConfigError, base_config, is_num, validate
from fedfrac.optim.fractional import fractional

NOTE = "is not finite in float32 (|x| <= 3.4028235e+38); "


@pytest.mark.parametrize("value, finite", [
    (0.05, True), (3.4e38, True), (-3.4e38, True), (10**30, True), (1e39, False),
    (1e308, False), (-1e308, False), (10**400, False), (math.inf, False),
    (math.nan, False), (np.float64(1e39), False), (np.float32(2.0), True),
    (True, False), ("1.0", False), (None, False)])
def test_finite_in_float32(value, finite):
  assert _validation.finite_in_float32(value) is finite


def test_is_num_and_schema_numbers_refuse_float32_overflow():
  assert is_num(0.1) and is_num(3e38) and not is_num(1e308) and not is_num(True)
  assert schema.is_number(1.0) and not schema.is_number(1e39)
  assert schema.positive(1e38) and not schema.positive(1e39)


def _config(**changes):
  c = base_config()
  c.methods.fedprox = ml_collections.ConfigDict(dict(name="fedprox"))
  for key, value in changes.items():
    node = c
    *parents, last = key.split(".")
    for p in parents:
      node = node[p]
    node[last] = value
  return c


@pytest.mark.parametrize("key, value, message", [
    ("client.lr", 1e308, f"config.client.lr=1e+308: {NOTE}must be > 0"),
    ("client.lr", 1e39, f"config.client.lr=1e+39: {NOTE}must be > 0"),
    ("client.lr", math.nan, "config.client.lr=nan: is not finite; must be > 0"),
    ("client.weight_decay", 1e300, f"config.client.weight_decay=1e+300: {NOTE}"),
    ("data.alpha", 1e39, f"config.data.alpha=1e+39: {NOTE}must be > 0"),
    ("task.huber_delta", 1e300, f"config.task.huber_delta=1e+300: {NOTE}"),
    ("attack.scale", -1e300, f"config.attack.scale=-1e+300: {NOTE}"),
    ("methods.fedprox.mu", 1e308, f"config.methods.fedprox.mu=1e+308: {NOTE}"),
    ("system.sigma", 1e39, "config.system.sigma=1e+39: must be a number >= 0, finite "
                           "in float32"),
])
def test_config_values_beyond_float32_are_refused(key, value, message):
  with pytest.raises(ConfigError) as info:
    validate(_config(**{key: value}))
  assert str(info.value).startswith(message), str(info.value)


def test_values_inside_float32_still_pass():
  validate(_config(**{"client.lr": 3e38, "methods.fedprox.mu": 1e30,
                      "system.deadline": math.inf}))


def test_function_arguments_beyond_float32_are_refused():
  assert math.isnan(_validation.concrete_scalar(1e39))
  assert math.isnan(_validation.concrete_scalar(np.asarray(1e308)))
  assert _validation.concrete_scalar(2.5) == 2.5
  with pytest.raises(ValueError, match="delta must be a finite number > 0"):
    fractional(alpha=0.9, delta=1e39)


ZERO = "is 0 in float32, the precision it is used in (a nonzero value needs |x| >= "


@pytest.mark.parametrize("key, value, message", [
    ("client.lr", 1e-300, f"config.client.lr=1e-300: {ZERO}"),
    ("client.lr", 1e-50, f"config.client.lr=1e-50: {ZERO}"),
    ("methods.fedprox.client.lr", 1e-40, f"config.methods.fedprox.client.lr=1e-40: {ZERO}"),
    ("client.weight_decay", 1e-45, f"config.client.weight_decay=1e-45: {ZERO}"),
    ("methods.fedprox.mu", 1e-300, f"config.methods.fedprox.mu=1e-300: {ZERO}"),
])
def test_values_that_are_zero_in_float32_are_refused(key, value, message):
  # Before: 1e-300 passed "> 0", became 0 in float32, and the model never moved
  # while the run's status was ok.
  c = _config()
  if key.startswith("methods.fedprox.client"):
    c.methods.fedprox.client = ml_collections.ConfigDict({"lr": value})
  else:
    c = _config(**{key: value})
  with pytest.raises(ConfigError) as info:
    validate(c)
  assert str(info.value).startswith(message), str(info.value)
  assert not _validation.usable_in_float32(value) and _validation.usable_in_float32(0.0)
  assert math.isnan(_validation.concrete_scalar(value))


def test_a_file_setting_a_rate_that_is_zero_in_float32_is_refused(tmp_path):
  from fedfrac import config_files
  path = tmp_path / "c.py"
  path.write_text("from fedfrac.config import base_config\n\n\ndef get_config():\n"
                  "  c = base_config()\n  c.client.lr = 1e-50\n  return c\n")
  with pytest.raises(ConfigError) as info:
    validate(config_files.load_config_file(str(path)))
  assert str(info.value).startswith(f"config.client.lr=1e-50: {ZERO}")


@pytest.mark.parametrize("seeds", [(2**63,), (0, 2**64 + 5)])
def test_seeds_beyond_a_prng_key_are_one_line(seeds):
  # Before: OverflowError from the PRNG key, after the data was built.
  import fedfrac as ff
  from tests import helpers
  c = helpers.tiny_config(rounds=1)
  c.seeds = seeds
  with pytest.raises(ConfigError, match=r"config.seeds=.*: seed \d+ is too large; seeds "
                                        r"are integers in 0..9223372036854775807"):
    ff.run(c)
  with pytest.raises(ConfigError, match="is too large"):
    ff.run_many(helpers.tiny_config(rounds=1), seeds=seeds)


@pytest.mark.parametrize("key, value", [("data.dir", "/tmp/mine"),
                                        ("data.files.format", "npz"),
                                        ("data.files.max_train", 100)])
def test_a_data_file_setting_without_the_files_source_is_refused(key, value):
  # Before: neither checked nor used, so one could believe the file ran.
  with pytest.raises(ConfigError) as info:
    validate(_config(**{key: value}))
  assert str(info.value).startswith(f"config.{key}={value!r}: only read with "
                                    f"data.source='files' (data.source is "
                                    f"'sklearn_digits')"), str(info.value)


@pytest.mark.parametrize("key", ["rounds", "client.local_epochs", "client.local_steps"])
def test_counts_beyond_int32_are_refused(key):
  with pytest.raises(ConfigError, match=rf"^config\.{key}=100000000000000000000: must be at "
                     r"most 2147483647 \(2\*\*31 - 1\): .* counted in int32"):
    validate(_config(**{key: 10**20}))
