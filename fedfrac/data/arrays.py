"""Your own arrays as a run's data: ``ff.run(config, data=...)``.

:func:`user_data` accepts

* a dict with ``x_train``, ``y_train`` and optionally ``x_test``, ``y_test``
  (also ``num_classes``, and ``train_groups`` / ``test_groups``: a natural
  client id per example, for ``data.partition="natural"``);
* a tuple ``(x_train, y_train)`` or ``(x_train, y_train, x_test, y_test)``, or
  ``((x_train, y_train), (x_test, y_test))``;
* a :class:`fedfrac.data.Dataset`;
* a :class:`fedfrac.data.FederatedData` (already split over clients, e.g. by
  :func:`fedfrac.data.federate`): used as it is for every seed.

Inputs are ``[N, ...]`` (tabular ``[N, D]``, images ``[N, H, W, C]``, windows
``[N, L, F]``); labels ``[N]`` integer classes ``0..C-1`` (``C`` = the
``num_classes`` given, else the largest label + 1), or real targets ``[N]``
when ``config.task.loss`` is a regression loss. Everything is checked before
any compute by :func:`fedfrac.data.validate.check_arrays`, the check the
``files`` source runs (shapes, dtypes, NaN / inf, label range, empty clients),
and refused in one :class:`~fedfrac.data.validate.DataError` line naming the
array. Without a test set, ``config.data.test_fraction`` of the examples (per
class) is held out with ``config.data.split_seed``. The rest of
``config.data`` (partition, ``num_clients``, ``alpha``, ``test_split``, ...)
splits a non-federated dataset over clients as it does a named source.

Float inputs become float32 (models see them as given); uint8 inputs are read
as images (``input_scale = 1/255``, as the ``files`` source does); other integer
inputs become float32.
"""
from __future__ import annotations

import dataclasses
import hashlib
import warnings
from typing import Any, Mapping

import numpy as np

from fedfrac.data.federated_data import FederatedData
from fedfrac.data.sources import stratified_split
from fedfrac.data.dataset import Dataset
from fedfrac.data.array_checks import DataError, check_arrays

KEYS = ("x_train", "y_train", "x_test", "y_test", "num_classes", "train_groups",
        "test_groups")


def _fail(message: str):
  raise DataError(message)


def _unpack(data: Any) -> dict:
  """``data`` (dict or tuple, see the module docstring) as a dict of its parts."""
  if isinstance(data, Mapping):
    unknown = [k for k in data if k not in KEYS]
    if unknown:
      import difflib
      close = difflib.get_close_matches(str(unknown[0]), KEYS, n=1)
      hint = f"did you mean {close[0]!r}? " if close else ""
      _fail(f"data[{unknown[0]!r}]: unknown key; {hint}allowed keys are {', '.join(KEYS)}")
    parts = dict(data)
  elif isinstance(data, (tuple, list)):
    items = list(data)
    if len(items) == 2 and all(isinstance(p, (tuple, list)) and len(p) == 2 for p in items):
      items = [*items[0], *items[1]]
    if len(items) not in (2, 4):
      _fail(f"data: a {type(data).__name__} of {len(items)} items; expected (x_train, "
            f"y_train), (x_train, y_train, x_test, y_test) or ((x_train, y_train), "
            f"(x_test, y_test))")
    parts = dict(zip(("x_train", "y_train", "x_test", "y_test"), items))
  else:
    _fail(f"data: a {type(data).__name__}; expected a dict of arrays (x_train, y_train"
          f"[, x_test, y_test]), a tuple of them, a fedfrac.data.Dataset or a "
          f"fedfrac.data.FederatedData")
  for k in ("x_train", "y_train"):
    if parts.get(k) is None:
      _fail(f"data: no {k} given; expected at least x_train and y_train")
  if (parts.get("x_test") is None) != (parts.get("y_test") is None):
    missing = "y_test" if parts.get("y_test") is None else "x_test"
    _fail(f"data: {missing} is missing; give both x_test and y_test, or neither (a "
          f"test set is then held out of the train arrays)")
  return parts


def _inputs(x: np.ndarray) -> tuple[np.ndarray, float]:
  if x.dtype == np.uint8:
    return x, 1.0 / 255.0
  return x.astype(np.float32), 1.0


def _targets(y: np.ndarray, regression: bool, name: str) -> np.ndarray:
  if not regression:
    return y.astype(np.int32)
  if y.ndim == 2 and y.shape[1] == 1:
    y = y[:, 0]
  if y.ndim != 1:
    _fail(f"data:{name}: has shape {y.shape}; expected one real target per example "
          f"[N] (or [N, 1])")
  return y.astype(np.float32)


def _warn_one_based(y_train, y_test, declared):
  """Labels 1..C with no 0 anywhere look one-based: say so (once)."""
  if declared or not np.issubdtype(y_train.dtype, np.integer):
    return
  both = np.concatenate([y_train.ravel(), y_test.ravel()])
  if both.size and both.min() == 1:
    warnings.warn(f"data: no example has label 0 (labels span 1..{int(both.max())}), so "
                  f"class 0 is empty; if the labels count from 1, give y - 1",
                  stacklevel=3)


