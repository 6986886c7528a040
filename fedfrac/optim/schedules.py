"""Round-indexed learning-rate schedules and unit-rate client optimizers.

Client optimizers are built with learning rate 1; the engine multiplies their
output by ``schedule(round)``. For every optax optimizer that ends in
``scale_by_learning_rate`` (SGD, momentum, Adam, ...) this equals running it with
that round's learning rate, and it lets the rate be a traced value.
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
import optax

SCHEDULES = ("constant", "inv_sqrt", "cosine", "exponential")
OPTIMIZERS = ("sgd", "momentum", "nesterov", "adam", "adamw", "rmsprop", "adagrad")


def lr_schedule(name: str, lr: float, rounds: int, final_fraction: float = 0.0,
                decay: float = 1.0) -> Callable[[ArrayLike], jax.Array]:
  """Round index t -> learning rate.

  constant: η0.  inv_sqrt: η0/sqrt(t+1) (FOFedAvg μ_t, BEV paper η_t).
  cosine: η_min + (η0−η_min)(1+cos(π t/R))/2 with η_min = final_fraction·η0.
  exponential: η0·decay^t.
  """
  if name not in SCHEDULES:
    raise ValueError(f"client.schedule={name!r}: allowed values are {', '.join(SCHEDULES)}")

  def schedule(t):
    t = jnp.asarray(t, jnp.float32)
    if name == "constant":
      return jnp.asarray(lr, jnp.float32) + 0.0 * t
    if name == "inv_sqrt":
      return lr / jnp.sqrt(t + 1.0)
    if name == "cosine":
      lo = final_fraction * lr
      return lo + (lr - lo) * 0.5 * (1.0 + jnp.cos(jnp.pi * jnp.minimum(t, rounds) / rounds))
    return lr * jnp.power(decay, t)
  return schedule


def client_optimizer(name: str, momentum: float = 0.9, weight_decay: float = 0.0,
                     b1: float = 0.9, b2: float = 0.999,
                     eps: float = 1e-8) -> optax.GradientTransformation:
  """Unit-learning-rate optax optimizer (its updates already carry the minus sign)."""
  if name == "sgd":
    tx = optax.sgd(1.0)
  elif name == "momentum":
    tx = optax.sgd(1.0, momentum=momentum)
  elif name == "nesterov":
    tx = optax.sgd(1.0, momentum=momentum, nesterov=True)
  elif name == "adam":
    tx = optax.adam(1.0, b1=b1, b2=b2, eps=eps)
  elif name == "adamw":
    tx = optax.adamw(1.0, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay)
  elif name == "rmsprop":
    tx = optax.rmsprop(1.0, eps=eps)
  elif name == "adagrad":
    tx = optax.adagrad(1.0, eps=eps)
  else:
    raise ValueError(f"client.optimizer={name!r}: allowed values are {', '.join(OPTIMIZERS)}")
  if weight_decay and name not in ("adamw",):
    tx = optax.chain(optax.add_decayed_weights(weight_decay), tx)
  return tx
