"""FedBM (Ping, Fu, Zhao, Liu, Pu & Ding, "FedBM: Balancing models for personalized
federated learning", Future Generation Computer Systems, article 108238, 2025;
FOFedAvg ref. [36]).

Source. The original paper's text could not be found here, so this module is our
reading of its title and of FOFedAvg's description (a personalized method that
mitigates bias under heterogeneity); no equation numbers are cited.

Balancing. Each client k keeps its own model θ_k (one row per client,
initialised to the initial global model). In round t it starts local training
from the balanced model

  v_k = β w_t + (1 − β) θ_k                                    # global/local balance

runs the configured local optimizer for its H_k steps to get v_k', keeps
θ_k ← v_k' and uploads Δ_k = v_k' − w_t. The server is FedAvg:
w_{t+1} = w_t + Σ_k p_k Δ_k, p_k = n_k / Σ_j n_j (robust rules apply through
``config.server``). Each client is evaluated on its balanced model
β w + (1 − β) θ_k. β = 1 is FedAvg exactly (start, upload and evaluation all use
w_t); smaller β keeps more of the client's own model.
"""
from __future__ import annotations

import jax

from fedfrac.algorithms import contract, local_training, schema, server, tasks, trees

HPARAMS = schema.HParamSchema({
    "beta": schema.HParam(0.5, schema.unit_interval,
                          "weight β of the global model in the balanced model; in [0, 1]"),
})


def balance(global_params, local_params, beta):
  """β w + (1 − β) θ, leaf-wise."""
  return jax.tree.map(lambda g, l: beta * g + (1.0 - beta) * l, global_params, local_params)


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
  training = ctx.training
  loss_fn = tasks.supervised_loss(ctx.model, ctx.task)
  beta = hp["beta"]

  def init(key, params0, num_clients, data_info):
    del key, data_info
    return {"params": params0}, trees.stack_for_clients(params0, num_clients)

  def client_update(payload, client_state, view, key, round_index):
    start = balance(payload, client_state, beta)
    lr = training.lr_schedule(round_index)
    trained, _, metrics = local_training.local_train(start, training.optimizer.init(start), view,
                                           key, lr, loss_fn, training)
    delta = trees.tree_sub(trained, payload)
    metrics["update_norm"] = trees.tree_norm(delta)
    return delta, trained, metrics

  aggregate = server.global_delta_aggregate(ctx.aggregator, 1.0)

  def eval_params(server_state, client_state):
    return balance(server_state["params"], client_state, beta)

  return contract.FedAlgorithm("fedbm", init, contract.broadcast_params, client_update, aggregate,
                           eval_params, personalized=True)


ENTRIES = (
    contract.AlgorithmEntry("fedbm", build, HPARAMS,
                            "FedBM (our reading): clients train from a beta-balanced "
                            "global/personal model", robust_aggregation=True),
)
