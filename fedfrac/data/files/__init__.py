"""Image classification data from local files in the standard distribution formats.

The ``files`` source (``data.source="files"``, ``data.dir=DIR``,
``data.files.format=...``) reads, without any network access:

* ``idx``: MNIST / Fashion-MNIST (``train-images-idx3-ubyte``,
  ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``,
  ``t10k-labels-idx1-ubyte``) and EMNIST (``emnist-<split>-train-images-idx3-ubyte``
  ...), each gzipped (``.gz``) or raw. IDX files are big-endian: a magic number
  ``0x00000803`` (unsigned bytes, 3 dimensions: images) or ``0x00000801`` (1
  dimension: labels), one int32 size per dimension, then the bytes.
* ``cifar10``: the CIFAR-10 "python version" batches ``data_batch_1`` ..
  ``data_batch_5`` and ``test_batch`` (pickled dicts with ``data`` ``[10000, 3072]``
  uint8 in channel-major order and ``labels``), in ``DIR``, in
  ``DIR/cifar-10-batches-py`` or inside ``cifar-10-python.tar.gz``.
* ``cifar100``: the CIFAR-100 python ``train`` / ``test`` pickles (``data``,
  ``fine_labels``, ``coarse_labels``), in ``DIR``, ``DIR/cifar-100-python`` or
  inside ``cifar-100-python.tar.gz``; ``data.files.cifar100_labels`` picks fine
  (100 classes) or coarse (20).
* ``npz``: one NumPy ``.npz`` holding ``x_train``, ``y_train``, ``x_test``, ``y_test``:
  images, or tabular features ``[N, D]`` (e.g. a scikit-learn or pandas table).
* ``mnist_pkl``: the ``mnist.pkl.gz`` layout (a pickle of ``(train, valid, test)``,
  each ``(x [n, 784] float32 = pixel/256, y [n])``); train + valid form the
  60,000 training images.

``format="auto"`` detects which of these ``DIR`` holds (``DIR`` may also be the
``.npz``, ``mnist.pkl[.gz]`` or CIFAR ``.tar.gz`` file itself).

Arrays come out as the ``tfds`` source gives them, so the same model configs
work: images uint8 ``[N, H, W, C]`` (NHWC; ``C = 1`` for the 28×28 formats,
``3`` for CIFAR) with ``input_scale = 1/255``, labels int32 ``[N]``. The
``mnist_pkl`` pixels are turned back into the original bytes (``x · 256``, exact).
An ``.npz`` with float images keeps them float32 with ``input_scale = 1``.

Every file is checked before it is used; a missing, truncated or mislabelled file
raises :class:`DataFileError` with one message naming the file and what was
expected. Pickles are read with an unpickler that only rebuilds NumPy arrays and
plain containers, so a data file cannot run code.


The package: one module per format (:mod:`~fedfrac.data.files.idx`,
:mod:`~fedfrac.data.files.cifar`, :mod:`~fedfrac.data.files.npz_pkl`) over
:mod:`~fedfrac.data.files.common`; this module detects the format and
dispatches (:func:`load_files`).
"""
from __future__ import annotations

import os

import numpy as np

from fedfrac.data.array_checks import check_arrays
from fedfrac.data.dataset import Dataset
from fedfrac.data.files.cifar import (  # noqa: F401  (re-exported)
    CIFAR100_LABELS, CIFAR100_SUBDIR, CIFAR100_TAR, CIFAR10_SUBDIR, CIFAR10_TAR, CIFAR10_TEST,
    CIFAR10_TRAIN, load_cifar10, load_cifar100)
from fedfrac.data.files.common import (  # noqa: F401  (re-exported)
    DataFileError, LoadedArrays, checked, fail, find, limit, what_is_at)
from fedfrac.data.files.idx import (  # noqa: F401  (re-exported)
    EMNIST_CLASSES, IDX_IMAGES_MAGIC, IDX_LABELS_MAGIC, idx_sets, load_idx, read_idx)
from fedfrac.data.files.npz_pkl import MNIST_PKL_NAMES, load_mnist_pkl, load_npz  # noqa: F401

