"""FedAvg (McMahan et al. 2017, Alg. 1): local SGD, sample-weighted model average.

Clients start each round from the global model with a fresh client optimizer
state, run E epochs (or H steps) of the configured optax optimizer and upload
their model delta Δ_k = w_k − w_t. The server sets
w_{t+1} = w_t + η_g Σ_k p_k Δ_k with p_k = n_k / Σ_{j∈S_t} n_j (η_g = 1 is FedAvg).
The sample-weighted mean can be swapped for a robust rule (median, trimmed mean,
Krum) with the config's ``server`` section (``fedfrac.algorithms.server``).
"""
from __future__ import annotations


from fedfrac.algorithms import base
from fedfrac.algorithms import server

ROBUST_AGGREGATION = True

HPARAMS = {
    "server_lr": base.HParam(1.0, base.positive, "server learning rate; must be > 0"),
}


def build(ctx: base.BuildContext, hp: dict) -> base.FedAlgorithm:
  training = ctx.training
  loss_fn = base.supervised_loss(ctx.model, ctx.task)
  server_lr = hp["server_lr"]

  def init(key, params0, num_clients, data_info):
    del key, num_clients, data_info
    return {"params": params0}, None

  def broadcast(server_state):
    return server_state["params"]

  def client_update(payload, client_state, view, key, round_index):
    lr = training.lr_schedule(round_index)
    opt_state = training.optimizer.init(payload)
    params, _, metrics = base.local_train(payload, opt_state, view, key, lr, loss_fn,
                                          training)
    delta = base.tree_sub(params, payload)
    metrics["update_norm"] = base.tree_norm(delta)
    return delta, client_state, metrics

  def aggregate(server_state, client_states, messages, weights, mask, key):
    delta, info = server.combine_deltas(messages, weights, mask, key, ctx.aggregator)
    params = base.tree_add(server_state["params"], base.tree_scale(delta, server_lr))
    return {"params": params}, client_states, info

  def eval_params(server_state, client_state):
    del client_state
    return server_state["params"]

  return base.FedAlgorithm("fedavg", init, broadcast, client_update, aggregate,
                           eval_params)


