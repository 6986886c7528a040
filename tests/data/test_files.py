"""The ``files`` source: every format written here in its real byte layout, every
bad-file error, the paper configs pointed at local files, and a CLI run."""
from __future__ import annotations

import gzip
import os
import pickle
import struct
import tarfile
import warnings

import numpy as np
import pytest

from fedfrac import config as config_lib
from fedfrac import data as data_lib
from fedfrac import models
from fedfrac.config import ConfigError, base_config, files_source
from fedfrac.config_base import import_config_file
from fedfrac.data import files
from fedfrac.data.files import DataFileError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ------------------------------------------------------------------ writers (real layouts)


def idx_bytes(array, magic=None):
  """An IDX file: big-endian magic 0x000008<ndim> (unsigned bytes), one big-endian
  int32 size per dimension, then the bytes in C order."""
  array = np.asarray(array, np.uint8)
  magic = (0x00000800 | array.ndim) if magic is None else magic
  return struct.pack(">I", magic) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()


def write(path, raw, gz=False):
  path = str(path) + (".gz" if gz else "")
  with (gzip.open(path, "wb") if gz else open(path, "wb")) as f:
    f.write(raw)
  return path


def digit_images(labels, size=28, seed=0):
  """uint8 images whose class shows as a bright block, so models can learn them."""
  rng = np.random.default_rng(seed)
  x = rng.integers(0, 60, (len(labels), size, size), dtype=np.uint8)
  for i, y in enumerate(labels):
    r, c = divmod(int(y) % 10, 4)
    x[i, 2 + 6 * r:6 + 6 * r, 2 + 6 * c:6 + 6 * c] = 250
  return x


def write_mnist_idx(directory, n_train=60, n_test=20, gz=False, prefix="",
                    test_stem="t10k", num_classes=10, seed=0):
  """MNIST-style (or ``emnist-<split>-``) IDX files; returns the arrays written."""
  rng = np.random.default_rng(seed)
  y_tr = np.arange(n_train) % num_classes
  y_te = rng.integers(0, num_classes, n_test)
  x_tr, x_te = digit_images(y_tr, seed=seed), digit_images(y_te, seed=seed + 1)
  stem_tr = f"{prefix}train" if prefix else "train"
  stem_te = f"{prefix}test" if prefix else test_stem
  write(os.path.join(directory, f"{stem_tr}-images-idx3-ubyte"), idx_bytes(x_tr), gz)
  write(os.path.join(directory, f"{stem_tr}-labels-idx1-ubyte"), idx_bytes(y_tr), gz)
  write(os.path.join(directory, f"{stem_te}-images-idx3-ubyte"), idx_bytes(x_te), gz)
  write(os.path.join(directory, f"{stem_te}-labels-idx1-ubyte"), idx_bytes(y_te), gz)
  return x_tr, y_tr, x_te, y_te


def cifar_batch(n, label_keys, seed, num_classes=(10,)):
  """A CIFAR python batch dict as the originals are pickled (Python 2: bytes keys)."""
  rng = np.random.default_rng(seed)
  d = {b"batch_label": b"batch", b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
       b"filenames": [b"img_%d.png" % i for i in range(n)]}
  for key, c in zip(label_keys, num_classes):
    d[key.encode()] = [int(v) for v in rng.integers(0, c, n)]
  return d


def write_cifar10(directory, n=8, tar=False):
  """data_batch_1..5, test_batch and batches.meta under cifar-10-batches-py/
  (optionally packed as cifar-10-python.tar.gz); returns the batch dicts."""
  sub = os.path.join(directory, "cifar-10-batches-py")
  os.makedirs(sub, exist_ok=True)
  batches = {}
  for i, name in enumerate([f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]):
    batches[name] = cifar_batch(n, ["labels"], seed=i)
  meta = {b"label_names": [b"airplane", b"automobile", b"bird", b"cat", b"deer", b"dog",
                           b"frog", b"horse", b"ship", b"truck"],
          b"num_cases_per_batch": n, b"num_vis": 3072}
  for name, d in list(batches.items()) + [("batches.meta", meta)]:
    with open(os.path.join(sub, name), "wb") as f:
      pickle.dump(d, f, protocol=2)
  if tar:
    _pack(directory, "cifar-10-python.tar.gz", "cifar-10-batches-py")
  return batches


