"""Model wrapper: a flax module whose params split into ``extractor`` and ``head``.

Every model is ``SplitModel(extractor, head)`` so that ``params`` is
``{"extractor": ..., "head": ...}``: FedRep/FIRMA keep heads private by touching
only the extractor subtree, and MOON reads extractor features.
"""
from __future__ import annotations

from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp


class SplitModel(nn.Module):
  """head(extractor(x)); params are ``{"extractor": ..., "head": ...}``."""
  extractor: nn.Module
  head: nn.Module

  def __call__(self, x, train: bool = False, return_features: bool = False):
    features = self.extractor(x, train=train)
    out = self.head(features)
    return (out, features) if return_features else out


class Model(NamedTuple):
  """A model as pure functions.

  Attributes:
    module: the flax module.
    input_shape: per-example input shape (no batch axis).
    num_outputs: classes (or 1 for scalar regression).
    input_scale: inputs are multiplied by this before the module (uint8 -> [0,1]).
    name: config name.
    input_mean, input_std: per-channel ``(x · input_scale − mean) / std`` after
      the scaling, as torchvision's ``Normalize`` (one value, or one per channel
      of the last input axis); ``()`` leaves the scaled inputs as they are.
  """
  module: nn.Module
  input_shape: tuple
  num_outputs: int
  input_scale: float
  name: str
  input_mean: tuple = ()
  input_std: tuple = ()

  def init(self, key):
    """Parameters ``{"extractor", "head"}`` for one model."""
    x = jnp.zeros((1,) + tuple(self.input_shape), jnp.float32)
    params = dict(self.module.init({"params": key, "dropout": key}, x)["params"])
    params.setdefault("extractor", {})   # a parameter-free extractor still has its key
    return params

  def apply(self, params, x, train: bool = False, key=None, return_features=False):
    """Outputs ``[B, num_outputs]`` (and features ``[B, F]`` if asked)."""
    x = x.astype(jnp.float32)
    if self.input_scale != 1.0:
      x = x * self.input_scale
    if self.input_mean:
      x = ((x - jnp.asarray(self.input_mean, jnp.float32))
           / jnp.asarray(self.input_std, jnp.float32))
    rngs = {"dropout": key} if (train and key is not None) else None
    return self.module.apply({"params": params}, x, train=train and key is not None,
                             rngs=rngs, return_features=return_features)


def param_count(params) -> int:
  return int(sum(x.size for x in jax.tree.leaves(params)))


def param_bytes(params) -> int:
  return int(sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(params)))

