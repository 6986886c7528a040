"""Window regression models for BEV energy (flax.linen) and masked regression losses.

Every model maps a window ``x [B, L, F]`` to a scalar prediction ``[B]`` and has two
submodules named ``extractor`` and ``head``, so its params are
``{"extractor": ..., "head": ...}`` (FedRep/FIRMA-style methods share only the
extractor). ``train`` is accepted for a uniform call signature (no dropout here);
``return_features=True`` also returns the extractor output ``[B, H]``.
"""
from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax.numpy as jnp

from fedfrac.models.mlp import MLPExtractor


class RecurrentExtractor(nn.Module):
  """One recurrent layer over time; last hidden state: ``[B, L, F] -> [B, hidden]``."""
  hidden: int = 64
  cell: str = "gru"

  @nn.compact
  def __call__(self, x, train: bool = False):
    if self.cell == "gru":
      cell = nn.GRUCell(features=self.hidden)
    elif self.cell == "lstm":
      cell = nn.OptimizedLSTMCell(features=self.hidden)
    else:
      raise ValueError(f"cell must be 'gru' or 'lstm', got {self.cell!r}")
    outputs = nn.RNN(cell)(x)  # [B, L, hidden]
    return outputs[:, -1]


class ScalarHead(nn.Module):
  """Linear head to one output: ``[B, H] -> [B]``."""

  @nn.compact
  def __call__(self, h):
    return nn.Dense(1)(h)[..., 0]


class _SplitRegressor(nn.Module):
  """Shared ``head(extractor(x))`` call; subclasses define ``setup``."""

  def __call__(self, x, train: bool = False, return_features: bool = False):
    features = self.extractor(x, train=train)
    out = self.head(features)
    return (out, features) if return_features else out


class WindowMLP(_SplitRegressor):
  """MLP on the flattened window: ``[B, L, F] -> [B]``."""
  hidden: Sequence[int] = (128, 64)

  def setup(self):
    self.extractor = MLPExtractor(hidden=tuple(self.hidden))
    self.head = ScalarHead()


class WindowGRU(_SplitRegressor):
  """GRU over time, linear head on the last hidden state: ``[B, L, F] -> [B]``."""
  hidden: int = 64

  def setup(self):
    self.extractor = RecurrentExtractor(hidden=self.hidden, cell="gru")
    self.head = ScalarHead()


class WindowLSTM(_SplitRegressor):
  """LSTM over time, linear head on the last hidden state: ``[B, L, F] -> [B]``."""
  hidden: int = 64

  def setup(self):
    self.extractor = RecurrentExtractor(hidden=self.hidden, cell="lstm")
    self.head = ScalarHead()


def _masked_mean(values, mask):
  """Σ m·v / max(Σ m, 1); masked entries may hold anything (even NaN)."""
  if mask is None:
    return jnp.mean(values)
  m = jnp.asarray(mask).astype(values.dtype).reshape(values.shape)
  v = jnp.where(m > 0, values, 0.0)
  return jnp.sum(v * m) / jnp.maximum(jnp.sum(m), 1.0)


def mse_loss(pred, y, mask=None):
  """Masked mean squared error. ``pred, y [B]``, ``mask [B]`` (0/1 or bool) -> scalar."""
  pred = jnp.asarray(pred)
  err = pred - jnp.asarray(y, pred.dtype)
  if mask is not None:
    err = jnp.where(jnp.asarray(mask, bool).reshape(err.shape), err, 0.0)
  return _masked_mean(err * err, mask)


def huber_loss(pred, y, mask=None, delta: float = 1.0):
  """Masked mean Huber loss: ½e² for |e| ≤ δ, δ(|e| − ½δ) beyond. -> scalar."""
  if isinstance(delta, (int, float)) and not delta > 0:
    raise ValueError(f"delta must be > 0, got {delta!r}")
  pred = jnp.asarray(pred)
  err = pred - jnp.asarray(y, pred.dtype)
  if mask is not None:
    err = jnp.where(jnp.asarray(mask, bool).reshape(err.shape), err, 0.0)
  a = jnp.abs(err)
  quad = jnp.minimum(a, delta)
  return _masked_mean(0.5 * quad * quad + delta * (a - quad), mask)