def write_cifar100(directory, n_train=12, n_test=6, tar=False):
  sub = os.path.join(directory, "cifar-100-python")
  os.makedirs(sub, exist_ok=True)
  batches = {"train": cifar_batch(n_train, ["fine_labels", "coarse_labels"], 0, (100, 20)),
             "test": cifar_batch(n_test, ["fine_labels", "coarse_labels"], 1, (100, 20))}
  meta = {b"fine_label_names": [b"c%d" % i for i in range(100)],
          b"coarse_label_names": [b"s%d" % i for i in range(20)]}
  for name, d in list(batches.items()) + [("meta", meta)]:
    with open(os.path.join(sub, name), "wb") as f:
      pickle.dump(d, f, protocol=2)
  if tar:
    _pack(directory, "cifar-100-python.tar.gz", "cifar-100-python")
  return batches


def _pack(directory, tar_name, sub):
  with tarfile.open(os.path.join(directory, tar_name), "w:gz") as t:
    t.add(os.path.join(directory, sub), arcname=sub)
  for name in os.listdir(os.path.join(directory, sub)):
    os.remove(os.path.join(directory, sub, name))
  os.rmdir(os.path.join(directory, sub))


def write_mnist_pkl(path, sizes=(30, 10, 12)):
  """The mnist.pkl.gz layout: gzip(pickle((train, valid, test))), each
  (float32 [n, 784] = pixel / 256, int64 [n])."""
  rng = np.random.default_rng(3)
  parts, raw_parts = [], []
  for n in sizes:
    y = rng.integers(0, 10, n)
    pixels = digit_images(y, seed=n).reshape(n, 784)
    parts.append((pixels.astype(np.float32) / np.float32(256), y.astype(np.int64)))
    raw_parts.append((pixels, y))
  with gzip.open(path, "wb") as f:
    pickle.dump(tuple(parts), f, protocol=2)
  return raw_parts


# ------------------------------------------------------------------ formats


@pytest.mark.parametrize("gz", [False, True])
def test_idx_mnist_layout_raw_and_gz(tmp_path, gz):
  x_tr, y_tr, x_te, y_te = write_mnist_idx(tmp_path, gz=gz)
  assert files.detect_format(str(tmp_path)) == "idx"
  ds = files.load_files(str(tmp_path))
  np.testing.assert_array_equal(ds.x_train[..., 0], x_tr)
  np.testing.assert_array_equal(ds.y_train, y_tr)
  np.testing.assert_array_equal(ds.x_test[..., 0], x_te)
  np.testing.assert_array_equal(ds.y_test, y_te)
  assert ds.x_train.shape == (60, 28, 28, 1) and ds.x_train.dtype == np.uint8
  assert ds.y_train.dtype == np.int32 and ds.num_classes == 10
  assert ds.input_scale == pytest.approx(1 / 255)
  # The first header bytes are the published magic numbers, big-endian.
  raw = open(os.path.join(tmp_path, "train-images-idx3-ubyte"), "rb").read() if not gz \
      else gzip.open(os.path.join(tmp_path, "train-images-idx3-ubyte.gz")).read()
  assert raw[:8] == b"\x00\x00\x08\x03\x00\x00\x00\x3c"


def test_idx_limits_keep_the_first_examples(tmp_path):
  x_tr, y_tr, _, y_te = write_mnist_idx(tmp_path)
  ds = files.load_files(str(tmp_path), format="idx", max_train=7, max_test=5)
  np.testing.assert_array_equal(ds.x_train[..., 0], x_tr[:7])
  assert len(ds.y_test) == 5 and np.array_equal(ds.y_test, y_te[:5])


