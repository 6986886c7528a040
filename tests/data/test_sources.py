"""Sources: digits, FedProx synthetic, and tfds under mock_data (never downloads)."""
from __future__ import annotations

import numpy as np
import pytest

from fedfrac import data as data_lib
from fedfrac.config import base_config


def test_sklearn_digits_shapes_and_split():
  ds = data_lib.sklearn_digits(test_fraction=0.2)
  assert ds.x_train.shape[1:] == (8, 8, 1) and ds.x_train.dtype == np.float32
  assert len(ds.y_train) + len(ds.y_test) == 1797
  assert 0.0 <= ds.x_train.min() and ds.x_train.max() <= 1.0
  assert set(np.unique(ds.y_test)) == set(range(10))


def test_synthetic_is_seeded_and_heterogeneous():
  a = data_lib.synthetic(1.0, 1.0, num_clients=8, seed=0)
  b = data_lib.synthetic(1.0, 1.0, num_clients=8, seed=0)
  c = data_lib.synthetic(1.0, 1.0, num_clients=8, seed=1)
  np.testing.assert_array_equal(a.x_train, b.x_train)
  assert a.x_train.shape != c.x_train.shape or not np.array_equal(a.x_train, c.x_train)
  assert a.x_train.shape[1] == 60 and set(np.unique(a.train_groups)) == set(range(8))
  # Non-IID: label distributions differ across clients.
  dists = [np.bincount(a.y_train[a.train_groups == k], minlength=10) for k in range(8)]
  dists = np.array([d / d.sum() for d in dists])
  assert np.abs(dists - dists.mean(0)).sum(1).mean() > 0.3
  with pytest.raises(ValueError, match="alpha"):
    data_lib.synthetic(-1.0, 1.0)


def test_build_natural_partition_for_synthetic():
  cfg = base_config().data
  cfg.source, cfg.partition, cfg.test_split, cfg.num_clients = (
      "synthetic", "natural", "natural", 5)
  fed = data_lib.build(cfg, seed=0)
  assert fed.num_clients == 5 and np.all(fed.client_test_size > 0)


def test_tfds_source_under_mock_data_never_downloads(tmp_path):
  tfds = pytest.importorskip("tensorflow_datasets")
  with tfds.testing.mock_data(num_examples=24):
    ds = data_lib.tfds_source("mnist", data_dir=str(tmp_path))
    assert ds.x_train.shape == (24, 28, 28, 1) and ds.x_train.dtype == np.uint8
    assert ds.input_scale == pytest.approx(1 / 255)
    cifar = data_lib.tfds_source("cifar10", data_dir=str(tmp_path))
    assert cifar.x_train.shape[1:] == (32, 32, 3)
    cfg = base_config().data
    cfg.source, cfg.num_clients, cfg.partition = "tfds", 4, "iid"
    cfg.tfds.name = "fashion_mnist"
    fed = data_lib.build(cfg, seed=0)
    assert fed.num_clients == 4 and fed.client_size.sum() == 24


def test_tfds_missing_dataset_gives_one_clear_error(tmp_path):
  with pytest.raises(FileNotFoundError, match="download=True"):
    data_lib.tfds_source("mnist", data_dir=str(tmp_path / "empty"), download=False)
  with pytest.raises(ValueError, match="data.tfds.name='imagenet'"):
    data_lib.tfds_source("imagenet")


def _tfds_extra():
  """Distribution names of setup.cfg's ``tfds`` extra."""
  import configparser
  import os
  import re
  cfg = configparser.ConfigParser()
  cfg.read(os.path.join(os.path.dirname(__file__), "..", "..", "setup.cfg"))
  lines = cfg["options.extras_require"]["tfds"].strip().splitlines()
  return [re.split(r"[<>=!~;\[ ]", ln.strip(), maxsplit=1)[0] for ln in lines if ln.strip()]


def test_tfds_extra_installs_every_module_the_prepare_path_imports():
  import importlib
  import importlib.util
  from fedfrac.data import sources
  extra = _tfds_extra()
  # Every module download_and_prepare needs comes from the extra (array_record is
  # a dependency of tensorflow-datasets itself).
  needed = {d for m, d in sources.TFDS_PREPARE_MODULES.items() if m != "array_record"}
  assert needed <= set(extra), sorted(needed - set(extra))
  modules = {dist: mod for mod, dist in sources.TFDS_PREPARE_MODULES.items()}
  modules["grain"] = "grain"
  missing = [d for d in extra if importlib.util.find_spec(modules[d]) is None]
  if missing:
    pytest.skip(f"the 'tfds' extra is not installed (missing {', '.join(missing)}): "
                f"pip install 'fedfrac[tfds]'")
  for module in sources.TFDS_PREPARE_MODULES:
    importlib.import_module(module)
  # The builders of the five datasets and the writer they prepare through.
  for module in ("tensorflow_datasets.image_classification.mnist",
                 "tensorflow_datasets.image_classification.cifar",
                 "tensorflow_datasets.core.dataset_builder",
                 "tensorflow_datasets.core.features.image_feature"):
    importlib.import_module(module)
  import tensorflow_datasets as tfds
  for name in ("mnist", "fashion_mnist", "cifar10", "cifar100", "emnist"):
    assert tfds.builder_cls(name) is not None


def test_tfds_import_failure_names_the_missing_module(monkeypatch, tmp_path):
  tfds = pytest.importorskip("tensorflow_datasets")

  def data_source(*args, **kwargs):
    try:
      raise ModuleNotFoundError("No module named 'importlib_resources'",
                                name="importlib_resources")
    except ModuleNotFoundError as e:
      raise RuntimeError("Failed to construct dataset mnist") from e
  monkeypatch.setattr(tfds, "data_source", data_source)
  with pytest.raises(ImportError, match=r"module 'importlib_resources'.*"
                                        r"install 'importlib_resources'") as info:
    data_lib.tfds_source("mnist", data_dir=str(tmp_path), download=True)
  assert info.value.name == "importlib_resources"


def test_test_fraction_that_holds_out_nothing_is_refused():
  from fedfrac.config import ConfigError
  with pytest.raises(ConfigError, match=r"^config\.data\.test_fraction=1e-30: holds out no "
                     r"test example .*give more than 0\.00"):
    data_lib.sklearn_digits(test_fraction=1e-30)
