"""The ``data`` section of an experiment config: every key once, with its
default, meaning and check (:mod:`fedfrac.config_schema`). Rules that relate
several keys are :func:`fedfrac.data.validate.validate_data`."""
from __future__ import annotations

import os

from fedfrac._validation import is_num
from fedfrac.config_schema import Check, Field, Section, integer, number, one_of
from fedfrac.data import augment, sources
from fedfrac.data.array_checks import MAX_CLASSES
from fedfrac.data.files import CIFAR100_LABELS, EMNIST_CLASSES, FORMATS
from fedfrac.data.label_skew import LABEL_SKEW_RULES, PATHOLOGICAL_LEVELS
from fedfrac.data.partition_schemes import SCHEMES

def _numbers(v, node) -> bool:
  return isinstance(v, (tuple, list)) and all(is_num(x) for x in v)


_CHANNEL_NUMBERS = Check(_numbers, "must be a tuple of numbers (one, or one per input "
                         "channel; () = inputs only scaled)")


def _augment_spec(v, node) -> bool:
  augment.parse(v)   # raises its own one-line ConfigError
  return True


def _reading(*read_by):
  """``when``: the key is read only with ``data.source`` in ``read_by``."""
  return lambda node, config: config.data.source in read_by


def _weights(v, node) -> bool:
  return (isinstance(v, (tuple, list)) and len(v) == 3
          and all(is_num(x) and x >= 0 for x in v) and sum(v) > 0)


def _fractions(v, node) -> bool:
  return (isinstance(v, (tuple, list)) and len(v) == 3
          and all(is_num(x) and x >= 0 for x in v) and abs(sum(v) - 1) < 1e-6
          and v[0] > 0)


def _low_high(v, node) -> bool:
  return (isinstance(v, (tuple, list)) and len(v) == 2 and all(is_num(x) for x in v)
          and v[0] <= v[1])


SYNTHETIC = Section("synthetic", "LEAF's Synthetic(alpha, beta) clients (data.source="
                    "'synthetic').", [
    Field("alpha", 1.0, "variance of the clients' model means"),
    Field("beta", 1.0, "variance of the clients' input means"),
    Field("dim", 60, "input features"),
    Field("num_classes", 10, "classes"),
    Field("iid", False, "one model and input distribution for every client"),
    Field("max_client_size", 2000, "largest client (lognormal client sizes)"),
])

TFDS = Section("tfds", "A TensorFlow Datasets dataset (data.source='tfds').", [
    Field("name", "mnist", "the dataset",
          one_of(*sources.TFDS_DATASETS, quote=False), when=_reading("tfds")),
    Field("data_dir", "", "tfds's data directory ('' = its default)"),
    Field("download", False, "let tfds download it"),
    Field("max_train", 0, "keep the first so many training examples (0 = all)"),
    Field("max_test", 0, "keep the first so many test examples (0 = all)"),
])

FILES = Section("files", "Local files (data.source='files', fedfrac.data.files): "
                "format auto | idx | cifar10 | cifar100 | npz | mnist_pkl.", [
    Field("format", "auto", "the files' format (auto: from their names)",
          one_of(*FORMATS, quote=False)),
    Field("emnist_split", "", "picks emnist-<split>-* IDX files",
          Check(lambda v, node: isinstance(v, str),
                f"must be '' or an EMNIST split ({', '.join(EMNIST_CLASSES)})")),
    Field("cifar100_labels", "fine", "fine | coarse",
          one_of(*CIFAR100_LABELS, quote=False)),
    Field("num_classes", 0, "0 = the format's own count",
          (integer(0), Check(lambda v, node: v <= MAX_CLASSES,
                             f"must be at most {MAX_CLASSES} (0 = the format's own "
                             f"count)"))),
    Field("max_train", 0, "keep the first so many training examples (0 = all)",
          integer(0)),
    Field("max_test", 0, "keep the first so many test examples (0 = all)", integer(0)),
], when=_reading("files"))

