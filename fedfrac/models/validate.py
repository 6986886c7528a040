"""Checks of the ``model`` section of an experiment config (see :mod:`fedfrac.config`)."""
from __future__ import annotations

from fedfrac._validation import check, is_int, is_num
from fedfrac.models import MODELS, USER_MODELS, WINDOW_MODELS, names
from fedfrac.models.cnn import CONV_IMPLS
from fedfrac.models.torch_init import INITS, TORCH_INIT_MODELS


def validate_model(config) -> None:
  """Check ``config.model`` (a window model needs a regression ``task.loss``)."""
  m = config.model
  check(m.name in MODELS or m.name in USER_MODELS, "model.name", m.name,
        f"allowed values are {', '.join(names())}")
  check(isinstance(m.hidden, (tuple, list)) and all(is_int(h) and h > 0 for h in m.hidden),
        "model.hidden", m.hidden, "must be a tuple of positive integers")
  check(m.padding in ("VALID", "SAME"), "model.padding", m.padding,
        "allowed values are 'VALID', 'SAME'")
  check(m.get("conv_impl", "auto") in CONV_IMPLS, "model.conv_impl", m.get("conv_impl"),
        f"allowed values are {', '.join(CONV_IMPLS)}")
  init = m.get("init", "flax")
  check(init in INITS, "model.init", init, f"allowed values are {', '.join(INITS)}")
  check(init == "flax" or m.name in TORCH_INIT_MODELS, "model.init", init,
        f"'torch' is available for model.name {', '.join(TORCH_INIT_MODELS)}, not "
        f"{m.name!r}")
  check(is_num(m.dropout) and 0 <= m.dropout < 1, "model.dropout", m.dropout,
        "must be in [0, 1)")
  check(is_int(m.get("rnn_hidden", 64)) and m.get("rnn_hidden", 64) >= 1,
        "model.rnn_hidden", m.get("rnn_hidden"), "must be an integer >= 1")
  if m.name in WINDOW_MODELS:
    check(config.task.loss in ("mse", "huber"), "task.loss", config.task.loss,
          f"model.name={m.name!r} is a regressor: allowed values are 'mse', 'huber'")
