"""DPSGD inside each client (Abadi et al., "Deep Learning with Differential
Privacy", CCS 2016, Alg. 1): record-level differential privacy.

Every local step of every client replaces the mini-batch gradient by

    g_i   = ∇_w ℓ(w; x_i, y_i)                          (per example, vmap over the batch)
    ḡ_i   = g_i · min(1, C / ‖g_i‖₂)                     (Alg. 1, "clip gradient")
    g̃     = (Σ_{i ∈ batch} ḡ_i + N(0, σ² C² I)) / B      (Alg. 1, "add noise")

before the configured client optimizer step; B is the batch size (a fixed lot
size, so the denominator does not depend on the data; padded samples of a
partial batch contribute nothing to the sum). The uploaded message is the model
delta Δ_k = w_k − w_t and the server is FedAvg's sample-weighted mean. With
σ = 0 and C above every per-example gradient norm this is FedAvg (exactly the
mean gradient of full batches; a partial batch is divided by B instead of its
size).

This is *record-level* privacy (one training example of a client), unlike
``dp_fedavg`` (McMahan et al. 2018), which clips and noises each client's whole
update on the server side and protects a client's entire data set (user level).

Privacy: each local step of client k is a sampled Gaussian mechanism with noise
multiplier σ and sampling rate q_k = B / n_k, and a round composes τ_k steps. The
accountant (``fedfrac.ops.dp.PrivacyAccountant``, ``dp_accounting``, host side)
reports ``dp_epsilon``, the largest ε at δ over clients after t rounds, counting
every round as one the client took part in (an upper bound under client
sampling). The batch sampler draws fixed-size batches (epoch shuffles or B
distinct rows); the accountant treats them as Poisson sampling with rate q_k,
the usual approximation (Abadi et al. 2016, §3.1).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac._validation import is_traced
from fedfrac.algorithms import contract, local_training, schema, server, tasks, trees
from fedfrac.ops import dp

HPARAMS = schema.HParamSchema({
    "noise_multiplier": schema.HParam(1.0, schema.non_negative,
                                      "noise multiplier σ; must be >= 0"),
    "clip_norm": schema.HParam(1.0, schema.positive,
                               "per-example clip norm C; must be > 0"),
    "delta": schema.HParam(1e-5, schema.interval(0, 1, lo_open=True, hi_open=True),
                           "target δ of the (ε, δ) guarantee; must be in (0, 1)"),
    "accountant": schema.HParam("rdp", schema.one_of(*dp.ACCOUNTANTS),
                                f"allowed values are {', '.join(dp.ACCOUNTANTS)}"),
})

_NOISE_STREAM = 0x5D9   # fold_in constant separating the noise key from the model key


def clip_per_example(per_example_grads, clip_norm):
  """Clip each example's gradient to norm C (Abadi et al. 2016, Alg. 1).

  Args:
    per_example_grads: pytree with leaves ``[B, ...]``.
    clip_norm: C > 0.
  Returns:
    ``(clipped [B, ...] pytree, norms [B])`` with ‖clipped_i‖ ≤ C and norms the
    pre-clipping ‖g_i‖₂.
  """
  return jax.vmap(lambda g: dp.clip_update(g, clip_norm))(per_example_grads)


def privatize_gradients(per_example_grads, sample_mask, clip_norm, noise_multiplier,
                        key):
  """The noisy clipped batch gradient g̃ = (Σ_i m_i ḡ_i + N(0, σ²C² I)) / B.

  Args:
    per_example_grads: pytree with leaves ``[B, ...]``.
    sample_mask: ``[B]`` bool, False for padded samples (left out of the sum).
    clip_norm: C > 0; noise_multiplier: σ >= 0; key: PRNG key of the noise.
  Returns:
    ``(g̃ pytree [...], info)`` with info ``clip_fraction`` (share of the valid
    examples that were clipped) and ``noise_std`` (σC/B, the noise std in g̃).
  """
  clipped, norms = clip_per_example(per_example_grads, clip_norm)
  b = sample_mask.shape[0]
  m = sample_mask.astype(jnp.float32)
  total = jax.tree.map(
      lambda g: jnp.tensordot(m.astype(g.dtype), g, axes=(0, 0)), clipped)
  std = jnp.asarray(noise_multiplier, jnp.float32) * jnp.asarray(clip_norm, jnp.float32)
  noise = dp.gaussian_noise_like(total, key, std)
  grad = jax.tree.map(lambda t, z: (t + z) / jnp.asarray(b, t.dtype), total, noise)
  info = {"clip_fraction": jnp.sum(m * (norms > clip_norm)) / jnp.maximum(jnp.sum(m), 1.0),
          "noise_std": std / b}
  return grad, info


def dp_loss(model, task, clip_norm, noise_multiplier):
  """``loss_fn(params, x, y, mask, key) -> (loss, outputs)`` for ``local_train``
  whose gradient is the DPSGD gradient g̃ and whose value is the plain masked
  mean loss.

  The per-example gradients, their clipping and the noise are computed inside
  the loss; the returned value is ``stop_gradient(loss) + ⟨w, sg(g̃)⟩ − sg(⟨w, g̃⟩)``,
  whose value is the loss (the last two terms are the same float) and whose
  gradient with respect to ``w`` is exactly g̃.
  """
  def example_loss(params, x1, y1, key):
    out = model.apply(params, x1[None], train=True, key=key)
    return task.example_loss(out, y1[None])[0], out[0]

  per_example = jax.vmap(jax.value_and_grad(example_loss, has_aux=True),
                         in_axes=(None, 0, 0, None))

  def loss_fn(params, x, y, mask, key):
    (losses, outputs), grads = per_example(params, x, y, key)
    noisy, _ = privatize_gradients(grads, mask, clip_norm, noise_multiplier,
                                   jax.random.fold_in(key, _NOISE_STREAM))
    noisy = jax.lax.stop_gradient(noisy)
    loss = jax.lax.stop_gradient(tasks.masked_mean(losses, mask))
    inner = sum(jnp.vdot(w, g) for w, g in zip(jax.tree.leaves(params),
                                                jax.tree.leaves(noisy)))
    return loss + (inner - jax.lax.stop_gradient(inner)), outputs
  return loss_fn


def record_epsilon_curve(noise_multiplier, client_size, steps_per_round, batch_size,
                         delta, accountant="rdp"):
  """``rounds_done -> ε``: the largest record-level ε at δ over clients.

  Client k composes τ_k steps of the Poisson-sampled Gaussian mechanism with
  rate q_k = min(B / n_k, 1) per round. Host side. Clients sharing (q_k, τ_k)
  share one accountant.
  """
  pairs = sorted({(min(batch_size / max(float(n), 1.0), 1.0), int(t))
                  for n, t in zip(np.asarray(client_size), np.asarray(steps_per_round))
                  if n > 0})
  accs = [(dp.PrivacyAccountant(noise_multiplier, q, delta, accountant), t)
          for q, t in pairs]
  curve = [0.0]

  def epsilon(rounds_done):
    rounds_done = int(rounds_done)
    while len(curve) <= rounds_done:
      curve.append(max((a.step(t).epsilon for a, t in accs), default=0.0))
    return curve[rounds_done]
  return epsilon


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
  training = ctx.training
  clip_norm, noise_multiplier = hp["clip_norm"], hp["noise_multiplier"]
  loss_fn = dp_loss(ctx.model, ctx.task, clip_norm, noise_multiplier)

  def client_update(payload, client_state, view, key, round_index):
    delta, metrics = local_training.local_delta(payload, view, key, round_index, loss_fn,
                                                training)
    return delta, client_state, metrics

  def aggregate(server_state, client_states, messages, weights, mask, key):
    mean_delta, info = server.combine_deltas(messages, weights, mask, key, ctx.aggregator)
    return contract.ServerUpdate(
        {"params": trees.tree_add(server_state["params"], mean_delta)}, client_states, info)

  host_metrics = None
  if not (is_traced(noise_multiplier) or is_traced(hp["delta"])):
    sizes = np.asarray(ctx.data_info.client_size)
    curve = record_epsilon_curve(float(noise_multiplier), sizes,
                                 training.steps_for(sizes), training.batch_size,
                                 float(hp["delta"]), hp["accountant"])
    host_metrics = lambda rounds_done: {"dp_epsilon": curve(rounds_done)}

  return contract.FedAlgorithm("dp_sgd", contract.init_global_model,
                               contract.broadcast_params, client_update, aggregate,
                               contract.eval_global_params, host_metrics=host_metrics)


ENTRIES = (
    contract.AlgorithmEntry(
        "dp_sgd", build, HPARAMS,
        "DPSGD: record-level DP (per-example clipping + Gaussian noise each local step)",
        robust_aggregation=True),
)
