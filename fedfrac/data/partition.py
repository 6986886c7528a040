"""Seeded, deterministic partitioners: labels -> per-client index arrays.

Every scheme returns ``list[np.ndarray]`` (one sorted int64 index array per client)
whose union is a subset of ``range(len(labels))`` with no index in two clients, and
guarantees each client at least ``min_size`` samples — an impossible request raises
``ValueError`` instead of producing empty clients.

Schemes (DESIGN §4):
  iid            uniform random split into near-equal parts.
  dirichlet      per class c, proportions over clients ~ Dir(alpha * 1_K).
  shards         sort by label, cut into K*s equal shards, deal s shards per client
                 without replacement (McMahan et al. 2017; Kuramoto-FedAvg).
  label_skew     the FIRMA authors' rule with K primary and K+1 secondary classes.
  natural        clients given by group ids (writer, vehicle, ...).
"""
from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np

SCHEMES = ("iid", "dirichlet", "shards", "label_skew", "natural")


def _check_labels(labels) -> np.ndarray:
  labels = np.asarray(labels)
  if labels.ndim != 1:
    raise ValueError(f"labels: expected a 1-D array, got shape {labels.shape}")
  if labels.size == 0:
    raise ValueError("labels: empty array; nothing to partition")
  return labels


def _check_num_clients(num_clients, n, min_size):
  if not isinstance(num_clients, (int, np.integer)) or num_clients < 1:
    raise ValueError(f"num_clients={num_clients!r}: must be an integer >= 1")
  if min_size < 1:
    raise ValueError(f"min_size={min_size!r}: must be >= 1")
  if num_clients * min_size > n:
    raise ValueError(
        f"num_clients={num_clients} with min_size={min_size} needs at least "
        f"{num_clients * min_size} samples, but only {n} are available")


def _finish(parts: Sequence[np.ndarray], min_size: int, scheme: str):
  out = [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]
  small = [i for i, p in enumerate(out) if len(p) < min_size]
  if small:
    raise ValueError(
        f"partition scheme={scheme!r}: clients {small} got fewer than "
        f"min_size={min_size} samples; lower num_clients or min_size")
  return out


def iid(labels, num_clients, seed, min_size=1):
  """Uniform random split into ``num_clients`` parts whose sizes differ by <= 1."""
  labels = _check_labels(labels)
  _check_num_clients(num_clients, labels.size, min_size)
  rng = np.random.default_rng(seed)
  perm = rng.permutation(labels.size)
  return _finish(np.array_split(perm, num_clients), min_size, "iid")


def dirichlet_proportions(num_classes, num_clients, alpha, rng):
  """Class-by-client proportions ``[C, K]``; row c ~ Dir(alpha * 1_K)."""
  return rng.dirichlet(np.full(num_clients, float(alpha)), size=num_classes)


def split_by_proportions(labels, proportions, rng):
  """Split each class's indices over clients by ``proportions [C, K]`` (rows sum to 1).

  Uses cumulative-proportion cut points over a shuffled class pool, as in the
  common Dirichlet partition code (Hsu et al. 2019; NIID-Bench).
  Returns a list of K index arrays.
  """
  labels = np.asarray(labels)
  num_classes, num_clients = proportions.shape
  parts = [[] for _ in range(num_clients)]
  for c in range(num_classes):
    idx = np.flatnonzero(labels == c)
    if idx.size == 0:
      continue
    idx = idx[rng.permutation(idx.size)]
    cuts = (np.cumsum(proportions[c]) * idx.size).astype(np.int64)[:-1]
    for k, chunk in enumerate(np.split(idx, cuts)):
      parts[k].append(chunk)
  return [np.concatenate(p) if p else np.zeros(0, np.int64) for p in parts]


def dirichlet(labels, num_clients, seed, alpha=0.5, min_size=1, max_tries=1000,
              return_proportions=False):
  """Label-distribution skew: per class, client shares ~ Dir(alpha * 1_K).

  Re-draws (up to ``max_tries``, deterministically from ``seed``) until every
  client holds at least ``min_size`` samples; raises if that never happens.
  Smaller ``alpha`` gives more skew.
  """
  labels = _check_labels(labels)
  if not np.isfinite(alpha) or alpha <= 0:
    raise ValueError(f"alpha={alpha!r}: Dirichlet concentration must be > 0")
  _check_num_clients(num_clients, labels.size, min_size)
  num_classes = int(labels.max()) + 1
  rng = np.random.default_rng(seed)
  for _ in range(max_tries):
    props = dirichlet_proportions(num_classes, num_clients, alpha, rng)
    parts = split_by_proportions(labels, props, rng)
    if min(len(p) for p in parts) >= min_size:
      parts = _finish(parts, min_size, "dirichlet")
      return (parts, props) if return_proportions else parts
  raise ValueError(
      f"dirichlet(alpha={alpha}) could not give all {num_clients} clients "
      f"min_size={min_size} samples in {max_tries} draws; raise alpha, lower "
      f"num_clients or min_size")


