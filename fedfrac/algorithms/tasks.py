"""Tasks: per-example losses and evaluation statistics of a model's outputs,
and the supervised loss every algorithm trains with."""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from fedfrac.models.base import Model


def masked_mean(values: jax.Array, mask: jax.Array) -> jax.Array:
  """Σ v·m / max(Σ m, 1) over the batch axis."""
  mask = mask.astype(values.dtype)
  return jnp.sum(values * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
  """Per-example softmax cross-entropy with integer labels: ``[B, C], [B] -> [B]``."""
  return optax.softmax_cross_entropy_with_integer_labels(logits, labels)


class Task(NamedTuple):
  """Per-example loss and evaluation statistics for a model's outputs.

  ``example_loss(outputs [B, C], y [B]) -> [B]``;
  ``example_stats(outputs, y) -> dict of [B] arrays`` summed by the evaluator.
  """
  name: str
  example_loss: Callable
  example_stats: Callable


def classification_task() -> Task:
  def stats(logits, y):
    return {"loss": cross_entropy(logits, y),
            "correct": (jnp.argmax(logits, -1) == y).astype(jnp.float32)}
  return Task("classification", cross_entropy, stats)


MAPE_RULES = ("stabilized", "thresholded")


def regression_task(loss: str = "mse", huber_delta: float = 1.0, mape_eps: float = 1.0,
                    mape_rule: str = "stabilized") -> Task:
  """Scalar regression with an MSE or Huber loss on (possibly normalised) labels.

  ``example_stats(pred [B], y [B], scale=None, center=None)`` returns per-example
  ``loss`` (training units), ``sq_err``/``abs_err`` in PHYSICAL units, where
  ``y_phys = y · scale + center`` inverts a per-sample label normalisation (so
  ``ŷ_phys − y_phys = (ŷ − y) · scale``; ``scale=None`` means 1, ``center=None``
  0), ``sq_err_norm`` (training units), and the MAPE terms ``ape`` and
  ``ape_count`` (MAPE = Σ ape / Σ ape_count):

  * ``mape_rule="stabilized"`` (BEV paper Eq. 34): ``ape`` =
    100·|e|/(|y_phys| + ε_Y) on every sample, ``ape_count`` = 1;
  * ``"thresholded"``: ``ape`` = 100·|e|/|y_phys| and ``ape_count`` = 1 only on
    samples with ``|y_phys| > ε_Y`` (0 elsewhere: near-zero labels are dropped).

  ε_Y is ``mape_eps`` (label units).
  """
  if mape_rule not in MAPE_RULES:
    raise ValueError(f"task.mape_rule={mape_rule!r}: allowed values are "
                     f"{', '.join(repr(r) for r in MAPE_RULES)}")
  def example_loss(pred, y):
    err = pred.reshape(y.shape) - y
    if loss == "huber":
      return optax.huber_loss(err, delta=huber_delta)
    return err ** 2

  def stats(pred, y, scale=None, center=None):
    err = pred.reshape(y.shape) - y
    scale = jnp.ones_like(y) if scale is None else scale
    center = jnp.zeros_like(y) if center is None else center
    err_phys = err * scale
    y_phys = y * scale + center
    if mape_rule == "stabilized":
      counted = jnp.ones_like(y_phys, bool)
      ape = 100.0 * jnp.abs(err_phys) / (jnp.abs(y_phys) + mape_eps)  # Eq. 34 term
    else:
      counted = jnp.abs(y_phys) > mape_eps
      ape = jnp.where(counted, 100.0 * jnp.abs(err_phys) /
                      jnp.where(counted, jnp.abs(y_phys), 1.0), 0.0)
    return {"loss": example_loss(pred, y), "sq_err": err_phys ** 2,
            "abs_err": jnp.abs(err_phys), "sq_err_norm": err ** 2, "ape": ape,
            "ape_count": counted.astype(err.dtype)}
  return Task("regression", example_loss, stats)


def supervised_loss(model: Model, task: Task) -> Callable:
  """``loss_fn(params, x, y, mask, key) -> (loss, outputs)`` for ``local_train``."""
  def loss_fn(params, x, y, mask, key):
    out = model.apply(params, x, train=True, key=key)
    return masked_mean(task.example_loss(out, y), mask), out
  return loss_fn
