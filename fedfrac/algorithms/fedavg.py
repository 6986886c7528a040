"""FedAvg (McMahan et al. 2017, Alg. 1): local SGD, sample-weighted model average.

Clients start each round from the global model with a fresh client optimizer
state, run E epochs (or H steps) of the configured optax optimizer and upload
their model delta Δ_k = w_k − w_t. The server sets
w_{t+1} = w_t + η_g Σ_k p_k Δ_k with p_k = n_k / Σ_{j∈S_t} n_j (η_g = 1 is FedAvg).
The sample-weighted mean can be swapped for a robust rule (median, trimmed mean,
Krum) with the config's ``server`` section (``fedfrac.algorithms.server``).

Option ``server_optimizer``: any optax optimizer as the server step instead
(``optax.adam(1e-2)`` from Python, ``"adam(0.01)"`` in a config), fed the
pseudo-gradient −Σ_k p_k Δ_k (Reddi et al. 2021, Alg. 1;
:mod:`fedfrac.algorithms.server_optimizer`): ``optax.sgd(1.0)`` is FedAvg,
``optax.sgd(η, momentum=β)`` FedAvgM, ``optax.adam`` FedAdam with bias
correction. FedOpt's presets (FedAdam, FedYogi, FedAdagrad) are this method with
Reddi et al.'s server rules.
"""
from __future__ import annotations


from fedfrac._validation import is_traced
from fedfrac.algorithms import contract, local_training, schema, tasks
from fedfrac.algorithms import server
from fedfrac.algorithms import server_optimizer as server_opt


def _lr_with_optimizer(hp):
  """The plain step's rate is not the optimizer's: a changed one is refused."""
  lr, tx = hp["server_lr"], hp["server_optimizer"]
  if tx is not None and not is_traced(lr) and lr != 1.0:
    return (f"server_lr={lr!r}: the rate of the plain server step; with "
            f"server_optimizer the optimizer's own learning rate applies (e.g. "
            f"optax.sgd({lr!r}), 'sgd({lr!r})'); leave server_lr at 1.0")
  return None


SERVER_OPTIMIZER = schema.HParam(
    None, lambda v: v is None or isinstance(v, str) or server_opt.is_transformation(v),
    server_opt.ALLOWED)


def _server_optimizer_check(hp):
  return server_opt.problem(hp["server_optimizer"])


HPARAMS = schema.HParamSchema({
    "server_lr": schema.HParam(1.0, schema.positive, "server learning rate; must be > 0"),
    "server_optimizer": SERVER_OPTIMIZER,
}, checks=(_server_optimizer_check, _lr_with_optimizer))


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
  training = ctx.training
  loss_fn = tasks.supervised_loss(ctx.model, ctx.task)
  server_lr = hp["server_lr"]

  def client_update(payload, client_state, view, key, round_index):
    delta, metrics = local_training.local_delta(payload, view, key, round_index, loss_fn,
                                                training)
    return delta, client_state, metrics

  tx = server_opt.transformation(hp.get("server_optimizer"))
  if tx is None:
    init = contract.init_global_model
    aggregate = server.global_delta_aggregate(ctx.aggregator, server_lr)
  else:   # ServerOpt(w_t, −Δ̄_t) (Reddi et al. 2021, Alg. 1)
    init, aggregate = server_opt.server_step(tx, ctx.aggregator)

  return contract.FedAlgorithm("fedavg", init, contract.broadcast_params,
                               client_update, aggregate, contract.eval_global_params)


ENTRIES = (
    contract.AlgorithmEntry(
        "fedavg", build, HPARAMS,
        "FedAvg: local SGD, sample-weighted model average", robust_aggregation=True,
        asynchronous=True),
)
