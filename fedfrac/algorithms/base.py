"""The algorithm contract (DESIGN §2.1) and the pieces every algorithm shares.

An algorithm is a value, :class:`FedAlgorithm`, of pure functions:

  init(key, params0, num_clients, data_info) -> (server_state, client_states)
  broadcast(server_state) -> payload                       # downlink, per client
  client_update(payload, client_state, client_view, key, round)
      -> (message, client_state, client_metrics)           # message = uplink
  aggregate(server_state, client_states, messages, weights, mask, key)
      -> (server_state, client_states) or (server_state, client_states, metrics)
  eval_params(server_state, client_state) -> params used to evaluate that client

Two optional hooks (``None`` = not used):

  prepare_cohort(payload, cohort_states, views, keys, mask, round) -> cohort_states
      runs once per round on the whole sampled cohort, outside the per-client
      vmap, before ``client_update`` (``views`` is a :class:`ClientView` whose
      per-client fields carry a leading ``[S]`` axis). Work that only some
      clients need this round (e.g. a periodic loss-landscape probe) can run for
      exactly those clients here, instead of for every client under a vmapped
      ``lax.cond`` (which becomes a select).
  cohort_metrics(client_metrics, weights, mask) -> dict of scalars
      round diagnostics computed from the stacked ``[S]`` client metrics
      (e.g. drift statistics); recorded as ``server/<name>``.

``client_states`` is one pytree whose leaves have a leading axis K (all clients);
the engine gathers the sampled rows, vmaps ``client_update`` and scatters them
back before calling ``aggregate`` with the stacked ``messages [S, ...]``,
``weights [S]`` (n_k, zero for masked slots) and ``mask [S]``.

Continuous hyper-parameters may arrive as traced JAX values (so whole runs can be
vmapped over a grid): builders must use them only in ``jnp`` arithmetic, never in
Python control flow.

Server-side combination of updates: an algorithm whose server averages the
cohort's updates (FedAvg, FedAvgM, FedOpt, FedProx, SCAFFOLD, ...) combines them
with one line,

    combined, info = server.combine_deltas(messages, weights, mask, key, ctx.aggregator)

(``fedfrac.algorithms.server``) instead of calling ``weighted_mean`` itself, and
sets ``ROBUST_AGGREGATION = True`` in its module; the config's ``server``
section then selects the mean, coordinate median, trimmed mean or (Multi-)Krum
for it (the mean is the default and gives identical numbers). ``info`` holds
server metrics to return as ``aggregate``'s third value.

Adversarial clients (``config.attack``) are simulated by the engine, not by the
algorithms: Byzantine clients' uploaded messages are transformed after
``client_update`` (so messages should be updates, e.g. model deltas), and
label-flipping clients see poisoned labels in ``ClientView.y``.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import optax

from fedfrac.data.federated import DataInfo
from fedfrac.models.base import Model


def star_communication(payload_bytes, message_bytes, participants):
  """Server-client accounting: each participant downloads the payload and uploads
  its message. Returns ``(bytes_up, bytes_down)`` for the round."""
  return message_bytes * participants, payload_bytes * participants


class FedAlgorithm(NamedTuple):
  """A federated algorithm as six pure functions (see module docstring).

  ``personalized=True`` means ``eval_params`` depends on the client state, so the
  engine evaluates every client's own model instead of one global model.
  ``comm(payload_bytes, message_bytes, participants) -> (up, down)`` turns the
  message and payload shapes into a round's traffic (decentralised algorithms
  override it, e.g. a ring sends each message to two neighbours per pass).
  ``host_metrics(rounds_done) -> dict of float`` (optional, host side, not
  jitted) adds metrics computed from the round count alone to every round's
  row, e.g. DP-FedAvg's privacy budget ε.
  ``prepare_cohort`` and ``cohort_metrics`` are the optional hooks described in
  the module docstring.
  """
  name: str
  init: Callable
  broadcast: Callable
  client_update: Callable
  aggregate: Callable
  eval_params: Callable
  personalized: bool = False
  comm: Callable = star_communication
  host_metrics: Optional[Callable] = None
  prepare_cohort: Optional[Callable] = None
  cohort_metrics: Optional[Callable] = None


class ClientView(NamedTuple):
  """What one client sees of the data inside ``client_update``.

  Attributes:
    x: ``[N, ...]`` the flat train inputs of all clients (shared, never copied).
    y: ``[N]`` the flat train targets.
    index: ``[n_max]`` int32 rows owned by this client (padded).
    size: ``[]`` int32 number of valid rows n_k.
    num_steps: ``[]`` int32 local steps this client runs this round.
    client_id: ``[]`` int32.
  """
  x: jax.Array
  y: jax.Array
  index: jax.Array
  size: jax.Array
  num_steps: jax.Array
  client_id: jax.Array


# --------------------------------------------------------------------------------
# Tasks: losses and evaluation statistics.


def masked_mean(values, mask):
  """Σ v·m / max(Σ m, 1) over the batch axis."""
  mask = mask.astype(values.dtype)
  return jnp.sum(values * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def cross_entropy(logits, labels):
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


def regression_task(loss="mse", huber_delta=1.0, mape_eps=1.0) -> Task:
  """Scalar regression with an MSE or Huber loss on (possibly normalised) labels.

  ``example_stats(pred [B], y [B], scale=None, center=None)`` returns per-example
  ``loss`` (training units), ``sq_err``/``abs_err`` in PHYSICAL units, where
  ``y_phys = y · scale + center`` inverts a per-sample label normalisation (so
  ``ŷ_phys − y_phys = (ŷ − y) · scale``; ``scale=None`` means 1, ``center=None``
  0), ``sq_err_norm`` (training units), and for MAPE ``ape`` = 100·|e|/|y_phys|
  with ``ape_count`` = 1 on samples with ``|y_phys| > mape_eps`` (0 elsewhere).
  """
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
    counted = jnp.abs(y_phys) > mape_eps
    ape = jnp.where(counted, 100.0 * jnp.abs(err_phys) /
                    jnp.where(counted, jnp.abs(y_phys), 1.0), 0.0)
    return {"loss": example_loss(pred, y), "sq_err": err_phys ** 2,
            "abs_err": jnp.abs(err_phys), "sq_err_norm": err ** 2, "ape": ape,
            "ape_count": counted.astype(err.dtype)}
  return Task("regression", example_loss, stats)


# --------------------------------------------------------------------------------
# Local training.


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
      scan; not reverse-differentiable (nothing differentiates through local
      training).
  """
  optimizer: optax.GradientTransformation
  lr_schedule: Callable
  batch_size: int
  local_epochs: Optional[int]
  local_steps: Optional[int]
  max_steps: int
  unroll: int = 1
  dynamic_steps: bool = False

  def steps_for(self, client_size):
    """Local steps per client ``[K]`` (host-side NumPy)."""
    import numpy as np
    client_size = np.asarray(client_size)
    if self.local_steps is not None:
      return np.full(client_size.shape, self.local_steps, np.int32)
    return (self.local_epochs * np.ceil(client_size / self.batch_size)).astype(np.int32)


