"""The partition schemes of class labels over clients that the others build on:
IID, Dirichlet (and its proportions), label shards, the authors' Dirichlet of
FIRMA's code and natural groups, with the checks every scheme shares
(:mod:`fedfrac.data.partition` dispatches by name)."""
from __future__ import annotations


from typing import Optional, Sequence

import numpy as np
from numpy.typing import ArrayLike


# One index array per client (what every scheme returns).


# One index array per client (what every scheme returns).
Parts = list[np.ndarray]

# data.partition -> one line for ``--list`` (the registry of partition schemes).
SCHEME_DESCRIPTIONS = {
    "iid": "uniformly random split",
    "dirichlet": "per-class client proportions ~ Dirichlet(data.alpha)",
    "shards": "label-sorted shards, data.shards_per_client per client",
    "shards_reference": "the Kuramoto-FedAvg authors' shard dealing (their draws, "
                        "data.shards_per_client labels per client)",
    "label_skew": "data.classes_per_client primary classes per client (FIRMA §3.5)",
    "pathological": "FOFedAvg shard non-IID, data.pathological_level mild/moderate/severe",
    "natural": "the source's own clients (e.g. one per vehicle)",
}
SCHEMES = tuple(SCHEME_DESCRIPTIONS)


def checked_labels(labels: ArrayLike) -> np.ndarray:
  labels = np.asarray(labels)
  if labels.ndim != 1:
    raise ValueError(f"labels: expected a 1-D array, got shape {labels.shape}")
  if labels.size == 0:
    raise ValueError("labels: empty array; nothing to partition")
  return labels


def check_class_labels(labels: ArrayLike) -> np.ndarray:
  """``labels`` as int64 class ids; raises unless they are non-negative integers
  (integer dtype, or floats with integral values)."""
  labels = checked_labels(labels)
  if labels.dtype.kind in "iub":
    out = labels.astype(np.int64)
  elif labels.dtype.kind == "f" and np.all(np.isfinite(labels)) and np.all(
      labels == np.round(labels)):
    out = labels.astype(np.int64)
  else:
    bad = labels.ravel()[0] if labels.dtype.kind not in "f" else labels[
        ~(np.isfinite(labels) & (labels == np.round(labels)))][0]
    bad = bad.item() if hasattr(bad, "item") else bad
    raise ValueError(f"labels: class labels must be non-negative integers; got "
                     f"{labels.dtype} values such as {bad!r}")
  if out.min() < 0:
    raise ValueError(f"labels: class labels must be non-negative integers; got "
                     f"{int(out.min())}")
  return out


def check_seed(seed: int) -> None:
  if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
    raise ValueError(f"seed={seed!r}: must be an integer >= 0")


def check_num_clients(num_clients: int, n: int, min_size: int) -> None:
  if not isinstance(num_clients, (int, np.integer)) or num_clients < 1:
    raise ValueError(f"num_clients={num_clients!r}: must be an integer >= 1")
  if min_size < 1:
    raise ValueError(f"min_size={min_size!r}: must be >= 1")
  if num_clients * min_size > n:
    raise ValueError(
        f"num_clients={num_clients} with min_size={min_size} needs at least "
        f"{num_clients * min_size} samples, but only {n} are available")


def finish(parts: Sequence[np.ndarray], min_size: int, scheme: str) -> list:
  out = [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]
  small = [i for i, p in enumerate(out) if len(p) < min_size]
  if small:
    raise ValueError(
        f"partition scheme={scheme!r}: clients {small} got fewer than "
        f"min_size={min_size} samples; lower num_clients or min_size")
  return out


def iid(labels: ArrayLike, num_clients: int, seed: int, min_size: int = 1) -> Parts:
  """Uniform random split into ``num_clients`` parts whose sizes differ by <= 1."""
  labels = checked_labels(labels)
  check_num_clients(num_clients, labels.size, min_size)
  rng = np.random.default_rng(seed)
  perm = rng.permutation(labels.size)
  return finish(np.array_split(perm, num_clients), min_size, "iid")


def dirichlet_proportions(num_classes: int, num_clients: int, alpha: float,
                          rng: np.random.Generator) -> np.ndarray:
  """Class-by-client proportions ``[C, K]``; row c ~ Dir(alpha * 1_K)."""
  return rng.dirichlet(np.full(num_clients, float(alpha)), size=num_classes)


def split_by_proportions(labels: ArrayLike, proportions: np.ndarray,
                         rng: np.random.Generator) -> Parts:
  """Split each class's indices over clients by ``proportions [C, K]`` (rows sum to 1).

  Uses cumulative-proportion cut points over a shuffled class pool, as in the
  common Dirichlet partition code (Hsu et al. 2019; NIID-Bench).
  Returns a list of K index arrays.
  """
  labels = np.asarray(labels)
  num_classes, num_clients = proportions.shape
  parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
  for c in range(num_classes):
    idx = np.flatnonzero(labels == c)
    if idx.size == 0:
      continue
    idx = idx[rng.permutation(idx.size)]
    cuts = (np.cumsum(proportions[c]) * idx.size).astype(np.int64)[:-1]
    for k, chunk in enumerate(np.split(idx, cuts)):
      parts[k].append(chunk)
  return [np.concatenate(p) if p else np.zeros(0, np.int64) for p in parts]


