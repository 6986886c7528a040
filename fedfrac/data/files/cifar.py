"""The CIFAR-10 and CIFAR-100 "python version" batches, in a folder or in their
``.tar.gz``."""
from __future__ import annotations


import os

import numpy as np

from fedfrac.data.files.common import (DataFileError, LoadedArrays, checked_labels, fail,
                                       Files, unpickle)



CIFAR100_LABELS = ("fine", "coarse")

CIFAR10_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR10_TEST = "test_batch"
CIFAR10_TAR = "cifar-10-python.tar.gz"
CIFAR10_SUBDIR = "cifar-10-batches-py"
CIFAR100_TAR = "cifar-100-python.tar.gz"
CIFAR100_SUBDIR = "cifar-100-python"
def _cifar_images(data, label):
  """``[n, 3072]`` uint8 rows (1024 red, 1024 green, 1024 blue, row-major 32x32)
  -> ``[n, 32, 32, 3]``."""
  data = np.asarray(data)
  if data.ndim != 2 or data.shape[1] != 3072 or data.dtype != np.uint8:
    fail(label, f"'data' has shape {data.shape} and dtype {data.dtype}",
          "uint8 [n, 3072] (3 x 32 x 32 channel-major rows)")
  return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)


def _cifar_batch(raw, label, label_key, num_classes):
  d = unpickle(raw, label)
  if not isinstance(d, dict):
    fail(label, f"unpickles to a {type(d).__name__}",
          f"a dict with 'data' and {label_key!r}")
  d = {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in d.items()}
  for key in ("data", label_key):
    if key not in d:
      fail(label, f"has no {key!r} entry (keys: {', '.join(map(str, d))})",
            f"a CIFAR batch dict with 'data' and {label_key!r}")
  images = _cifar_images(d["data"], label)
  labels = checked_labels(np.asarray(d[label_key]), num_classes, label)
  if len(labels) != len(images):
    fail(label, f"holds {len(labels)} {label_key} but {len(images)} images",
          "one label per image")
  return images, labels


def _cifar_files(path, names, tar_name, subdir):
  """Where the CIFAR batches are: a tar archive or a directory (or its subdir)."""
  if os.path.isfile(path):
    return Files(os.path.dirname(path), names, tar_path=path)
  for sub in ("", subdir):
    if os.path.isfile(os.path.join(path, sub, names[-1])):
      return Files(path, names, subdir=sub)
  if os.path.isfile(os.path.join(path, tar_name)):
    return Files(path, names, tar_path=os.path.join(path, tar_name))
  return Files(path, names)   # reading then names the first missing file


def load_cifar10(path: str) -> LoadedArrays:
  """CIFAR-10 python batches (directory, its ``cifar-10-batches-py`` or the
  ``cifar-10-python.tar.gz``) -> ``(x_train, y_train, x_test, y_test, 10)``."""
  files = _cifar_files(path, CIFAR10_TRAIN + (CIFAR10_TEST,), CIFAR10_TAR, CIFAR10_SUBDIR)
  parts: list[np.ndarray] = []
  for names in (CIFAR10_TRAIN, (CIFAR10_TEST,)):
    batches = [_cifar_batch(files.read(n, "a CIFAR-10 python batch"), files.label(n),
                            "labels", 10) for n in names]
    parts += [np.concatenate([b[0] for b in batches]),
              np.concatenate([b[1] for b in batches])]
  x_train, y_train, x_test, y_test = parts
  return x_train, y_train, x_test, y_test, 10


def load_cifar100(path: str, labels: str = "fine") -> LoadedArrays:
  """CIFAR-100 python ``train`` / ``test`` (directory, its ``cifar-100-python`` or
  the ``cifar-100-python.tar.gz``) -> ``(x_train, y_train, x_test, y_test, C)``;
  ``labels="fine"`` (C = 100) or ``"coarse"`` (the 20 superclasses)."""
  if labels not in CIFAR100_LABELS:
    raise DataFileError(f"data.files.cifar100_labels={labels!r}: allowed values are "
                        f"{', '.join(CIFAR100_LABELS)}")
  files = _cifar_files(path, ("train", "test"), CIFAR100_TAR, CIFAR100_SUBDIR)
  num_classes = 100 if labels == "fine" else 20
  parts: list[np.ndarray] = []
  for name in ("train", "test"):
    parts += _cifar_batch(files.read(name, "the CIFAR-100 python batch"),
                          files.label(name), f"{labels}_labels", num_classes)
  x_train, y_train, x_test, y_test = parts
  return x_train, y_train, x_test, y_test, num_classes
