"""Bad data is named as bad data: fedfrac.data.validate.check_arrays (shapes,
dtypes, NaN/inf, label range, empty splits and clients) and the files source
(NaN/inf in an .npz, a directory where a file is expected, a garbage or
truncated .npz, a label of 10**9), each refused at load time in one line naming
the file and the array."""
from __future__ import annotations

import os

import numpy as np
import pytest

from fedfrac.config import ConfigError, base_config, files_source, validate
from fedfrac.data import build, files
from fedfrac.data.files import DataFileError
from fedfrac.data.validate import MAX_CLASSES, DataError, check_arrays


def _arrays(n_train=20, n_test=8, classes=4, seed=0, dtype=np.float32):
  r = np.random.default_rng(seed)
  return (r.random((n_train, 6, 6)).astype(dtype), r.integers(0, classes, n_train),
          r.random((n_test, 6, 6)).astype(dtype), r.integers(0, classes, n_test))


def test_good_arrays_give_their_class_count():
  x, y, xt, yt = _arrays()
  y[0] = 3
  assert check_arrays(x, y, xt, yt) == 4
  assert check_arrays(x, y, xt, yt, num_classes=10) == 10
  assert check_arrays(x, y.astype(np.float32), xt, yt.astype(np.float32),
                      regression=True) == 0
  assert check_arrays(x, y, xt, yt, client_indices=[np.arange(10), np.arange(10, 20)]) == 4


def _bad(kind):
  x, y, xt, yt = _arrays()
  kwargs = {}
  if kind == "nan":
    x[2, 1, 1] = np.nan
  elif kind == "inf":
    xt[0, 0, 0] = -np.inf
  elif kind == "huge_label":
    y[5] = 10**9
  elif kind == "negative_label":
    yt[1] = -1
  elif kind == "declared":
    kwargs["num_classes"] = 3
    y[0] = 3
  elif kind == "float_labels":
    y = y.astype(np.float32)
  elif kind == "real_labels":
    y = y + 0.5
  elif kind == "count":
    y = y[:-1]
  elif kind == "shape":
    xt = xt[:, :5]
  elif kind == "empty_test":
    xt, yt = xt[:0], yt[:0]
  elif kind == "empty_client":
    kwargs["client_indices"] = [np.arange(20), np.arange(0)]
  elif kind == "client_range":
    kwargs["client_indices"] = [np.arange(21)]
  elif kind == "strings":
    x = np.full((20, 2), "a")
  elif kind == "regression_nan":
    kwargs["regression"] = True
    y = y.astype(np.float32)
    y[4] = np.nan
    yt = yt.astype(np.float32)
  return (x, y, xt, yt), kwargs