BEV = Section("bev", "BEV energy sources (synthetic_bev, ved_csv): one client per "
              "vehicle, so data.partition must be 'natural'; data.num_clients = "
              "vehicles in the synthetic fleet (ved_csv: 0 = every usable vehicle "
              "in the files).", [
    Field("hours_per_vehicle", 3.0, "synthetic fleet: driving hours per vehicle",
          number(0, lo_open=True)),
    Field("class_mix", (0.6, 0.2, 0.2), "synthetic fleet: passenger, truck, bus",
          Check(_weights, "must be 3 non-negative weights (passenger, truck, bus), "
                "not all 0")),
    Field("temperature_range_c", (-5.0, 30.0),
          "synthetic fleet: per-vehicle climate range",
          Check(_low_high, "must be (low, high) in °C with low <= high")),
    Field("window", 60, "L_win samples per window", integer(1)),
    Field("stride", 10, "window stride (the VED paper uses 1)", integer(1)),
    Field("fractions", (0.7, 0.1, 0.2), "train/val/test trips per vehicle",
          Check(_fractions, "must be 3 non-negative train/val/test fractions summing "
                "to 1, train > 0")),
    Field("holdout_vehicles", (), "vehicles whose windows all go to test",
          Check(lambda v, node: isinstance(v, (tuple, list)),
                "must be a tuple of vehicle ids")),
    Field("min_windows", 1, "drop vehicles with fewer windows", integer(1)),
    Field("eval_split", "test", "split the engine evaluates: test | val",
          one_of("test", "val")),
    Field("input_clip", 0.0, "clip normalised inputs to ±this (0 = off)",
          number(0, note=" (0 = off)")),
    Field("regime_skew", 0.0, "α_D of the regime partition (0 = per vehicle)",
          Check(lambda v, node: v is None or (is_num(v) and v >= 0),
                "must be a finite number >= 0 (0 or None = one client per vehicle; "
                "> 0 = the Dirichlet concentration α_D of the regime partition)")),
    Field("num_regimes", 4, "R mean-speed regimes (regime_skew > 0)", integer(2)),
    Field("ved_path", "", "VED dynamic CSVs: file, dir or a,b,c",
          Check(lambda v, node: isinstance(v, str) and v != "",
                "give the VED dynamic-data CSV file(s) or their directory"),
          when=_reading("ved_csv")),
    Field("ved_resample_dt_s", 1.0, "VED: resampling step in seconds",
          number(0, lo_open=True), when=_reading("ved_csv")),
    Field("ved_max_gap_s", 10.0, "VED: a longer gap ends a trip", number(0, lo_open=True),
          when=_reading("ved_csv")),
    Field("ved_vehicles", (), "VED: the vehicles to read (() = all)"),
    Field("ved_current_sign", "auto", "VED: sign of the battery current",
          Check(lambda v, node: v in ("auto", 1, -1), "allowed values are 'auto', 1, -1"),
          when=_reading("ved_csv")),
], when=_reading(*sources.BEV_SOURCES))

DATA = Section("data", "The dataset and how it is split over clients.", [
    Field("source", "sklearn_digits", "the dataset (--list: Data sources)",
          one_of(*sources.SOURCES, quote=False)),
    Field("num_clients", 10, "K clients",
          integer(lambda d: 0 if d.source == "ved_csv" else 1)),
    Field("partition", "dirichlet", "how the training rows are split over clients",
          one_of(*SCHEMES, quote=False)),
    Field("alpha", 0.5, "Dirichlet concentration", number(0, lo_open=True)),
    Field("shards_per_client", 2, "shards partition", integer(1)),
    Field("classes_per_client", 2, "label_skew partition", integer(1)),
    Field("min_client_size", 64, "clients below it: see on_small", integer(1)),
    Field("on_small", "error", "a client below min_client_size: drop | error",
          one_of("drop", "error")),
    Field("label_skew_rule", "paper", "paper (FIRMA §3.5) | reference_code (greedy)",
          one_of(*LABEL_SKEW_RULES)),
    Field("pathological_level", "severe", "mild | moderate | severe (FOFedAvg app.)",
          one_of(*PATHOLOGICAL_LEVELS)),
    Field("min_size", 1, "smallest client of a Dirichlet draw", integer(1)),
    Field("test_split", "like_train", "like_train | iid | natural",
          one_of("like_train", "iid", "natural")),
    Field("test_fraction", 0.2, "rows held out for testing",
          number(0, 1, lo_open=True, hi_open=True)),
    Field("split_seed", 0, "seed of the train / test split", integer(0)),
    # Tuning: each client's train rows split into train / validation with the data
    # seed (0 = no validation split); eval_split="val" evaluates on it instead of test.
    Field("validation_fraction", 0.0, "each client's train rows held out for "
          "validation (0 = no validation split)",
          number(0, 1, hi_open=True, note=" (0 = no validation split)")),
    Field("eval_split", "test", "test | val (evaluate on the validation rows)",
          one_of("test", "val")),
    Field("seed", -1, "partition seed; -1 = the run's seed",
          integer(-1, allowed="must be an integer >= 0, or -1 for the run's seed")),
    # Inputs (uint8 images scaled to [0, 1] first) standardised per channel as
    # (x - input_mean) / input_std, torchvision's Normalize.
    Field("input_mean", (), "per-channel mean: one value or one per channel; () = "
          "only scaled", _CHANNEL_NUMBERS),
    Field("input_std", (), "per-channel std, as input_mean",
          (_CHANNEL_NUMBERS, Check(lambda v, node: all(x > 0 for x in v),
                                   "every value must be > 0"))),
    Field("augment", "", "training batches, e.g. 'crop:28:4,flip,cutout:16' "
          "(fedfrac.data.augment)", Check(_augment_spec, "")),
    Field("compat", "paper", "paper | reference_code (FIRMA authors' pipeline)",
          one_of("paper", "reference_code")),
    SYNTHETIC,
    TFDS,
    Field("dir", "", "data.source='files': the directory (or the one .npz / "
          "mnist.pkl.gz / CIFAR .tar.gz file)",
          (Check(lambda v, node: isinstance(v, str) and v != "",
                 "give the directory holding the data files (or the .npz / "
                 "mnist.pkl.gz / CIFAR .tar.gz file)"),
           Check(lambda v, node: os.path.exists(os.path.expanduser(v)),
                 "does not exist; give the directory holding the data files")),
          when=_reading("files")),
    FILES,
    BEV,
])
