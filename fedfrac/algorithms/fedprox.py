"""FedProx (Li et al. 2020, "Federated Optimization in Heterogeneous Networks", Alg. 2).

Client k approximately minimises the proximal objective

  h_k(w; w_t) = F_k(w) + (μ/2) ‖w − w_t‖²            # Li et al. 2020, Alg. 2 / eq. (2)

with the configured local optimizer: every mini-batch gradient g gets the
proximal gradient added, g + μ (w − w_t), before the optimizer step (so any
optax client optimizer sees the gradient of h_k). The reported ``loss`` is the
task loss F_k only. The server is FedAvg: w_{t+1} = w_t + Σ_k p_k Δ_k with
p_k = n_k / Σ_{j∈S_t} n_j. μ = 0 is FedAvg exactly. Option ``server_optimizer``:
any optax optimizer as the server step instead, as for FedAvg
(:mod:`fedfrac.algorithms.server_optimizer`).

The paper's handling of stragglers (variable local work γ_k) maps to the engine's
per-client step counts (epoch mode gives each client E·⌈n_k/B⌉ steps).
"""
from __future__ import annotations

import jax

from fedfrac.algorithms import contract, local_training, schema, server, tasks, trees
from fedfrac.algorithms import server_optimizer as server_opt
from fedfrac.algorithms.fedavg import SERVER_OPTIMIZER


HPARAMS = schema.HParamSchema({
    "mu": schema.HParam(0.01, schema.non_negative, "proximal weight μ; must be >= 0"),
    "server_optimizer": SERVER_OPTIMIZER,
}, checks=(lambda hp: server_opt.problem(hp["server_optimizer"]),))


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
  training = ctx.training
  loss_fn = tasks.supervised_loss(ctx.model, ctx.task)
  mu = hp["mu"]

  def client_update(payload, client_state, view, key, round_index):
    def proximal(grads, params, step):
      del step
      # ∇h_k = ∇F_k(w) + μ (w − w_t)   (Li et al. 2020, eq. (2))
      return jax.tree.map(lambda g, w, w0: g + mu * (w - w0), grads, params, payload)

    delta, metrics = local_training.local_delta(payload, view, key, round_index, loss_fn,
                                                training, step_hook=proximal)
    return delta, client_state, metrics

  def aggregate(server_state, client_states, messages, weights, mask, key):
    mean_delta, _ = server.combine_deltas(messages, weights, mask, key, ctx.aggregator)
    return contract.ServerUpdate(
        {"params": trees.tree_add(server_state["params"], mean_delta)}, client_states)

  init = contract.init_global_model
  tx = server_opt.transformation(hp.get("server_optimizer"))
  if tx is not None:   # ServerOpt(w_t, −Δ̄_t) (Reddi et al. 2021, Alg. 1)
    init, aggregate = server_opt.server_step(tx, ctx.aggregator)

  return contract.FedAlgorithm("fedprox", init, contract.broadcast_params,
                               client_update, aggregate, contract.eval_global_params)


ENTRIES = (
    contract.AlgorithmEntry(
        "fedprox", build, HPARAMS,
        "FedProx: local proximal term mu/2 ||w - w_t||^2", robust_aggregation=True,
        asynchronous=True),
)
