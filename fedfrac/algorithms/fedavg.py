"""FedAvg (McMahan et al. 2017, Alg. 1): local SGD, sample-weighted model average.

Clients start each round from the global model with a fresh client optimizer
state, run E epochs (or H steps) of the configured optax optimizer and upload
their model delta Δ_k = w_k − w_t. The server sets
w_{t+1} = w_t + η_g Σ_k p_k Δ_k with p_k = n_k / Σ_{j∈S_t} n_j (η_g = 1 is FedAvg).
The sample-weighted mean can be swapped for a robust rule (median, trimmed mean,
Krum) with the config's ``server`` section (``fedfrac.algorithms.server``).
"""
from __future__ import annotations


from fedfrac.algorithms import contract, local_training, schema, tasks
from fedfrac.algorithms import server


HPARAMS = schema.HParamSchema({
    "server_lr": schema.HParam(1.0, schema.positive, "server learning rate; must be > 0"),
})


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
  training = ctx.training
  loss_fn = tasks.supervised_loss(ctx.model, ctx.task)
  server_lr = hp["server_lr"]

  def client_update(payload, client_state, view, key, round_index):
    delta, metrics = local_training.local_delta(payload, view, key, round_index, loss_fn,
                                                training)
    return delta, client_state, metrics

  aggregate = server.global_delta_aggregate(ctx.aggregator, server_lr)

  return contract.FedAlgorithm("fedavg", contract.init_global_model,
                               contract.broadcast_params,
                           client_update, aggregate, contract.eval_global_params)


ENTRIES = (
    contract.AlgorithmEntry(
        "fedavg", build, HPARAMS,
        "FedAvg: local SGD, sample-weighted model average", robust_aggregation=True),
)
