"""Building a federated dataset from a config: the partition of the train set
over clients (:mod:`fedfrac.data.partition`), each client's test split, the
BEV fleet's clients, and a validation split carved from each client's train
rows. The data structure is :class:`~fedfrac.data.federated_data.FederatedData`
(re-exported here with its index tables).
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import TYPE_CHECKING, Any, Optional, Sequence

import numpy as np

import importlib
partition_lib = importlib.import_module("fedfrac.data.partition")
from fedfrac._validation import ConfigError  # noqa: E402
from fedfrac.data import sources  # noqa: E402
from fedfrac.data import dataset as dataset_mod  # noqa: E402
from fedfrac.data.federated_data import (  # noqa: E402,F401  (re-exported)
    DataInfo, FederatedData, index_table, pad_tables)

if TYPE_CHECKING:
  from ml_collections import ConfigDict

  from fedfrac.data.bev import BEVData


def federate(dataset: dataset_mod.Dataset, train_parts: Sequence[np.ndarray],
             test_parts: Sequence[np.ndarray]) -> FederatedData:
  """Assemble :class:`FederatedData` from a dataset and per-client index lists."""
  client_index, client_size = index_table(train_parts)
  test_index, test_size = index_table(test_parts)
  if dataset.task == "classification":
    counts = partition_lib.class_counts(dataset.y_train, train_parts, dataset.num_classes)
  else:
    counts = np.zeros((len(train_parts), 0), np.int64)
  return FederatedData(
      name=dataset.name, task=dataset.task, num_classes=dataset.num_classes,
      input_scale=dataset.input_scale, x_train=dataset.x_train,
      y_train=dataset.y_train, client_index=client_index, client_size=client_size,
      x_test=dataset.x_test, y_test=dataset.y_test, client_test_index=test_index,
      client_test_size=test_size, class_counts=counts)


def federate_bev(bev_data: BEVData, eval_split: str = "test",
                 input_clip: float = 0.0) -> FederatedData:
  """Vehicles as clients: BEV windows -> :class:`FederatedData` (natural partition).

  Client k is vehicle k: its train rows are its train windows, its per-client test
  split its test windows (the global test set is the union over vehicles), its
  validation rows its validation windows. Inputs and labels are standardised per
  vehicle by that vehicle's TRAIN statistics only
  (:meth:`fedfrac.data.bev.BEVData.normalized`); models train on the normalised
  labels. For evaluation in physical units (Wh per window) every test/val sample
  carries its vehicle's label scale and center (``y_test_scale``,
  ``y_test_center``), so the engine inverts the normalisation per sample inside
  its jitted evaluation: ``ŷ_phys = ŷ · s + c`` and ``ŷ_phys − y_phys = (ŷ − y) · s``.

  Args:
    bev_data: :class:`fedfrac.data.bev.BEVData` in physical units (or normalised).
    eval_split: ``"test"`` (default) or ``"val"``: the split placed in the test
      slot the engine evaluates (``"val"`` for tuning / early stopping; the test
      split then stays untouched in ``meta["bev"]``).
    input_clip: if > 0, normalised inputs are clipped to ``[-input_clip,
      input_clip]`` (winsorising: a feature that barely varies in a vehicle's
      train trips, e.g. outside temperature, has a tiny IQR, so other trips can
      map to tens of IQRs and a model extrapolates wildly). 0 = no clipping.
  Returns:
    :class:`FederatedData` with ``task="regression"``, ``x [N, L, F]``, ``y [N]``
    float32 (normalised), ``client_group [K]`` the vehicle classes.
  """
  if eval_split not in ("test", "val"):
    raise ValueError(f"data.bev.eval_split={eval_split!r}: allowed values are 'test', "
                     f"'val'")
  nb = bev_data if bev_data.is_normalized else bev_data.normalized()
  if not input_clip >= 0:
    raise ValueError(f"data.bev.input_clip={input_clip!r}: must be >= 0 (0 = off)")
  if input_clip > 0:
    nb = dataclasses.replace(nb, **{f"x_{s}": np.clip(getattr(nb, f"x_{s}"), -input_clip,
                                                      input_clip) for s in
                                    ("train", "val", "test")})
  k = nb.num_clients
  yc, ys = (np.asarray(a, np.float32) for a in nb.y_norm_stats)

  def parts(client_ids):
    return [np.flatnonzero(client_ids == i) for i in range(k)]

  train_parts = parts(nb.client_train)
  if not any(len(p) for p in train_parts):
    raise ValueError("BEV data has no train windows; lower data.bev.window or add "
                     "trips")
  eval_name = eval_split
  x_ev, y_ev, c_ev = nb.split(eval_name)
  if len(y_ev) == 0:
    raise ValueError(f"data.bev.eval_split={eval_split!r}: the {eval_name} split is "
                     f"empty (data.bev.fractions gives it no trips)")
  ev_index, ev_size = index_table(parts(c_ev))
  val_index, val_size = index_table(parts(nb.client_val))
  client_index, client_size = index_table(train_parts)
  return FederatedData(
      name=str(nb.meta.get("source", "bev")), task="regression", num_classes=0,
      input_scale=1.0, x_train=nb.x_train, y_train=nb.y_train,
      client_index=client_index, client_size=client_size, x_test=x_ev, y_test=y_ev,
      client_test_index=ev_index, client_test_size=ev_size,
      class_counts=np.zeros((k, 0), np.int64),
      y_test_scale=ys[c_ev], y_test_center=yc[c_ev],
      x_val=nb.x_val, y_val=nb.y_val, client_val_index=val_index,
      client_val_size=val_size, y_val_scale=ys[nb.client_val],
      y_val_center=yc[nb.client_val], client_group=np.asarray(nb.vehicle_class),
      meta={"bev": nb, "eval_split": eval_name,
            "source": nb.meta.get("source", "bev")})


# data.<key> -> keyword of the partition function (same name unless mapped).
PARTITION_OPTIONS = {
    "iid": (),
    "dirichlet": ("alpha",),
    "shards": ("shards_per_client",),
    "shards_reference": ("shards_per_client",),
    "label_skew": ("classes_per_client", "min_client_size", "on_small",
                   ("label_skew_rule", "rule")),
    "pathological": (("pathological_level", "level"),),
    "natural": (),
}


def partition_kwargs(data_cfg: ConfigDict, scheme: str) -> dict[str, Any]:
  """The partition function's keyword arguments for ``scheme`` from ``data_cfg``."""
  kwargs = {}
  for entry in PARTITION_OPTIONS[scheme]:
    key, name = entry if isinstance(entry, tuple) else (entry, entry)
    if key in data_cfg:
      kwargs[name] = data_cfg[key]
  return kwargs