def dirichlet(labels: ArrayLike, num_clients: int, seed: int, alpha: float = 0.5,
              min_size: int = 1, max_tries: int = 1000, return_proportions: bool = False,
              ) -> Parts | tuple[Parts, np.ndarray]:
  """Label-distribution skew: per class, client shares ~ Dir(alpha * 1_K).

  Re-draws (up to ``max_tries``, deterministically from ``seed``) until every
  client holds at least ``min_size`` samples; raises if that never happens.
  Smaller ``alpha`` gives more skew.
  """
  labels = check_class_labels(labels)
  if (not isinstance(alpha, (int, float, np.integer, np.floating))
      or isinstance(alpha, bool) or not np.isfinite(alpha) or alpha <= 0):
    raise ValueError(f"alpha={alpha!r}: Dirichlet concentration must be a number > 0")
  check_num_clients(num_clients, labels.size, min_size)
  num_classes = int(labels.max()) + 1
  rng = np.random.default_rng(seed)
  for _ in range(max_tries):
    props = dirichlet_proportions(num_classes, num_clients, alpha, rng)
    parts = split_by_proportions(labels, props, rng)
    if min(len(p) for p in parts) >= min_size:
      parts = finish(parts, min_size, "dirichlet")
      return (parts, props) if return_proportions else parts
  raise ValueError(
      f"dirichlet(alpha={alpha}) could not give all {num_clients} clients "
      f"min_size={min_size} samples in {max_tries} draws; raise alpha, lower "
      f"num_clients or min_size")


def shards(labels: ArrayLike, num_clients: int, seed: int, shards_per_client: int = 2,
           min_size: int = 1) -> Parts:
  """Pathological label shards (McMahan et al. 2017; Kuramoto-FedAvg §5).

  Sort indices by label (ties broken by a seeded shuffle), cut into
  ``num_clients * shards_per_client`` equal shards (the remainder of the
  integer division is left out), and deal ``shards_per_client`` distinct shards
  to each client without replacement.
  """
  labels = check_class_labels(labels)
  if not isinstance(shards_per_client, (int, np.integer)) or shards_per_client < 1:
    raise ValueError(
        f"shards_per_client={shards_per_client!r}: must be an integer >= 1")
  check_num_clients(num_clients, labels.size, min_size)
  num_shards = num_clients * shards_per_client
  shard_size = labels.size // num_shards
  if shard_size < 1:
    raise ValueError(
        f"shards: num_clients*shards_per_client={num_shards} shards exceed the "
        f"{labels.size} samples")
  rng = np.random.default_rng(seed)
  shuffled = rng.permutation(labels.size)
  order = shuffled[np.argsort(labels[shuffled], kind="stable")]
  shard_ids = rng.permutation(num_shards).reshape(num_clients, shards_per_client)
  parts = [np.concatenate([order[s * shard_size:(s + 1) * shard_size] for s in row])
           for row in shard_ids]
  return finish(parts, min_size, "shards")


def dirichlet_reference(labels: ArrayLike, num_clients: int, seed: int, alpha: float = 0.5,
                        num_classes: Optional[int] = None) -> Parts:
  """The FIRMA authors' Dirichlet split (``fibfl/data.py``), reproduced exactly.

  For each class c in order: shuffle the class's indices, draw p ~ Dir(alpha·1_K),
  give client k ``floor(p_k n_c)`` samples and the last client the remainder.
  There is no minimum-size guarantee: clients may be small or empty (the authors
  drop clients with fewer than a batch of train samples afterwards; see
  ``fedfrac.data.federated.build`` with ``data.compat='reference_code'``).
  Differs from :func:`dirichlet`, which draws all proportions first, cuts by
  cumulative proportions and re-draws until every client has ``min_size``.
  Returns K unsorted index arrays.
  """
  labels = check_class_labels(labels)
  if (not isinstance(alpha, (int, float, np.integer, np.floating))
      or isinstance(alpha, bool) or not np.isfinite(alpha) or alpha <= 0):
    raise ValueError(f"alpha={alpha!r}: Dirichlet concentration must be a number > 0")
  if not isinstance(num_clients, (int, np.integer)) or num_clients < 1:
    raise ValueError(f"num_clients={num_clients!r}: must be an integer >= 1")
  num_classes = int(labels.max()) + 1 if num_classes is None else int(num_classes)
  rng = np.random.default_rng(seed)
  parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
  for c in range(num_classes):
    idx = rng.permutation(np.flatnonzero(labels == c))
    props = rng.dirichlet(np.ones(num_clients) * alpha)
    sizes = (props * idx.size).astype(np.int64)
    sizes[-1] = idx.size - sizes[:-1].sum()
    for k, chunk in enumerate(np.split(idx, np.cumsum(sizes)[:-1])):
      parts[k].extend(chunk.tolist())
  return [np.asarray(p, np.int64) for p in parts]


def natural(labels: ArrayLike, num_clients: int, seed: int,
            group_ids: Optional[ArrayLike] = None, min_size: int = 1) -> Parts:
  """One client per distinct group id (writer, vehicle, ...), in sorted id order."""
  labels = checked_labels(labels)
  if group_ids is None:
    raise ValueError("natural partition needs group_ids (one id per sample)")
  group_ids = np.asarray(group_ids)
  if group_ids.shape != labels.shape:
    raise ValueError(
        f"group_ids shape {group_ids.shape} does not match labels {labels.shape}")
  groups = np.unique(group_ids)
  if num_clients not in (None, len(groups)):
    raise ValueError(
        f"num_clients={num_clients}: natural partition has {len(groups)} groups")
  return finish([np.flatnonzero(group_ids == g) for g in groups], min_size, "natural")