FORMATS = ("auto", "idx", "cifar10", "cifar100", "npz", "mnist_pkl")
def detect_format(path: str) -> str:
  """The format ``path`` (a directory or one file) holds; fails if none or several."""
  if not os.path.exists(path):
    fail(path, "does not exist", "a directory of data files (or one .npz, "
          "mnist.pkl[.gz] or CIFAR .tar.gz file)")
  if os.path.isfile(path):
    name = os.path.basename(path)
    if name.endswith(".npz"):
      return "npz"
    if name in MNIST_PKL_NAMES:
      return "mnist_pkl"
    if name == CIFAR10_TAR:
      return "cifar10"
    if name == CIFAR100_TAR:
      return "cifar100"
    fail(path, "is not a file type the files source knows",
          f"a directory, a .npz, {' or '.join(MNIST_PKL_NAMES)}, {CIFAR10_TAR} or "
          f"{CIFAR100_TAR} (or name data.files.format)")
  if path.endswith((".npz", ".pkl", ".pkl.gz", ".tar.gz")):
    fail(path, what_is_at(path), f"a {os.path.basename(path)!r} file, not a directory")
  found = []
  if idx_sets(path):
    found.append("idx")
  if any(os.path.isfile(os.path.join(path, sub, CIFAR10_TEST))
         for sub in ("", CIFAR10_SUBDIR)) or os.path.isfile(os.path.join(path, CIFAR10_TAR)):
    found.append("cifar10")
  if any(os.path.isfile(os.path.join(path, sub, "train"))
         and os.path.isfile(os.path.join(path, sub, "test"))
         for sub in ("", CIFAR100_SUBDIR)) or os.path.isfile(os.path.join(path, CIFAR100_TAR)):
    found.append("cifar100")
  if any(n.endswith(".npz") for n in os.listdir(path)):
    found.append("npz")
  if find(path, ("mnist.pkl",)):
    found.append("mnist_pkl")
  if not found:
    fail(path, "holds no data files the files source knows",
          "train-images-idx3-ubyte[.gz] (+ labels, t10k-*), emnist-<split>-*-ubyte[.gz], "
          f"CIFAR-10 data_batch_1..5 + test_batch (or {CIFAR10_TAR}), CIFAR-100 "
          f"train + test (or {CIFAR100_TAR}), one .npz, or mnist.pkl.gz")
  if len(found) > 1:
    fail(path, f"holds several formats ({', '.join(found)})",
          "one; name it with data.files.format")
  return found[0]


def load_files(path: str, format: str = "auto", emnist_split: str = "",
               cifar100_labels: str = "fine", num_classes: int = 0, max_train: int = 0,
               max_test: int = 0) -> Dataset:
  """The :class:`Dataset` of the local files at ``path`` (see the module docstring).

  Args:
    path: a directory, or one ``.npz`` / ``mnist.pkl[.gz]`` / CIFAR ``.tar.gz`` file.
    format: one of :data:`FORMATS`; ``"auto"`` detects it.
    emnist_split: IDX only: the ``emnist-<split>-*`` set to read.
    cifar100_labels: ``"fine"`` (100 classes) or ``"coarse"`` (20).
    num_classes: > 0 overrides the class count (IDX, npz); labels must lie below it.
    max_train, max_test: > 0 keeps only the first so many examples (smoke runs).
  Returns:
    images uint8 ``[N, H, W, C]`` (``input_scale = 1/255``; float32 with scale 1
    for a float ``.npz``), labels int32 ``[N]``.
  Raises:
    DataFileError: a missing, truncated or mislabelled file.
  """
  if format not in FORMATS:
    raise DataFileError(f"data.files.format={format!r}: allowed values are "
                        f"{', '.join(FORMATS)}")
  if not path:
    raise DataFileError("data.dir='': give the directory holding the data files "
                        "(or the .npz / mnist.pkl.gz / CIFAR .tar.gz file)")
  path = os.path.abspath(os.path.expanduser(path))
  fmt = detect_format(path) if format == "auto" else format
  if not os.path.exists(path):
    fail(path, "does not exist", f"a directory holding {fmt} data files")
  if fmt == "idx":
    if not os.path.isdir(path):
      fail(path, "is a file", "a directory holding the IDX files")
    arrays = load_idx(path, emnist_split, num_classes)
  elif fmt == "cifar10":
    arrays = load_cifar10(path)
  elif fmt == "cifar100":
    arrays = load_cifar100(path, cifar100_labels)
  elif fmt == "npz":
    arrays = load_npz(path, num_classes)
  else:
    arrays = load_mnist_pkl(path)
  x_tr, y_tr, x_te, y_te, classes = arrays
  x_tr, y_tr = limit(x_tr, y_tr, max_train)
  x_te, y_te = limit(x_te, y_te, max_test)
  # Every format's arrays pass the same checks as user-supplied arrays would.
  checked(check_arrays, x_tr, y_tr, x_te, y_te, num_classes=classes,
           where=f"data file {path}", declare="data.files.num_classes")
  scale = 1.0 / 255.0 if x_tr.dtype == np.uint8 else 1.0
  name = f"files:{fmt}:{os.path.basename(path.rstrip(os.sep))}"
  return Dataset(name, np.ascontiguousarray(x_tr), y_tr, np.ascontiguousarray(x_te),
                 y_te, num_classes=int(classes), input_scale=scale)