def epoch_permutations(key, size, n_max, num_epochs, batch_size):
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


def batch_positions(view: ClientView, key, step, training: LocalTraining, perms):
  """Positions (into ``view.index``) and sample mask of the batch at ``step``.

  Epoch mode walks the epoch shuffles in order; the last batch of an epoch may be
  partial (masked). Step mode draws B distinct positions uniformly each step.
  Returns ``(positions [B] int32, sample_mask [B] bool)``.
  """
  b = training.batch_size
  if training.local_steps is None:
    steps_per_epoch = jnp.maximum((view.size + b - 1) // b, 1)
    epoch = jnp.minimum(step // steps_per_epoch, training.local_epochs - 1)
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


def select_tree(pred, on_true, on_false):
  """Leaf-wise ``where(pred, a, b)``; bit-identical ``b`` when pred is False."""
  return jax.tree.map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)


def local_train(params, opt_state, view: ClientView, key, lr, loss_fn,
                training: LocalTraining, optimizer=None, step_hook=None):
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
    perms = epoch_permutations(batch_key, view.size, n_max, training.local_epochs,
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
    (loss, _), grads = grad_fn(params, x, y, sample_mask, jax.random.fold_in(step_key, step))
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

    def body(state):
      i, carry = state
      for j in range(unroll):   # written out: `unroll` steps per iteration
        carry = step_fn(carry, i * unroll + j, masked=unroll > 1)
      return i + 1, carry
    _, (params, opt_state, loss_sum, gnorm_sum) = jax.lax.while_loop(
        lambda state: state[0] < trips, body, (jnp.zeros((), jnp.int32), init))
  else:
    (params, opt_state, loss_sum, gnorm_sum), _ = jax.lax.scan(
        lambda c, h: (step_fn(c, h), None), init, jnp.arange(training.max_steps),
        unroll=unroll)
  steps = total.astype(jnp.float32)
  denom = jnp.maximum(steps, 1.0)
  return params, opt_state, {"loss": loss_sum / denom, "steps": steps,
                             "grad_norm": gnorm_sum / denom}


def local_delta(payload, view: ClientView, key, round_index, loss_fn,
                training: LocalTraining, **local_train_kw):
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


def init_global_model(key, params0, num_clients, data_info):
  """``init`` of a server that only keeps the global model: ``({"params"}, None)``."""
  del key, num_clients, data_info
  return {"params": params0}, None


def broadcast_params(server_state):
  """``broadcast`` that sends the global model ``server_state["params"]``."""
  return server_state["params"]


def eval_global_params(server_state, client_state):
  """``eval_params`` that evaluates the global model for every client."""
  del client_state
  return server_state["params"]


def supervised_loss(model: Model, task: Task):
  """``loss_fn(params, x, y, mask, key) -> (loss, outputs)`` for ``local_train``."""
  def loss_fn(params, x, y, mask, key):
    out = model.apply(params, x, train=True, key=key)
    return masked_mean(task.example_loss(out, y), mask), out
  return loss_fn


# --------------------------------------------------------------------------------
# Building algorithms from configs.


@dataclasses.dataclass(frozen=True)
class BuildContext:
  """Everything an algorithm builder may close over (static, host-side).

  ``aggregator`` is the :class:`fedfrac.algorithms.server.AggregatorSpec` the
  config's ``server`` section selects (pass it to ``server.combine_deltas``);
  ``participation`` is the client fraction C of the run.
  """
  model: Model
  task: Task
  training: LocalTraining
  data_info: DataInfo
  rounds: int
  client_cfg: Any = None
  aggregator: Any = None        # server.AggregatorSpec; None = weighted mean
  participation: float = 1.0    # client fraction C (sampling rate of a round)


class HParam(NamedTuple):
  """A hyper-parameter: default, check (value -> bool) and what is allowed."""
  default: Any
  check: Optional[Callable] = None
  allowed: str = ""


class HParams(dict):
  """An algorithm's ``{name: HParam}`` plus checks that involve several options.

  Each entry of ``checks`` is ``check(hp) -> None or str``: given the resolved
  options it returns None when they are consistent, else a message that starts
  with the offending ``key=value`` (e.g. ``"alpha=1.5: needs
  allow_heuristic_alpha=True"``). Checks must ignore traced values.
  """

  def __init__(self, specs, checks=()):
    super().__init__(specs)
    self.checks = tuple(checks)


def positive(v):
  return _is_number(v) and v > 0


def non_negative(v):
  return _is_number(v) and v >= 0


def unit_interval(v):
  return _is_number(v) and 0 <= v <= 1


def one_of(*values):
  return lambda v: v in values


def boolean(v):
  return isinstance(v, bool)


def concrete(v):
  """``v`` as a Python float when it is a concrete number, else None (traced)."""
  if _is_traced(v):
    return None
  return float(v)


def _is_number(v):
  return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def resolve_hparams(algorithm_name, spec: dict, given: dict, prefix="") -> dict:
  """Defaults + given values, each checked; unknown keys are errors."""
  unknown = sorted(set(given) - set(spec))
  if unknown:
    raise ValueError(
        f"{prefix}{unknown[0]}: unknown option for algorithm {algorithm_name!r}; "
        f"allowed options are {', '.join(sorted(spec)) or '(none)'}")
  out = {}
  for key, hp in spec.items():
    value = given.get(key, hp.default)
    if hp.check is not None and not _is_traced(value) and not hp.check(value):
      raise ValueError(f"{prefix}{key}={value!r}: {hp.allowed or 'invalid value'}")
    out[key] = value
  for check in getattr(spec, "checks", ()):
    message = check(out)
    if message:
      raise ValueError(f"{prefix}{message}")
  return out


def _is_traced(v):
  return isinstance(v, jax.core.Tracer)


# --------------------------------------------------------------------------------
# Small pytree helpers used by several algorithms.


def tree_sub(a, b):
  return jax.tree.map(jnp.subtract, a, b)


def tree_add(a, b):
  return jax.tree.map(jnp.add, a, b)


def tree_scale(a, s):
  return jax.tree.map(lambda x: s * x, a)


def tree_zeros_like(a):
  return jax.tree.map(jnp.zeros_like, a)


def tree_norm(a):
  return optax.global_norm(a)


def stack_for_clients(tree, num_clients):
  """Broadcast a pytree to ``[K, ...]`` leaves (initial per-client state)."""
  return jax.tree.map(lambda x: jnp.broadcast_to(x, (num_clients,) + x.shape).copy(), tree)
