"""The Kuramoto-FedAvg authors' label-shard dealing (partition ``shards_reference``).

Their code (github.com/amuhebwa/Kuramoto-FedAvg, ``src/train_tools/preprocessing/
datasetter.py``, ``sharding_partition``, called by ``data_distributer`` right after
``main.py``'s ``_get_setups`` seeds Python's ``random`` and NumPy's global generator
with 19940817, whatever the run's seed) splits the train labels so:

1. C = the number of distinct labels, ``spc = ⌊s·K/C⌋`` shards per class;
2. each class's indices, ascending, are cut into ``spc`` equal shards of
   ``⌊n_c/spc⌋``, and the ``n_c mod spc`` indices left at the end go one each to
   the first shards;
3. the label list ``[0, 1, ..., C−1] × spc`` is shuffled by Python's
   ``random.shuffle`` and reshaped to ``[K, C·spc/K]``: row k is client k's labels
   (a label may occur twice in a row, so a client can hold two shards of one
   class; ``C·spc/K`` is s when K·s is a multiple of C, fewer otherwise);
4. for client k = 0..K−1 and each label c of its row in order, one of class c's
   remaining shards is drawn with ``np.random.choice(len(pool), replace=False)``
   (legacy generator: a permutation of the pool, its first entry) and removed
   from the pool; the client's indices are its shards concatenated in draw order.

Here the same draws come from ``random.Random(seed)`` and
``np.random.RandomState(seed)``: the same streams as the authors' seeded global
generators (nothing draws from them before the partition in their ``main.py``).
The configs' ``mode=reference_code`` passes their seed through ``data.seed``.
Their code then deals the test labels with the same label rows, continuing the
NumPy stream; those client test splits enter no accuracy they report (a client's
``test_acc`` is measured on the global test set), so fedfrac keeps its own
``data.test_split``. Every train index is dealt: no remainder is dropped, unlike
:func:`fedfrac.data.partition.shards`.

Differs from ``shards`` (sort by label, K·s equal shards, s distinct shards per
client from a permutation): shard sizes follow each class's size, a client's
shards may repeat a class, and the draws are the authors'.
"""
from __future__ import annotations

import random
import warnings

import numpy as np
from numpy.typing import ArrayLike

AUTHORS_SEED = 19940817   # main.py _get_setups: np.random.seed / random.seed


def _class_labels(labels) -> tuple[np.ndarray, int]:
  """``labels`` as int64 ``[N]`` and C; raises unless they are the integers
  0..C−1, every one present (the authors' code indexes its pools by
  ``range(len(np.unique(labels)))``)."""
  labels = np.asarray(labels)
  if labels.ndim != 1 or labels.size == 0:
    raise ValueError(f"labels: shards_reference needs a non-empty 1-D label array, got "
                     f"shape {labels.shape}")
  if labels.dtype.kind not in "iu" and not (
      labels.dtype.kind == "f" and np.all(labels == np.round(labels))):
    raise ValueError(f"labels: shards_reference needs integer class labels, got "
                     f"{labels.dtype}")
  labels = labels.astype(np.int64)
  classes = np.unique(labels)
  num_classes = classes.size
  if classes[0] != 0 or classes[-1] != num_classes - 1:
    missing = sorted(set(range(int(classes[-1]) + 1)) - set(classes.tolist()))
    raise ValueError(f"labels: shards_reference needs every class 0..C-1 present; "
                     f"labels run {int(classes[0])}..{int(classes[-1])} without "
                     f"{missing[:5] if missing else 'a start at 0'}")
  return labels, num_classes