def reference_code_parts(dataset: dataset_mod.Dataset, data_cfg: ConfigDict, data_seed: int,
                         ) -> tuple[list[np.ndarray], list[np.ndarray]]:
  """Train and test client splits exactly as the FIRMA authors' code makes them.

  ``fibfl/data.py`` (``partition``) splits the train labels AND, independently,
  the test labels with the same scheme and seed (``iid``: permutation +
  ``array_split``; ``dirichlet``: :func:`~fedfrac.data.partition.dirichlet_reference`;
  ``label_skew``: :func:`~fedfrac.data.partition.label_skew_parts` with
  ``min_take=1``), so a client's Dirichlet test classes need not match its train
  classes. It then drops every client with fewer than ``min_client_size`` train
  samples (their code: fewer than one batch, 64) and keeps the FIRST as many test
  splits as clients remain (positional pairing: if a client other than the last
  ones is dropped, later clients are paired with a neighbour's test split; a
  warning says so). Returns ``(train_parts, test_parts)``.
  """
  scheme = data_cfg.partition
  n = data_cfg.num_clients

  def split(labels):
    labels = np.asarray(labels)
    if scheme == "iid":
      perm = np.random.default_rng(data_seed).permutation(labels.size)
      return [np.asarray(p, np.int64) for p in np.array_split(perm, n)]
    if scheme == "dirichlet":
      return partition_lib.dirichlet_reference(labels, n, data_seed, data_cfg.alpha,
                                               dataset.num_classes)
    if scheme == "label_skew":
      return partition_lib.label_skew_parts(labels, n, data_seed,
                                            data_cfg.classes_per_client, min_take=1)
    raise ValueError(f"data.partition={scheme!r}: data.compat='reference_code' "
                     f"supports 'iid', 'dirichlet', 'label_skew'")

  train_parts, test_parts = split(dataset.y_train), split(dataset.y_test)
  floor = max(int(data_cfg.get("min_client_size", 64)), 1)
  keep = [k for k, p in enumerate(train_parts) if len(p) >= floor]
  if not keep:
    raise ValueError(f"data.compat='reference_code': every client has fewer than "
                     f"min_client_size={floor} train samples")
  if len(keep) < n:
    dropped = sorted(set(range(n)) - set(keep))
    msg = (f"reference_code split: dropping clients {dropped} with fewer than "
           f"{floor} train samples")
    if keep != list(range(len(keep))):
      msg += ("; as in the authors' code the remaining clients take the first "
              f"{len(keep)} test splits, so some are paired with another client's")
    warnings.warn(msg)
  return [train_parts[k] for k in keep], test_parts[:len(keep)]


