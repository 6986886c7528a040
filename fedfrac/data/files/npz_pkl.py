"""One NumPy ``.npz`` of train and test arrays, and the ``mnist.pkl.gz`` layout."""
from __future__ import annotations


import os
import zlib

import numpy as np

from fedfrac.data.array_checks import check_arrays, check_finite
from fedfrac.data.files.common import (DataFileError, LoadedArrays, check_count,
                                       checked_labels, checked, describe_bytes, fail,
                                       find, read_bytes, unpickle, what_is_at)



MNIST_PKL_NAMES = ("mnist.pkl.gz", "mnist.pkl")

def _npz_path(path):
  if os.path.isfile(path):
    return path
  if not os.path.isdir(path):
    fail(path, what_is_at(path), "a .npz file or a directory holding one")
  found = sorted(n for n in os.listdir(path) if n.endswith(".npz"))
  if len(found) != 1:
    fail(os.path.join(path, "*.npz"), f"matches {len(found)} files "
          f"({', '.join(found) or 'none'})", "exactly one .npz (or point data.dir at it)")
  path = os.path.join(path, found[0])
  if not os.path.isfile(path):
    fail(path, what_is_at(path), "a .npz file (np.savez)")
  return path


def _npz_arrays(path):
  """The four arrays of the ``.npz`` at ``path``; a file that is not a complete
  zip of ``.npy`` arrays is described by what it holds."""
  import zipfile
  expected = "a NumPy .npz archive (np.savez) of x_train, y_train, x_test, y_test"
  with open(path, "rb") as f:
    head = f.read(64)
  if head[:4] not in (b"PK\x03\x04", b"PK\x05\x06"):
    fail(path, describe_bytes(head), expected)
  try:
    with np.load(path, allow_pickle=False) as z:
      missing = [k for k in ("x_train", "y_train", "x_test", "y_test") if k not in z]
      if missing:
        fail(path, f"has no {', '.join(missing)} (holds {', '.join(z.files) or 'nothing'})",
              "arrays x_train, y_train, x_test, y_test")
      arrays = {}
      for k in ("x_train", "y_train", "x_test", "y_test"):
        try:
          arrays[k] = z[k]
        except ValueError as e:
          if "pickle" in str(e):
            fail(f"{path}:{k}", "holds Python objects (a pickled object array), "
                  "which are not read", "a numeric array")
          raise
      return arrays
  except DataFileError:
    raise
  except (zipfile.BadZipFile, OSError, ValueError, EOFError, zlib.error) as e:
    fail(path, f"is a truncated or corrupt zip archive ({type(e).__name__}: {e})",
          expected)


def load_npz(path: str, num_classes: int = 0) -> LoadedArrays:
  """A ``.npz`` with ``x_train, y_train, x_test, y_test`` -> arrays.

  Tabular features ``[N, D]`` are kept as they are (float, or integer read as
  float32; uint8 counts as pixels, scaled by 1/255); images ``[N, H, W]`` gain
  a channel axis; ``[N, H, W, C]`` are kept (NHWC). ``num_classes`` 0 means
  ``max(label) + 1`` over both splits.
  """
  path = _npz_path(path)
  arrays = _npz_arrays(path)
  x_tr, x_te = arrays["x_train"], arrays["x_test"]
  for key, x in (("x_train", x_tr), ("x_test", x_te)):
    real = x.dtype == np.uint8 or np.issubdtype(x.dtype, np.floating)
    tabular = x.ndim == 2 and (real or np.issubdtype(x.dtype, np.integer))
    if not (tabular or (x.ndim in (3, 4) and real)):
      fail(f"{path}:{key}", f"has shape {x.shape} and dtype {x.dtype}",
            "tabular features [N, D] (float or integer), or uint8 or float images "
            "[N, H, W] or [N, H, W, C]")
  if x_tr.ndim == 3:
    x_tr = x_tr[..., None]
  if x_te.ndim == 3:
    x_te = x_te[..., None]
  if x_tr.shape[1:] != x_te.shape[1:]:
    what = "features" if x_tr.ndim == 2 else "images"
    fail(f"{path}:x_test", f"has {what} of shape {x_te.shape[1:]}",
          f"the shape of x_train's, {x_tr.shape[1:]}")
  if x_tr.dtype != x_te.dtype:
    fail(f"{path}:x_test", f"has dtype {x_te.dtype}", f"x_train's dtype {x_tr.dtype}")
  ys = {}
  for key in ("y_train", "y_test"):
    y = arrays[key]
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
      fail(f"{path}:{key}", f"has shape {y.shape} and dtype {y.dtype}",
            "a 1-D array of integer class labels")
    ys[key] = y
  num_classes = checked(check_arrays, x_tr, ys["y_train"], x_te, ys["y_test"],
                         num_classes=num_classes, where=f"data file {path}",
                         declare="data.files.num_classes")
  y_tr, y_te = ys["y_train"].astype(np.int32), ys["y_test"].astype(np.int32)
  if x_tr.dtype != np.uint8:
    x_tr, x_te = x_tr.astype(np.float32), x_te.astype(np.float32)
  return x_tr, y_tr, x_te, y_te, num_classes


def load_mnist_pkl(path: str) -> LoadedArrays:
  """The ``mnist.pkl.gz`` layout -> MNIST uint8 arrays (train = train + valid).

  The pickle holds ``(train, valid, test)``, each ``(x, y)`` with ``x`` float32
  ``[n, 784]`` = pixel / 256 and ``y`` the digit; pixels are restored exactly
  (``x · 256``) and reshaped to ``[n, 28, 28, 1]``.
  """
  if os.path.isdir(path):
    found = find(path, ("mnist.pkl",))
    if found is None:
      fail(os.path.join(path, "mnist.pkl.gz"), "does not exist",
            "the (train, valid, test) MNIST pickle")
    path = found
  obj = unpickle(read_bytes(path), path)
  layout = "a pickle of (train, valid, test), each (x [n, 784] float32, y [n])"
  if not (isinstance(obj, (tuple, list)) and len(obj) == 3
          and all(isinstance(p, (tuple, list)) and len(p) == 2 for p in obj)):
    fail(path, f"unpickles to a {type(obj).__name__}", layout)
  parts = []
  for name, (x, y) in zip(("train", "valid", "test"), obj):
    x, y = np.asarray(x), np.asarray(y)
    label = f"{path} ({name})"
    if x.ndim != 2 or x.shape[1] != 784 or not np.issubdtype(x.dtype, np.floating):
      fail(label, f"images have shape {x.shape} and dtype {x.dtype}", layout)
    checked(check_finite, x, f"data file {label} images")
    scaled = x.astype(np.float32) * np.float32(256)   # exact: 256 is a power of 2
    pixels = np.rint(scaled)
    if pixels.size and (pixels.min() < 0 or pixels.max() > 255
                        or not np.array_equal(pixels, scaled)):
      fail(label, "images are not whole multiples of 1/256 in [0, 255/256]",
            "pixel values stored as pixel / 256")
    y = checked_labels(y, 10, label)
    check_count(x, y, label, label)
    parts.append((pixels.astype(np.uint8).reshape(-1, 28, 28, 1), y))
  (x_a, y_a), (x_b, y_b), (x_te, y_te) = parts
  return np.concatenate([x_a, x_b]), np.concatenate([y_a, y_b]), x_te, y_te, 10


# --------------------------------------------------------------------------- detection
