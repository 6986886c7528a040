"""Convolutional models of the FedAvg literature (flax.linen, NHWC).

``CNNMnist`` and ``CNNCifar`` are the two small CNNs used by the FOFedAvg
experiments (the widely used FedAvg PyTorch reference models of the same names):

  CNNMnist: conv5x5(10) → maxpool2 → ReLU → conv5x5(20) → dropout → maxpool2 → ReLU
            → FC(50) → ReLU → dropout | head FC(C)
  CNNCifar: conv5x5(6) → ReLU → maxpool2 → conv5x5(16) → ReLU → maxpool2
            → FC(120) → ReLU → FC(84) → ReLU | head FC(C)

Convolutions use VALID padding as in the reference; ``padding="SAME"`` lets the
same layer stack run on small inputs (8×8 digits).
"""
from __future__ import annotations

import flax.linen as nn


def max_pool_2x2(x):
  """2×2 max pooling, stride 2, floor mode: ``[B, H, W, C] -> [B, H//2, W//2, C]``.

  Written as a reshape + max, which differentiates to a cheap select on every
  backend (the windowed-reduction gradient is slow on XLA:CPU).
  """
  b, h, w, c = x.shape
  x = x[:, :h - h % 2, :w - w % 2, :]
  return x.reshape(b, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))


def _check_spatial(x, padding, name, min_hw):
  if padding == "VALID" and min(x.shape[1], x.shape[2]) < min_hw:
    raise ValueError(
        f"model.name={name!r} with padding='VALID' needs inputs of at least "
        f"{min_hw}x{min_hw}, got {x.shape[1]}x{x.shape[2]}; set "
        f"--config.model.padding=SAME")


class CNNMnistExtractor(nn.Module):
  padding: str = "VALID"
  dropout: float = 0.5

  @nn.compact
  def __call__(self, x, train: bool = False):
    _check_spatial(x, self.padding, "cnn_mnist", 12)
    x = nn.relu(max_pool_2x2(nn.Conv(10, (5, 5), padding=self.padding)(x)))
    x = nn.Conv(20, (5, 5), padding=self.padding)(x)
    # Dropout2d: drops whole channels.
    x = nn.Dropout(self.dropout, broadcast_dims=(1, 2), deterministic=not train)(x)
    x = nn.relu(max_pool_2x2(x))
    x = x.reshape((x.shape[0], -1))
    x = nn.relu(nn.Dense(50)(x))
    return nn.Dropout(self.dropout, deterministic=not train)(x)


class CNNCifarExtractor(nn.Module):
  padding: str = "VALID"

  @nn.compact
  def __call__(self, x, train: bool = False):
    _check_spatial(x, self.padding, "cnn_cifar", 16)
    x = max_pool_2x2(nn.relu(nn.Conv(6, (5, 5), padding=self.padding)(x)))
    x = max_pool_2x2(nn.relu(nn.Conv(16, (5, 5), padding=self.padding)(x)))
    x = x.reshape((x.shape[0], -1))
    x = nn.relu(nn.Dense(120)(x))
    return nn.relu(nn.Dense(84)(x))


