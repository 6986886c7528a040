"""PyTorch's parameter initialisation as flax initialisers (``model.init="torch"``).

The Kuramoto-FedAvg authors' models (github.com/amuhebwa/Kuramoto-FedAvg,
``src/train_tools/models/fedavgnet.py`` ``FedAvgNetMNIST``, ``vgg.py`` ``VGG``)
keep what ``torch.nn`` gives their layers:

* ``nn.Linear`` and ``nn.Conv2d`` (``reset_parameters``): weight
  ``kaiming_uniform_(a=√5)``: U(±b) with b = gain·√(3/fan_in), gain = √(2/(1+a²))
  = √(1/3), so b = 1/√fan_in; bias U(±1/√fan_in). fan_in is the weight's
  ``size(1) · prod(size()[2:])`` (``_calculate_fan_in_and_fan_out``): the input
  features of a Linear, C_in·kh·kw of a Conv2d;
* VGG's convolutions are then re-initialised by its ``__init__``: weight
  N(0, 2/n) with n = kh·kw·C_out, bias 0 (He normal, fan-out).

fedfrac's kernels are ``[in, out]`` (Dense) and ``[kh, kw, C_in, C_out]`` (HWIO,
:class:`fedfrac.models.cnn.Conv2D`), so torch's fan_in is the product of every axis
but the last (:func:`fan_in`), and U(±1/√fan_in) is ``variance_scaling(1/3,
"fan_in", "uniform")`` (its bound √(3·scale/fan_in)). The distributions are
torch's; the draws are JAX's (the same key gives the same model, not torch's
numbers). ``"flax"`` (default) keeps flax's: LeCun normal kernels, zero biases.
"""
from __future__ import annotations

import math
from typing import Callable

import jax
import jax.numpy as jnp
from flax import linen as nn

INITS = ("flax", "torch")
# Models whose layers take model.init="torch" (the Kuramoto configs' models and
# the MLP of their digits stand-in).
TORCH_INIT_MODELS = ("cnn4", "vgg11", "mlp")

Initializer = Callable[..., jax.Array]


def check_init(init: str) -> str:
  if init not in INITS:
    raise ValueError(f"model.init={init!r}: allowed values are {', '.join(INITS)}")
  return init


def fan_in(shape) -> int:
  """torch's fan_in of a fedfrac kernel of ``shape`` (``[in, out]`` or HWIO):
  the product of every axis but the last."""
  return int(math.prod(shape[:-1]))


def bound(fan: int) -> float:
  """1/√fan_in: torch's bound for a Linear / Conv2d weight (kaiming_uniform_ with
  a=√5) and bias; 0 for fan_in 0, as torch."""
  return 1.0 / math.sqrt(fan) if fan > 0 else 0.0


def torch_kernel_init() -> Initializer:
  """``kaiming_uniform_(a=√5)`` on a fedfrac kernel: U(±1/√fan_in)."""
  return nn.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")


def torch_bias_init(fan: int) -> Initializer:
  """torch's Linear / Conv2d bias: U(±1/√fan_in); ``fan`` is the layer's fan_in
  (the bias shape alone does not hold it)."""
  b = bound(fan)

  def init(key, shape, dtype=jnp.float32):
    return jax.random.uniform(key, shape, dtype, -b, b)
  return init


def vgg_conv_kernel_init() -> Initializer:
  """The authors' ``VGG.__init__`` convolution weight: N(0, 2/(kh·kw·C_out))."""
  return nn.initializers.variance_scaling(2.0, "fan_out", "normal")


def dense_inits(init: str, features_in: int) -> dict:
  """``kernel_init`` / ``bias_init`` for an ``nn.Dense`` on ``features_in``
  inputs: ``{}`` (flax's) or torch's Linear."""
  if check_init(init) == "flax":
    return {}
  return {"kernel_init": torch_kernel_init(), "bias_init": torch_bias_init(features_in)}


def conv_inits(init: str, kernel_shape, vgg: bool = False) -> tuple[Initializer, Initializer]:
  """``(kernel_init, bias_init)`` of a :class:`fedfrac.models.cnn.Conv2D` of HWIO
  ``kernel_shape``: flax's (LeCun normal, zeros), torch's Conv2d, or with
  ``vgg`` the authors' VGG re-initialisation (He normal fan-out, zeros)."""
  if check_init(init) == "flax":
    return nn.initializers.lecun_normal(), nn.initializers.zeros_init()
  if vgg:
    return vgg_conv_kernel_init(), nn.initializers.zeros_init()
  return torch_kernel_init(), torch_bias_init(fan_in(kernel_shape))


__all__ = ["INITS", "TORCH_INIT_MODELS", "fan_in", "bound", "torch_kernel_init",
           "torch_bias_init", "vgg_conv_kernel_init", "dense_inits", "conv_inits",
           "check_init"]
