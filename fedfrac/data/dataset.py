"""The :class:`Dataset` every source returns (re-exported by
:mod:`fedfrac.data.sources`)."""
from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np


@dataclasses.dataclass(frozen=True)
class Dataset:
  """A centralised dataset before federation.

  Attributes:
    name: source name.
    x_train: ``[N, ...]`` inputs (float32, or uint8 with ``input_scale``).
    y_train: ``[N]`` int32 class labels (float32 targets for regression).
    x_test, y_test: the global test set, same layout.
    num_classes: number of classes (0 for regression).
    task: ``"classification"`` or ``"regression"``.
    input_scale: models multiply inputs by this (``1/255`` for uint8 images).
    train_groups, test_groups: optional ``[N]`` / ``[M]`` natural client ids
      (FedProx synthetic users, vehicles); used by the ``natural`` partition.
  """
  name: str
  x_train: np.ndarray
  y_train: np.ndarray
  x_test: np.ndarray
  y_test: np.ndarray
  num_classes: int
  task: str = "classification"
  input_scale: float = 1.0
  train_groups: Optional[np.ndarray] = None
  test_groups: Optional[np.ndarray] = None

  @property
  def input_shape(self) -> tuple[int, ...]:
    return tuple(self.x_train.shape[1:])