def shards(labels, num_clients, seed, shards_per_client=2, min_size=1):
  """Pathological label shards (McMahan et al. 2017; Kuramoto-FedAvg §5).

  Sort indices by label (ties broken by a seeded shuffle), cut into
  ``num_clients * shards_per_client`` equal shards (the remainder of the
  integer division is left out), and deal ``shards_per_client`` distinct shards
  to each client without replacement.
  """
  labels = _check_labels(labels)
  if not isinstance(shards_per_client, (int, np.integer)) or shards_per_client < 1:
    raise ValueError(
        f"shards_per_client={shards_per_client!r}: must be an integer >= 1")
  _check_num_clients(num_clients, labels.size, min_size)
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
  return _finish(parts, min_size, "shards")


def label_skew(labels, num_clients, seed, classes_per_client=2, min_size=1,
               min_client_size=64, on_small="error", primary_share=0.55,
               secondary_share=0.20, minority_share=0.03):
  """Label skew exactly as the FIRMA authors define it (Hedjam; DESIGN §4).

  Classes are cycled 0..C-1. With K = ``classes_per_client``, client i's primary
  classes are ``cyc[iK : iK+K]`` and its secondary classes the next K+1 entries
  of the cycle (windows of neighbouring clients overlap). With
  ``budget = max(20, n // num_clients)``, client i takes ``int(0.55*budget)``
  samples from EACH primary class, ``int(0.20*budget)`` from each secondary class
  and ``int(0.03*budget)`` from each remaining class, greedily in client order
  from shuffled per-class pools until a pool is exhausted. Clients left with fewer
  than ``min_client_size`` samples are dropped with a warning
  (``on_small="drop"``; the returned list is then shorter) or rejected
  (``on_small="error"``, default).
  """
  labels = _check_labels(labels)
  if on_small not in ("drop", "error"):
    raise ValueError(f"on_small={on_small!r}: allowed values are 'drop', 'error'")
  _check_num_clients(num_clients, labels.size, min_size)
  parts = label_skew_parts(labels, num_clients, seed, classes_per_client,
                           primary_share, secondary_share, minority_share)
  floor = max(min_size, min_client_size)
  small = [i for i, p in enumerate(parts) if len(p) < floor]
  if small:
    if on_small == "error":
      raise ValueError(
          f"label_skew: clients {small} got fewer than min_client_size={floor} "
          f"samples (pools exhausted); use on_small='drop', fewer clients or a "
          f"smaller min_client_size")
    if len(small) == len(parts):
      raise ValueError(
          f"label_skew: every client has fewer than min_client_size={floor} "
          f"samples; nothing would be left")
    warnings.warn(f"label_skew: dropping clients {small} with fewer than {floor} samples")
    parts = [p for i, p in enumerate(parts) if i not in small]
  return _finish(parts, min_size, "label_skew")


