"""FedNova (Wang et al. 2020, "Tackling the Objective Inconsistency Problem in
Heterogeneous Federated Optimization": the FedNova update and its momentum
correction).

Clients run different numbers of local steps τ_k (epoch mode: E·⌈n_k/B⌉), which
makes FedAvg optimise an inconsistent, τ-weighted objective. FedNova writes each
client's update as Δ_k = w_k − w_t = −η G_k a_k, where G_k stacks the τ_k
mini-batch gradients and a_k ≥ 0 holds their accumulated coefficients, and
averages the normalised updates:

  d_k = Δ_k / ‖a_k‖₁                                   # normalised update
  τ_eff = Σ_{k∈S} p_k ‖a_k‖₁                           # the paper's default τ_eff
  w_{t+1} = w_t + τ_eff Σ_{k∈S} p_k d_k                # FedNova server update
  with p_k = n_k / Σ_{j∈S} n_j.

‖a_k‖₁ for the client optimizers whose coefficients are data independent, with
τ = τ_k the client's active local steps this round and ρ = ``client.momentum``
(the optimizer state restarts every round):

  ``sgd``:       a = (1, …, 1),                         ‖a‖₁ = τ
  ``momentum``:  a_j = (1 − ρ^{τ−j}) / (1 − ρ)          (heavy ball, optax ``trace``)
                 ‖a‖₁ = [τ − ρ (1 − ρ^τ)/(1 − ρ)] / (1 − ρ)       # momentum a_k
  ``nesterov``:  a_j = 1 + ρ (1 − ρ^{τ−j}) / (1 − ρ)
                 ‖a‖₁ = τ + ρ/(1 − ρ) · [τ − ρ (1 − ρ^τ)/(1 − ρ)]

Weight decay counts as part of the gradient (it does not change a). Adaptive
client optimizers (Adam, …) have no such a and are rejected. The proximal
variant of the paper (FedProx local objective) is not implemented. With equal τ_k
and plain SGD FedNova equals FedAvg. Each client uploads (Δ_k, ‖a_k‖₁).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from fedfrac.algorithms import schema, contract, local_training, tasks, trees
from fedfrac.ops import aggregate as agg

CLIENT_OPTIMIZERS = ("sgd", "momentum", "nesterov")

HPARAMS = schema.HParamSchema({})


def a_norm(num_steps, momentum=0.0, nesterov=False):
  """‖a‖₁ of τ = ``num_steps`` steps of SGD with momentum ρ (see module docstring).

  Args:
    num_steps: ``[...]`` float steps τ ≥ 0.
    momentum: ρ in [0, 1) (0 is plain SGD).
    nesterov: Nesterov momentum (optax ``nesterov=True``) instead of heavy ball.
  Returns:
    ``[...]`` float32 ‖a‖₁.
  """
  tau = jnp.asarray(num_steps, jnp.float32)
  rho = jnp.asarray(momentum, jnp.float32)
  one_minus = 1.0 - rho
  # Σ_{i=1}^{τ} ρ^i = ρ (1 − ρ^τ)/(1 − ρ)
  geometric = rho * (1.0 - jnp.power(rho, tau)) / one_minus
  heavy_ball = (tau - geometric) / one_minus      # Wang et al. 2020 (momentum a_k)
  if nesterov:
    return tau + rho * heavy_ball
  return heavy_ball


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
  del hp
  training = ctx.training
  loss_fn = tasks.supervised_loss(ctx.model, ctx.task)
  cc = ctx.client_cfg
  if cc is None:
    raise ValueError("fednova needs the client optimizer settings (BuildContext."
                     "client_cfg) to compute its normalising vector a_k")
  if cc.optimizer not in CLIENT_OPTIMIZERS:
    raise ValueError(
        f"client.optimizer={cc.optimizer!r}: fednova needs a client optimizer with "
        f"data-independent step coefficients; allowed values are "
        f"{', '.join(CLIENT_OPTIMIZERS)}")
  rho = 0.0 if cc.optimizer == "sgd" else float(cc.momentum)
  nesterov = cc.optimizer == "nesterov"

  def client_update(payload, client_state, view, key, round_index):
    delta, metrics = local_training.local_delta(payload, view, key, round_index, loss_fn,
                                                training)
    norm = a_norm(metrics["steps"], rho, nesterov)
    metrics["a_norm"] = norm
    return {"delta": delta, "a_norm": norm}, client_state, metrics

  def aggregate(server_state, client_states, messages, weights, mask, key):
    del key
    p = agg.normalize_weights(weights, mask)
    norms = messages["a_norm"]
    # d_k = Δ_k/‖a_k‖₁ (normalised update); τ_eff = Σ p_k ‖a_k‖₁;
    # w ← w + τ_eff Σ p_k d_k (FedNova update)
    inv = jnp.where(norms > 0, 1.0 / jnp.where(norms > 0, norms, 1.0), 0.0)
    tau_eff = jnp.sum(p * norms)
    coef = tau_eff * p * inv
    step = jax.tree.map(lambda d: jnp.tensordot(coef.astype(d.dtype), d, axes=(0, 0)),
                        messages["delta"])
    params = trees.tree_add(server_state["params"], step)
    return {"params": params}, client_states, {"tau_eff": tau_eff}

  return contract.FedAlgorithm("fednova", contract.init_global_model,
                               contract.broadcast_params,
                           client_update, aggregate, contract.eval_global_params)


ENTRIES = (
    contract.AlgorithmEntry(
        "fednova", build, HPARAMS,
        "FedNova: normalised averaging of local updates"),
)
