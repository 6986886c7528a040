"""MNIST / Fashion-MNIST / EMNIST IDX files (gzipped or raw)."""
from __future__ import annotations


import os
import re

import numpy as np

from fedfrac.data.files.common import (LoadedArrays, check_count, checked_labels, fail,
                                       find, read_bytes)



# EMNIST split -> number of classes, as tfds counts them (letters: labels 1..26,
# 37 outputs in tfds), so a files run has the model outputs of the tfds run.
EMNIST_CLASSES = {"byclass": 62, "bymerge": 47, "balanced": 47, "letters": 37,
                  "digits": 10, "mnist": 10}

IDX_IMAGES_MAGIC = 0x00000803   # unsigned bytes, 3 dimensions [N, rows, cols]
IDX_LABELS_MAGIC = 0x00000801   # unsigned bytes, 1 dimension [N]

def read_idx(path: str, magic: int) -> np.ndarray:
  """One IDX file -> uint8 array shaped as its header says.

  ``magic``: the expected magic number (:data:`IDX_IMAGES_MAGIC` or
  :data:`IDX_LABELS_MAGIC`); the header is big-endian ``>u4`` magic then one
  ``>u4`` size per dimension, and the file must hold exactly their product of bytes.
  """
  raw = read_bytes(path)
  ndim = magic & 0xFF
  what = "images" if magic == IDX_IMAGES_MAGIC else "labels"
  expected_magic = (f"magic number 0x{magic:08x} (IDX {what}: unsigned bytes, "
                    f"{ndim} dimension{'s' if ndim > 1 else ''})")
  if len(raw) < 4:
    fail(path, f"holds {len(raw)} bytes, too short for an IDX header", expected_magic)
  found = int.from_bytes(raw[:4], "big")
  if found != magic:
    hint = ""
    if found in (IDX_IMAGES_MAGIC, IDX_LABELS_MAGIC):
      hint = (" (an IDX " + ("images" if found == IDX_IMAGES_MAGIC else "labels")
              + " file: images and labels swapped?)")
    fail(path, f"has magic number 0x{found:08x}{hint}", expected_magic)
  header = 4 + 4 * ndim
  if len(raw) < header:
    fail(path, f"holds {len(raw)} bytes, too short for its {header}-byte header",
          f"{ndim} big-endian int32 sizes after the magic number")
  dims = tuple(int(d) for d in np.frombuffer(raw, ">u4", ndim, 4))
  body = int(np.prod(dims, dtype=np.int64))
  if len(raw) - header != body:
    state = "truncated: it" if len(raw) - header < body else "it"
    fail(path, f"{state} holds {len(raw) - header} data bytes but its header says "
          f"{' x '.join(map(str, dims))}", f"{header} + {body} = {header + body} bytes")
  return np.frombuffer(raw, np.uint8, body, header).reshape(dims)


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
    path = find(directory, names)
    if path is None:
      fail(os.path.join(directory, names[0]), "does not exist (nor with .gz)",
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
      fail(os.path.join(directory, f"emnist-{emnist_split}-train-images-idx3-ubyte"),
            "does not exist (nor with .gz)",
            f"the EMNIST split {emnist_split!r} named by data.files.emnist_split; "
            f"{directory} holds IDX sets {sets or 'none'}")
    key = emnist_split
  elif len(sets) == 1:
    key = sets[0]
  elif not sets:
    fail(os.path.join(directory, "train-images-idx3-ubyte[.gz]"),
          "does not exist", "MNIST-style or emnist-<split>-* IDX files in "
          f"{directory}")
  elif "" in sets and len(sets) > 1:
    fail(directory, f"holds several IDX sets (MNIST-style and EMNIST "
          f"{[s for s in sets if s]})", "one; pick EMNIST with "
          "data.files.emnist_split=<split>")
  else:
    fail(directory, f"holds several EMNIST splits {sets}",
          "one; pick it with data.files.emnist_split=<split>")
  prefix = f"emnist-{key}-" if key else ""
  if not num_classes:
    if key and key not in EMNIST_CLASSES:
      fail(os.path.join(directory, f"{prefix}train-labels-idx1-ubyte"),
            f"belongs to an unknown EMNIST split {key!r}",
            f"one of {', '.join(EMNIST_CLASSES)}, or set data.files.num_classes")
    num_classes = EMNIST_CLASSES[key] if key else 10
  out = []
  for split in ("train", "test"):
    img_path, lab_path = _idx_pair(directory, split, prefix)
    images = read_idx(img_path, IDX_IMAGES_MAGIC)
    labels = read_idx(lab_path, IDX_LABELS_MAGIC)
    check_count(images, labels, img_path, lab_path)
    out += [images[..., None], checked_labels(labels, num_classes, lab_path)]
  if out[0].shape[1:] != out[2].shape[1:]:
    fail(img_path, f"holds images of {out[2].shape[1:3]}",
          f"the train images' size {out[0].shape[1:3]}")
  return (*out, num_classes)
