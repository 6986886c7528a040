"""Checks of the ``data`` section of an experiment config (see :mod:`fedfrac.config`),
and of a dataset's arrays (:func:`check_arrays`: shapes, dtypes, NaN/inf, label
range, empty splits or clients), which raise :class:`DataError` naming the array;
the array checks are defined in :mod:`fedfrac.data.array_checks`, below the file
readers that use them, and re-exported here.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from fedfrac._validation import check
from fedfrac.data.array_checks import (MAX_CLASSES, DataError, check_arrays,  # noqa: F401
                                       check_finite, check_labels)
from fedfrac.data import sources
from fedfrac.data.schema import DATA

if TYPE_CHECKING:
  from ml_collections import ConfigDict

BEV_CLASSES = ("passenger", "truck", "bus", "ev", "phev")


def validate_data(config: ConfigDict) -> None:
  """Check ``config.data``: every key by its declaration (:data:`fedfrac.data.schema.DATA`),
  then the rules that relate several keys."""
  DATA.check(config.data, "data", config)
  d = config.data
  mean, std = d.get("input_mean", ()), d.get("input_std", ())
  check(len(std) == len(mean), "data.input_std", std,
        f"needs as many values as data.input_mean={tuple(mean)}")
  check(d.get("eval_split", "test") == "test" or d.get("validation_fraction", 0.0) > 0,
        "data.eval_split", d.get("eval_split"), "'val' needs data.validation_fraction > 0")
  if d.get("compat", "paper") == "reference_code":
    check(d.partition in ("iid", "dirichlet", "label_skew"), "data.partition",
          d.partition, "data.compat='reference_code' supports 'iid', "
          "'dirichlet', 'label_skew' (the FIRMA authors' splits)")
  if d.source in sources.BEV_SOURCES:
    validate_bev(config)


# Parts of ``data`` that only some sources read (key -> those sources). The
# ``tfds`` part is left out: configs name their tfds dataset while runs of them
# switch to the same data from local files.
SOURCE_PARTS = {"dir": ("files",), "files": ("files",)}


def _leaves(node, prefix):
  if hasattr(node, "items"):
    for k, v in node.items():
      yield from _leaves(v, f"{prefix}.{k}")
  else:
    yield prefix, node


def check_unused(config: ConfigDict, defaults: ConfigDict) -> None:
  """Refuse a value set in a part of ``data`` its source does not read
  (``data.dir`` without ``data.source='files'``): nothing would check or use
  it, and one could believe it ran. ``defaults``: the base config's."""
  d = config.data
  for part, sources_reading in SOURCE_PARTS.items():
    if d.source in sources_reading or part not in d:
      continue
    default = dict(_leaves(defaults.data[part], f"data.{part}"))
    for key, value in _leaves(d[part], f"data.{part}"):
      if key in default and value != default[key]:
        check(False, key, value,
              f"only read with data.source={' or '.join(map(repr, sources_reading))} "
              f"(data.source is {d.source!r}): set data.source to read it, or leave "
              f"{key} at its default {default[key]!r}")


def validate_bev(config: ConfigDict) -> None:
  """The rules of a BEV source (one client per vehicle, regression) that relate
  ``data.bev`` to other keys; its keys are checked by their declarations
  (:data:`fedfrac.data.schema.BEV`)."""
  d, b = config.data, config.data.bev
  check(d.partition == "natural", "data.partition", d.partition,
        f"source {d.source!r} has one client per vehicle: must be 'natural'")
  check(config.task.loss in ("mse", "huber"), "task.loss", config.task.loss,
        f"source {d.source!r} is a regression task: allowed values are 'mse', 'huber'")
  check(b.eval_split != "val" or b.fractions[1] > 0, "data.bev.eval_split", b.eval_split,
        "'val' needs a validation fraction > 0 in data.bev.fractions")
  skew = b.get("regime_skew", 0.0)
  if skew:
    check(len(b.holdout_vehicles) == 0, "data.bev.holdout_vehicles",
          b.holdout_vehicles, f"must be empty with data.bev.regime_skew={skew!r} (the "
          "regime partition deals every vehicle's trips to clients)")
