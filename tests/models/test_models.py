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


@pytest.mark.parametrize("padding", ["VALID", "SAME"])
def test_im2col_convolution_matches_xla_convolution_and_its_gradients(padding):
  from fedfrac.models import cnn
  kx, kw = jax.random.split(jax.random.PRNGKey(0))
  x = jax.random.normal(kx, (3, 9, 8, 4))
  w = jax.random.normal(kw, (5, 5, 4, 6))

  def loss(impl):
    return lambda x, w: jnp.sum(jnp.sin(cnn.conv2d(x, w, padding, impl)))
  np.testing.assert_allclose(cnn.conv2d(x, w, padding, "im2col"),
                             cnn.conv2d(x, w, padding, "xla"), atol=1e-4, rtol=1e-5)
  for a, b in zip(jax.grad(loss("im2col"), (0, 1))(x, w), jax.grad(loss("xla"), (0, 1))(x, w)):
    np.testing.assert_allclose(a, b, atol=1e-4, rtol=1e-4)
  with pytest.raises(ValueError, match="conv_impl='fft'"):
    cnn.conv2d(x, w, padding, "fft")


@pytest.mark.parametrize("padding", ["VALID", "SAME"])
@pytest.mark.parametrize("kernel", [(5, 5), (3, 3), (2, 3)])
def test_im2col_is_the_stack_of_every_tap_bit_for_bit(padding, kernel):
  """The patches built row by row are exactly the (kh, kw, C)-ordered taps: the
  faster form cannot change a number."""
  from fedfrac.models import cnn
  x = jax.random.normal(jax.random.PRNGKey(3), (2, 9, 8, 3))
  kh, kw = kernel
  xp = np.asarray(cnn._pad(x, kernel, padding))
  oh, ow = xp.shape[1] - kh + 1, xp.shape[2] - kw + 1
  want = np.zeros((2, oh, ow, kh * kw * 3), np.float32)
  for i in range(kh):
    for j in range(kw):
      t = i * kw + j
      want[..., t * 3:(t + 1) * 3] = xp[:, i:i + oh, j:j + ow, :]
  got = jax.jit(cnn.im2col, static_argnums=(1, 2))(x, kernel, padding)
  np.testing.assert_array_equal(np.asarray(got), want)


def test_cnn_params_are_those_of_flax_conv_layers():
  import flax.linen as nn
  from fedfrac.models import cnn

  class Reference(nn.Module):   # the same stack written with flax.linen.Conv
    @nn.compact
    def __call__(self, x, train=False):
      x = nn.relu(cnn.max_pool_2x2(nn.Conv(10, (5, 5), padding="VALID")(x)))
      x = nn.relu(cnn.max_pool_2x2(nn.Conv(20, (5, 5), padding="VALID")(x)))
      return nn.relu(nn.Dense(50)(x.reshape((x.shape[0], -1))))

  x = jax.random.normal(jax.random.PRNGKey(1), (2, 28, 28, 1))
  ref = models.SplitModel(Reference(), models.LinearHead(10))
  want = ref.init(jax.random.PRNGKey(0), x)["params"]
  for impl in ("im2col", "xla"):
    module = models.SplitModel(cnn.CNNMnistExtractor(conv_impl=impl), models.LinearHead(10))
    got = module.init({"params": jax.random.PRNGKey(0), "dropout": jax.random.PRNGKey(0)},
                      x)["params"]
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
      np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(module.apply({"params": got}, x),
                               ref.apply({"params": want}, x), atol=1e-5)


def test_max_pool_gradient_shares_ties_like_reduce_max():
  x = jax.random.normal(jax.random.PRNGKey(0), (2, 8, 7, 3))
  x = jnp.round(x * 2) / 2            # many exact ties inside windows
  x = x.at[0, :2, :2, 0].set(1.0)     # a window that is all ties

  def reference(x):
    b, h, w, c = x.shape
    x = x[:, :h - h % 2, :w - w % 2, :]
    return x.reshape(b, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))
  g = jax.random.normal(jax.random.PRNGKey(1), reference(x).shape)
  got = jax.vjp(models.max_pool_2x2, x)[1](g)[0]
  want = jax.vjp(reference, x)[1](g)[0]
  np.testing.assert_array_equal(got, want)
  np.testing.assert_allclose(got[0, :2, :2, 0], np.full((2, 2), g[0, 0, 0, 0] / 4))


def test_input_normalisation_is_torchvision_normalize_after_the_scale():
  """(x · scale − mean) / std per channel: the model sees what a model without
  normalisation sees on inputs normalised by hand."""
  shape = (4, 4, 3)
  mean, std = (0.1, 0.5, 0.9), (0.2, 0.5, 2.0)
  normed = models.build(_cfg("mlp"), shape, 10, input_scale=1 / 255, input_mean=mean,
                        input_std=std)
  plain = models.build(_cfg("mlp"), shape, 10)
  params = plain.init(jax.random.PRNGKey(0))
  x = jax.random.randint(jax.random.PRNGKey(1), (5,) + shape, 0, 256).astype(jnp.uint8)
  by_hand = (np.asarray(x, np.float32) / 255 - np.array(mean)) / np.array(std)
  np.testing.assert_allclose(normed.apply(params, x), plain.apply(params, by_hand),
                             rtol=1e-5, atol=1e-5)
  # One value applies to every channel; () changes nothing.
  one = models.build(_cfg("mlp"), shape, 10, input_mean=(0.5,), input_std=(0.5,))
  np.testing.assert_allclose(one.apply(params, jnp.ones((2,) + shape)),
                             plain.apply(params, jnp.ones((2,) + shape)), atol=1e-6)
  assert not np.allclose(one.apply(params, jnp.zeros((2,) + shape)),
                         plain.apply(params, jnp.zeros((2,) + shape)))


@pytest.mark.parametrize("mean,std,match", [
    ((0.5, 0.5), (0.5, 0.5), r"data.input_mean=\(0.5, 0.5\): needs 1 value or one per "
     r"input channel \(3"),
    ((0.5,), (), r"data.input_std=\(\): needs as many values"),
    ((0.5,), (0.0,), r"data.input_std=\(0.0,\): every value must be > 0"),
])
def test_input_normalisation_rejects_bad_values(mean, std, match):
  with pytest.raises(ValueError, match=match):
    models.build(_cfg("mlp"), (4, 4, 3), 10, input_mean=mean, input_std=std)