CASES = {
    "nan": "user:x_train: holds 1 NaN value (first at index [2, 1, 1])",
    "inf": "user:x_test: holds 1 inf value (first at index [0, 0, 0])",
    "huge_label": "user:y_train: labels span 0..1000000000, which would make 1000000001 "
                  "classes for 28 examples",
    "negative_label": "user:y_test: labels span -1..",
    "declared": "user:y_train: labels span 0..3; expected class labels in 0..2 (3 classes)",
    "float_labels": "user:y_train: has dtype float32 (shape (20,)); expected integer "
                    "class labels 0..C-1 (these are whole numbers: pass "
                    "y.astype(np.int32))",
    "real_labels": "user:y_train: has dtype float64 (shape (20,)); expected integer "
                   "class labels 0..C-1 (real-valued targets need a regression "
                   "task.loss, e.g. 'mse')",
    "count": "user:y_train: holds 19 targets but user:x_train holds 20 inputs",
    "shape": "user:x_test: has inputs of shape (5, 6)",
    "empty_test": "user:x_test: holds no examples",
    "empty_client": "user:clients: client 1 holds no examples",
    "client_range": "user:clients: client 0 has indices 0..20",
    "strings": "user:x_train: has shape (20, 2) and dtype <U1",
    "regression_nan": "user:y_train: holds 1 NaN value (first at index [4])",
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_bad_arrays_are_named(kind):
  arrays, kwargs = _bad(kind)
  with pytest.raises(DataError) as info:
    check_arrays(*arrays, where="user", **kwargs)
  assert str(info.value).startswith(CASES[kind]), str(info.value)
  assert "\n" not in str(info.value)


def _npz(path, **changes):
  x, y, xt, yt = _arrays()
  arrays = dict(x_train=x, y_train=y, x_test=xt, y_test=yt)
  arrays.update(changes)
  np.savez(path, **arrays)
  return str(path)


def test_nan_and_inf_in_an_npz_are_refused_naming_file_and_array(tmp_path):
  x, _, xt, _ = _arrays()
  x[3, 2, 2] = np.nan
  path = _npz(tmp_path / "nan.npz", x_train=x)
  with pytest.raises(DataFileError, match=r"^data file .*nan.npz:x_train: holds 1 NaN "
                     r"value .*; expected finite numbers only$"):
    files.load_files(path)
  xt[0, 0, 0] = np.inf
  path = _npz(tmp_path / "inf.npz", x_test=xt)
  with pytest.raises(DataFileError, match=r"inf.npz:x_test: holds 1 inf value"):
    files.load_files(path)


def test_a_huge_label_is_refused_not_allocated(tmp_path):
  _, y, _, _ = _arrays()
  y[0] = 10**9
  path = _npz(tmp_path / "big.npz", y_train=y)
  with pytest.raises(DataFileError, match=r"big.npz:y_train: labels span 0..1000000000, "
                     r".*declare C with data.files.num_classes"):
    files.load_files(path)
  with pytest.raises(DataFileError, match=r"expected class labels in 0..9 \(10 classes\)"):
    files.load_files(path, num_classes=10)
  config = files_source(base_config(), str(tmp_path), num_classes=MAX_CLASSES + 1)
  with pytest.raises(ConfigError, match=f"data.files.num_classes={MAX_CLASSES + 1}: "
                     f"must be at most {MAX_CLASSES}"):
    validate(config)


def test_garbage_truncated_and_npy_files_say_what_they_hold(tmp_path):
  good = _npz(tmp_path / "good.npz")
  raw = open(good, "rb").read()
  (tmp_path / "text.npz").write_bytes(b"not an archive at all\n")
  (tmp_path / "cut.npz").write_bytes(raw[:len(raw) // 2])
  (tmp_path / "empty.npz").write_bytes(b"")
  np.save(tmp_path / "one.npy", np.zeros(3))
  os.replace(tmp_path / "one.npy", tmp_path / "one.npz")
  (tmp_path / "noise.npz").write_bytes(bytes(range(200, 256)) * 4)
  expected = {
      "text.npz": "holds text ('not an archive at all\\n'...)",
      "cut.npz": "is a truncated or corrupt zip archive (BadZipFile",
      "empty.npz": "is empty (0 bytes)",
      "one.npz": "holds a single .npy array (np.save), not an .npz archive (np.savez)",
      "noise.npz": "holds binary data starting with bytes c8 c9 ca",
  }
  for name, fragment in expected.items():
    with pytest.raises(DataFileError) as info:
      files.load_files(str(tmp_path / name))
    message = str(info.value)
    assert message.startswith(f"data file {tmp_path / name}: {fragment}"), message
    assert "pickled" not in message


def test_a_directory_where_a_file_is_expected_says_so(tmp_path):
  idx = tmp_path / "idx"
  (idx / "train-images-idx3-ubyte").mkdir(parents=True)
  (idx / "train-images-idx3-ubyte" / "part0").write_bytes(b"")
  for name in ("train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
               "t10k-labels-idx1-ubyte"):
    (idx / name).write_bytes(b"")
  with pytest.raises(DataFileError, match=r"train-images-idx3-ubyte: is a directory "
                     r"\(holding 1 entry: part0\); expected a file"):
    files.load_files(str(idx))
  cifar = tmp_path / "cifar"
  (cifar / "test_batch").mkdir(parents=True)
  with pytest.raises(DataFileError, match=r"data_batch_1: does not exist"):
    files.load_files(str(cifar), format="cifar10")
  for i in range(1, 6):
    (cifar / f"data_batch_{i}").mkdir()
  with pytest.raises(DataFileError, match=r"data_batch_1: is a directory \(holding 0 "
                     r"entries\)"):
    files.load_files(str(cifar), format="cifar10")
  (tmp_path / "dir.npz").mkdir()
  with pytest.raises(DataFileError, match=r"dir.npz: is a directory \(holding 0 entries\); "
                     r"expected a 'dir.npz' file, not a directory"):
    files.load_files(str(tmp_path / "dir.npz"))
  holder = tmp_path / "holder"
  (holder / "inner.npz").mkdir(parents=True)
  with pytest.raises(DataFileError, match=r"inner.npz: is a directory"):
    files.load_files(str(holder), format="npz")


def test_a_run_on_a_nan_file_stops_at_load_time(tmp_path):
  """Before: accepted, then reported as 'diverged at round 1 ... lower client.lr'."""
  x, _, _, _ = _arrays()
  x[0, 0, 0] = np.nan
  path = _npz(tmp_path / "nan.npz", x_train=x)
  config = files_source(base_config(), path)
  config.data.num_clients = 2
  config.data.partition = "iid"
  with pytest.raises(DataFileError, match="nan.npz:x_train: holds 1 NaN"):
    build(config.data, 0)
