"""Checks of the ``model`` section of an experiment config (see :mod:`fedfrac.config`):
every key by its declaration (:data:`fedfrac.models.schema.MODEL`), then the rules
that relate it to other keys."""
from __future__ import annotations

from fedfrac._validation import check
from fedfrac.models import WINDOW_MODELS
from fedfrac.models.schema import MODEL
from fedfrac.models.torch_init import TORCH_INIT_MODELS


def validate_model(config) -> None:
  """Check ``config.model`` (a window model needs a regression ``task.loss``)."""
  MODEL.check(config.model, "model", config)
  m = config.model
  init = m.get("init", "flax")
  check(init == "flax" or m.name in TORCH_INIT_MODELS, "model.init", init,
        f"'torch' is available for model.name {', '.join(TORCH_INIT_MODELS)}, not "
        f"{m.name!r}")
  if m.name in WINDOW_MODELS:
    check(config.task.loss in ("mse", "huber"), "task.loss", config.task.loss,
          f"model.name={m.name!r} is a regressor: allowed values are 'mse', 'huber'")
