"""The checks every loaded dataset's arrays pass (shapes, dtypes, finite values,
labels in range): :class:`DataError` names the array. Re-exported by
:mod:`fedfrac.data.validate`; the file readers (:mod:`fedfrac.data.files`) use
them from here, below the config checks that name the readers' formats.
"""
from __future__ import annotations

from typing import Callable, Mapping, Optional, Sequence

import numpy as np
from numpy.typing import ArrayLike


# Most classes a dataset may have: far above any image classification label
# set (ImageNet-21k: 21,841), far below a count whose per-client class tables
# and output layer would not fit in memory (a label 10**9 would ask for ~75 GiB).
MAX_CLASSES = 100_000


class DataError(ValueError):
  """Arrays of a dataset are unusable (wrong shape or dtype, NaN or inf, labels
  out of range, an empty split or client); the message names the array."""


def _fail(name: str, problem: str, expected: str):
  raise DataError(f"{name}: {problem}; expected {expected}")


FLOAT32_MAX = float(np.finfo(np.float32).max)


def check_finite(x: np.ndarray, name: str) -> None:
  """Refuse NaN or inf in a floating array (integer arrays are always finite),
  and finite values beyond float32, the precision they are computed in (1e300
  in a float64 array would become inf there)."""
  x = np.asarray(x)
  if not np.issubdtype(x.dtype, np.floating) or x.size == 0:
    return
  bad = ~np.isfinite(x)
  if not bad.any() and x.dtype.itemsize > 4:
    big = np.abs(x) > FLOAT32_MAX
    if big.any():
      first = tuple(int(i) for i in np.argwhere(big)[0])
      n = int(big.sum())
      _fail(name, f"holds {n} value{'s' if n > 1 else ''} beyond float32 (|x| > "
            f"{FLOAT32_MAX:.8g}, first at index {list(first)}), which would become inf "
            f"when computed in float32", "numbers within float32's range")
  if bad.any():
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    nans, infs = int(np.isnan(x).sum()), int(np.isinf(x).sum())
    what = ", ".join(p for p in (f"{nans} NaN" if nans else "",
                                 f"{infs} inf" if infs else "") if p)
    _fail(name, f"holds {what} value{'s' if nans + infs > 1 else ''} (first at index "
          f"{list(first)})", "finite numbers only")


def check_labels(y: np.ndarray, name: str, num_classes: int = 0, examples: int = 0,
                 declare: str = "num_classes") -> int:
  """Integer class labels ``[N]`` in ``0..C-1``; returns ``C``.

  ``num_classes`` > 0 is the declared ``C``; 0 takes ``C = max(y) + 1`` when that
  is plausible: at most :data:`MAX_CLASSES` and at most ``examples`` (the number
  of labelled examples, when given), else the labels are refused (``declare``
  names the option that declares ``C``).
  """
  y = np.asarray(y)
  if not np.issubdtype(y.dtype, np.integer):   # the dtype first: the usual mistake
    whole = (np.issubdtype(y.dtype, np.floating) and y.size and np.isfinite(y).all()
             and (y == np.round(y)).all())
    hint = ("these are whole numbers: pass y.astype(np.int32)" if whole else
            "real-valued targets need a regression task.loss, e.g. 'mse'")
    _fail(name, f"has dtype {y.dtype} (shape {y.shape})",
          f"integer class labels 0..C-1 ({hint})")
  if y.ndim != 1:
    _fail(name, f"has shape {y.shape} and dtype {y.dtype}",
          "a 1-D array of integer class labels")
  if not y.size:
    return num_classes
  lo, hi = int(y.min()), int(y.max())
  if lo < 0:
    _fail(name, f"labels span {lo}..{hi}", "class labels >= 0")
  if num_classes:
    if hi >= num_classes:
      _fail(name, f"labels span {lo}..{hi}",
            f"class labels in 0..{num_classes - 1} ({num_classes} classes)")
    return num_classes
  count = hi + 1
  limit = min(MAX_CLASSES, examples) if examples else MAX_CLASSES
  if count > limit:
    _fail(name, f"labels span {lo}..{hi}, which would make {count} classes for "
          f"{examples or 'these'} examples",
          "class labels 0..C-1 with C at most "
          + (f"the number of labelled examples ({examples}) and at most " if examples
             else "") + f"{MAX_CLASSES}; if the labels are right, declare C with "
          f"{declare}")
  return count


