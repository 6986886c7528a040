"""Seeded, deterministic partitioners: labels -> per-client index arrays.

Every scheme returns ``list[np.ndarray]`` (one sorted int64 index array per client)
whose union is a subset of ``range(len(labels))`` with no index in two clients, and
guarantees each client at least ``min_size`` samples — an impossible request raises
``ValueError`` instead of producing empty clients.

Schemes (docs/design.md §4):
  iid            uniform random split into near-equal parts.
  dirichlet      per class c, proportions over clients ~ Dir(alpha * 1_K).
  shards         sort by label, cut into K*s equal shards, deal s shards per client
                 without replacement (McMahan et al. 2017; Kuramoto-FedAvg).
  shards_reference  the Kuramoto-FedAvg authors' dealing: floor(s*K/C) shards per
                 class, a shuffled label list dealt s per client, their draws
                 (:mod:`fedfrac.data.shards_reference`).
  label_skew     FIRMA §3.5: K primary, K+1 secondary and 3 % minority classes per
                 client (``rule="paper"``, default) or the authors' greedy rule
                 (``rule="reference_code"``).
  pathological   the FOFedAvg appendix's mild / moderate / severe shard settings.
  natural        clients given by group ids (writer, vehicle, ...).


The schemes live in :mod:`fedfrac.data.partition_schemes` (IID, Dirichlet,
shards, natural), :mod:`fedfrac.data.label_skew` (label skew, pathological) and
:mod:`fedfrac.data.shards_reference`; this module dispatches by name
(:func:`partition`), counts classes and splits the test set, and re-exports them.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from fedfrac.data.label_skew import (  # noqa: F401  (re-exported)
    LABEL_SKEW_RULES, PATHOLOGICAL_LEVELS, label_skew, label_skew_paper_parts,
    label_skew_parts, label_skew_roles, label_skew_target_mix, pathological)
from fedfrac.data.partition_schemes import (  # noqa: F401  (re-exported)
    SCHEME_DESCRIPTIONS, SCHEMES, Parts, check_class_labels, check_seed, dirichlet,
    dirichlet_proportions, dirichlet_reference, iid, natural, shards, split_by_proportions)
from fedfrac.data.shards_reference import shards_reference

_FUNCS: dict[str, Callable[..., Any]] = {
    "iid": iid, "dirichlet": dirichlet, "shards": shards, "label_skew": label_skew,
    "pathological": pathological, "natural": natural, "shards_reference": shards_reference}


def partition(labels: ArrayLike, num_clients: int, scheme: str, seed: int,
              **kwargs: Any) -> Parts:
  """Split sample indices over clients (docs/design.md §7 public name).

  Args:
    labels: ``[N]`` integer class labels.
    num_clients: number of clients K.
    scheme: one of ``SCHEMES``.
    seed: integer seed; equal seeds give equal partitions.
    **kwargs: scheme options (``alpha``, ``shards_per_client``,
      ``classes_per_client``, ``rule``, ``level``, ``group_ids``, ``min_size``, ...).
  Returns:
    list of K sorted int64 index arrays, pairwise disjoint.
  """
  if scheme not in _FUNCS:
    raise ValueError(f"scheme={scheme!r}: allowed values are {', '.join(SCHEMES)}")
  check_seed(seed)
  if scheme in ("dirichlet", "shards", "label_skew"):
    labels = check_class_labels(labels)
  return _FUNCS[scheme](labels, num_clients, seed, **kwargs)


def class_counts(labels: ArrayLike, parts: Sequence[np.ndarray],
                 num_classes: int) -> np.ndarray:
  """``[K, C]`` per-client class histogram of integer ``labels`` in
  ``0..num_classes-1`` (``parts``: one index array per client); labels outside
  that range are refused in one line (``ValueError``), not counted in extra
  columns."""
  labels = np.asarray(labels)
  if labels.size and not np.issubdtype(labels.dtype, np.integer):
    raise ValueError(f"class_counts: labels have dtype {labels.dtype}; expected integer "
                     f"class labels 0..{int(num_classes) - 1}")
  used = np.concatenate([np.asarray(p, np.int64).reshape(-1) for p in parts]) if len(
      parts) else np.zeros(0, np.int64)
  if used.size:
    lo, hi = int(labels[used].min()), int(labels[used].max())
    if lo < 0 or hi >= num_classes:
      raise ValueError(f"class_counts: labels span {lo}..{hi}; expected class labels in "
                       f"0..{int(num_classes) - 1} (num_classes={num_classes})")
  return np.stack([np.bincount(labels[p], minlength=num_classes) for p in parts])


def split_test_like_train(test_labels: ArrayLike, train_counts: np.ndarray, seed: int) -> Parts:
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


def split_iid(num_samples: int, num_clients: int, seed: int) -> Parts:
  """Random near-equal split of ``range(num_samples)`` (per-client IID test sets)."""
  rng = np.random.default_rng(seed)
  return [np.sort(p) for p in np.array_split(rng.permutation(num_samples), num_clients)]


__all__ = ["partition", "iid", "dirichlet", "shards", "shards_reference", "label_skew",
           "pathological",
           "natural", "label_skew_parts", "label_skew_paper_parts", "label_skew_roles",
           "label_skew_target_mix", "dirichlet_reference", "LABEL_SKEW_RULES",
           "PATHOLOGICAL_LEVELS",
           "class_counts", "split_test_like_train", "split_iid", "SCHEMES",
           "dirichlet_proportions", "split_by_proportions"]
