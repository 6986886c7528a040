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

Convolutions are :class:`Conv2D` layers (parameters named and initialised exactly
as ``flax.linen.Conv``), computed as im2col matmuls on CPU and GPU and as XLA
convolutions elsewhere (``conv_impl``). On XLA:CPU the im2col form is several
times faster inside the engine's loops: the weight-gradient convolution of
``lax.conv_general_dilated`` is emitted with non-canonical dimension labels in a
while-loop body and runs as a slow generic loop nest, and a convolution vmapped
over per-client weights becomes a grouped convolution; im2col turns all of it
into (batched) matmuls.
"""
from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import lax

from fedfrac.models.torch_init import conv_inits, dense_inits

CONV_IMPLS = ("auto", "im2col", "xla")
# What ``auto`` runs on each backend (``jax.default_backend()``). CPU: im2col, several
# times faster inside the engine's loops (benchmarks/results.md and the module
# docstring). GPU: im2col, faster forward + backward under vmap for all three CNNs
# on an H200 (benchmarks/results_h200.md, "Convolution forms under vmap", 10
# clients x 50: CNNMnist 0.51 against 1.44 ms, CNN4 1.81 against 2.07, CNNCifar
# 0.94 against 1.38). Other backends keep XLA's convolutions until a conv-forms
# table measured there (``fedfrac-bench convs``) says otherwise; a backend not
# listed runs ``xla``.
AUTO_CONV_IMPL = {"cpu": "im2col", "gpu": "im2col", "tpu": "xla"}


def resolve_conv_impl(impl: str, backend: str | None = None) -> str:
  """``auto`` -> :data:`AUTO_CONV_IMPL` of ``backend`` (default: JAX's default
  backend); ``im2col`` and ``xla`` as given."""
  if impl not in CONV_IMPLS:
    raise ValueError(f"model.conv_impl={impl!r}: allowed values are "
                     f"{', '.join(CONV_IMPLS)}")
  if impl == "auto":
    return AUTO_CONV_IMPL.get(backend or jax.default_backend(), "xla")
  return impl


def _pad(x, kernel_size, padding):
  """``x [B, H, W, C]`` padded for a stride-1 convolution (``padding`` as in lax)."""
  if isinstance(padding, str):
    pads = lax.padtype_to_pads(x.shape[1:3], tuple(kernel_size), (1, 1), padding)
  else:
    pads = tuple(padding)
  if any(lo or hi for lo, hi in pads):
    x = jnp.pad(x, ((0, 0),) + tuple(pads) + ((0, 0),))
  return x


def _shifted_windows(x, kernel_size):
  """The kh·kw shifted ``[B, OH, OW, C]`` windows of a padded ``x``, row-major taps."""
  kh, kw = kernel_size
  oh, ow = x.shape[1] - kh + 1, x.shape[2] - kw + 1
  return [x[:, i:i + oh, j:j + ow, :] for i in range(kh) for j in range(kw)]


def im2col(x, kernel_size, padding):
  """Patches of ``x [B, H, W, C]`` -> ``[B, OH, OW, kh·kw·C]`` (stride 1).

  The last axis is ordered (kh, kw, C), matching ``kernel.reshape(-1, C_out)``
  of an HWIO kernel. Built as one stack of kw taps per kernel row, then a stack
  of the kh rows: the same array as one stack of all kh·kw taps (tested bit for
  bit), but XLA:CPU emits it as one fusion, one pass over the patches, where
  one stack of 25 slices became 25 slice kernels and a concatenate that copied
  their 40 MB again (CNN4's second layer; docs/design.md §2.5).
  """
  kh, kw = kernel_size
  taps = _shifted_windows(_pad(x, kernel_size, padding), kernel_size)
  b, oh, ow, c = taps[0].shape
  rows = [jnp.stack(taps[i * kw:(i + 1) * kw], axis=3) for i in range(kh)]
  return jnp.stack(rows, axis=3).reshape(b, oh, ow, kh * kw * c)


@jax.custom_vjp
def _patch_matmul(cols, w):
  """``cols [M, K] @ w [K, N]`` (im2col patches times the flattened kernel), whose
  kernel gradient XLA:CPU computes at twice the speed of autodiff's form.

  Autodiff's kernel gradient is ``colsᵀ g`` with the transpose folded into the
  product, ``[K, N]`` contracting the long M axis of both operands; XLA:CPU runs
  that product at about 40 GFLOP/s on CNN4's second layer (M = 12,544, K = 800).
  Here it is ``(gᵀ cols)ᵀ``, the ``[N, K]`` product, fenced by an optimization
  barrier so the algebraic simplifier cannot fold the transpose back. The same
  sums in another order: gradients agree to float rounding.
  """
  return cols @ w


def _patch_matmul_fwd(cols, w):
  return cols @ w, (cols, w)


def _patch_matmul_bwd(res, g):
  cols, w = res
  dw_t = lax.optimization_barrier(lax.dot_general(g, cols, (((0,), (0,)), ((), ()))))
  return g @ w.T, dw_t.T


_patch_matmul.defvjp(_patch_matmul_fwd, _patch_matmul_bwd)


def conv2d(x, kernel, padding, impl="auto"):
  """Stride-1 2-D convolution, NHWC input and HWIO kernel -> ``[B, OH, OW, O]``."""
  if resolve_conv_impl(impl) == "im2col":
    kh, kw, ci, co = kernel.shape
    if ci == 1:
      # One input channel: build the patches tap-major, ``[kh·kw, B·OH·OW]``
      # (each tap one contiguous shifted copy), instead of interleaving 25
      # single floats per pixel; the product contracts the leading axis.
      taps = _shifted_windows(_pad(x, (kh, kw), padding), (kh, kw))
      b, oh, ow, _ = taps[0].shape
      cols = jnp.stack(taps, axis=0).reshape(kh * kw, b * oh * ow)
      out = lax.dot_general(cols, kernel.reshape(kh * kw, co), (((0,), (0,)), ((), ())))
      return out.reshape(b, oh, ow, co)
    cols = im2col(x, (kh, kw), padding)
    b, oh, ow, k = cols.shape
    out = _patch_matmul(cols.reshape(b * oh * ow, k), kernel.reshape(k, co))
    return out.reshape(b, oh, ow, co)
  return lax.conv_general_dilated(x, kernel, (1, 1), padding,
                                  dimension_numbers=("NHWC", "HWIO", "NHWC"))


class Conv2D(nn.Module):
  """A stride-1 convolution with ``flax.linen.Conv``'s parameters (``kernel``
  ``[kh, kw, C_in, C_out]`` lecun-normal, ``bias`` zeros), so a model's params
  are the same whichever ``impl`` computes it. ``init="torch"``: torch's Conv2d
  initialisation instead (with ``vgg``, the authors' VGG re-initialisation;
  :mod:`fedfrac.models.torch_init`)."""
  features: int
  kernel_size: Sequence[int] = (5, 5)
  padding: str = "VALID"
  impl: str = "auto"
  init: str = "flax"
  vgg: bool = False

  @nn.compact
  def __call__(self, x):
    shape = tuple(self.kernel_size) + (x.shape[-1], self.features)
    kernel_init, bias_init = conv_inits(self.init, shape, self.vgg)
    kernel = self.param("kernel", kernel_init, shape, jnp.float32)
    bias = self.param("bias", bias_init, (self.features,), jnp.float32)
    return conv2d(x, kernel, self.padding, self.impl) + bias


def _pool_windows(x):
  """The four corners of every 2×2 window: 4 × ``[B, H//2, W//2, C]``."""
  return (x[:, 0::2, 0::2, :], x[:, 0::2, 1::2, :], x[:, 1::2, 0::2, :],
          x[:, 1::2, 1::2, :])


def _interleave(parts, shape):
  """Inverse of :func:`_pool_windows` for an even-sized ``shape``."""
  b, h, w, c = shape
  a00, a01, a10, a11 = parts
  top = jnp.stack([a00, a01], axis=3)      # [B, H/2, W/2, 2, C]
  bottom = jnp.stack([a10, a11], axis=3)
  return jnp.stack([top, bottom], axis=2).reshape(b, h, w, c)


@jax.custom_vjp
def _max_pool_even(x):
  # The forward is XLA's windowed max, which XLA computes once. Written as the
  # maximum of the four corners it is an elementwise expression that XLA:CPU fuses
  # into, and so recomputes in, every consumer: after CNNMnist's first pool the 25
  # slices of the next layer's im2col each recomputed it, a third of a training
  # step (benchmarks/results.md, "The campaign's workloads").
  return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def _max_pool_even_fwd(x):
  out = _max_pool_even(x)
  return out, (x, out)


def _max_pool_even_bwd(res, g):
  # The gradient of a max is shared equally by the window's tied maxima (the
  # rule JAX applies to reduce-max), written on the four corner slices.
  x, out = res
  hits = [(corner == out).astype(g.dtype) for corner in _pool_windows(x)]
  share = g / (hits[0] + hits[1] + hits[2] + hits[3])
  return (_interleave([h * share for h in hits], x.shape),)


_max_pool_even.defvjp(_max_pool_even_fwd, _max_pool_even_bwd)


def max_pool_2x2(x):
  """2×2 max pooling, stride 2, floor mode: ``[B, H, W, C] -> [B, H//2, W//2, C]``.

  The forward is ``lax.reduce_window`` (the same values as ``flax.linen.max_pool``);
  the gradient is custom, written on the four strided corners of the windows
  (elementwise compare/select, equal shares for ties as for ``reduce_max``): the
  windowed-reduction gradient is slow on XLA:CPU.
  """
  b, h, w, c = x.shape
  x = x[:, :h - h % 2, :w - w % 2, :]
  return _max_pool_even(x)


def _check_spatial(x, padding, name, min_hw):
  if padding == "VALID" and min(x.shape[1], x.shape[2]) < min_hw:
    raise ValueError(
        f"model.name={name!r} with padding='VALID' needs inputs of at least "
        f"{min_hw}x{min_hw}, got {x.shape[1]}x{x.shape[2]}; set "
        f"--config.model.padding=SAME")


class CNNMnistExtractor(nn.Module):
  padding: str = "VALID"
  dropout: float = 0.5
  conv_impl: str = "auto"

  @nn.compact
  def __call__(self, x, train: bool = False):
    _check_spatial(x, self.padding, "cnn_mnist", 12)
    conv = lambda f, name: Conv2D(f, (5, 5), self.padding, self.conv_impl, name=name)
    x = nn.relu(max_pool_2x2(conv(10, "Conv_0")(x)))
    x = conv(20, "Conv_1")(x)
    # Dropout2d: drops whole channels.
    x = nn.Dropout(self.dropout, broadcast_dims=(1, 2), deterministic=not train)(x)
    x = nn.relu(max_pool_2x2(x))
    x = x.reshape((x.shape[0], -1))
    x = nn.relu(nn.Dense(50)(x))
    return nn.Dropout(self.dropout, deterministic=not train)(x)


class CNNCifarExtractor(nn.Module):
  padding: str = "VALID"
  conv_impl: str = "auto"

  @nn.compact
  def __call__(self, x, train: bool = False):
    _check_spatial(x, self.padding, "cnn_cifar", 16)
    conv = lambda f, name: Conv2D(f, (5, 5), self.padding, self.conv_impl, name=name)
    x = max_pool_2x2(nn.relu(conv(6, "Conv_0")(x)))
    x = max_pool_2x2(nn.relu(conv(16, "Conv_1")(x)))
    x = x.reshape((x.shape[0], -1))
    x = nn.relu(nn.Dense(120)(x))
    return nn.relu(nn.Dense(84)(x))




class CNN4Extractor(nn.Module):
  """The 2-conv + 2-FC "CNN" of McMahan et al. (2017): ``[B, H, W, C] -> [B, 512]``.

  With ``padding="SAME"`` (as in the original) a 28×28 input gives 7·7·64 = 3136
  features before FC(512); ``"VALID"`` needs inputs of at least 12×12. It is the
  Kuramoto-FedAvg authors' ``FedAvgNetMNIST``; ``init="torch"`` initialises it as
  torch does theirs.
  """
  padding: str = "SAME"
  conv_impl: str = "auto"
  init: str = "flax"

  @nn.compact
  def __call__(self, x, train: bool = False):
    _check_spatial(x, self.padding, "cnn4", 12)
    conv = lambda f, name: Conv2D(f, (5, 5), self.padding, self.conv_impl, self.init,
                                  name=name)
    x = max_pool_2x2(nn.relu(conv(32, "Conv_0")(x)))
    x = max_pool_2x2(nn.relu(conv(64, "Conv_1")(x)))
    x = x.reshape((x.shape[0], -1))
    return nn.relu(nn.Dense(512, **dense_inits(self.init, x.shape[-1]))(x))


VGG11_LAYERS = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")


class VGG11Extractor(nn.Module):
  """VGG-11 (configuration A) for 32×32 inputs: ``[B, 32, 32, C] -> [B, 512]``.

  ``norm``: ``None`` (no normalisation) or ``"group"`` (GroupNorm with
  ``num_groups`` groups after every convolution, before the ReLU). ``init="torch"``:
  as the authors' ``VGG`` (``vgg.py``) initialises itself: convolutions N(0,
  2/(kh·kw·C_out)) with zero biases, the FC layers torch's Linear default.
  """
  norm: str | None = None
  num_groups: int = 32
  conv_impl: str = "auto"
  init: str = "flax"

  @nn.compact
  def __call__(self, x, train: bool = False):
    if min(x.shape[1], x.shape[2]) < 32:
      raise ValueError(
          f"model.name='vgg11' needs inputs of at least 32x32 (five 2x2 poolings), "
          f"got {x.shape[1]}x{x.shape[2]}")
    convs = 0
    for layer in VGG11_LAYERS:
      if layer == "M":
        x = max_pool_2x2(x)
        continue
      x = Conv2D(layer, (3, 3), "SAME", self.conv_impl, self.init, vgg=True,
                 name=f"Conv_{convs}")(x)
      convs += 1
      if self.norm == "group":
        x = nn.GroupNorm(num_groups=self.num_groups)(x)
      x = nn.relu(x)
    x = x.reshape((x.shape[0], -1))
    x = nn.relu(nn.Dense(512, **dense_inits(self.init, x.shape[-1]))(x))
    return nn.relu(nn.Dense(512, **dense_inits(self.init, 512))(x))
