"""``model.init="torch"``: PyTorch's default initialisation as flax initialisers,
against a transcription of torch's rule (``torch.nn.init``: fan_in from
``_calculate_fan_in_and_fan_out``, ``kaiming_uniform_(a=√5)`` for Linear / Conv2d
weights, U(±1/√fan_in) biases) and the authors' VGG re-initialisation; with torch
installed, also against torch's own layers."""
from __future__ import annotations

import math

import jax
import numpy as np
import pytest

from fedfrac import models
from fedfrac.config import ConfigError, base_config, validate
from fedfrac.models import torch_init

# fedfrac kernel shapes of the Kuramoto authors' FedAvgNetMNIST (cnn4 SAME on
# 28x28x1) and of a VGG-11 layer: Dense [in, out], Conv2D HWIO.
SHAPES = [(3136, 512), (512, 10), (5, 5, 1, 32), (5, 5, 32, 64), (3, 3, 64, 128)]


def torch_layout(shape):
  """A fedfrac kernel shape in torch's layout: Linear [out, in], Conv2d [O, I, kh, kw]."""
  if len(shape) == 2:
    return (shape[1], shape[0])
  kh, kw, ci, co = shape
  return (co, ci, kh, kw)


def torch_fan_in(torch_shape):
  """Transcription of ``torch.nn.init._calculate_fan_in_and_fan_out`` (fan_in)."""
  num_input_fmaps = torch_shape[1]
  receptive_field_size = math.prod(torch_shape[2:]) if len(torch_shape) > 2 else 1
  return num_input_fmaps * receptive_field_size


def torch_weight_bound(torch_shape, a=math.sqrt(5)):
  """Transcription of ``kaiming_uniform_(w, a=√5)`` (mode fan_in, leaky_relu gain):
  the bound of its U(−b, b)."""
  gain = math.sqrt(2.0 / (1 + a ** 2))
  std = gain / math.sqrt(torch_fan_in(torch_shape))
  return math.sqrt(3.0) * std


def torch_bias_bound(torch_shape):
  """Transcription of ``Linear.reset_parameters`` / ``_ConvNd.reset_parameters``'s
  bias bound: 1/√fan_in (0 when fan_in is 0)."""
  fan = torch_fan_in(torch_shape)
  return 1 / math.sqrt(fan) if fan > 0 else 0


def check_uniform(values, b):
  """``values`` look like U(−b, b): inside, reaching near both ends, variance b²/3."""
  v = np.asarray(values, np.float64).ravel()
  assert np.all(np.abs(v) <= b * (1 + 1e-6))
  assert v.max() > 0.95 * b and v.min() < -0.95 * b
  assert abs(v.var() / (b * b / 3) - 1) < 0.05 + 3 / math.sqrt(v.size)
  assert abs(v.mean()) < 4 * b / math.sqrt(3 * v.size)


@pytest.mark.parametrize("shape", SHAPES)
def test_fan_in_and_bounds_are_torchs(shape):
  t = torch_layout(shape)
  assert torch_init.fan_in(shape) == torch_fan_in(t)
  assert torch_init.bound(torch_init.fan_in(shape)) == pytest.approx(torch_weight_bound(t),
                                                                     rel=1e-12)
  assert torch_init.bound(torch_init.fan_in(shape)) == pytest.approx(torch_bias_bound(t),
                                                                     rel=1e-12)
  assert torch_init.bound(0) == torch_bias_bound((4, 0)) == 0


@pytest.mark.parametrize("shape", SHAPES)
def test_kernel_and_bias_initialisers_draw_torchs_distributions(shape):
  t = torch_layout(shape)
  k1, k2 = jax.random.split(jax.random.PRNGKey(0))
  w = torch_init.torch_kernel_init()(k1, shape)
  check_uniform(w, torch_weight_bound(t))
  b = torch_init.torch_bias_init(torch_init.fan_in(shape))(k2, (4096,))
  check_uniform(b, torch_bias_bound(t))


def test_vgg_convolutions_follow_the_authors_rule():
  """vgg.py: ``n = kh·kw·C_out; weight.normal_(0, √(2/n)); bias.zero_()``."""
  shape = (3, 3, 64, 128)
  kernel_init, bias_init = torch_init.conv_inits("torch", shape, vgg=True)
  w = np.asarray(kernel_init(jax.random.PRNGKey(1), shape), np.float64)
  std = math.sqrt(2.0 / (3 * 3 * 128))
  assert abs(w.std() / std - 1) < 0.03 and abs(w.mean()) < 4 * std / math.sqrt(w.size)
  assert np.abs(w).max() > 3.5 * std    # a normal, not truncated at 2σ
  assert not np.any(bias_init(jax.random.PRNGKey(2), (128,)))