def check_test_groups(data_cfg: ConfigDict, dataset: Any) -> None:
  """Refuse your own data's ``test_groups`` with a natural partition and a
  ``test_split`` that would not use them: ``like_train`` / ``iid`` re-sample
  every client's test rows from the pooled test set, so each client would be
  evaluated on other users' rows, not on its own (one line, before any compute)."""
  if (getattr(dataset, "test_groups", None) is None
          or data_cfg.get("partition") != "natural"
          or data_cfg.get("test_split", "like_train") == "natural"):
    return
  raise ConfigError(
      f"config.data.test_split={data_cfg.test_split!r} with "
      f"config.data.partition='natural': data= has test_groups (each client's own "
      f"test rows), which this split ignores; set config.data.test_split='natural' "
      f"to evaluate each client on its own rows, or leave test_groups out")


def build(data_cfg: ConfigDict, seed: int,
          dataset: Optional[dataset_mod.Dataset] = None) -> FederatedData:
  """Config -> :class:`FederatedData`: load the source, partition, split the test set.

  ``data_cfg.partition`` picks the scheme; ``data_cfg.test_split`` picks how the
  global test set is divided into per-client test splits: ``"like_train"``
  (each client's own class mix, the FIRMA protocol), ``"iid"`` or ``"natural"``
  (the source's own per-client test data, e.g. FedProx synthetic).
  ``data_cfg.compat="reference_code"`` instead reproduces the FIRMA authors'
  pipeline (:func:`reference_code_parts`; digits split by one permutation).
  BEV sources (``synthetic_bev``, ``ved_csv``) need ``partition="natural"`` (one
  client per vehicle) and go through :func:`federate_bev`; ``test_split`` does
  not apply. ``dataset`` (your own arrays, :func:`fedfrac.data.arrays.user_data`)
  replaces ``data_cfg.source``.
  """
  data_seed = seed if data_cfg.get("seed", -1) < 0 else data_cfg.seed
  if dataset is None and data_cfg.source in sources.BEV_SOURCES:
    # Vehicles are the clients (natural partition); test/val are their own trips.
    if data_cfg.partition != "natural":
      raise ValueError(
          f"data.partition={data_cfg.partition!r}: source {data_cfg.source!r} has "
          f"one client per vehicle; set data.partition='natural'")
    return federate_bev(sources.load_bev(data_cfg, data_seed),
                        eval_split=data_cfg.bev.eval_split,
                        input_clip=data_cfg.bev.get("input_clip", 0.0))
  source = data_cfg.source if dataset is None else "data= (your arrays)"
  if dataset is None:
    dataset = sources.load(data_cfg, data_seed)
  else:
    check_test_groups(data_cfg, dataset)
  if data_cfg.get("compat", "paper") == "reference_code":
    train_parts, test_parts = reference_code_parts(dataset, data_cfg, data_seed)
    return with_validation(federate(dataset, train_parts, test_parts), data_cfg,
                           data_seed)
  scheme = data_cfg.partition
  kwargs = partition_kwargs(data_cfg, scheme)
  kwargs["min_size"] = data_cfg.min_size
  num_clients = data_cfg.num_clients
  if scheme == "natural":
    if dataset.train_groups is None:
      raise ValueError(
          f"data.partition='natural': source {source!r} has no natural "
          f"client ids; use iid, dirichlet, shards or label_skew")
    kwargs["group_ids"] = dataset.train_groups
  train_parts = partition_lib.partition(dataset.y_train if dataset.task == "classification"
                                        else np.zeros(len(dataset.y_train), np.int32),
                                        num_clients, scheme, data_seed, **kwargs)
  test_mode = data_cfg.test_split
  if test_mode == "natural":
    if dataset.test_groups is None:
      raise ValueError(
          f"data.test_split='natural': source {source!r} has no per-client "
          f"test data; use 'like_train' or 'iid'")
    test_parts = [np.flatnonzero(dataset.test_groups == g)
                  for g in np.unique(np.asarray(dataset.train_groups))]
  elif test_mode == "iid" or dataset.task != "classification":
    test_parts = partition_lib.split_iid(len(dataset.y_test), len(train_parts),
                                         data_seed + 1)
  else:
    counts = partition_lib.class_counts(dataset.y_train, train_parts, dataset.num_classes)
    test_parts = partition_lib.split_test_like_train(dataset.y_test, counts, data_seed + 1)
  return with_validation(federate(dataset, train_parts, test_parts), data_cfg, data_seed)


