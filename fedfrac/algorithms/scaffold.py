"""SCAFFOLD (Karimireddy et al. 2020, "SCAFFOLD: Stochastic Controlled Averaging for
Federated Learning", Alg. 1 with option I or II control variates).

Server state: model x and control variate c. Client state: c_k (zeros at t = 0,
one row per client). In round t every sampled client receives (x, c) and runs its
local steps with the corrected gradient

  y ← y − η (g_k(y) − c_k + c)                      # Alg. 1, local update

(the correction is applied to the mini-batch gradient before the configured
optax client optimizer; with plain SGD this is the paper's update). Then

  c_k⁺ = c_k − c + (x − y_k) / (K_k η)                # Alg. 1, control variate option II
  c_k⁺ = g_k(x)                                       # Alg. 1, control variate option I

with K_k the client's own number of active local steps this round and η the
round's client learning rate. The client uploads (Δy_k, Δc_k) = (y_k − x, c_k⁺ − c_k)
— twice a model's bytes — and the server applies

  x ← x + η_g Σ_{k∈S} p_k Δy_k                        # Alg. 1, server model
  c ← c + Σ_{k∈S} q_k Δc_k                            # Alg. 1, server control variate

Weighting (option ``weighting``):
  ``"uniform"`` (default, Alg. 1 as printed): p_k = 1/|S| and q_k = 1/N, so
    c ← c + (|S|/N)·mean_k Δc_k and c = (1/N) Σ_k c_k.
  ``"samples"`` (the FedAvg convention of the other fedfrac methods):
    p_k = n_k / Σ_{j∈S} n_j and q_k = n_k / n (n = all clients' samples), which
    keeps c = Σ_k (n_k/n) c_k over all clients, the control variate of the
    sample-weighted objective.
With equal client sizes the two agree. In round 0 all control variates are zero,
so that round equals FedAvg (with the same weighting).

Option I (``control_variate="option1"``): c_k⁺ is the gradient of the client's
local loss at the server model x, "an additional pass over the local data"
(§3 of the paper): the mean per-sample gradient over all n_k samples, computed in
mini-batches of B in the client's stored order (:func:`full_local_gradient`);
dropout, if the model has any, is active with the client's key of the round.

Control variate with other client optimizers (option ``control_variate``). For
plain SGD, (x − y_k)/(K_k η) = mean_h (g_h − c_k + c), so option II's c_k⁺ is
exactly the mean of the raw mini-batch gradients g_h the client computed along
its local steps. With momentum β the same displacement is about 1/(1 − β) times
larger (ten times at β = 0.9), and with Adam it is not a gradient at all, so the
printed formula inflates c and the correction c − c_k then drives the clients
apart (runs diverge at every learning rate). ``"mean_gradient"`` computes the
quantity option II stands for directly,

  c_k⁺ = (1/K_k) Σ_h g_k(y_h)                           # option II's value for SGD

summed over the client's active steps whatever the optimizer. ``"option2"`` is
the printed formula; ``"auto"`` (default) uses ``option2`` with plain SGD
(``client.optimizer="sgd"``, the paper's setting, bit-identical to it) and
``mean_gradient`` with any other client optimizer. ``"option1"`` does not depend
on the client optimizer.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from fedfrac.algorithms import contract, local_training, schema, tasks, trees
from fedfrac.ops import aggregate as agg

WEIGHTINGS = ("uniform", "samples")
CONTROL_VARIATES = ("auto", "option1", "option2", "mean_gradient")
OPTION1_KEY_TAG = 0x4F505431   # fold_in tag of option I's dropout key

HPARAMS = schema.HParamSchema({
    "server_lr": schema.HParam(1.0, schema.positive, "server learning rate η_g; must be > 0"),
    "weighting": schema.HParam("uniform", schema.one_of(*WEIGHTINGS),
                               "allowed values are 'uniform' (Alg. 1), 'samples'"),
    "control_variate": schema.HParam(
        "auto", schema.one_of(*CONTROL_VARIATES),
        "allowed values are 'auto' (option2 with plain SGD clients, else "
        "mean_gradient), 'option1', 'option2', 'mean_gradient'"),
})


def resolve_control_variate(choice: str, client_cfg) -> str:
  """``"option2"`` or ``"mean_gradient"`` for option ``choice`` given the client
  config (``auto``: option II with plain SGD clients, the mean raw gradient with
  any other optimizer)."""
  if choice != "auto":
    return choice
  optimizer = "sgd" if client_cfg is None else client_cfg.get("optimizer", "sgd")
  return "option2" if optimizer == "sgd" else "mean_gradient"


def with_gradient_sum(optimizer: optax.GradientTransformation, correction
                      ) -> optax.GradientTransformation:
  """``optimizer`` applied to ``correction(g)``, its state extended with Σ g over
  the steps it updated (the raw gradients; a masked, inactive step leaves the
  state and so the sum unchanged). State: ``(gradient sum, inner state)``."""

  def init(params):
    return trees.tree_zeros_like(params), optimizer.init(params)

  def update(grads, state, params=None):
    grad_sum, inner = state
    updates, inner = optimizer.update(correction(grads), inner, params)
    return updates, (trees.tree_add(grad_sum, grads), inner)

  return optax.GradientTransformation(init, update)


def full_local_gradient(loss_fn, params, view, key, batch_size):
  """g_k(x): the gradient of client k's mean loss over all its n_k samples at
  ``params`` (SCAFFOLD option I), as a pytree like ``params``.

  One pass over ``view.index[:view.size]`` in mini-batches of ``batch_size``
  (``ceil(n_max / B)`` static steps, padding masked); batch j's mean-loss
  gradient is weighted by its count of valid samples, so the result is the mean
  per-sample gradient whatever B. ``loss_fn`` is ``local_train``'s
  ``(params, x, y, mask, key) -> (loss, aux)``.
  """
  n_max = view.index.shape[0]
  steps = -(-n_max // batch_size)
  index = jnp.pad(view.index, (0, steps * batch_size - n_max))
  grad_fn = jax.grad(lambda p, x, y, m, k: loss_fn(p, x, y, m, k)[0])

  def body(total, j):
    start = j * batch_size
    rows = jax.lax.dynamic_slice(index, (start,), (batch_size,))
    mask = start + jnp.arange(batch_size) < view.size
    grads = grad_fn(params, view.x[rows], view.y[rows], mask, jax.random.fold_in(key, j))
    count = jnp.sum(mask.astype(jnp.float32))
    return jax.tree.map(lambda t, g: t + count * g, total, grads), None

  total, _ = jax.lax.scan(body, trees.tree_zeros_like(params), jnp.arange(steps))
  n = jnp.maximum(view.size.astype(jnp.float32), 1.0)
  return trees.tree_scale(total, 1.0 / n)


def cohort_weights(weights, mask, client_size, weighting):
  """Server weights ``(p [S], q [S])`` of the model and control-variate updates.

  ``weights`` are the engine's ``n_k · mask``; ``client_size [K]`` holds every
  client's n_k. ``p`` sums to one over the participating slots; ``q`` is each
  participant's share of the whole population (n_k / n, or 1/N).
  """
  m = mask.astype(jnp.float32)
  if weighting == "uniform":
    return agg.normalize_weights(m), m / client_size.shape[0]
  total = jnp.sum(client_size.astype(jnp.float32))
  return agg.normalize_weights(weights, mask), weights * m / total


def weighted_sum(stacked, q):
  """Σ_k q_k x_k over the leading axis (no normalisation)."""
  return jax.tree.map(lambda x: jnp.tensordot(q.astype(x.dtype), x, axes=(0, 0)), stacked)


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
  training = ctx.training
  loss_fn = tasks.supervised_loss(ctx.model, ctx.task)
  server_lr, weighting = hp["server_lr"], hp["weighting"]
  control_variate = resolve_control_variate(hp["control_variate"], ctx.client_cfg)
  client_size = jnp.asarray(ctx.data_info.client_size)

  def init(key, params0, num_clients, data_info):
    del key, data_info
    zeros = trees.tree_zeros_like(params0)
    return ({"params": params0, "c": zeros},
            {"c": trees.stack_for_clients(zeros, num_clients)})

  def broadcast(server_state):
    return {"params": server_state["params"], "c": server_state["c"]}

  def client_update(payload, client_state, view, key, round_index):
    lr = training.lr_schedule(round_index)
    x, c = payload["params"], payload["c"]
    c_k = client_state["c"]

    def correct(grads):
      # g − c_k + c   (Alg. 1, local update)
      return jax.tree.map(lambda g, ck, cs: g - ck + cs, grads, c_k, c)

    if control_variate == "option1":
      y, _, metrics = local_training.local_train(
          x, training.optimizer.init(x), view, key, lr, loss_fn, training,
          step_hook=lambda grads, params, step: correct(grads))
      steps = metrics["steps"]
      g_x = full_local_gradient(loss_fn, x, view,
                                jax.random.fold_in(key, OPTION1_KEY_TAG),
                                training.batch_size)
      # c_k⁺ = g_k(x)   (Alg. 1, option I; a client with no active step keeps c_k)
      c_new = jax.tree.map(lambda ck, g: jnp.where(steps > 0, g, ck), c_k, g_x)
    elif control_variate == "mean_gradient":
      optimizer = with_gradient_sum(training.optimizer, correct)
      y, (grad_sum, _), metrics = local_training.local_train(
          x, optimizer.init(x), view, key, lr, loss_fn, training, optimizer=optimizer)
      steps = metrics["steps"]
      # c_k⁺ = mean of the raw gradients over the active steps (= option II for SGD)
      c_new = jax.tree.map(
          lambda ck, gs: jnp.where(steps > 0, gs / jnp.maximum(steps, 1.0), ck),
          c_k, grad_sum)
    else:
      opt_state = training.optimizer.init(x)
      y, _, metrics = local_training.local_train(
          x, opt_state, view, key, lr, loss_fn, training,
          step_hook=lambda grads, params, step: correct(grads))
      steps = metrics["steps"]
      scale = 1.0 / (jnp.maximum(steps, 1.0) * lr)
      # c_k⁺ = c_k − c + (x − y_k)/(K_k η)   (Alg. 1, option II)
      # (a client with no active step keeps its c_k)
      c_new = jax.tree.map(
          lambda ck, cs, a, b: jnp.where(steps > 0, ck - cs + (a - b) * scale, ck),
          c_k, c, x, y)
    delta_y = trees.tree_sub(y, x)
    delta_c = trees.tree_sub(c_new, c_k)
    metrics["update_norm"] = trees.tree_norm(delta_y)
    metrics["control_norm"] = trees.tree_norm(c_new)
    return {"delta": delta_y, "delta_c": delta_c}, {"c": c_new}, metrics

  def aggregate(server_state, client_states, messages, weights, mask, key):
    del key
    p, q = cohort_weights(weights, mask, client_size, weighting)
    mean_delta = weighted_sum(messages["delta"], p)
    # x ← x + η_g Σ p_k Δy_k;  c ← c + Σ q_k Δc_k   (Alg. 1, server update)
    params = trees.tree_add(server_state["params"], trees.tree_scale(mean_delta,
                                                                     server_lr))
    c = trees.tree_add(server_state["c"], weighted_sum(messages["delta_c"], q))
    return contract.ServerUpdate({"params": params, "c": c}, client_states,
                                 {"control_norm": trees.tree_norm(c)})

  return contract.FedAlgorithm("scaffold", init, broadcast, client_update, aggregate,
                           contract.eval_global_params)


ENTRIES = (
    contract.AlgorithmEntry(
        "scaffold", build, HPARAMS,
        "SCAFFOLD: control variates correct client drift"),
)
