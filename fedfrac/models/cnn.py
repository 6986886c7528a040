"""Convolutional models of the FedAvg literature (flax.linen, NHWC).

``CNNMnist`` and ``CNNCifar`` are the two small CNNs used by the FOFedAvg
experiments (the widely used FedAvg PyTorch reference models of the same names):

  CNNMnist: conv5x5(10) → maxpool2 → ReLU → conv5x5(20) → dropout → maxpool2 → ReLU
            → FC(50) → ReLU → dropout | head FC(C)
  CNNCifar: conv5x5(6) → ReLU → maxpool2 → conv5x5(16) → ReLU → maxpool2
            → FC(120) → ReLU → FC(84) → ReLU | head FC(C)

Convolutions use VALID padding as in the reference; ``padding="SAME"`` lets the
same layer stack run on small inputs (8×8 digits).

Two further models serve the Kuramoto-FedAvg experiments, whose paper names a
"4-layer CNN" (MNIST, Fashion-MNIST) and VGG-11 (CIFAR-10) without giving sizes;
the common FL versions are used:

  CNN4 (McMahan et al. 2017, "CNN"): conv5x5(32) → ReLU → maxpool2 → conv5x5(64)
            → ReLU → maxpool2 → FC(512) → ReLU | head FC(C)   (2 conv + 2 FC layers)
  VGG11:    VGG configuration "A" (Simonyan & Zisserman 2015) on 32×32 inputs:
            conv3x3 widths 64, M, 128, M, 256, 256, M, 512, 512, M, 512, 512, M
            (SAME padding, ReLU) → FC(512) → ReLU → FC(512) → ReLU | head FC(C),
            the CIFAR variant used by FedMA/FedNova. Without batch norm
            (``norm=None``; batch statistics do not fit FedAvg's averaging), or
            with GroupNorm(32 groups) after every convolution (``norm="group"``).
            No dropout.
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




class CNN4Extractor(nn.Module):
  """The 2-conv + 2-FC "CNN" of McMahan et al. (2017): ``[B, H, W, C] -> [B, 512]``.

  With ``padding="SAME"`` (as in the original) a 28×28 input gives 7·7·64 = 3136
  features before FC(512); ``"VALID"`` needs inputs of at least 12×12.
  """
  padding: str = "SAME"

  @nn.compact
  def __call__(self, x, train: bool = False):
    _check_spatial(x, self.padding, "cnn4", 12)
    x = max_pool_2x2(nn.relu(nn.Conv(32, (5, 5), padding=self.padding)(x)))
    x = max_pool_2x2(nn.relu(nn.Conv(64, (5, 5), padding=self.padding)(x)))
    x = x.reshape((x.shape[0], -1))
    return nn.relu(nn.Dense(512)(x))


VGG11_LAYERS = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")


class VGG11Extractor(nn.Module):
  """VGG-11 (configuration A) for 32×32 inputs: ``[B, 32, 32, C] -> [B, 512]``.

  ``norm``: ``None`` (no normalisation) or ``"group"`` (GroupNorm with
  ``num_groups`` groups after every convolution, before the ReLU).
  """
  norm: str | None = None
  num_groups: int = 32

  @nn.compact
  def __call__(self, x, train: bool = False):
    if min(x.shape[1], x.shape[2]) < 32:
      raise ValueError(
          f"model.name='vgg11' needs inputs of at least 32x32 (five 2x2 poolings), "
          f"got {x.shape[1]}x{x.shape[2]}")
    for layer in VGG11_LAYERS:
      if layer == "M":
        x = max_pool_2x2(x)
        continue
      x = nn.Conv(layer, (3, 3), padding="SAME")(x)
      if self.norm == "group":
        x = nn.GroupNorm(num_groups=self.num_groups)(x)
      x = nn.relu(x)
    x = x.reshape((x.shape[0], -1))
    x = nn.relu(nn.Dense(512)(x))
    return nn.relu(nn.Dense(512)(x))
