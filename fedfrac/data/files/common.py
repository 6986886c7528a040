"""What every reader of local data files shares: the one-line error naming the
file and what was expected, reading (gzipped) bytes, an unpickler that only
rebuilds arrays, and the label and count checks."""
from __future__ import annotations


import gzip
import io
import os
import pickle
import tarfile
import zlib
from typing import NoReturn, Optional

import numpy as np

from fedfrac.data.array_checks import DataError, check_labels



# What every loader returns: (x_train, y_train, x_test, y_test, num_classes).
LoadedArrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]


class DataFileError(DataError):
  """A local data file is missing, truncated or mislabelled (the message names the
  file and what was expected)."""


def fail(path: str, problem: str, expected: Optional[str] = None) -> NoReturn:
  msg = f"data file {path}: {problem}"
  if expected:
    msg += f"; expected {expected}"
  raise DataFileError(msg)


def what_is_at(path: str) -> str:
  """What ``path`` is when it is not a readable regular file, for messages:
  ``"is a directory (holding 2 entries: a, b)"``, ``"does not exist"``, ..."""
  if os.path.islink(path) and not os.path.exists(path):
    return f"is a broken symbolic link (to {os.readlink(path)!r})"
  if not os.path.exists(path):
    return "does not exist"
  if os.path.isdir(path):
    try:
      names = sorted(os.listdir(path))
    except OSError:
      return "is a directory"
    shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
    return (f"is a directory (holding {len(names)} entr{'y' if len(names) == 1 else 'ies'}"
            f"{': ' + shown if names else ''})")
  if not os.path.isfile(path):
    return "is not a regular file (a device, socket or pipe)"
  return "is a file"


def describe_bytes(raw: bytes) -> str:
  """What the first bytes of a file look like: empty, gzip, zip, .npy, text or binary."""
  if not raw:
    return "is empty (0 bytes)"
  if raw[:2] == b"\x1f\x8b":
    return "holds gzip data"
  if raw[:6] == b"\x93NUMPY":
    return "holds a single .npy array (np.save), not an .npz archive (np.savez)"
  if raw[:2] == b"PK":
    return "is a zip archive"
  head = raw[:32]
  if all(32 <= b < 127 or b in (9, 10, 13) for b in head):
    return f"holds text ({head.decode('ascii')!r}...)"
  return f"holds binary data starting with bytes {head[:8].hex(' ')}"


# --------------------------------------------------------------------------- reading


def read_bytes(path):
  """Bytes of the file ``path`` (gunzipped when it starts with the gzip magic)."""
  if not os.path.isfile(path):
    fail(path, what_is_at(path), "a file")
  try:
    with open(path, "rb") as f:
      raw = f.read()
  except FileNotFoundError:
    fail(path, "does not exist")
  except OSError as e:
    fail(path, f"cannot be read ({type(e).__name__}: {e})", "a readable file")
  return _read_bytes_from(raw, path)


def _read_bytes_from(raw, label):
  """``raw``, gunzipped when it starts with the gzip magic 1f 8b."""
  if raw[:2] == b"\x1f\x8b":
    try:
      raw = gzip.decompress(raw)
    except (EOFError, OSError, zlib.error) as e:
      fail(label, f"is a truncated or corrupt gzip file ({type(e).__name__}: {e})",
            "a complete gzip stream")
  return raw


_ALLOWED_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode"),
    ("copy_reg", "_reconstructor"), ("copyreg", "_reconstructor"),
    ("__builtin__", "object"), ("builtins", "object"),
}


class _ArrayUnpickler(pickle.Unpickler):
  """Unpickles NumPy arrays, dicts, lists, tuples, numbers and strings only."""

  def find_class(self, module, name):
    if (module, name) in _ALLOWED_GLOBALS:
      return super().find_class(module, name)
    raise pickle.UnpicklingError(f"refers to {module}.{name}, which a data file "
                                 f"does not need")


def unpickle(raw, label):
  """A Python 2 or 3 pickle (Python 2 strings decoded as latin-1, as NumPy needs)."""
  try:
    return _ArrayUnpickler(io.BytesIO(raw), encoding="latin1").load()
  except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
          IndexError, KeyError, MemoryError) as e:
    fail(label, f"is not a readable pickle ({type(e).__name__}: {e})",
          "a complete pickle of NumPy arrays and lists")


def checked_labels(labels, num_classes, label):
  labels = np.asarray(labels)
  if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
    fail(label, f"labels have shape {labels.shape} and dtype {labels.dtype}",
          "a 1-D array of integer class labels")
  checked(check_labels, labels, f"data file {label}", num_classes)
  return labels.astype(np.int32)


def checked(check, *args, **kwargs):
  """``check(*args, **kwargs)`` (a :mod:`fedfrac.data.validate` array check), its
  :class:`DataError` raised as a :class:`DataFileError`."""
  try:
    return check(*args, **kwargs)
  except DataFileError:
    raise
  except DataError as e:
    raise DataFileError(str(e)) from None


def check_count(images, labels, images_label, labels_label):
  if len(images) != len(labels):
    fail(labels_label, f"holds {len(labels)} labels but {images_label} holds "
          f"{len(images)} images", "one label per image")


def find(directory, names):
  """The first of ``names`` present in ``directory`` as a file, each tried raw then
  ``.gz``; else the first present as something else (a directory of that name
  is then reported as one when read), else None."""
  candidates = [os.path.join(directory, c) for name in names for c in (name, name + ".gz")]
  for test in (os.path.isfile, os.path.lexists):
    for path in candidates:
      if test(path):
        return path
  return None


class Files:
  """The CIFAR batch files ``names`` of a directory or of a tar archive (whose
  members are read in one pass), by base name."""

  def __init__(self, root, names, tar_path=None, subdir=""):
    self.root, self.tar_path, self.subdir = root, tar_path, subdir
    self.members, self.data = {}, {}
    if tar_path:
      try:
        with tarfile.open(tar_path, "r:*") as tar:
          for m in tar:
            base = os.path.basename(m.name)
            if m.isfile() and base in names and base not in self.members:
              self.members[base] = m.name
              self.data[base] = tar.extractfile(m).read()
      except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
        fail(tar_path, f"cannot be read ({type(e).__name__}: {e})",
              "a complete tar.gz archive")

  def label(self, name):
    if self.tar_path:
      return f"{self.tar_path}:{self.members.get(name, name)}"
    return os.path.join(self.root, self.subdir, name)

  def read(self, name, what):
    if self.tar_path:
      if name not in self.data:
        fail(self.label(name), "is not in the archive", what)
      return _read_bytes_from(self.data.pop(name), self.label(name))
    path = self.label(name)
    if not os.path.isfile(path):
      fail(path, what_is_at(path), what)
    return read_bytes(path)


def limit(x, y, n):
  return (x[:n], y[:n]) if n else (x, y)