def label_skew_parts(labels, num_clients, seed, classes_per_client=2,
                     primary_share=0.55, secondary_share=0.20, minority_share=0.03,
                     min_take=0):
  """The raw FIRMA label-skew assignment (see :func:`label_skew`), with no
  minimum-size rule: returns ``num_clients`` index arrays (possibly empty), in
  the order the samples were taken. Each role takes at least ``min_take``
  samples per class (the authors' code uses ``max(1, int(share * budget))``,
  i.e. ``min_take=1``; it only matters when ``int(share * budget)`` is 0)."""
  labels = _check_labels(labels)
  num_classes = int(labels.max()) + 1
  if (not isinstance(classes_per_client, (int, np.integer))
      or not 1 <= classes_per_client <= num_classes):
    raise ValueError(
        f"classes_per_client={classes_per_client!r}: must be an integer in "
        f"[1, {num_classes}] (the number of classes)")
  if not isinstance(num_clients, (int, np.integer)) or num_clients < 1:
    raise ValueError(f"num_clients={num_clients!r}: must be an integer >= 1")
  rng = np.random.default_rng(seed)
  pools = [list(rng.permutation(np.flatnonzero(labels == c))) for c in range(num_classes)]
  budget = max(20, labels.size // num_clients)
  take = {"primary": max(min_take, int(primary_share * budget)),
          "secondary": max(min_take, int(secondary_share * budget)),
          "minority": max(min_take, int(minority_share * budget))}
  k = classes_per_client
  parts = []
  for i in range(num_clients):
    cyc = [(i * k + j) % num_classes for j in range(2 * k + 1)]
    primary = list(dict.fromkeys(cyc[:k]))
    secondary = [c for c in dict.fromkeys(cyc[k:]) if c not in primary]
    chosen = []
    for c in range(num_classes):
      role = "primary" if c in primary else "secondary" if c in secondary else "minority"
      n_take = min(take[role], len(pools[c]))
      chosen.extend(pools[c][:n_take])
      del pools[c][:n_take]
    parts.append(np.asarray(chosen, np.int64))
  return parts


def dirichlet_reference(labels, num_clients, seed, alpha=0.5, num_classes=None):
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
  labels = _check_labels(labels)
  if not np.isfinite(alpha) or alpha <= 0:
    raise ValueError(f"alpha={alpha!r}: Dirichlet concentration must be > 0")
  if not isinstance(num_clients, (int, np.integer)) or num_clients < 1:
    raise ValueError(f"num_clients={num_clients!r}: must be an integer >= 1")
  num_classes = int(labels.max()) + 1 if num_classes is None else int(num_classes)
  rng = np.random.default_rng(seed)
  parts = [[] for _ in range(num_clients)]
  for c in range(num_classes):
    idx = rng.permutation(np.flatnonzero(labels == c))
    props = rng.dirichlet(np.ones(num_clients) * alpha)
    sizes = (props * idx.size).astype(np.int64)
    sizes[-1] = idx.size - sizes[:-1].sum()
    for k, chunk in enumerate(np.split(idx, np.cumsum(sizes)[:-1])):
      parts[k].extend(chunk.tolist())
  return [np.asarray(p, np.int64) for p in parts]


def natural(labels, num_clients, seed, group_ids=None, min_size=1):
  """One client per distinct group id (writer, vehicle, ...), in sorted id order."""
  labels = _check_labels(labels)
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
  return _finish([np.flatnonzero(group_ids == g) for g in groups], min_size, "natural")


_FUNCS = {"iid": iid, "dirichlet": dirichlet, "shards": shards,
          "label_skew": label_skew, "natural": natural}


def partition(labels, num_clients, scheme, seed, **kwargs):
  """Split sample indices over clients (DESIGN §7 public name).

  Args:
    labels: ``[N]`` integer class labels.
    num_clients: number of clients K.
    scheme: one of ``SCHEMES``.
    seed: integer seed; equal seeds give equal partitions.
    **kwargs: scheme options (``alpha``, ``shards_per_client``,
      ``classes_per_client``, ``group_ids``, ``min_size``, ...).
  Returns:
    list of K sorted int64 index arrays, pairwise disjoint.
  """
  if scheme not in _FUNCS:
    raise ValueError(f"scheme={scheme!r}: allowed values are {', '.join(SCHEMES)}")
  return _FUNCS[scheme](labels, num_clients, seed, **kwargs)


def class_counts(labels, parts, num_classes) -> np.ndarray:
  """``[K, C]`` per-client class histogram."""
  labels = np.asarray(labels)
  return np.stack([np.bincount(labels[p], minlength=num_classes) for p in parts])


def split_test_like_train(test_labels, train_counts, seed):
  """Per-client test splits that follow each client's own train class mix.

  For every class c the test samples of class c are shuffled and divided over
  clients in proportion to their train counts ``n_{k,c}`` (a client with no
  train samples of class c gets none of its test samples). This reproduces the
  FIRMA protocol of partitioning the test set with the same scheme as the train
  set (same Dirichlet proportions, same label-skew classes), for any scheme.

  Args:
    test_labels: ``[M]`` labels of the global test set.
    train_counts: ``[K, C]`` per-client train class counts.
  Returns:
    list of K index arrays into the test set, pairwise disjoint.
  """
  test_labels = np.asarray(test_labels)
  train_counts = np.asarray(train_counts, np.float64)
  num_clients, num_classes = train_counts.shape
  totals = train_counts.sum(axis=0)
  props = np.where(totals > 0, train_counts / np.where(totals > 0, totals, 1), 0).T
  rng = np.random.default_rng(seed)
  return [np.sort(p) for p in split_by_proportions(test_labels, props, rng)]


def split_iid(num_samples, num_clients, seed):
  """Random near-equal split of ``range(num_samples)`` (per-client IID test sets)."""
  rng = np.random.default_rng(seed)
  return [np.sort(p) for p in np.array_split(rng.permutation(num_samples), num_clients)]


__all__ = ["partition", "iid", "dirichlet", "shards", "label_skew", "natural",
           "label_skew_parts", "dirichlet_reference",
           "class_counts", "split_test_like_train", "split_iid", "SCHEMES",
           "dirichlet_proportions", "split_by_proportions"]