def _from_parts(parts: dict, regression: bool, test_fraction: float,
                split_seed: int) -> Dataset:
  x_train, y_train = np.asarray(parts["x_train"]), np.asarray(parts["y_train"])
  for key, array in (("x_train", x_train), ("y_train", y_train)):
    if array.ndim == 0 or not len(array):
      _fail(f"data:{key}: holds no examples (shape {array.shape}); expected one row "
            f"per example, at least one")
  groups = parts.get("train_groups")
  test_groups = parts.get("test_groups")
  if parts.get("x_test") is None:
    if not 0.0 < test_fraction < 1.0:
      _fail(f"data.test_fraction={test_fraction!r}: must be in (0, 1) to hold out a "
            f"test set when data has no x_test")
    if len(y_train) != len(x_train):
      _fail(f"data:y_train: holds {len(y_train)} targets but data:x_train holds "
            f"{len(x_train)} inputs; expected one target per input")
    if groups is not None and np.shape(groups) != (len(y_train),):
      _fail(f"data:train_groups: has shape {np.shape(groups)}; expected one client id "
            f"per row of data:x_train ({len(y_train)},) (the test set is split off "
            f"those rows, and their groups with them)")
    if (not regression and y_train.ndim == 1
            and np.issubdtype(y_train.dtype, np.integer)):
      tr, te = stratified_split(y_train, test_fraction, split_seed)
    else:
      perm = np.random.default_rng(split_seed).permutation(len(y_train))
      n_test = max(1, int(round(test_fraction * len(y_train))))
      tr, te = np.sort(perm[n_test:]), np.sort(perm[:n_test])
    x_test, y_test = x_train[te], y_train[te]
    x_train, y_train = x_train[tr], y_train[tr]
    if groups is not None:
      groups, test_groups = np.asarray(groups)[tr], np.asarray(groups)[te]
  else:
    x_test, y_test = np.asarray(parts["x_test"]), np.asarray(parts["y_test"])
  declared = int(parts.get("num_classes") or 0)
  classes = check_arrays(x_train, y_train, x_test, y_test, num_classes=declared,
                         regression=regression, declare="data['num_classes']")
  _warn_one_based(y_train, y_test, declared)
  for key, g, n in (("train_groups", groups, len(y_train)),
                    ("test_groups", test_groups, len(y_test))):
    if g is not None and np.shape(g) != (n,):
      _fail(f"data:{key}: has shape {np.shape(g)}; expected one client id per example "
            f"({n},)")
  x_train, scale = _inputs(x_train)
  x_test, _ = _inputs(x_test)
  return Dataset("arrays", x_train, _targets(y_train, regression, "y_train"), x_test,
                 _targets(y_test, regression, "y_test"), int(classes),
                 task="regression" if regression else "classification",
                 input_scale=scale,
                 train_groups=None if groups is None else np.asarray(groups),
                 test_groups=None if test_groups is None else np.asarray(test_groups))


def check_federated(fed: FederatedData) -> FederatedData:
  """A :class:`FederatedData` checked as the ``files`` source checks its arrays
  (plus every client's rows and test indices in range); returned unchanged."""
  regression = fed.task != "classification"
  k = fed.num_clients
  rows = [fed.client_index[i, :fed.client_size[i]] for i in range(k)]
  check_arrays(fed.x_train, fed.y_train, fed.x_test, fed.y_test,
               num_classes=0 if regression else int(fed.num_classes),
               regression=regression, client_indices=rows, where="data")
  m = len(fed.y_test)
  for i in range(k):
    idx = np.asarray(fed.client_test_index[i, :fed.client_test_size[i]])
    if idx.size and (idx.min() < 0 or idx.max() >= m):
      _fail(f"data:client_test_index: client {i} has test indices {idx.min()}.."
            f"{idx.max()}; expected indices into the {m} test examples")
  return fed


def user_data(data: Any, *, regression: bool = False, test_fraction: float = 0.2,
              split_seed: int = 0) -> Dataset | FederatedData:
  """``data`` (see the module docstring) checked, as a :class:`Dataset` to
  partition or a :class:`FederatedData` to use as it is.

  Raises:
    DataError: one line naming the array, what it holds and what was expected.
  """
  if isinstance(data, FederatedData):
    return check_federated(data)
  if isinstance(data, Dataset):
    return _from_parts({"x_train": data.x_train, "y_train": data.y_train,
                        "x_test": data.x_test, "y_test": data.y_test,
                        "num_classes": data.num_classes,
                        "train_groups": data.train_groups, "test_groups": data.test_groups},
                       data.task == "regression", test_fraction, split_seed)
  return _from_parts(_unpack(data), regression, test_fraction, split_seed)


def digest(data: Dataset | FederatedData) -> str:
  """SHA-256 (16 hex digits) of the arrays of ``data``: what a workdir's
  fingerprint records of a run's own data."""
  h = hashlib.sha256()
  for f in dataclasses.fields(data):
    v = getattr(data, f.name)
    if isinstance(v, np.ndarray):
      h.update(f"{f.name}:{v.dtype}:{v.shape}".encode())
      h.update(np.ascontiguousarray(v).tobytes())
    elif isinstance(v, (int, float, str)):
      h.update(f"{f.name}={v!r}".encode())
  return h.hexdigest()[:16]
