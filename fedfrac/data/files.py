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
"""
from __future__ import annotations

import gzip
import io
import os
import pickle
import re
import tarfile
import zlib
from typing import NoReturn, Optional

import numpy as np

from fedfrac.data.array_checks import DataError, check_arrays, check_finite, check_labels
from fedfrac.data.dataset import Dataset

FORMATS = ("auto", "idx", "cifar10", "cifar100", "npz", "mnist_pkl")
CIFAR100_LABELS = ("fine", "coarse")

# EMNIST split -> number of classes, as tfds counts them (letters: labels 1..26,
# 37 outputs in tfds), so a files run has the model outputs of the tfds run.
EMNIST_CLASSES = {"byclass": 62, "bymerge": 47, "balanced": 47, "letters": 37,
                  "digits": 10, "mnist": 10}

IDX_IMAGES_MAGIC = 0x00000803   # unsigned bytes, 3 dimensions [N, rows, cols]
IDX_LABELS_MAGIC = 0x00000801   # unsigned bytes, 1 dimension [N]

CIFAR10_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR10_TEST = "test_batch"
CIFAR10_TAR = "cifar-10-python.tar.gz"
CIFAR10_SUBDIR = "cifar-10-batches-py"
CIFAR100_TAR = "cifar-100-python.tar.gz"
CIFAR100_SUBDIR = "cifar-100-python"
MNIST_PKL_NAMES = ("mnist.pkl.gz", "mnist.pkl")

# What every loader returns: (x_train, y_train, x_test, y_test, num_classes).
LoadedArrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]


class DataFileError(DataError):
  """A local data file is missing, truncated or mislabelled (the message names the
  file and what was expected)."""


def _fail(path: str, problem: str, expected: Optional[str] = None) -> NoReturn:
  msg = f"data file {path}: {problem}"
  if expected:
    msg += f"; expected {expected}"
  raise DataFileError(msg)


def _what_is_at(path: str) -> str:
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


def _describe_bytes(raw: bytes) -> str:
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


def _read_bytes(path):
  """Bytes of the file ``path`` (gunzipped when it starts with the gzip magic)."""
  if not os.path.isfile(path):
    _fail(path, _what_is_at(path), "a file")
  try:
    with open(path, "rb") as f:
      raw = f.read()
  except FileNotFoundError:
    _fail(path, "does not exist")
  except OSError as e:
    _fail(path, f"cannot be read ({type(e).__name__}: {e})", "a readable file")
  return _read_bytes_from(raw, path)


def _read_bytes_from(raw, label):
  """``raw``, gunzipped when it starts with the gzip magic 1f 8b."""
  if raw[:2] == b"\x1f\x8b":
    try:
      raw = gzip.decompress(raw)
    except (EOFError, OSError, zlib.error) as e:
      _fail(label, f"is a truncated or corrupt gzip file ({type(e).__name__}: {e})",
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


def _unpickle(raw, label):
  """A Python 2 or 3 pickle (Python 2 strings decoded as latin-1, as NumPy needs)."""
  try:
    return _ArrayUnpickler(io.BytesIO(raw), encoding="latin1").load()
  except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
          IndexError, KeyError, MemoryError) as e:
    _fail(label, f"is not a readable pickle ({type(e).__name__}: {e})",
          "a complete pickle of NumPy arrays and lists")


def _check_labels(labels, num_classes, label):
  labels = np.asarray(labels)
  if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
    _fail(label, f"labels have shape {labels.shape} and dtype {labels.dtype}",
          "a 1-D array of integer class labels")
  _checked(check_labels, labels, f"data file {label}", num_classes)
  return labels.astype(np.int32)


def _checked(check, *args, **kwargs):
  """``check(*args, **kwargs)`` (a :mod:`fedfrac.data.validate` array check), its
  :class:`DataError` raised as a :class:`DataFileError`."""
  try:
    return check(*args, **kwargs)
  except DataFileError:
    raise
  except DataError as e:
    raise DataFileError(str(e)) from None


def _check_count(images, labels, images_label, labels_label):
  if len(images) != len(labels):
    _fail(labels_label, f"holds {len(labels)} labels but {images_label} holds "
          f"{len(images)} images", "one label per image")


def read_idx(path: str, magic: int) -> np.ndarray:
  """One IDX file -> uint8 array shaped as its header says.

  ``magic``: the expected magic number (:data:`IDX_IMAGES_MAGIC` or
  :data:`IDX_LABELS_MAGIC`); the header is big-endian ``>u4`` magic then one
  ``>u4`` size per dimension, and the file must hold exactly their product of bytes.
  """
  raw = _read_bytes(path)
  ndim = magic & 0xFF
  what = "images" if magic == IDX_IMAGES_MAGIC else "labels"
  expected_magic = (f"magic number 0x{magic:08x} (IDX {what}: unsigned bytes, "
                    f"{ndim} dimension{'s' if ndim > 1 else ''})")
  if len(raw) < 4:
    _fail(path, f"holds {len(raw)} bytes, too short for an IDX header", expected_magic)
  found = int.from_bytes(raw[:4], "big")
  if found != magic:
    hint = ""
    if found in (IDX_IMAGES_MAGIC, IDX_LABELS_MAGIC):
      hint = (" (an IDX " + ("images" if found == IDX_IMAGES_MAGIC else "labels")
              + " file: images and labels swapped?)")
    _fail(path, f"has magic number 0x{found:08x}{hint}", expected_magic)
  header = 4 + 4 * ndim
  if len(raw) < header:
    _fail(path, f"holds {len(raw)} bytes, too short for its {header}-byte header",
          f"{ndim} big-endian int32 sizes after the magic number")
  dims = tuple(int(d) for d in np.frombuffer(raw, ">u4", ndim, 4))
  body = int(np.prod(dims, dtype=np.int64))
  if len(raw) - header != body:
    state = "truncated: it" if len(raw) - header < body else "it"
    _fail(path, f"{state} holds {len(raw) - header} data bytes but its header says "
          f"{' x '.join(map(str, dims))}", f"{header} + {body} = {header + body} bytes")
  return np.frombuffer(raw, np.uint8, body, header).reshape(dims)


def _find(directory, names):
  """The first of ``names`` present in ``directory`` as a file, each tried raw then
  ``.gz``; else the first present as something else (a directory of that name
  is then reported as one when read), else None."""
  candidates = [os.path.join(directory, c) for name in names for c in (name, name + ".gz")]
  for test in (os.path.isfile, os.path.lexists):
    for path in candidates:
      if test(path):
        return path
  return None


def idx_sets(directory: str) -> list[str]:
  """Sorted IDX file sets in ``directory``: ``""`` for the MNIST-style names
  (``train-images-idx3-ubyte``), ``"<split>"`` for ``emnist-<split>-*``."""
  sets: dict[str, bool] = {}
  try:
    names = os.listdir(directory)
  except (FileNotFoundError, NotADirectoryError):
    return []
  for name in names:
    if re.fullmatch(r"train-images[-.]idx3-ubyte(\.gz)?", name):
      sets[""] = True
    m = re.fullmatch(r"emnist-([a-z]+)-train-images-idx3-ubyte(\.gz)?", name)
    if m:
      sets[m.group(1)] = True
  return sorted(sets)


def _idx_pair(directory, split, prefix):
  """(images path, labels path) of one split; a missing file fails naming it."""
  if prefix:
    stems = [f"{prefix}{split}"]
  else:
    stems = ["train"] if split == "train" else ["t10k", "test"]
  paths = []
  for kind, dim in (("images", 3), ("labels", 1)):
    names = [f"{s}-{kind}{sep}idx{dim}-ubyte" for s in stems for sep in ("-", ".")]
    path = _find(directory, names)
    if path is None:
      _fail(os.path.join(directory, names[0]), "does not exist (nor with .gz)",
            f"the {split} {kind} of the IDX set"
            + (f" {prefix[:-1]!r}" if prefix else "") + f" in {directory}")
    paths.append(path)
  return tuple(paths)


def load_idx(directory: str, emnist_split: str = "", num_classes: int = 0) -> LoadedArrays:
  """MNIST / Fashion-MNIST / EMNIST IDX files in ``directory`` -> arrays.

  Returns ``(x_train, y_train, x_test, y_test, num_classes)``, images uint8
  ``[N, 28, 28, 1]`` in the files' own pixel order (EMNIST's are stored transposed
  relative to MNIST and stay so, as tfds gives them). ``emnist_split`` picks the
  ``emnist-<split>-*`` files (needed when several sets are present);
  ``num_classes`` > 0 overrides the class count (default 10, or the EMNIST
  split's count as in :data:`EMNIST_CLASSES`).
  """
  sets = idx_sets(directory)
  if emnist_split:
    if emnist_split not in sets:
      _fail(os.path.join(directory, f"emnist-{emnist_split}-train-images-idx3-ubyte"),
            "does not exist (nor with .gz)",
            f"the EMNIST split {emnist_split!r} named by data.files.emnist_split; "
            f"{directory} holds IDX sets {sets or 'none'}")
    key = emnist_split
  elif len(sets) == 1:
    key = sets[0]
  elif not sets:
    _fail(os.path.join(directory, "train-images-idx3-ubyte[.gz]"),
          "does not exist", "MNIST-style or emnist-<split>-* IDX files in "
          f"{directory}")
  elif "" in sets and len(sets) > 1:
    _fail(directory, f"holds several IDX sets (MNIST-style and EMNIST "
          f"{[s for s in sets if s]})", "one; pick EMNIST with "
          "data.files.emnist_split=<split>")
  else:
    _fail(directory, f"holds several EMNIST splits {sets}",
          "one; pick it with data.files.emnist_split=<split>")
  prefix = f"emnist-{key}-" if key else ""
  if not num_classes:
    if key and key not in EMNIST_CLASSES:
      _fail(os.path.join(directory, f"{prefix}train-labels-idx1-ubyte"),
            f"belongs to an unknown EMNIST split {key!r}",
            f"one of {', '.join(EMNIST_CLASSES)}, or set data.files.num_classes")
    num_classes = EMNIST_CLASSES[key] if key else 10
  out = []
  for split in ("train", "test"):
    img_path, lab_path = _idx_pair(directory, split, prefix)
    images = read_idx(img_path, IDX_IMAGES_MAGIC)
    labels = read_idx(lab_path, IDX_LABELS_MAGIC)
    _check_count(images, labels, img_path, lab_path)
    out += [images[..., None], _check_labels(labels, num_classes, lab_path)]
  if out[0].shape[1:] != out[2].shape[1:]:
    _fail(img_path, f"holds images of {out[2].shape[1:3]}",
          f"the train images' size {out[0].shape[1:3]}")
  return (*out, num_classes)


def _cifar_images(data, label):
  """``[n, 3072]`` uint8 rows (1024 red, 1024 green, 1024 blue, row-major 32x32)
  -> ``[n, 32, 32, 3]``."""
  data = np.asarray(data)
  if data.ndim != 2 or data.shape[1] != 3072 or data.dtype != np.uint8:
    _fail(label, f"'data' has shape {data.shape} and dtype {data.dtype}",
          "uint8 [n, 3072] (3 x 32 x 32 channel-major rows)")
  return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)


def _cifar_batch(raw, label, label_key, num_classes):
  d = _unpickle(raw, label)
  if not isinstance(d, dict):
    _fail(label, f"unpickles to a {type(d).__name__}",
          f"a dict with 'data' and {label_key!r}")
  d = {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in d.items()}
  for key in ("data", label_key):
    if key not in d:
      _fail(label, f"has no {key!r} entry (keys: {', '.join(map(str, d))})",
            f"a CIFAR batch dict with 'data' and {label_key!r}")
  images = _cifar_images(d["data"], label)
  labels = _check_labels(np.asarray(d[label_key]), num_classes, label)
  if len(labels) != len(images):
    _fail(label, f"holds {len(labels)} {label_key} but {len(images)} images",
          "one label per image")
  return images, labels


class _Files:
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
        _fail(tar_path, f"cannot be read ({type(e).__name__}: {e})",
              "a complete tar.gz archive")

  def label(self, name):
    if self.tar_path:
      return f"{self.tar_path}:{self.members.get(name, name)}"
    return os.path.join(self.root, self.subdir, name)

  def read(self, name, what):
    if self.tar_path:
      if name not in self.data:
        _fail(self.label(name), "is not in the archive", what)
      return _read_bytes_from(self.data.pop(name), self.label(name))
    path = self.label(name)
    if not os.path.isfile(path):
      _fail(path, _what_is_at(path), what)
    return _read_bytes(path)


def _cifar_files(path, names, tar_name, subdir):
  """Where the CIFAR batches are: a tar archive or a directory (or its subdir)."""
  if os.path.isfile(path):
    return _Files(os.path.dirname(path), names, tar_path=path)
  for sub in ("", subdir):
    if os.path.isfile(os.path.join(path, sub, names[-1])):
      return _Files(path, names, subdir=sub)
  if os.path.isfile(os.path.join(path, tar_name)):
    return _Files(path, names, tar_path=os.path.join(path, tar_name))
  return _Files(path, names)   # reading then names the first missing file


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


def _npz_path(path):
  if os.path.isfile(path):
    return path
  if not os.path.isdir(path):
    _fail(path, _what_is_at(path), "a .npz file or a directory holding one")
  found = sorted(n for n in os.listdir(path) if n.endswith(".npz"))
  if len(found) != 1:
    _fail(os.path.join(path, "*.npz"), f"matches {len(found)} files "
          f"({', '.join(found) or 'none'})", "exactly one .npz (or point data.dir at it)")
  path = os.path.join(path, found[0])
  if not os.path.isfile(path):
    _fail(path, _what_is_at(path), "a .npz file (np.savez)")
  return path


def _npz_arrays(path):
  """The four arrays of the ``.npz`` at ``path``; a file that is not a complete
  zip of ``.npy`` arrays is described by what it holds."""
  import zipfile
  expected = "a NumPy .npz archive (np.savez) of x_train, y_train, x_test, y_test"
  with open(path, "rb") as f:
    head = f.read(64)
  if head[:4] not in (b"PK\x03\x04", b"PK\x05\x06"):
    _fail(path, _describe_bytes(head), expected)
  try:
    with np.load(path, allow_pickle=False) as z:
      missing = [k for k in ("x_train", "y_train", "x_test", "y_test") if k not in z]
      if missing:
        _fail(path, f"has no {', '.join(missing)} (holds {', '.join(z.files) or 'nothing'})",
              "arrays x_train, y_train, x_test, y_test")
      arrays = {}
      for k in ("x_train", "y_train", "x_test", "y_test"):
        try:
          arrays[k] = z[k]
        except ValueError as e:
          if "pickle" in str(e):
            _fail(f"{path}:{k}", "holds Python objects (a pickled object array), "
                  "which are not read", "a numeric array")
          raise
      return arrays
  except DataFileError:
    raise
  except (zipfile.BadZipFile, OSError, ValueError, EOFError, zlib.error) as e:
    _fail(path, f"is a truncated or corrupt zip archive ({type(e).__name__}: {e})",
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
      _fail(f"{path}:{key}", f"has shape {x.shape} and dtype {x.dtype}",
            "tabular features [N, D] (float or integer), or uint8 or float images "
            "[N, H, W] or [N, H, W, C]")
  if x_tr.ndim == 3:
    x_tr = x_tr[..., None]
  if x_te.ndim == 3:
    x_te = x_te[..., None]
  if x_tr.shape[1:] != x_te.shape[1:]:
    what = "features" if x_tr.ndim == 2 else "images"
    _fail(f"{path}:x_test", f"has {what} of shape {x_te.shape[1:]}",
          f"the shape of x_train's, {x_tr.shape[1:]}")
  if x_tr.dtype != x_te.dtype:
    _fail(f"{path}:x_test", f"has dtype {x_te.dtype}", f"x_train's dtype {x_tr.dtype}")
  ys = {}
  for key in ("y_train", "y_test"):
    y = arrays[key]
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
      _fail(f"{path}:{key}", f"has shape {y.shape} and dtype {y.dtype}",
            "a 1-D array of integer class labels")
    ys[key] = y
  num_classes = _checked(check_arrays, x_tr, ys["y_train"], x_te, ys["y_test"],
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
    found = _find(path, ("mnist.pkl",))
    if found is None:
      _fail(os.path.join(path, "mnist.pkl.gz"), "does not exist",
            "the (train, valid, test) MNIST pickle")
    path = found
  obj = _unpickle(_read_bytes(path), path)
  layout = "a pickle of (train, valid, test), each (x [n, 784] float32, y [n])"
  if not (isinstance(obj, (tuple, list)) and len(obj) == 3
          and all(isinstance(p, (tuple, list)) and len(p) == 2 for p in obj)):
    _fail(path, f"unpickles to a {type(obj).__name__}", layout)
  parts = []
  for name, (x, y) in zip(("train", "valid", "test"), obj):
    x, y = np.asarray(x), np.asarray(y)
    label = f"{path} ({name})"
    if x.ndim != 2 or x.shape[1] != 784 or not np.issubdtype(x.dtype, np.floating):
      _fail(label, f"images have shape {x.shape} and dtype {x.dtype}", layout)
    _checked(check_finite, x, f"data file {label} images")
    scaled = x.astype(np.float32) * np.float32(256)   # exact: 256 is a power of 2
    pixels = np.rint(scaled)
    if pixels.size and (pixels.min() < 0 or pixels.max() > 255
                        or not np.array_equal(pixels, scaled)):
      _fail(label, "images are not whole multiples of 1/256 in [0, 255/256]",
            "pixel values stored as pixel / 256")
    y = _check_labels(y, 10, label)
    _check_count(x, y, label, label)
    parts.append((pixels.astype(np.uint8).reshape(-1, 28, 28, 1), y))
  (x_a, y_a), (x_b, y_b), (x_te, y_te) = parts
  return np.concatenate([x_a, x_b]), np.concatenate([y_a, y_b]), x_te, y_te, 10


# --------------------------------------------------------------------------- detection


def detect_format(path: str) -> str:
  """The format ``path`` (a directory or one file) holds; fails if none or several."""
  if not os.path.exists(path):
    _fail(path, "does not exist", "a directory of data files (or one .npz, "
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
    _fail(path, "is not a file type the files source knows",
          f"a directory, a .npz, {' or '.join(MNIST_PKL_NAMES)}, {CIFAR10_TAR} or "
          f"{CIFAR100_TAR} (or name data.files.format)")
  if path.endswith((".npz", ".pkl", ".pkl.gz", ".tar.gz")):
    _fail(path, _what_is_at(path), f"a {os.path.basename(path)!r} file, not a directory")
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
  if _find(path, ("mnist.pkl",)):
    found.append("mnist_pkl")
  if not found:
    _fail(path, "holds no data files the files source knows",
          "train-images-idx3-ubyte[.gz] (+ labels, t10k-*), emnist-<split>-*-ubyte[.gz], "
          f"CIFAR-10 data_batch_1..5 + test_batch (or {CIFAR10_TAR}), CIFAR-100 "
          f"train + test (or {CIFAR100_TAR}), one .npz, or mnist.pkl.gz")
  if len(found) > 1:
    _fail(path, f"holds several formats ({', '.join(found)})",
          "one; name it with data.files.format")
  return found[0]


def _limit(x, y, n):
  return (x[:n], y[:n]) if n else (x, y)


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
    _fail(path, "does not exist", f"a directory holding {fmt} data files")
  if fmt == "idx":
    if not os.path.isdir(path):
      _fail(path, "is a file", "a directory holding the IDX files")
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
  x_tr, y_tr = _limit(x_tr, y_tr, max_train)
  x_te, y_te = _limit(x_te, y_te, max_test)
  # Every format's arrays pass the same checks as user-supplied arrays would.
  _checked(check_arrays, x_tr, y_tr, x_te, y_te, num_classes=classes,
           where=f"data file {path}", declare="data.files.num_classes")
  scale = 1.0 / 255.0 if x_tr.dtype == np.uint8 else 1.0
  name = f"files:{fmt}:{os.path.basename(path.rstrip(os.sep))}"
  return Dataset(name, np.ascontiguousarray(x_tr), y_tr, np.ascontiguousarray(x_te),
                 y_te, num_classes=int(classes), input_scale=scale)