def shards_per_class(num_classes: int, num_clients: int, shards_per_client: int) -> int:
  """``⌊s·K/C⌋``, checked: at least 1, and ``C·spc`` divisible by K (their
  ``reshape((n_clients, -1))`` fails otherwise)."""
  for key, value in (("num_clients", num_clients), ("shards_per_client", shards_per_client)):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
      raise ValueError(f"data.{key}={value!r}: must be an integer >= 1")
  spc = shards_per_client * num_clients // num_classes
  if spc < 1:
    raise ValueError(f"data.shards_per_client={shards_per_client} with data.num_clients="
                     f"{num_clients} and {num_classes} classes gives floor(s*K/C) = 0 "
                     f"shards per class; shards_reference needs s*K >= C")
  if (num_classes * spc) % num_clients:
    raise ValueError(f"data.shards_per_client={shards_per_client} with data.num_clients="
                     f"{num_clients}: the {num_classes * spc} shards ({spc} per class) do "
                     f"not deal evenly to {num_clients} clients; shards_reference needs "
                     f"C*floor(s*K/C) divisible by K (e.g. s*K a multiple of C)")
  if spc * num_classes != shards_per_client * num_clients:
    warnings.warn(f"shards_reference: s={shards_per_client}, K={num_clients}, C="
                  f"{num_classes} gives {num_classes * spc // num_clients} shards per "
                  f"client, not {shards_per_client} (floor(s*K/C) = {spc} per class), "
                  f"as the authors' code deals them")
  return spc


def class_shards(labels: np.ndarray, num_classes: int, spc: int) -> list[list[np.ndarray]]:
  """Per class, its ``spc`` shards (step 2 of the module docstring): shard j is
  ``idx[j·q:(j+1)·q]`` plus ``idx[spc·q + j]`` for j < n_c mod spc, where ``idx``
  is the class's indices ascending and ``q = ⌊n_c/spc⌋``."""
  pools = []
  for c in range(num_classes):
    idx = np.flatnonzero(labels == c)
    q, r = divmod(idx.size, spc)
    if q < 1:
      raise ValueError(f"labels: class {c} has {idx.size} samples, fewer than the "
                       f"{spc} shards per class of shards_reference")
    pools.append([np.concatenate([idx[j * q:(j + 1) * q], idx[spc * q + j:spc * q + j + 1]
                                  if j < r else idx[:0]]) for j in range(spc)])
  return pools


def label_rows(num_classes: int, num_clients: int, spc: int, seed: int) -> np.ndarray:
  """``[K, C·spc/K]`` int: client k's shard labels (step 3): ``[0..C−1] × spc``
  shuffled by ``random.Random(seed).shuffle``."""
  rows = list(range(num_classes)) * spc
  random.Random(seed).shuffle(rows)
  return np.asarray(rows, np.int64).reshape(num_clients, -1)


def deal(labels: ArrayLike, num_clients: int, seed: int, shards_per_client: int,
         ) -> tuple[list[np.ndarray], np.ndarray]:
  """The authors' dealing of ``labels [N]`` to K clients, in their order.

  Returns ``(parts, rows)``: ``parts[k]`` client k's int64 indices, its shards
  concatenated in draw order (not sorted); ``rows [K, C·spc/K]`` its shard labels.
  """
  labels, num_classes = _class_labels(labels)
  spc = shards_per_class(num_classes, num_clients, shards_per_client)
  pools = class_shards(labels, num_classes, spc)
  rows = label_rows(num_classes, num_clients, spc, seed)
  rng = np.random.RandomState(seed)
  parts = []
  for row in rows:
    taken = [pools[c].pop(int(rng.choice(len(pools[c]), replace=False))) for c in row]
    parts.append(np.concatenate(taken).astype(np.int64))
  return parts, rows


def shards_reference(labels: ArrayLike, num_clients: int, seed: int,
                     shards_per_client: int = 2, min_size: int = 1) -> list[np.ndarray]:
  """Partition scheme ``shards_reference``: :func:`deal`, each client's indices
  sorted (the partition contract); every train index goes to one client.

  Args:
    labels: ``[N]`` class labels 0..C−1, every class present.
    num_clients: K; seed: the authors' is :data:`AUTHORS_SEED`.
    shards_per_client: s (``data.shards_per_client``).
    min_size: every client gets at least one whole shard; a smaller one raises.
  Returns:
    K sorted int64 index arrays, pairwise disjoint, covering ``range(N)``.
  """
  parts, _ = deal(labels, num_clients, seed, shards_per_client)
  small = [k for k, p in enumerate(parts) if p.size < min_size]
  if small:
    raise ValueError(f"partition scheme='shards_reference': clients {small} got fewer "
                     f"than min_size={min_size} samples; lower num_clients or min_size")
  return [np.sort(p) for p in parts]


__all__ = ["AUTHORS_SEED", "shards_reference", "deal", "label_rows", "class_shards",
           "shards_per_class"]
