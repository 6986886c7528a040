"""Models: extractor/head split, shapes, reference parameter counts."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ml_collections import ConfigDict

from fedfrac import models


def _cfg(name, **kw):
  c = dict(name=name, hidden=(32, 16), padding="VALID", dropout=0.5)
  c.update(kw)
  return ConfigDict(c)


@pytest.mark.parametrize("name,shape,count", [
    ("cnn_mnist", (28, 28, 1), 21840),     # same as the PyTorch CNNMnist
    ("cnn_cifar", (32, 32, 3), 62006),     # same as the PyTorch CNNCifar
    ("firma_mlp", (8, 8, 1), 64 * 256 + 256 + 2 * 256 + 256 * 256 + 256 + 2 * 256
     + 256 * 128 + 128 + 128 * 10 + 10),
    ("mlp", (8, 8, 1), 64 * 32 + 32 + 32 * 16 + 16 + 16 * 10 + 10),
    ("logistic", (8, 8, 1), 64 * 10 + 10),
])
def test_param_split_shapes_and_counts(name, shape, count):
  model = models.build(_cfg(name), shape, 10)
  params = model.init(jax.random.PRNGKey(0))
  assert set(params) == {"extractor", "head"}
  assert models.param_count(params) == count
  out = model.apply(params, jnp.ones((3,) + shape))
  assert out.shape == (3, 10)
  out, feats = model.apply(params, jnp.ones((3,) + shape), return_features=True)
  assert feats.ndim == 2 and feats.shape[0] == 3


def test_cnn_on_small_inputs_needs_same_padding():
  with pytest.raises(ValueError, match="padding"):
    model = models.build(_cfg("cnn_mnist"), (8, 8, 1), 10)
    model.init(jax.random.PRNGKey(0))
  model = models.build(_cfg("cnn_mnist", padding="SAME"), (8, 8, 1), 10)
  assert model.apply(model.init(jax.random.PRNGKey(0)), jnp.ones((2, 8, 8, 1))).shape == (2, 10)


def test_dropout_only_in_training_and_input_scale():
  model = models.build(_cfg("cnn_mnist"), (28, 28, 1), 10, input_scale=1 / 255)
  params = model.init(jax.random.PRNGKey(0))
  x = jnp.full((2, 28, 28, 1), 255, jnp.uint8)
  eval_a = model.apply(params, x)
  np.testing.assert_array_equal(eval_a, model.apply(params, x))
  unscaled = models.build(_cfg("cnn_mnist"), (28, 28, 1), 10)
  np.testing.assert_allclose(eval_a, unscaled.apply(params, jnp.ones((2, 28, 28, 1))),
                             atol=1e-5)
  t1 = model.apply(params, x, train=True, key=jax.random.PRNGKey(1))
  t2 = model.apply(params, x, train=True, key=jax.random.PRNGKey(2))
  assert not np.allclose(t1, t2)


def test_max_pool_matches_flax_reference():
  x = jax.random.normal(jax.random.PRNGKey(0), (2, 7, 9, 3))
  import flax.linen as nn
  np.testing.assert_array_equal(models.max_pool_2x2(x),
                                nn.max_pool(x, (2, 2), strides=(2, 2), padding="VALID"))


def test_unknown_model_name():
  with pytest.raises(ValueError, match="model.name='resnet'"):
    models.build(_cfg("resnet"), (8, 8, 1), 10)


@pytest.mark.parametrize("name,shape,count", [
    ("cnn4", (28, 28, 1), 1663370),        # McMahan et al. (2017): 1,663,370
    ("vgg11", (32, 32, 3), 9750922),       # the FedMA/FedNova CIFAR VGG-11
    # GroupNorm adds a scale and a bias per channel of the 8 conv layers.
    ("vgg11_gn", (32, 32, 3), 9750922 + 2 * (64 + 128 + 2 * 256 + 4 * 512)),
])
def test_kuramoto_paper_models(name, shape, count):
  model = models.build(_cfg(name, padding="SAME"), shape, 10)
  params = jax.eval_shape(model.init, jax.random.PRNGKey(0))   # shapes only: fast
  assert set(params) == {"extractor", "head"}
  assert models.param_count(params) == count
  out, feats = jax.eval_shape(lambda p, x: model.apply(p, x, return_features=True),
                              params, jax.ShapeDtypeStruct((2,) + shape, jnp.float32))
  assert out.shape == (2, 10) and feats.shape == (2, 512)


def test_vgg11_group_norm_layers_and_small_inputs_rejected():
  model = models.build(_cfg("vgg11_gn"), (32, 32, 3), 10)
  params = jax.eval_shape(model.init, jax.random.PRNGKey(0))["extractor"]
  norms = sorted(k for k in params if k.startswith("GroupNorm"))
  convs = sorted(k for k in params if k.startswith("Conv"))
  assert len(norms) == len(convs) == 8     # one GroupNorm after every convolution
  plain = jax.eval_shape(models.build(_cfg("vgg11"), (32, 32, 3), 10).init,
                         jax.random.PRNGKey(0))["extractor"]
  assert not any(k.startswith(("GroupNorm", "BatchNorm")) for k in plain)
  with pytest.raises(ValueError, match="32x32"):
    jax.eval_shape(models.build(_cfg("vgg11"), (28, 28, 1), 10).init,
                   jax.random.PRNGKey(0))
