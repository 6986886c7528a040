"""Fully connected models (flax.linen), split into extractor and head."""
from __future__ import annotations

from typing import Sequence

import flax.linen as nn

from fedfrac.models.torch_init import dense_inits


class MLPExtractor(nn.Module):
  """Flatten, then Dense+ReLU layers of the given widths: ``[B, ...] -> [B, hidden[-1]]``
  (``init="torch"``: torch's Linear initialisation, :mod:`fedfrac.models.torch_init`)."""
  hidden: Sequence[int] = (200, 200)
  init: str = "flax"

  @nn.compact
  def __call__(self, x, train: bool = False):
    x = x.reshape((x.shape[0], -1))
    for width in self.hidden:
      x = nn.relu(nn.Dense(width, **dense_inits(self.init, x.shape[-1]))(x))
    return x


class FirmaExtractor(nn.Module):
  """FIRMA §6.1 extractor: FC(d→256)–LN–ReLU–FC(256→256)–LN–ReLU–FC(256→128)–ReLU."""
  widths: Sequence[int] = (256, 256, 128)

  @nn.compact
  def __call__(self, x, train: bool = False):
    x = x.reshape((x.shape[0], -1))
    for width in self.widths[:-1]:
      x = nn.relu(nn.LayerNorm()(nn.Dense(width)(x)))
    return nn.relu(nn.Dense(self.widths[-1])(x))


class LinearHead(nn.Module):
  """Dense head: ``[B, F] -> [B, num_outputs]`` (``init="torch"``: torch's Linear)."""
  num_outputs: int
  init: str = "flax"

  @nn.compact
  def __call__(self, x):
    return nn.Dense(self.num_outputs, **dense_inits(self.init, x.shape[-1]))(x)


class Identity(nn.Module):
  """An empty extractor (multinomial logistic regression = Identity + LinearHead)."""

  @nn.compact
  def __call__(self, x, train: bool = False):
    return x.reshape((x.shape[0], -1))


