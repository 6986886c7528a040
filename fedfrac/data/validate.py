"""Checks of the ``data`` section of an experiment config (see :mod:`fedfrac.config`),
and of a dataset's arrays (:func:`check_arrays`: shapes, dtypes, NaN/inf, label
range, empty splits or clients), which raise :class:`DataError` naming the array;
the array checks are defined in :mod:`fedfrac.data.array_checks`, below the file
readers that use them, and re-exported here.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from fedfrac._validation import check, int_at_least, is_int, is_num
from fedfrac.data.array_checks import (MAX_CLASSES, DataError, check_arrays,  # noqa: F401
                                       check_finite, check_labels)
from fedfrac.data import augment, sources
from fedfrac.data.label_skew import LABEL_SKEW_RULES, PATHOLOGICAL_LEVELS
from fedfrac.data.partition_schemes import SCHEMES

if TYPE_CHECKING:
  from ml_collections import ConfigDict

BEV_CLASSES = ("passenger", "truck", "bus", "ev", "phev")


def validate_data(config: ConfigDict) -> None:
  """Check ``config.data`` (and, for a BEV source, ``data.bev``)."""
  d = config.data
  check(d.source in sources.SOURCES, "data.source", d.source,
        f"allowed values are {', '.join(sources.SOURCES)}")
  int_at_least(config, "data.num_clients", 0 if d.source == "ved_csv" else 1)
  check(d.partition in SCHEMES, "data.partition", d.partition,
        f"allowed values are {', '.join(SCHEMES)}")
  check(is_num(d.alpha) and d.alpha > 0, "data.alpha", d.alpha, "must be > 0")
  int_at_least(config, "data.shards_per_client", 1)
  int_at_least(config, "data.classes_per_client", 1)
  int_at_least(config, "data.min_size", 1)
  int_at_least(config, "data.min_client_size", 1)
  check(d.on_small in ("drop", "error"), "data.on_small", d.on_small,
        "allowed values are 'drop', 'error'")
  check(d.get("label_skew_rule", "paper") in LABEL_SKEW_RULES, "data.label_skew_rule",
        d.get("label_skew_rule", "paper"),
        f"allowed values are {', '.join(map(repr, LABEL_SKEW_RULES))}")
  check(d.get("pathological_level", "severe") in PATHOLOGICAL_LEVELS,
        "data.pathological_level", d.get("pathological_level", "severe"),
        f"allowed values are {', '.join(map(repr, PATHOLOGICAL_LEVELS))}")
  check(d.test_split in ("like_train", "iid", "natural"), "data.test_split",
        d.test_split, "allowed values are 'like_train', 'iid', 'natural'")
  check(is_num(d.test_fraction) and 0 < d.test_fraction < 1, "data.test_fraction",
        d.test_fraction, "must be in (0, 1)")
  mean, std = d.get("input_mean", ()), d.get("input_std", ())
  for key, value in (("data.input_mean", mean), ("data.input_std", std)):
    check(isinstance(value, (tuple, list)) and all(is_num(v) for v in value), key,
          value, "must be a tuple of numbers (one, or one per input channel; () = "
          "inputs only scaled)")
  check(len(std) == len(mean), "data.input_std", std,
        f"needs as many values as data.input_mean={tuple(mean)}")
  check(all(v > 0 for v in std), "data.input_std", std, "every value must be > 0")
  augment.parse(d.get("augment", ""))
  vf = d.get("validation_fraction", 0.0)
  check(is_num(vf) and 0 <= vf < 1, "data.validation_fraction", vf,
        "must be in [0, 1) (0 = no validation split)")
  ev = d.get("eval_split", "test")
  check(ev in ("test", "val"), "data.eval_split", ev, "allowed values are 'test', 'val'")
  check(ev == "test" or vf > 0, "data.eval_split", ev,
        "'val' needs data.validation_fraction > 0")
  int_at_least(config, "data.split_seed", 0)
  check(is_int(d.seed) and d.seed >= -1, "data.seed", d.seed,
        "must be an integer >= 0, or -1 for the run's seed")
  compat = d.get("compat", "paper")
  check(compat in ("paper", "reference_code"), "data.compat", compat,
        "allowed values are 'paper', 'reference_code'")
  if compat == "reference_code":
    check(d.partition in ("iid", "dirichlet", "label_skew"), "data.partition",
          d.partition, "data.compat='reference_code' supports 'iid', "
          "'dirichlet', 'label_skew' (the FIRMA authors' splits)")
  if d.source == "files":
    validate_files(config)
  if d.source == "tfds":
    check(d.tfds.name in sources.TFDS_DATASETS, "data.tfds.name", d.tfds.name,
          f"allowed values are {', '.join(sources.TFDS_DATASETS)}")
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
  """Check ``config.data.bev`` of a BEV source (one client per vehicle, regression)."""
  d, b = config.data, config.data.bev
  check(d.partition == "natural", "data.partition", d.partition,
        f"source {d.source!r} has one client per vehicle: must be 'natural'")
  check(config.task.loss in ("mse", "huber"), "task.loss", config.task.loss,
        f"source {d.source!r} is a regression task: allowed values are 'mse', 'huber'")
  check(is_num(b.hours_per_vehicle) and b.hours_per_vehicle > 0,
        "data.bev.hours_per_vehicle", b.hours_per_vehicle, "must be > 0")
  check(isinstance(b.class_mix, (tuple, list)) and len(b.class_mix) == 3
        and all(is_num(v) and v >= 0 for v in b.class_mix) and sum(b.class_mix) > 0,
        "data.bev.class_mix", b.class_mix,
        "must be 3 non-negative weights (passenger, truck, bus), not all 0")
  tr = b.temperature_range_c
  check(isinstance(tr, (tuple, list)) and len(tr) == 2 and all(is_num(v) for v in tr)
        and tr[0] <= tr[1], "data.bev.temperature_range_c", tr,
        "must be (low, high) in °C with low <= high")
  int_at_least(config, "data.bev.window", 1)
  int_at_least(config, "data.bev.stride", 1)
  int_at_least(config, "data.bev.min_windows", 1)
  fr = b.fractions
  check(isinstance(fr, (tuple, list)) and len(fr) == 3
        and all(is_num(v) and v >= 0 for v in fr) and abs(sum(fr) - 1) < 1e-6
        and fr[0] > 0, "data.bev.fractions", fr,
        "must be 3 non-negative train/val/test fractions summing to 1, train > 0")
  check(isinstance(b.holdout_vehicles, (tuple, list)), "data.bev.holdout_vehicles",
        b.holdout_vehicles, "must be a tuple of vehicle ids")
  check(b.eval_split in ("test", "val"), "data.bev.eval_split", b.eval_split,
        "allowed values are 'test', 'val'")
  check(b.eval_split != "val" or fr[1] > 0, "data.bev.eval_split", b.eval_split,
        "'val' needs a validation fraction > 0 in data.bev.fractions")
  check(is_num(b.input_clip) and b.input_clip >= 0, "data.bev.input_clip",
        b.input_clip, "must be >= 0 (0 = off)")
  skew = b.get("regime_skew", 0.0)
  check(skew is None or (is_num(skew) and skew >= 0),
        "data.bev.regime_skew", skew, "must be a finite number >= 0 (0 or None = one "
        "client per vehicle; > 0 = the Dirichlet concentration α_D of the regime "
        "partition)")
  check(is_int(b.get("num_regimes", 4)) and b.get("num_regimes", 4) >= 2,
        "data.bev.num_regimes", b.get("num_regimes", 4), "must be an integer >= 2")
  if skew:
    check(len(b.holdout_vehicles) == 0, "data.bev.holdout_vehicles",
          b.holdout_vehicles, f"must be empty with data.bev.regime_skew={skew!r} (the "
          "regime partition deals every vehicle's trips to clients)")
  if d.source == "ved_csv":
    check(isinstance(b.ved_path, str) and b.ved_path != "", "data.bev.ved_path",
          b.ved_path, "give the VED dynamic-data CSV file(s) or their directory")
    check(is_num(b.ved_resample_dt_s) and b.ved_resample_dt_s > 0,
          "data.bev.ved_resample_dt_s", b.ved_resample_dt_s, "must be > 0")
    check(is_num(b.ved_max_gap_s) and b.ved_max_gap_s > 0, "data.bev.ved_max_gap_s",
          b.ved_max_gap_s, "must be > 0")
    check(b.ved_current_sign in ("auto", 1, -1), "data.bev.ved_current_sign",
          b.ved_current_sign, "allowed values are 'auto', 1, -1")


def validate_files(config: ConfigDict) -> None:
  """The ``files`` source's options; the files themselves are checked when read."""
  from fedfrac.data import files as files_lib
  d, f = config.data, config.data.files
  check(isinstance(d.dir, str) and d.dir != "", "data.dir", d.dir,
        "give the directory holding the data files (or the .npz / mnist.pkl.gz / "
        "CIFAR .tar.gz file)")
  check(os.path.exists(os.path.expanduser(d.dir)), "data.dir", d.dir,
        "does not exist; give the directory holding the data files")
  check(f.format in files_lib.FORMATS, "data.files.format", f.format,
        f"allowed values are {', '.join(files_lib.FORMATS)}")
  check(f.cifar100_labels in files_lib.CIFAR100_LABELS, "data.files.cifar100_labels",
        f.cifar100_labels, f"allowed values are {', '.join(files_lib.CIFAR100_LABELS)}")
  check(isinstance(f.emnist_split, str), "data.files.emnist_split", f.emnist_split,
        f"must be '' or an EMNIST split ({', '.join(files_lib.EMNIST_CLASSES)})")
  for key in ("num_classes", "max_train", "max_test"):
    int_at_least(config, f"data.files.{key}", 0)
  check(f.num_classes <= MAX_CLASSES, "data.files.num_classes", f.num_classes,
        f"must be at most {MAX_CLASSES} (0 = the format's own count)")
