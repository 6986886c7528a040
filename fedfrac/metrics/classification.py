"""Classification metrics (host-side NumPy)."""
from __future__ import annotations

import numpy as np


def accuracy(logits, labels) -> float:
  """Share of rows of ``logits [N, C]`` whose argmax equals ``labels [N]``."""
  return float(np.mean(np.argmax(np.asarray(logits), -1) == np.asarray(labels)))
