"""FedDyn (Acar et al. 2021, "Federated Learning Based on Dynamic Regularization",
Alg. 1).

Client k keeps h_k, its running estimate of ∇L_k at its last local model (zeros
at t = 0, one row per client). In round t it approximately minimises

  L_k(θ) − ⟨h_k, θ⟩ + (α/2) ‖θ − θ^{t−1}‖²                  # Alg. 1, client objective

with the configured local optimizer: every mini-batch gradient g becomes
g − h_k + α (θ − θ^{t−1}) before the optimizer step (the reported ``loss`` is L_k
only). With the new local model θ_k^t it updates and uploads Δ_k = θ_k^t − θ^{t−1}:

  h_k ← h_k − α Δ_k                                         # Alg. 1, first-order condition

The server keeps h (zeros at t = 0) and sets

  h^t = h^{t−1} − α Σ_{k∈P_t} q_k Δ_k                        # Alg. 1, server state
  θ^t = θ^{t−1} + Σ_{k∈P_t} p_k Δ_k − h^t / α                # Alg. 1, server model

Weighting (option ``weighting``):
  ``"uniform"`` (default, Alg. 1 as printed): p_k = 1/|P_t|, q_k = 1/m (m = all
    clients), i.e. h^t = h^{t−1} − α (|P_t|/m) mean_k Δ_k and h = (1/m) Σ_k h_k.
  ``"samples"`` (the FedAvg convention of the other fedfrac methods):
    p_k = n_k / Σ_{j∈P} n_j and q_k = n_k / n, which keeps h = Σ_k (n_k/n) h_k
    over all clients (the sample-weighted objective).
With equal client sizes the two agree. The paper tunes α ∈ {0.1, 0.01, 0.001}.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from fedfrac.algorithms import contract, local_training, schema, tasks, trees
from fedfrac.algorithms.scaffold import WEIGHTINGS, cohort_weights, weighted_sum

HPARAMS = schema.HParamSchema({
    "alpha": schema.HParam(0.01, schema.positive, "regularisation α; must be > 0"),
    "weighting": schema.HParam("uniform", schema.one_of(*WEIGHTINGS),
                               "allowed values are 'uniform' (Alg. 1), 'samples'"),
})


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
  training = ctx.training
  loss_fn = tasks.supervised_loss(ctx.model, ctx.task)
  alpha, weighting = hp["alpha"], hp["weighting"]
  client_size = jnp.asarray(ctx.data_info.client_size)

  def init(key, params0, num_clients, data_info):
    del key, data_info
    zeros = trees.tree_zeros_like(params0)
    return ({"params": params0, "h": zeros},
            {"h": trees.stack_for_clients(zeros, num_clients)})

  def client_update(payload, client_state, view, key, round_index):
    lr = training.lr_schedule(round_index)
    h_k = client_state["h"]

    def dynamic(grads, params, step):
      del step
      # ∇[L_k(θ) − ⟨h_k, θ⟩ + α/2 ‖θ − θ^{t−1}‖²]   (Alg. 1)
      return jax.tree.map(lambda g, h, w, w0: g - h + alpha * (w - w0),
                          grads, h_k, params, payload)

    opt_state = training.optimizer.init(payload)
    params, _, metrics = local_training.local_train(payload, opt_state, view, key, lr,
                                                    loss_fn, training, step_hook=dynamic)
    delta = trees.tree_sub(params, payload)
    # h_k ← h_k − α (θ_k^t − θ^{t−1})   (Alg. 1)
    h_new = jax.tree.map(lambda h, d: h - alpha * d, h_k, delta)
    metrics["update_norm"] = trees.tree_norm(delta)
    return delta, {"h": h_new}, metrics

  def aggregate(server_state, client_states, messages, weights, mask, key):
    del key
    p, q = cohort_weights(weights, mask, client_size, weighting)
    # h^t = h^{t−1} − α Σ q_k Δ_k;  θ^t = θ^{t−1} + Σ p_k Δ_k − h^t/α   (Alg. 1)
    h = jax.tree.map(lambda h, s: h - alpha * s, server_state["h"],
                     weighted_sum(messages, q))
    mean_delta = weighted_sum(messages, p)
    params = jax.tree.map(lambda w, d, hh: w + d - hh / alpha,
                          server_state["params"], mean_delta, h)
    return contract.ServerUpdate({"params": params, "h": h}, client_states,
                                 {"h_norm": trees.tree_norm(h)})

  return contract.FedAlgorithm("feddyn", init, contract.broadcast_params,
                           client_update, aggregate, contract.eval_global_params)


ENTRIES = (
    contract.AlgorithmEntry(
        "feddyn", build, HPARAMS,
        "FedDyn: dynamic regularisation of the local objective"),
)