def test_emnist_naming_and_split_choice(tmp_path):
  write_mnist_idx(tmp_path, prefix="emnist-balanced-", gz=True, num_classes=47)
  ds = files.load_files(str(tmp_path))
  assert ds.num_classes == 47 and ds.y_train.max() == 46
  write_mnist_idx(tmp_path, prefix="emnist-digits-", num_classes=10, seed=5)
  with pytest.raises(DataFileError, match="several EMNIST splits.*emnist_split"):
    files.load_files(str(tmp_path))
  digits = files.load_files(str(tmp_path), emnist_split="digits")
  assert digits.num_classes == 10 and len(digits.y_train) == 60
  with pytest.raises(DataFileError, match="emnist-letters-train-images-idx3-ubyte"):
    files.load_files(str(tmp_path), emnist_split="letters")


def test_cifar10_python_batches_dir_and_tar(tmp_path):
  batches = write_cifar10(tmp_path / "d", n=8)
  assert files.detect_format(str(tmp_path / "d")) == "cifar10"
  ds = files.load_files(str(tmp_path / "d"))
  assert ds.x_train.shape == (40, 32, 32, 3) and ds.x_test.shape == (8, 32, 32, 3)
  assert ds.x_train.dtype == np.uint8 and ds.num_classes == 10
  # NHWC: pixel (row r, col c, channel ch) is data[ch * 1024 + r * 32 + c].
  data = batches["data_batch_2"][b"data"]
  i, r, c = 3, 5, 17
  np.testing.assert_array_equal(ds.x_train[8 + i, r, c],
                                [data[i, ch * 1024 + r * 32 + c] for ch in range(3)])
  np.testing.assert_array_equal(ds.y_test, batches["test_batch"][b"labels"])
  write_cifar10(tmp_path / "t", n=8, tar=True)
  from_tar = files.load_files(str(tmp_path / "t" / "cifar-10-python.tar.gz"))
  assert from_tar.x_train.shape == (40, 32, 32, 3)
  assert files.load_files(str(tmp_path / "t")).num_classes == 10   # dir holding the tar


@pytest.mark.parametrize("labels,classes", [("fine", 100), ("coarse", 20)])
def test_cifar100_fine_and_coarse_labels(tmp_path, labels, classes):
  batches = write_cifar100(tmp_path, tar=(labels == "coarse"))
  ds = files.load_files(str(tmp_path), cifar100_labels=labels)
  assert ds.num_classes == classes and ds.x_train.shape == (12, 32, 32, 3)
  np.testing.assert_array_equal(ds.y_train, batches["train"][f"{labels}_labels".encode()])


def test_npz_uint8_and_float(tmp_path):
  rng = np.random.default_rng(0)
  x_tr = rng.integers(0, 256, (10, 12, 12), dtype=np.uint8)
  x_te = rng.integers(0, 256, (4, 12, 12), dtype=np.uint8)
  np.savez(tmp_path / "d.npz", x_train=x_tr, y_train=np.arange(10) % 3, x_test=x_te,
           y_test=np.array([0, 1, 2, 2]))
  ds = files.load_files(str(tmp_path))
  assert ds.x_train.shape == (10, 12, 12, 1) and ds.num_classes == 3
  assert ds.input_scale == pytest.approx(1 / 255)
  ds5 = files.load_files(str(tmp_path / "d.npz"), format="npz", num_classes=5)
  assert ds5.num_classes == 5
  np.savez(tmp_path / "d.npz", x_train=x_tr[..., None] / 255.0, y_train=np.arange(10) % 3,
           x_test=x_te[..., None] / 255.0, y_test=np.array([0, 1, 2, 2]))
  f = files.load_files(str(tmp_path / "d.npz"))
  assert f.x_train.dtype == np.float32 and f.input_scale == 1.0


