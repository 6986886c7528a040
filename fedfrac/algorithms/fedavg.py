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

  def client_update(payload, client_state, view, key, round_index):
    delta, metrics = base.local_delta(payload, view, key, round_index, loss_fn, training)
    return delta, client_state, metrics

  aggregate = server.global_delta_aggregate(ctx.aggregator, server_lr)

  return base.FedAlgorithm("fedavg", base.init_global_model, base.broadcast_params,
                           client_update, aggregate, base.eval_global_params)