def carve_validation(fed: FederatedData, fraction: float, seed: int,
                     eval_split: str = "test") -> FederatedData:
  """Split each client's train rows into train and validation (for tuning).

  Client k keeps ``size_k − v_k`` rows for training and moves ``v_k`` rows, drawn
  with ``seed``, to its validation split: ``v_k`` is ``fraction · size_k`` rounded
  by largest remainder so that Σ v_k = round(fraction · Σ size_k) exactly (the
  validation set has the same size for every seed, so seeds batch together), and
  at most ``size_k − 1`` (``x_val`` = those rows, ``client_val_index``
  their positions; class counts are recounted on what stays). The same seed
  gives the same split whatever ``eval_split`` is, so a tuning run on ``"val"``
  and the final run on ``"test"`` train on identical rows. ``eval_split="val"``
  places the validation split in the test slot the engine evaluates (the test
  set is then never seen); ``"test"`` keeps the test set there.
  """
  if not 0.0 < fraction < 1.0:
    raise ValueError(f"data.validation_fraction={fraction!r}: must be in (0, 1) "
                     f"to carve a validation split (0 = none)")
  if eval_split not in ("test", "val"):
    raise ValueError(f"data.eval_split={eval_split!r}: allowed values are 'test', 'val'")
  rng = np.random.default_rng([int(seed), 7])
  sizes = fed.client_size.astype(np.int64)
  quota = fraction * sizes
  counts_v = np.floor(quota).astype(np.int64)
  extra = int(round(fraction * sizes.sum())) - int(counts_v.sum())
  order = np.argsort(-(quota - counts_v), kind="stable")
  counts_v[order[:max(extra, 0)]] += 1
  counts_v = np.minimum(counts_v, np.maximum(sizes - 1, 0))
  train_parts, val_rows = [], []
  for k in range(fed.num_clients):
    rows = fed.client_index[k, :fed.client_size[k]]
    rows = rows[rng.permutation(rows.size)]
    v = int(counts_v[k])
    val_rows.append(np.sort(rows[:v]))
    train_parts.append(np.sort(rows[v:]))
  offsets = np.cumsum([0] + [r.size for r in val_rows])
  val_parts = [np.arange(offsets[k], offsets[k + 1]) for k in range(fed.num_clients)]
  all_val = np.concatenate(val_rows) if val_rows else np.zeros((0,), np.int64)
  x_val, y_val = fed.x_train[all_val], fed.y_train[all_val]
  client_index, client_size = index_table(train_parts)
  val_index, val_size = index_table(val_parts)
  counts = (partition_lib.class_counts(fed.y_train, train_parts, fed.num_classes)
            if fed.task == "classification" else fed.class_counts)
  out = dataclasses.replace(fed, client_index=client_index, client_size=client_size,
                            class_counts=counts, x_val=x_val, y_val=y_val,
                            client_val_index=val_index, client_val_size=val_size,
                            meta=dict(fed.meta, eval_split=eval_split))
  if eval_split == "val":
    out = dataclasses.replace(out, x_test=x_val, y_test=y_val,
                              client_test_index=val_index, client_test_size=val_size,
                              y_test_scale=None, y_test_center=None)
  return out


def with_validation(fed: FederatedData, data_cfg: ConfigDict, data_seed: int) -> FederatedData:
  """``fed`` with the validation split of ``data.validation_fraction`` (0 = none,
  ``fed`` unchanged) evaluated per ``data.eval_split``."""
  fraction = data_cfg.get("validation_fraction", 0.0)
  eval_split = data_cfg.get("eval_split", "test")
  if not fraction:
    if eval_split != "test":
      raise ValueError(f"data.eval_split={eval_split!r}: needs "
                       f"data.validation_fraction > 0")
    return fed
  return carve_validation(fed, float(fraction), data_seed, eval_split)