def test_mnist_pkl_restores_the_bytes_and_joins_train_and_valid(tmp_path):
  (x_a, y_a), (x_b, y_b), (x_te, y_te) = write_mnist_pkl(tmp_path / "mnist.pkl.gz")
  assert files.detect_format(str(tmp_path)) == "mnist_pkl"
  ds = files.load_files(str(tmp_path))
  np.testing.assert_array_equal(ds.x_train.reshape(-1, 784), np.concatenate([x_a, x_b]))
  np.testing.assert_array_equal(ds.y_train, np.concatenate([y_a, y_b]))
  np.testing.assert_array_equal(ds.x_test.reshape(-1, 784), x_te)
  assert ds.x_train.shape == (40, 28, 28, 1) and ds.x_train.dtype == np.uint8


def test_files_match_the_tfds_layout(tmp_path):
  """The same arrays as the tfds source gives (uint8 NHWC, int32, scale 1/255)."""
  tfds = pytest.importorskip("tensorflow_datasets")
  write_mnist_idx(tmp_path)
  ours = files.load_files(str(tmp_path))
  with tfds.testing.mock_data(num_examples=4):
    theirs = data_lib.tfds_source("mnist", data_dir=str(tmp_path / "tfds"))
  assert ours.x_train.shape[1:] == theirs.x_train.shape[1:]
  assert ours.x_train.dtype == theirs.x_train.dtype and ours.y_train.dtype == theirs.y_train.dtype
  assert ours.input_scale == theirs.input_scale and ours.num_classes == theirs.num_classes


# ------------------------------------------------------------------ bad files


def _idx_dir(tmp_path, gz=False):
  write_mnist_idx(tmp_path, gz=gz)
  return str(tmp_path)


def test_missing_file_is_named(tmp_path):
  d = _idx_dir(tmp_path)
  os.remove(os.path.join(d, "t10k-labels-idx1-ubyte"))
  with pytest.raises(DataFileError, match=r"t10k-labels-idx1-ubyte: does not exist"):
    files.load_files(d)


def test_wrong_magic_number(tmp_path):
  d = _idx_dir(tmp_path)
  labels = np.arange(60) % 10
  write(os.path.join(d, "train-labels-idx1-ubyte"), idx_bytes(labels, magic=0x00000803))
  with pytest.raises(DataFileError, match=r"train-labels-idx1-ubyte: has magic number "
                     r"0x00000803.*swapped.*expected magic number 0x00000801"):
    files.load_files(d)
  write(os.path.join(d, "train-labels-idx1-ubyte"), b"\x12\x34\x56\x78" + bytes(64))
  with pytest.raises(DataFileError, match="has magic number 0x12345678"):
    files.load_files(d)