def _params(name, shape, init, **model):
  cfg = base_config().model
  cfg.name, cfg.init = name, init
  for k, v in model.items():
    cfg[k] = v
  m = models.build(cfg, shape, 10)
  return m.init(jax.random.PRNGKey(3))


def _layers(params):
  """``[(path, kernel, bias)]`` of every Dense / Conv2D layer."""
  out = []
  for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
    keys = [getattr(p, "key", str(p)) for p in path]
    if keys[-1] == "kernel":
      bias = params
      for k in keys[:-1] + ["bias"]:
        bias = bias[k]
      out.append(("/".join(keys[:-1]), np.asarray(leaf), np.asarray(bias)))
  return out


def test_cnn4_torch_init_is_the_authors_fedavgnet_mnist_layer_by_layer():
  layers = _layers(_params("cnn4", (28, 28, 1), "torch", padding="SAME"))
  assert [k.shape for _, k, _ in layers] == [(5, 5, 1, 32), (5, 5, 32, 64), (3136, 512),
                                             (512, 10)]
  for _, kernel, bias in layers:
    t = torch_layout(kernel.shape)
    b = torch_weight_bound(t)
    assert np.all(np.abs(kernel) <= b * (1 + 1e-6)) and np.abs(kernel).max() > 0.9 * b
    assert np.all(np.abs(bias) <= torch_bias_bound(t) * (1 + 1e-6)) and np.any(bias)
  # flax's default on the same model: LeCun normal kernels past the bound, zero biases
  flax_layers = _layers(_params("cnn4", (28, 28, 1), "flax", padding="SAME"))
  assert all(not np.any(bias) for _, _, bias in flax_layers)
  assert all(np.abs(k).max() > torch_weight_bound(torch_layout(k.shape))
             for _, k, _ in flax_layers)


def test_vgg11_and_mlp_torch_init():
  layers = _layers(_params("vgg11", (32, 32, 3), "torch"))
  convs = [(k, b) for _, k, b in layers if k.ndim == 4]
  dense = [(k, b) for _, k, b in layers if k.ndim == 2]
  assert len(convs) == 8 and len(dense) == 3
  for k, b in convs:
    assert abs(k.std() / math.sqrt(2.0 / (k.shape[0] * k.shape[1] * k.shape[3])) - 1) < 0.1
    assert not np.any(b)
  for k, b in dense:
    assert np.abs(k).max() <= torch_weight_bound(torch_layout(k.shape)) * (1 + 1e-6)
    assert np.any(b)
  for _, k, b in _layers(_params("mlp", (8, 8, 1), "torch", hidden=(128, 64))):
    t = torch_layout(k.shape)
    assert np.abs(k).max() <= torch_weight_bound(t) * (1 + 1e-6)
    assert np.abs(b).max() <= torch_bias_bound(t) * (1 + 1e-6) and np.any(b)


@pytest.mark.parametrize("changes,message", [
    ({"init": "pytorch"}, "config.model.init='pytorch': allowed values are flax, torch"),
    ({"init": "torch", "name": "cnn_mnist"},
     "config.model.init='torch': 'torch' is available for model.name cnn4, vgg11, mlp, "
     "not 'cnn_mnist'"),
])
def test_bad_init_is_one_line_naming_the_key(changes, message):
  c = base_config()
  for k, v in changes.items():
    c.model[k] = v
  with pytest.raises(ConfigError) as e:
    validate(c)
  assert message in str(e.value) and "\n" not in str(e.value)
  cfg = c.model
  with pytest.raises(ValueError, match="model.init="):
    models.build(cfg, (28, 28, 1), 10)


def test_torch_init_matches_torch_layers_when_torch_is_installed():
  """Torch's own nn.Linear / nn.Conv2d of the authors' FedAvgNetMNIST shapes: their
  draws lie inside the same bounds, reach them, and have the same spread as ours."""
  torch = pytest.importorskip("torch")
  torch.manual_seed(0)
  layers = {(5, 5, 1, 32): torch.nn.Conv2d(1, 32, 5, padding=2),
            (5, 5, 32, 64): torch.nn.Conv2d(32, 64, 5, padding=2),
            (3136, 512): torch.nn.Linear(3136, 512), (512, 10): torch.nn.Linear(512, 10)}
  for i, (shape, layer) in enumerate(layers.items()):
    w = layer.weight.detach().numpy().astype(np.float64)
    b = layer.bias.detach().numpy().astype(np.float64)
    assert w.shape == torch_layout(shape)
    bound = torch_init.bound(torch_init.fan_in(shape))
    assert np.abs(w).max() <= bound * (1 + 1e-6) and np.abs(w).max() > 0.9 * bound
    assert np.abs(b).max() <= bound * (1 + 1e-6)
    ours = np.asarray(torch_init.torch_kernel_init()(jax.random.PRNGKey(i), shape))
    assert abs(ours.std() / w.std() - 1) < 0.05 + 4 / math.sqrt(w.size)
