"""FederatedData: flat arrays plus per-client index tables (docs/design.md §2.2).

Client data is stored once (``x_train [N, ...]``, ``y_train [N]``); client k owns
rows ``client_index[k, :client_size[k]]``. The table is padded to ``n_max`` with
the client's own first index so every entry is a valid row; padded entries are
masked by the engine. The same layout holds per-client test splits as indices into
the global test set.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple, Optional, Sequence

import numpy as np


class DataInfo(NamedTuple):
  """Static, host-side facts an algorithm may use at ``init``."""
  num_clients: int
  num_classes: int
  input_shape: tuple
  client_size: np.ndarray      # [K] train samples per client
  class_counts: np.ndarray     # [K, C] train class histogram (zeros for regression)
  task: str


@dataclasses.dataclass(frozen=True)
class FederatedData:
  """A federated dataset.

  Attributes:
    x_train: ``[N, ...]``; y_train: ``[N]``.
    client_index: ``[K, n_max]`` int32 rows of the train arrays per client.
    client_size: ``[K]`` int32 number of valid entries per row.
    x_test, y_test: global test set ``[M, ...]``, ``[M]``.
    client_test_index: ``[K, m_max]`` int32 indices into the test set.
    client_test_size: ``[K]`` int32 (may be 0 for a client with no test data).
    class_counts: ``[K, C]`` train class histogram.
    y_test_scale, y_test_center: optional ``[M]`` float32 per-test-sample inverse
      of the label normalisation, ``y_phys = y · scale + center`` (BEV sources:
      the scale/center of the sample's own vehicle, fitted on that vehicle's
      train split). ``None`` means the labels are already in physical units.
    x_val, y_val, client_val_index, client_val_size, y_val_scale, y_val_center:
      optional validation split in the same layout (BEV sources: each vehicle's
      validation trips), for early stopping and tuning; the engine does not read
      it (set ``data.bev.eval_split="val"`` to evaluate on it instead of test).
    client_group: optional ``[K]`` str group of each client (BEV: vehicle class).
    meta: source details (BEV: ``"bev"`` holds the normalised
      :class:`fedfrac.data.bev.BEVData`, ``"eval_split"`` the evaluated split).
  """
  name: str
  task: str
  num_classes: int
  input_scale: float
  x_train: np.ndarray
  y_train: np.ndarray
  client_index: np.ndarray
  client_size: np.ndarray
  x_test: np.ndarray
  y_test: np.ndarray
  client_test_index: np.ndarray
  client_test_size: np.ndarray
  class_counts: np.ndarray
  y_test_scale: Optional[np.ndarray] = None
  y_test_center: Optional[np.ndarray] = None
  x_val: Optional[np.ndarray] = None
  y_val: Optional[np.ndarray] = None
  client_val_index: Optional[np.ndarray] = None
  client_val_size: Optional[np.ndarray] = None
  y_val_scale: Optional[np.ndarray] = None
  y_val_center: Optional[np.ndarray] = None
  client_group: Optional[np.ndarray] = None
  meta: dict = dataclasses.field(default_factory=dict)

  @property
  def num_clients(self) -> int:
    return int(self.client_size.shape[0])

  @property
  def input_shape(self) -> tuple:
    return tuple(self.x_train.shape[1:])

  def info(self) -> DataInfo:
    return DataInfo(self.num_clients, self.num_classes, self.input_shape,
                    self.client_size.copy(), self.class_counts.copy(), self.task)

  def client_arrays(self, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Host copy of client k's train data (for reference loops and notebooks)."""
    idx = self.client_index[k, :self.client_size[k]]
    return self.x_train[idx], self.y_train[idx]

  def client_test_arrays(self, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Host copy of client k's test split ``(x [m_k, ...], y [m_k])``: what a
    personalised method's client ``k`` is evaluated on."""
    idx = self.client_test_index[k, :self.client_test_size[k]]
    return self.x_test[idx], self.y_test[idx]


def index_table(parts: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
  """Pad index lists into ``([K, n_max] int32, [K] int32)``.

  Padding repeats the row's first index (or 0 for an empty row).
  """
  sizes = np.asarray([len(p) for p in parts], np.int32)
  n_max = max(1, int(sizes.max()) if len(parts) else 1)
  table = np.zeros((len(parts), n_max), np.int32)
  for k, p in enumerate(parts):
    if len(p):
      table[k, :len(p)] = p
      table[k, len(p):] = p[0]
  return table, sizes


def pad_tables(fed: FederatedData, n_max: int, m_max: int) -> FederatedData:
  """The same data with index tables padded to widths ``n_max`` / ``m_max``
  (padding repeats each row's first index), so datasets with different client
  sizes share array shapes (one compiled program serves them all)."""
  def pad(table, width):
    if width < table.shape[1]:
      raise ValueError(f"pad_tables: width {width} is smaller than the table's "
                       f"{table.shape[1]}")
    return np.concatenate(
        [table, np.repeat(table[:, :1], width - table.shape[1], axis=1)], axis=1)
  return dataclasses.replace(fed, client_index=pad(fed.client_index, n_max),
                             client_test_index=pad(fed.client_test_index, m_max))