@pytest.mark.parametrize("gz", [False, True])
def test_truncated_file(tmp_path, gz):
  d = _idx_dir(tmp_path)
  path = os.path.join(d, "train-images-idx3-ubyte")
  raw = open(path, "rb").read()
  os.remove(path)
  if gz:
    packed = gzip.compress(raw)
    write(path + ".gz", packed[:len(packed) // 2])
    match = r"train-images-idx3-ubyte.gz: is a truncated or corrupt gzip file"
  else:
    write(path, raw[:-100])
    match = (r"train-images-idx3-ubyte: truncated: it holds 46940 data bytes but its "
             r"header says 60 x 28 x 28; expected 16 \+ 47040")
  with pytest.raises(DataFileError, match=match):
    files.load_files(d)


def test_header_count_disagrees_with_bytes(tmp_path):
  d = _idx_dir(tmp_path)
  labels = np.arange(60) % 10
  # Header says 50 labels, 60 follow.
  write(os.path.join(d, "train-labels-idx1-ubyte"),
        struct.pack(">II", 0x801, 50) + labels.astype(np.uint8).tobytes())
  with pytest.raises(DataFileError, match=r"holds 60 data bytes but its header says 50"):
    files.load_files(d)


def test_label_count_differs_from_image_count(tmp_path):
  d = _idx_dir(tmp_path, gz=True)
  write(os.path.join(d, "t10k-labels-idx1-ubyte"), idx_bytes(np.zeros(19)), gz=True)
  with pytest.raises(DataFileError, match=r"t10k-labels-idx1-ubyte.gz: holds 19 labels "
                     r"but .*t10k-images-idx3-ubyte.gz holds 20 images"):
    files.load_files(d)


def test_labels_out_of_range(tmp_path):
  d = _idx_dir(tmp_path)
  write(os.path.join(d, "train-labels-idx1-ubyte"), idx_bytes(np.arange(60) % 11))
  with pytest.raises(DataFileError, match=r"train-labels-idx1-ubyte: labels span 0..10; "
                     r"expected class labels in 0..9"):
    files.load_files(d)
  batches = write_cifar10(tmp_path / "c")
  bad = {**batches["test_batch"], b"labels": [10] * 8}
  with open(tmp_path / "c" / "cifar-10-batches-py" / "test_batch", "wb") as f:
    pickle.dump(bad, f, protocol=2)
  with pytest.raises(DataFileError, match=r"test_batch: labels span 10..10"):
    files.load_files(str(tmp_path / "c"))
  np.savez(tmp_path / "n.npz", x_train=np.zeros((3, 4, 4), np.uint8), y_train=[0, 1, 5],
           x_test=np.zeros((1, 4, 4), np.uint8), y_test=[0])
  with pytest.raises(DataFileError, match=r"n.npz:y_train: labels span 0..5"):
    files.load_files(str(tmp_path / "n.npz"), num_classes=3)


def test_cifar_batch_errors(tmp_path):
  batches = write_cifar10(tmp_path)
  sub = tmp_path / "cifar-10-batches-py"
  no_labels = {k: v for k, v in batches["data_batch_3"].items() if k != b"labels"}
  with open(sub / "data_batch_3", "wb") as f:
    pickle.dump(no_labels, f, protocol=2)
  with pytest.raises(DataFileError, match=r"data_batch_3: has no 'labels' entry"):
    files.load_files(str(tmp_path))
  short = {**batches["data_batch_3"], b"labels": [1] * 7}
  with open(sub / "data_batch_3", "wb") as f:
    pickle.dump(short, f, protocol=2)
  with pytest.raises(DataFileError, match=r"data_batch_3: holds 7 labels but 8 images"):
    files.load_files(str(tmp_path))
  with open(sub / "data_batch_3", "wb") as f:
    f.write(pickle.dumps(batches["data_batch_3"], protocol=2)[:500])
  with pytest.raises(DataFileError, match=r"data_batch_3: is not a readable pickle"):
    files.load_files(str(tmp_path))
  with open(sub / "data_batch_3", "wb") as f:
    pickle.dump(batches["data_batch_3"], f, protocol=2)
  os.remove(sub / "data_batch_5")
  with pytest.raises(DataFileError, match=r"data_batch_5: does not exist"):
    files.load_files(str(tmp_path))
  c100 = tmp_path / "c100"
  write_cifar100(c100)
  with pytest.raises(DataFileError, match=r"c100/data_batch_1: does not exist; "
                     r"expected a CIFAR-10 python batch"):
    files.load_files(str(c100), format="cifar10")   # the wrong format named
  train = pickle.load(open(c100 / "cifar-100-python" / "train", "rb"))
  with open(c100 / "cifar-100-python" / "train", "wb") as f:
    pickle.dump({k: v for k, v in train.items() if k != b"fine_labels"}, f, protocol=2)
  with pytest.raises(DataFileError, match=r"cifar-100-python/train: has no 'fine_labels'"):
    files.load_files(str(c100))
  tar_dir = tmp_path / "t"
  write_cifar100(tar_dir, tar=True)
  raw = open(tar_dir / "cifar-100-python.tar.gz", "rb").read()
  with open(tar_dir / "cifar-100-python.tar.gz", "wb") as f:
    f.write(raw[:len(raw) // 2])
  with pytest.raises(DataFileError, match=r"cifar-100-python.tar.gz: cannot be read"):
    files.load_files(str(tar_dir))


def test_pickles_cannot_run_code(tmp_path):
  class Evil:
    def __reduce__(self):
      return (os.system, ("echo pwned",))
  with gzip.open(tmp_path / "mnist.pkl.gz", "wb") as f:
    pickle.dump(Evil(), f)
  with pytest.raises(DataFileError, match=r"mnist.pkl.gz: is not a readable pickle.*"
                     r"refers to (posix|os|nt)\.system"):
    files.load_files(str(tmp_path))


def test_mnist_pkl_and_npz_layout_errors(tmp_path):
  with gzip.open(tmp_path / "mnist.pkl.gz", "wb") as f:
    pickle.dump((np.zeros((2, 784), np.float32), np.zeros(2)), f)
  with pytest.raises(DataFileError, match=r"mnist.pkl.gz: unpickles to a tuple; expected "
                     r"a pickle of \(train, valid, test\)"):
    files.load_files(str(tmp_path))
  parts = [(np.full((2, 784), 0.3, np.float32), np.zeros(2, np.int64))] * 3
  with gzip.open(tmp_path / "mnist.pkl.gz", "wb") as f:
    pickle.dump(tuple(parts), f)
  with pytest.raises(DataFileError, match=r"not whole multiples of 1/256"):
    files.load_files(str(tmp_path))
  np.savez(tmp_path / "x.npz", x_train=np.zeros((3, 4, 4), np.uint8), y_train=[0, 1, 2])
  with pytest.raises(DataFileError, match=r"x.npz: has no x_test, y_test"):
    files.load_files(str(tmp_path / "x.npz"))


def test_detection_errors(tmp_path):
  with pytest.raises(DataFileError, match=r"holds no data files.*train-images-idx3-ubyte"):
    files.load_files(str(tmp_path))
  write_mnist_idx(tmp_path)
  write_mnist_pkl(tmp_path / "mnist.pkl.gz")
  with pytest.raises(DataFileError, match=r"several formats \(idx, mnist_pkl\).*"
                     r"data.files.format"):
    files.load_files(str(tmp_path))
  assert files.load_files(str(tmp_path), format="mnist_pkl").x_train.shape[0] == 40
  with pytest.raises(DataFileError, match=r"data.files.format='png'"):
    files.load_files(str(tmp_path), format="png")
  with pytest.raises(DataFileError, match=r"nowhere: does not exist"):
    files.load_files(str(tmp_path / "nowhere"))


def test_config_validation_of_the_files_source(tmp_path):
  c = files_source(base_config(), str(tmp_path / "missing"))
  with pytest.raises(ConfigError, match=r"config.data.dir='.*missing': does not exist"):
    config_lib.validate(c)
  c = files_source(base_config(), "")
  with pytest.raises(ConfigError, match=r"config.data.dir=''"):
    config_lib.validate(c)
  c = files_source(base_config(), str(tmp_path), format="jpeg")
  with pytest.raises(ConfigError, match=r"config.data.files.format='jpeg': allowed"):
    config_lib.validate(c)
  with pytest.raises(ConfigError, match=r"data.files.labels"):
    files_source(base_config(), str(tmp_path), labels="fine")
  c = files_source(base_config(), str(tmp_path), cifar100_labels="medium")
  with pytest.raises(ConfigError, match=r"config.data.files.cifar100_labels='medium'"):
    config_lib.validate(c)


# ------------------------------------------------------------------ configs and CLI


def _paper_configs():
  firma = import_config_file(os.path.join(ROOT, "configs/firma/fashion_mnist.py"))
  fo = import_config_file(os.path.join(ROOT, "configs/fofedavg/mnist_cnn.py"))
  k_mnist = import_config_file(os.path.join(ROOT, "configs/kuramoto/mnist.py"))
  k_fmnist = import_config_file(os.path.join(ROOT, "configs/kuramoto/fashion_mnist.py"))
  return {"firma_fashion_mnist": firma.get_config(),
          "firma_fashion_mnist_reference": firma.get_config("reference_code,dir0.5"),
          "fofedavg_mnist_cnn": fo.get_config(), "kuramoto_mnist": k_mnist.get_config(),
          "kuramoto_fashion_mnist": k_fmnist.get_config()}


def test_paper_configs_run_on_local_files(tmp_path):
  """The tfds paper settings, pointed at local IDX files, validate, federate with
  their own partition and build their models on the arrays."""
  import jax
  # FOFedAvg's Dirichlet(0.1) clients (Fig. 1: 10 of them) need >= 10 samples each.
  write_mnist_idx(tmp_path, n_train=6000, n_test=500, gz=True)
  for name, c in _paper_configs().items():
    assert c.data.source == "tfds", name
    files_source(c, str(tmp_path))
    config_lib.validate(c)
    with warnings.catch_warnings():   # reference_code may drop a small client
      warnings.simplefilter("ignore")
      fed = data_lib.build(c.data, seed=0)
    if c.data.compat == "paper":
      assert fed.num_clients == c.data.num_clients, name
      assert int(fed.client_size.sum()) == 6000, name
    else:   # the authors' pipeline drops clients below one batch
      assert 1 <= fed.num_clients <= c.data.num_clients, name
      assert np.all(fed.client_size >= 64), name
    assert fed.input_shape == (28, 28, 1) and fed.x_train.dtype == np.uint8, name
    assert 0 < int(fed.client_test_size.sum()) <= 500, name
    model = models.build(c.model, fed.input_shape, fed.num_classes, fed.input_scale)
    params = model.init(jax.random.PRNGKey(0))
    logits = model.apply(params, fed.x_train[:2])
    assert logits.shape == (2, 10), name


def _cli(args, tmp_path):
  from tests import helpers
  return helpers.run_cli_in_process([
      "--config=configs/firma/fashion_mnist.py", f"--workdir={tmp_path / 'run'}",
      "--config.data.source=files", "--config.rounds=2", "--config.only=fedavg",
      "--config.seeds=(0,)", "--config.progress=False"] + args)


def test_cli_runs_on_files_and_reports_a_bad_file_in_one_line(tmp_path):
  data_dir = tmp_path / "fashion"
  data_dir.mkdir()
  write_mnist_idx(data_dir, n_train=1500, n_test=300, gz=True)
  out = _cli([f"--config.data.dir={data_dir}"], tmp_path)
  assert out.returncode == 0, out.stderr[-2000:]
  assert "| fedavg |" in out.stdout
  rows = (tmp_path / "run" / "metrics.csv").read_text().splitlines()
  assert len(rows) == 1 + 2
  write(data_dir / "t10k-labels-idx1-ubyte", idx_bytes(np.zeros(299)), gz=True)
  bad = _cli([f"--config.data.dir={data_dir}"], tmp_path)
  lines = bad.stderr.strip().splitlines()
  assert bad.returncode == 2 and "Traceback" not in bad.stderr
  assert "t10k-labels-idx1-ubyte.gz: holds 299 labels" in lines[-1]
  assert lines[-1].startswith("error: ")


@pytest.mark.parametrize("name,mean,std", [
    ("fashion_mnist.py", (0.5,), (0.5,)),
    ("mnist.py", (0.5,), (0.5,)),
    ("cifar10.py", (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)),
])
def test_firma_image_configs_normalise_inputs_as_the_authors_in_reference_code(
    name, mean, std):
  """The authors' torchvision Normalize in ``reference_code``; ``paper`` keeps the
  [0, 1] of its §6.1; their MNIST-1797 (digits) stays pixel / 16."""
  module = import_config_file(os.path.join(ROOT, "configs", "firma", name))
  ref = module.get_config("reference_code,iid")
  assert tuple(ref.data.input_mean) == mean and tuple(ref.data.input_std) == std
  paper = module.get_config("paper,iid")
  assert tuple(paper.data.input_mean) == () and tuple(paper.data.input_std) == ()
  digits = import_config_file(os.path.join(ROOT, "configs", "firma",
                                       "digits.py")).get_config("reference_code,iid")
  assert tuple(digits.data.input_mean) == ()
