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
