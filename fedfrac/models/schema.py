"""The ``model`` section of an experiment config: every key once, with its
default, meaning and check (:mod:`fedfrac.config_schema`). Rules that relate
several keys are :func:`fedfrac.models.validate.validate_model`."""
from __future__ import annotations

from fedfrac._validation import is_int
from fedfrac.config_schema import Check, Field, Section, integer, number, one_of
from fedfrac.models import MODELS, USER_MODELS, names
from fedfrac.models.cnn import CONV_IMPLS
from fedfrac.models.torch_init import INITS

MODEL = Section("model", "The model every client trains (--list: Models).", [
    Field("name", "mlp", "the model",
          Check(lambda v, node: v in MODELS or v in USER_MODELS,
                lambda node: f"allowed values are {', '.join(names())}")),
    Field("hidden", (200, 200), "hidden widths (mlp, window_mlp)",
          Check(lambda v, node: isinstance(v, (tuple, list))
                and all(is_int(h) and h > 0 for h in v),
                "must be a tuple of positive integers")),
    Field("padding", "VALID", "convolution padding", one_of("VALID", "SAME")),
    Field("dropout", 0.5, "dropout rate of the models that have dropout",
          number(0, 1, hi_open=True)),
    Field("rnn_hidden", 64, "window_gru / window_lstm state size", integer(1)),
    Field("conv_impl", "auto", "auto (by backend, fedfrac.models.cnn.AUTO_CONV_IMPL) | "
          "im2col | xla", one_of(*CONV_IMPLS, quote=False)),
    Field("init", "flax", "flax (LeCun normal kernels, zero biases) | torch "
          "(PyTorch's defaults, as the Kuramoto authors' models; cnn4, vgg11, mlp; "
          "fedfrac.models.torch_init)", one_of(*INITS, quote=False)),
])
