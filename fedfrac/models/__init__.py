"""Models: flax.linen modules whose params split into ``extractor`` and ``head``.

The protocol every model follows is :class:`fedfrac.models.base.Model`; your own
plain flax module joins it through :func:`flax_model` (:mod:`fedfrac.models.adapter`)
and runs with ``ff.run(config, model=...)`` or :func:`register`.
"""
from __future__ import annotations

from fedfrac.models.adapter import FlaxAdapter, adapted_model, flax_model
from fedfrac.models.base import Model, SplitModel, param_bytes, param_count
from fedfrac.models.cnn import (CNN4Extractor, CNNCifarExtractor, CNNMnistExtractor,
                                VGG11Extractor, max_pool_2x2)
from fedfrac.models.mlp import FirmaExtractor, Identity, LinearHead, MLPExtractor
from fedfrac.models import torch_init

# model.name -> one line for ``--list`` (the registry of model names).
MODEL_DESCRIPTIONS = {
    "mlp": "MLP extractor (model.hidden) + linear head",
    "firma_mlp": "the FIRMA paper's MLP extractor + linear head",
    "logistic": "multinomial logistic regression (identity extractor + linear head)",
    "cnn_mnist": "MNIST CNN (model.padding, model.dropout) + linear head",
    "cnn_cifar": "CIFAR CNN (model.padding) + linear head",
    "cnn4": "4-layer CNN (model.padding) + linear head",
    "vgg11": "VGG-11 without normalisation + linear head",
    "vgg11_gn": "VGG-11 with group normalisation + linear head",
    "window_mlp": "window regressor [B, L, F] -> [B]: MLP (model.hidden)",
    "window_gru": "window regressor [B, L, F] -> [B]: GRU (model.rnn_hidden)",
    "window_lstm": "window regressor [B, L, F] -> [B]: LSTM (model.rnn_hidden)",
}
MODELS = tuple(MODEL_DESCRIPTIONS)
# Window regressors (BEV energy): [B, L, F] -> [B]; their own extractor/head split.
WINDOW_MODELS = ("window_mlp", "window_gru", "window_lstm")


def input_normalisation(input_shape, input_mean=(), input_std=()) -> tuple:
  """``(mean, std)`` tuples of floats for :class:`Model` (``data.input_mean`` /
  ``data.input_std``): both empty, or both of one value or of one value per
  channel (the last axis of ``input_shape``) with every std > 0."""
  mean = tuple(float(v) for v in input_mean)
  std = tuple(float(v) for v in input_std)
  channels = int(input_shape[-1]) if len(input_shape) else 1
  if len(mean) != len(std):
    raise ValueError(f"data.input_std={std}: needs as many values as data.input_mean="
                     f"{mean} ({len(mean)})")
  if mean and len(mean) not in (1, channels):
    raise ValueError(f"data.input_mean={mean}: needs 1 value or one per input "
                     f"channel ({channels} for inputs of shape {tuple(input_shape)})")
  if any(not v > 0 for v in std):
    raise ValueError(f"data.input_std={std}: every value must be > 0")
  return mean, std


# Models registered with :func:`register` (name -> FlaxAdapter), usable as model.name.
USER_MODELS: dict = {}


def register(name: str, model) -> FlaxAdapter:
  """Make your flax module (or :func:`flax_model` adapter) usable as
  ``config.model.name = name``; a name you registered before is replaced."""
  adapter = model if isinstance(model, FlaxAdapter) else flax_model(model)
  if not (isinstance(name, str) and name):
    raise ValueError(f"model name={name!r}: must be a non-empty string")
  if name in MODELS:
    raise ValueError(f"model name={name!r} is a built-in model; choose another name")
  USER_MODELS[name] = adapter
  return adapter


def names() -> tuple:
  """Every model name: the built-in ones, then those registered with :func:`register`."""
  return MODELS + tuple(n for n in USER_MODELS if n not in MODELS)


def build(model_cfg, input_shape, num_outputs, input_scale=1.0, input_mean=(),
          input_std=()) -> Model:
  """Config -> :class:`Model` with input shape taken from the dataset; inputs are
  scaled by ``input_scale`` and then standardised per channel by ``input_mean`` /
  ``input_std`` (see :func:`input_normalisation`)."""
  mean, std = input_normalisation(input_shape, input_mean, input_std)
  name = model_cfg.name
  init = torch_init.check_init(model_cfg.get("init", "flax"))
  if init != "flax" and name not in torch_init.TORCH_INIT_MODELS:
    raise ValueError(f"model.init={init!r}: available for model.name "
                     f"{', '.join(torch_init.TORCH_INIT_MODELS)}, not {name!r}")
  if name in USER_MODELS:
    return adapted_model(USER_MODELS[name], input_shape, num_outputs, input_scale, mean,
                         std, name)
  conv_impl = model_cfg.get("conv_impl", "auto")
  if name in WINDOW_MODELS:
    from fedfrac.models import regression
    if int(num_outputs) != 1:
      raise ValueError(f"model.name={name!r} is a scalar regressor (one output); "
                       f"got num_outputs={num_outputs} (use it with task.loss "
                       f"'mse' or 'huber')")
    if name == "window_mlp":
      module = regression.WindowMLP(hidden=tuple(model_cfg.hidden))
    else:
      rnn_hidden = model_cfg.get("rnn_hidden", 64)
      module = (regression.WindowGRU if name == "window_gru" else
                regression.WindowLSTM)(hidden=int(rnn_hidden))
    return Model(module, tuple(input_shape), 1, float(input_scale), name, mean, std)
  if name == "mlp":
    extractor = MLPExtractor(hidden=tuple(model_cfg.hidden), init=init)
  elif name == "firma_mlp":
    extractor = FirmaExtractor()
  elif name == "logistic":
    extractor = Identity()
  elif name == "cnn_mnist":
    extractor = CNNMnistExtractor(padding=model_cfg.padding, dropout=model_cfg.dropout,
                                  conv_impl=conv_impl)
  elif name == "cnn_cifar":
    extractor = CNNCifarExtractor(padding=model_cfg.padding, conv_impl=conv_impl)
  elif name == "cnn4":
    extractor = CNN4Extractor(padding=model_cfg.padding, conv_impl=conv_impl, init=init)
  elif name in ("vgg11", "vgg11_gn"):
    extractor = VGG11Extractor(norm="group" if name == "vgg11_gn" else None,
                               conv_impl=conv_impl, init=init)
  else:
    raise ValueError(f"model.name={name!r}: allowed values are {', '.join(MODELS)}")
  module = SplitModel(extractor=extractor, head=LinearHead(num_outputs, init=init))
  return Model(module, tuple(input_shape), int(num_outputs), float(input_scale), name,
               mean, std)

from fedfrac.models.regression import (WindowGRU, WindowLSTM, WindowMLP, huber_loss,  # noqa: E402
                                       mse_loss)
