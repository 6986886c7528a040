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
client optimizers (Adam, …) have no such a and are rejected. With equal τ_k
and plain SGD FedNova equals FedAvg. Each client uploads (Δ_k, ‖a_k‖₁).

Proximal variant (option ``mu`` > 0; FedNova on FedProx's local objective,
F_k(w) + μ/2 ‖w − w_t‖², §4 of the paper): every local SGD step is
w ← w − η (g + μ (w − w_t)), i.e. w − w_t shrinks by (1 − ημ) per step, so

  a = ((1 − ημ)^{τ−1}, …, 1 − ημ, 1),   ‖a‖₁ = [1 − (1 − ημ)^τ] / (ημ)   # FedProx a_k

and τ_eff = Σ p_k ‖a_k‖₁ as above (the authors' code uses Σ p_k τ_k there). It
needs plain SGD clients (``client.optimizer="sgd"``, the paper's setting) and
ημ < 1.

Server momentum (option ``server_momentum`` β > 0; the authors' ``gmf``,
SlowMo with slow learning rate 1): the server keeps v (zeros at t = 0) in
gradient units and, with η_t the round's client learning rate,

  v ← β v + τ_eff Σ_k p_k d_k / η_t,   w_{t+1} = w_t + η_t v   # server momentum

with t the server's count of its own updates (state ``round``). With a constant
η this is FedAvgM's v ← β v + Δ, w ← w + v on the FedNova step. β = 0 (default)
is the plain FedNova update above, bit for bit.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from fedfrac._validation import concrete_scalar
from fedfrac.algorithms import schema, contract, local_training, tasks, trees
from fedfrac.ops import aggregate as agg

CLIENT_OPTIMIZERS = ("sgd", "momentum", "nesterov")



def _momentum(v):
  return schema.non_negative(v) and v < 1


HPARAMS = schema.HParamSchema({
    "mu": schema.HParam(0.0, schema.non_negative,
                        "proximal strength μ of the FedProx variant; must be >= 0 "
                        "(0 = FedNova on plain local SGD)"),
    "server_momentum": schema.HParam(0.0, _momentum,
                                     "server momentum β; must be in [0, 1) "
                                     "(0 = none)"),
})


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


def a_norm_proximal(num_steps, shrink):
  """‖a‖₁ = [1 − (1 − ημ)^τ]/(ημ) of τ = ``num_steps`` proximal SGD steps with
  ``shrink`` = ημ in (0, 1) (see module docstring), ``[...]`` float32."""
  tau = jnp.asarray(num_steps, jnp.float32)
  shrink = jnp.asarray(shrink, jnp.float32)
  return (1.0 - jnp.power(1.0 - shrink, tau)) / shrink   # Σ_{j<τ} (1 − ημ)^j


def _nonzero(v):
  c = concrete_scalar(v)
  return c is None or c != 0


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
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
  mu, beta = hp["mu"], hp["server_momentum"]
  proximal, use_momentum = _nonzero(mu), _nonzero(beta)
  if proximal and cc.optimizer != "sgd":
    raise ValueError(f"client.optimizer={cc.optimizer!r}: fednova's proximal variant "
                     f"(mu={mu!r}) has the closed-form a_k of plain SGD only; allowed "
                     f"value is 'sgd' (or set mu=0)")
  if proximal:
    shrink = concrete_scalar(mu * training.lr_schedule(0))
    if shrink is not None and not shrink < 1:
      raise ValueError(f"mu={mu!r}: fednova's proximal variant needs client.lr·mu < 1 "
                       f"(got {shrink:g})")

  def client_update(payload, client_state, view, key, round_index):
    if proximal:
      # ∇[F_k(w) + μ/2 ‖w − w_t‖²] = g + μ (w − w_t)   (FedProx local objective)
      hook = lambda grads, params, step: jax.tree.map(
          lambda g, w, w0: g + mu * (w - w0), grads, params, payload)
      delta, metrics = local_training.local_delta(payload, view, key, round_index,
                                                  loss_fn, training, step_hook=hook)
      norm = a_norm_proximal(metrics["steps"], mu * training.lr_schedule(round_index))
    else:
      delta, metrics = local_training.local_delta(payload, view, key, round_index,
                                                  loss_fn, training)
      norm = a_norm(metrics["steps"], rho, nesterov)
    metrics["a_norm"] = norm
    return {"delta": delta, "a_norm": norm}, client_state, metrics

  def init(key, params0, num_clients, data_info):
    server_state, clients = contract.init_global_model(key, params0, num_clients,
                                                       data_info)
    if use_momentum:
      server_state = {**server_state, "momentum": trees.tree_zeros_like(params0),
                      "round": jnp.zeros((), jnp.int32)}
    return server_state, clients

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
    if not use_momentum:
      params = trees.tree_add(server_state["params"], step)
      return contract.ServerUpdate({"params": params}, client_states, {"tau_eff": tau_eff})
    lr = training.lr_schedule(server_state["round"])   # η_t
    # v ← β v + step/η_t;  w ← w + η_t v   (server momentum, authors' gmf)
    v = jax.tree.map(lambda m, s: beta * m + s / lr, server_state["momentum"], step)
    params = jax.tree.map(lambda w, m: w + lr * m, server_state["params"], v)
    return contract.ServerUpdate(
        {"params": params, "momentum": v, "round": server_state["round"] + 1},
        client_states, {"tau_eff": tau_eff, "momentum_norm": trees.tree_norm(v)})

  return contract.FedAlgorithm("fednova", init, contract.broadcast_params,
                           client_update, aggregate, contract.eval_global_params)


ENTRIES = (
    contract.AlgorithmEntry(
        "fednova", build, HPARAMS,
        "FedNova: normalised averaging of local updates"),
)