def check_classes(y_train: np.ndarray, y_test: np.ndarray, train_name: str,
                  test_name: str, warn: Optional[Callable[[str], None]] = None) -> None:
  """Classification labels a run can learn from: ``y_train`` holds at least two
  classes (with one, every prediction of it is right: accuracy 1.0 measures
  nothing), else :class:`DataError`; test labels that ``y_train`` never holds
  are said in one line (``warn``, default stderr), as they may be intended."""
  seen = np.unique(np.asarray(y_train))
  if seen.size == 1:
    _fail(train_name, f"every label is {int(seen[0])} (one class)",
          "at least two classes: with one, every prediction is right and accuracy "
          "measures nothing")
  unseen = np.setdiff1d(np.unique(np.asarray(y_test)), seen)
  if unseen.size:
    count = int(np.isin(np.asarray(y_test), unseen).sum())
    shown = ", ".join(str(int(c)) for c in unseen[:5]) + (", ..." if unseen.size > 5
                                                          else "")
    line = (f"warning: {test_name}: {count} of {len(y_test)} examples have labels "
            f"{train_name} never holds ({shown}), so no client learns them and they "
            f"count as errors")
    if warn is None:
      import sys
      print(line, file=sys.stderr)
    else:
      warn(line)


def check_arrays(x_train: ArrayLike, y_train: ArrayLike, x_test: ArrayLike,
                 y_test: ArrayLike, *, num_classes: int = 0,
                 regression: bool = False,
                 client_indices: Optional[Sequence[np.ndarray]] = None,
                 where: str = "data", names: Optional[Mapping[str, str]] = None,
                 declare: str = "num_classes") -> int:
  """Check a dataset's arrays before anything is built from them; returns the
  class count (0 for regression).

  Args:
    x_train, x_test: inputs ``[N, ...]`` (same trailing shape), a real dtype,
      every value finite.
    y_train, y_test: one target per input: integer class labels ``[N]`` in
      ``0..C-1`` (:func:`check_labels`), or finite real targets ``[N]`` /
      ``[N, d]`` with ``regression``.
    num_classes: the declared ``C`` (0 = ``max(label) + 1``, when plausible).
    client_indices: optional ``[K]`` index arrays into the training rows, one per
      client; each must be non-empty and in range.
    where, names: how messages name the arrays: ``names[array]`` when given, else
      ``"<where>:<array>"`` (e.g. ``where="data file /d/x.npz"``).
    declare: the option that declares ``C``, named when labels are implausible.
  Raises:
    DataError: one line naming the array, what it holds and what was expected.
  """
  label = {k: (names or {}).get(k, f"{where}:{k}")
           for k in ("x_train", "y_train", "x_test", "y_test", "clients")}
  xs = {"x_train": np.asarray(x_train), "x_test": np.asarray(x_test)}
  ys = {"y_train": np.asarray(y_train), "y_test": np.asarray(y_test)}
  for key, x in xs.items():
    if x.ndim < 2 or not (np.issubdtype(x.dtype, np.integer)
                          or np.issubdtype(x.dtype, np.floating)):
      _fail(label[key], f"has shape {x.shape} and dtype {x.dtype}",
            "real or integer inputs [N, ...] (one row per example)")
    if not len(x):
      _fail(label[key], "holds no examples", "at least one example")
    check_finite(x, label[key])
  if xs["x_train"].shape[1:] != xs["x_test"].shape[1:]:
    _fail(label["x_test"], f"has inputs of shape {xs['x_test'].shape[1:]}",
          f"the shape of x_train's, {xs['x_train'].shape[1:]}")
  for (xk, x), (yk, y) in zip(xs.items(), ys.items()):
    if len(y) != len(x):
      _fail(label[yk], f"holds {len(y)} targets but {label[xk]} holds {len(x)} "
            f"inputs", "one target per input")
  if regression:
    for key, y in ys.items():
      if y.ndim not in (1, 2) or not np.issubdtype(y.dtype, np.floating):
        _fail(label[key], f"has shape {y.shape} and dtype {y.dtype}",
              "real targets [N] or [N, d]")
      check_finite(y, label[key])
    classes = 0
  else:
    examples = len(ys["y_train"]) + len(ys["y_test"])
    for key in ("y_train", "y_test"):
      check_labels(ys[key], label[key], num_classes, examples, declare)
    classes = num_classes or int(max(ys["y_train"].max(), ys["y_test"].max(initial=0))) + 1
    check_classes(ys["y_train"], ys["y_test"], label["y_train"], label["y_test"])
  if client_indices is not None:
    n = len(ys["y_train"])
    for k, idx in enumerate(client_indices):
      idx = np.asarray(idx)
      if not idx.size:
        _fail(label["clients"], f"client {k} holds no examples",
              "every client to hold at least one training example")
      if not np.issubdtype(idx.dtype, np.integer) or idx.min() < 0 or idx.max() >= n:
        _fail(label["clients"], f"client {k} has indices {idx.min()}..{idx.max()} of "
              f"dtype {idx.dtype}", f"integer row indices in 0..{n - 1}")
  return classes
