"""Client-side local training shared by all algorithms: the masked local-step
loop (:func:`local_train`) and the FedAvg client (:func:`local_delta`)."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional, cast

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
import numpy as np
import optax

from fedfrac.algorithms.client_view import ClientView
from fedfrac.algorithms.trees import select_tree, tree_norm, tree_sub
from fedfrac.ops import lockstep


@dataclasses.dataclass(frozen=True)
class LocalTraining:
  """Static description of client-side training shared by all algorithms.

  Attributes:
    optimizer: optax transformation with unit learning rate; the round's
      learning rate multiplies its output (``lr_schedule(round)``).
    lr_schedule: round index -> learning rate (jnp scalar).
    batch_size: B.
    local_epochs: E (epoch mode: client k runs E·ceil(n_k/B) steps) or None.
    local_steps: H (step mode: every client runs exactly H steps) or None.
    max_steps: static scan length (the largest step count of any client).
    unroll: local steps per loop iteration (``lax.scan`` unroll factor, or the
      steps written out in one iteration of the dynamic loop).
    dynamic_steps: if True the local-step loop is a ``lax.while_loop`` whose
      trip count is the client's own ``ceil(num_steps / unroll)`` (not bounded
      by ``max_steps``, so one compiled program serves datasets whose clients
      need different step counts): under ``vmap`` it runs the largest count of
      the vmapped clients and leaves finished clients bit-identical, and a
      client run on its own (``client_parallelism="map"``) never runs a masked
      step beyond the last partial unrolled iteration. Same results as the
      scan (to float rounding: the steps all vmapped clients share run in a
      loop without select, :mod:`fedfrac.ops.lockstep`); not
      reverse-differentiable (nothing differentiates through local training).
    augment: ``(client_key, step, x [B, ...]) -> x`` applied to the training
      batch of every local step (``data.augment``,
      :class:`fedfrac.data.augment.Augmentation`); None = batches as stored.
  """
  optimizer: optax.GradientTransformation
  lr_schedule: Callable
  batch_size: int
  local_epochs: Optional[int]
  local_steps: Optional[int]
  max_steps: int
  unroll: int = 1
  dynamic_steps: bool = False
  augment: Optional[Callable] = None

  def steps_for(self, client_size: ArrayLike) -> np.ndarray:
    """Local steps per client ``[K]`` (host-side NumPy)."""
    client_size = np.asarray(client_size)
    if self.local_steps is not None:
      return np.full(client_size.shape, self.local_steps, np.int32)
    return (self.local_epochs * np.ceil(client_size / self.batch_size)).astype(np.int32)


def epoch_permutations(key: jax.Array, size: ArrayLike, n_max: int, num_epochs: int,
                       batch_size: int) -> jax.Array:
  """Per-epoch shuffles of a client's valid positions: ``[E, n_max + B]`` int32.

  Row e lists positions 0..size-1 in a random order first (then the padded
  positions); it is padded by B so a batch slice never runs off the end.
  """
  def one(k):
    scores = jax.random.uniform(k, (n_max,))
    scores = jnp.where(jnp.arange(n_max) < size, scores, 2.0)
    return jnp.argsort(scores).astype(jnp.int32)
  perms = jax.vmap(one)(jax.random.split(key, num_epochs))
  return jnp.pad(perms, ((0, 0), (0, batch_size)))


def batch_positions(view: "ClientView", key: jax.Array, step: ArrayLike,
                    training: LocalTraining, perms: Any) -> tuple[jax.Array, Any]:
  """Positions (into ``view.index``) and sample mask of the batch at ``step``.

  Epoch mode walks the epoch shuffles in order; the last batch of an epoch may be
  partial (masked). Step mode draws B distinct positions uniformly each step.
  Returns ``(positions [B] int32, sample_mask [B] bool)``.
  """
  b = training.batch_size
  if training.local_steps is None:
    steps_per_epoch = jnp.maximum((view.size + b - 1) // b, 1)
    epochs = cast(int, training.local_epochs)   # epoch mode: local_steps is None
    epoch = jnp.minimum(step // steps_per_epoch, epochs - 1)
    start = (step % steps_per_epoch) * b
    pos = jax.lax.dynamic_slice(perms[epoch], (start,), (b,))
    valid = start + jnp.arange(b) < view.size
  else:
    n_max = view.index.shape[0]
    scores = jax.random.uniform(jax.random.fold_in(key, step), (n_max,))
    scores = jnp.where(jnp.arange(n_max) < view.size, scores, 2.0)
    if n_max >= b:
      pos = jnp.argsort(scores)[:b].astype(jnp.int32)
    else:
      pos = jnp.pad(jnp.argsort(scores).astype(jnp.int32), (0, b - n_max))
    valid = jnp.arange(b) < view.size
  return pos, valid


def local_train(params: Any, opt_state: Any, view: "ClientView", key: jax.Array,
                lr: ArrayLike, loss_fn: Callable, training: LocalTraining,
                optimizer: Optional[optax.GradientTransformation] = None,
                step_hook: Optional[Callable] = None) -> tuple[Any, Any, dict]:
  """Run a client's local steps as one masked loop.

  Step h is active iff ``h < view.num_steps`` (and, for the scan,
  ``h < training.max_steps``); an inactive step leaves params and optimizer
  state bit-identical. The loop is a ``lax.scan`` over ``training.max_steps``
  steps, or with ``training.dynamic_steps`` a ``lax.while_loop`` that stops
  after the client's own steps (see :class:`LocalTraining`); both give the same
  results. Samples past ``view.size`` in a partial batch are masked out of the
  loss.

  Args:
    params: model params pytree.
    opt_state: state of ``optimizer`` (default ``training.optimizer``).
    view: the client's :class:`ClientView`.
    key: client key for this round.
    lr: learning rate multiplying the optimizer's (unit-rate) updates.
    loss_fn: ``(params, x [B,...], y [B], sample_mask [B], key) -> (loss, aux)``.
    step_hook: optional ``(grads, params, step) -> grads`` applied before the
      optimizer (e.g. SCAFFOLD's control-variate correction).
  Returns:
    ``(params, opt_state, metrics)`` with metrics ``loss`` (mean over active
    steps of the batch loss), ``steps`` (active steps), ``grad_norm`` (mean
    global gradient norm over active steps).
  """
  optimizer = optimizer or training.optimizer
  n_max = view.index.shape[0]
  batch_key, step_key = jax.random.split(key)
  if training.local_steps is None:
    perms = epoch_permutations(batch_key, view.size, n_max,
                               cast(int, training.local_epochs),
                               training.batch_size)
  else:
    perms = None
  grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
  if training.dynamic_steps:
    total = jnp.maximum(view.num_steps, 0)
  else:
    total = jnp.clip(view.num_steps, 0, training.max_steps)

  def step_fn(carry, step, masked=True):
    params, opt_state, loss_sum, gnorm_sum = carry
    pos, sample_mask = batch_positions(view, batch_key, step, training, perms)
    rows = view.index[pos]
    x, y = view.x[rows], view.y[rows]
    if training.augment is not None:   # data.augment: fresh draws every step
      x = training.augment(key, step, x)
    (loss, _), grads = grad_fn(params, x, y, sample_mask, jax.random.fold_in(step_key,
                                                                             step))
    if step_hook is not None:
      grads = step_hook(grads, params, step)
    updates, new_opt_state = optimizer.update(grads, opt_state, params)
    new_params = jax.tree.map(lambda p, u: p + lr * u, params, updates)
    gnorm = optax.global_norm(grads)
    if not masked:   # every step of this loop is active
      return new_params, new_opt_state, loss_sum + loss, gnorm_sum + gnorm
    active = step < total
    params = select_tree(active, new_params, params)
    opt_state = select_tree(active, new_opt_state, opt_state)
    act = active.astype(jnp.float32)
    return params, opt_state, loss_sum + act * loss, gnorm_sum + act * gnorm

  init = (params, opt_state, jnp.zeros((), jnp.float32), jnp.zeros((), jnp.float32))
  unroll = max(int(training.unroll), 1)
  if training.dynamic_steps:
    trips = (total + unroll - 1) // unroll
    # Iterations every client of the vmapped group (and every vmapped run) takes
    # in full: an unbatched trip count, so no per-step select of the carry
    # (fedfrac.ops.lockstep); the rest (larger clients) runs in the loop below.
    shared_trips = lockstep.shared_min(total) // unroll

    def body(state, masked=unroll > 1):
      i, carry = state
      for j in range(unroll):   # written out: `unroll` steps per iteration
        carry = step_fn(carry, i * unroll + j, masked=masked)
      return i + 1, carry
    state = jax.lax.while_loop(lambda state: state[0] < shared_trips,
                               lambda state: body(state, masked=False),
                               (jnp.zeros((), jnp.int32), init))
    _, (params, opt_state, loss_sum, gnorm_sum) = jax.lax.while_loop(
        lambda state: state[0] < trips, body, state)
  else:
    (params, opt_state, loss_sum, gnorm_sum), _ = jax.lax.scan(
        lambda c, h: (step_fn(c, h), None), init, jnp.arange(training.max_steps),
        unroll=unroll)
  steps = total.astype(jnp.float32)
  denom = jnp.maximum(steps, 1.0)
  return params, opt_state, {"loss": loss_sum / denom, "steps": steps,
                             "grad_norm": gnorm_sum / denom}


def local_delta(payload: Any, view: "ClientView", key: jax.Array, round_index: ArrayLike,
                loss_fn: Callable, training: LocalTraining,
                **local_train_kw: Any) -> tuple[Any, dict]:
  """The FedAvg client (McMahan et al. 2017, Alg. 1, ClientUpdate): train from the
  global model ``payload`` with a fresh ``training.optimizer`` state.

  Returns ``(delta, metrics)``: Δ_k = w_k − w_t (the payload's pytree) and
  :func:`local_train`'s metrics plus ``update_norm`` = ‖Δ_k‖₂.
  ``local_train_kw`` go to :func:`local_train` (e.g. ``step_hook``).
  """
  lr = training.lr_schedule(round_index)
  params, _, metrics = local_train(payload, training.optimizer.init(payload), view, key,
                                   lr, loss_fn, training, **local_train_kw)
  delta = tree_sub(params, payload)
  metrics["update_norm"] = tree_norm(delta)
  return delta, metrics
