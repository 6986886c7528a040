"""FedAvgM (Hsu, Qi & Brown 2019, "Measuring the effects of non-identical data
distribution for federated visual classification"): FedAvg with server momentum.

Clients run the same local training as FedAvg and upload Δ_k = w_k − w_t. The
server keeps a momentum buffer v (zeros at t = 0) and applies

  Δ̄_t = Σ_{k∈S_t} p_k Δ_k,   p_k = n_k / Σ_{j∈S_t} n_j
  v_{t+1} = β v_t + Δ̄_t                      # Hsu et al. 2019 (server momentum)
  w_{t+1} = w_t + η_g v_{t+1}

(the paper writes the same update with the pseudo-gradient −Δ̄ and w ← w − v).
β = 0 with η_g = 1 is FedAvg. Option ``nesterov=True`` takes the Nesterov step of
the same buffer (the form of PyTorch's and optax's SGD; Sutskever et al. 2013):

  v_{t+1} = β v_t + Δ̄_t,   w_{t+1} = w_t + η_g (Δ̄_t + β v_{t+1})   # Nesterov

The effective server step grows like η_g / (1 − β), so large β usually wants
η_g < 1 (Hsu et al. keep η_g (1−β)⁻¹ near 1).
"""
from __future__ import annotations

from fedfrac.algorithms import contract, local_training, schema, server, tasks, trees


def _momentum(v):
  return schema.non_negative(v) and v < 1


HPARAMS = schema.HParamSchema({
    "server_lr": schema.HParam(1.0, schema.positive, "server learning rate; must be > 0"),
    "momentum": schema.HParam(0.9, _momentum, "server momentum β; must be in [0, 1)"),
    "nesterov": schema.HParam(False, schema.boolean,
                              "Nesterov server momentum; must be True or False"),
})


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
  training = ctx.training
  loss_fn = tasks.supervised_loss(ctx.model, ctx.task)
  server_lr, beta = hp["server_lr"], hp["momentum"]

  def init(key, params0, num_clients, data_info):
    del key, num_clients, data_info
    return {"params": params0, "momentum": trees.tree_zeros_like(params0)}, None

  def client_update(payload, client_state, view, key, round_index):
    delta, metrics = local_training.local_delta(payload, view, key, round_index, loss_fn,
                                                training)
    return delta, client_state, metrics

  def aggregate(server_state, client_states, messages, weights, mask, key):
    mean_delta, _ = server.combine_deltas(messages, weights, mask, key, ctx.aggregator)
    # v ← β v + Δ̄;  w ← w + η_g v   (Hsu et al. 2019, FedAvgM)
    v = trees.tree_add(trees.tree_scale(server_state["momentum"], beta), mean_delta)
    step = v
    if hp["nesterov"]:
      # w ← w + η_g (Δ̄ + β v)   (Nesterov)
      step = trees.tree_add(mean_delta, trees.tree_scale(v, beta))
    params = trees.tree_add(server_state["params"], trees.tree_scale(step, server_lr))
    return contract.ServerUpdate({"params": params, "momentum": v}, client_states,
                                 {"momentum_norm": trees.tree_norm(v)})

  return contract.FedAlgorithm("fedavgm", init, contract.broadcast_params,
                           client_update, aggregate, contract.eval_global_params)


ENTRIES = (
    contract.AlgorithmEntry(
        "fedavgm", build, HPARAMS,
        "FedAvgM: FedAvg with server momentum", robust_aggregation=True),
)
