"""FOFedAvg: FedAvg with fractional-order SGD (FOSGD) clients (docs/design.md §3.1).

Client step (FOSGD, Partohaghighi, Marcia, Chen; FOFedAvg paper Eqs. 8–9):

  w ← w − μ_t · s · g,   s = (‖w_cur − w_prev‖₂ + δ)^(1−α) / Γ(2−α)

with the scalar factor s computed over the whole parameter vector by
:func:`fedfrac.optim.fractional` (``granularity="scalar"``). The server is
FedAvg: w_{t+1} = w_t + η_g Σ_k p_k Δ_k, p_k = n_k / Σ_{j∈S_t} n_j.

Step size μ_t. The algorithm uses the client learning-rate schedule of the run
(``client.lr`` × ``client.schedule``); the paper's μ_t = μ0/sqrt(t+1) is
``client.schedule="inv_sqrt"`` with ``client.lr=μ0``, which every
``configs/fofedavg`` file and the quickstart entry set. (Keeping the schedule
outside the algorithm lets FedAvg run with exactly the same μ_t, so α = 1 is
FedAvg bit for bit.) The fractional factor multiplies the gradient before the
configured client optimizer; with ``client.optimizer="sgd"`` (the paper) the
step is exactly the FOSGD step above.

Rules (paper Alg. 2 and docs/design.md §3.1):

* round 0 is plain SGD (s = 1 on every step);
* ``memory="step"``: w_prev is the previous local iterate; the first local
  step of every round has none and uses s = 1;
* ``memory="round"``: w_prev is the client's final local parameters from the
  previous round it took part in, kept in the client state
  (``last_params [K, ...]``, ``has_participated [K]``); a client's first
  participation is plain SGD;
* α ∈ (0, 1]; α ∈ (1, 2) only with ``allow_heuristic_alpha=True``; δ > 0.
  α = 1 gives s = 1 exactly (FedAvg with the same schedule).

Client metric ``fractional_factor``: the mean over the client's local steps
(those with a w_prev) of the factor s (Eq. 8), so μ_t · s is the effective step;
the round reports its weighted mean over the cohort as ``train_fractional_factor``.

Per-round diagnostics (``diagnostics=True``): client metric ``drift`` =
‖Δ_t^k‖₂ and server metrics ``drift_mean`` / ``drift_cv`` (BEV paper
Eqs. 36–38; see :mod:`fedfrac.metrics`).
"""
from __future__ import annotations

import jax.numpy as jnp
import optax

from fedfrac import metrics as metrics_lib
from fedfrac.algorithms import contract, local_training, schema, tasks, trees
from fedfrac.algorithms import server
from fedfrac.optim.fractional import (alpha_range_error, fractional,
                                      fractional_mean_factor, fractional_set_reference)


class _AlphaRange:
  """Per-key check of α: a number in the widest range, (0, 2) (whether α > 1 is
  allowed depends on ``allow_heuristic_alpha``: :func:`check_alpha`). A traced α
  (a vmapped grid) outside (0, 1] — (0, 2) with ``allow_heuristic_alpha`` —
  becomes NaN (:func:`fedfrac.algorithms.schema.nan_outside`), so the run
  diverges instead of training with an order the method does not define."""

  def __call__(self, v):
    return schema.is_number(v) and alpha_range_error(v, allow_heuristic_alpha=True) is None

  def traced(self, v, hp):
    high = 2.0 if hp.get("allow_heuristic_alpha") else 1.0
    below = v < high if high == 2.0 else v <= high
    return jnp.isfinite(v) & (v > 0) & below


alpha_in_range = _AlphaRange()


def check_alpha(hp):
  """α's range given ``allow_heuristic_alpha`` (``optim.fractional.alpha_range_error``)."""
  message = alpha_range_error(hp["alpha"], hp["allow_heuristic_alpha"])
  return f"alpha={hp['alpha']!r}: {message}" if message else None


HPARAMS = schema.HParamSchema({
    "alpha": schema.HParam(0.97, alpha_in_range,
                           "fractional order; must be in (0, 1], or (0, 2) with "
                           "allow_heuristic_alpha=True"),
    "delta": schema.HParam(1e-5, schema.positive, "must be > 0"),
    "memory": schema.HParam("step", schema.one_of("step", "round"),
                            "allowed values are 'step', 'round'"),
    "allow_heuristic_alpha": schema.HParam(False, schema.boolean, "must be True or False"),
    "server_lr": schema.HParam(1.0, schema.positive, "server learning rate; must be > 0"),
    "diagnostics": schema.HParam(True, schema.boolean, "must be True or False"),
}, checks=(check_alpha,))


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
  training = ctx.training
  loss_fn = tasks.supervised_loss(ctx.model, ctx.task)
  alpha, delta, memory = hp["alpha"], hp["delta"], hp["memory"]
  server_lr = hp["server_lr"]

  def client_optimizer(round_index):
    # Round 0 is plain SGD (paper Alg. 2): α_eff = 1 makes s = 1 exactly.
    alpha_t = jnp.where(round_index == 0, 1.0, alpha)
    return optax.chain(
        fractional(alpha_t, delta, "scalar", memory, allow_heuristic_alpha=True),
        training.optimizer)

  def init(key, params0, num_clients, data_info):
    del key, data_info
    clients = None
    if memory == "round":
      clients = {"last_params": trees.stack_for_clients(params0, num_clients),
                 "has_participated": jnp.zeros((num_clients,), bool)}
    return {"params": params0}, clients

  def client_update(payload, client_state, view, key, round_index):
    lr = training.lr_schedule(round_index)  # μ_t (inv_sqrt: μ0/sqrt(t+1))
    tx = client_optimizer(round_index)
    opt_state = tx.init(payload)
    if memory == "round":
      # w_prev = this client's parameters from its previous participation.
      opt_state = fractional_set_reference(
          opt_state, client_state["last_params"], client_state["has_participated"])
    params, opt_state, metrics = local_training.local_train(
        payload, opt_state, view, key, lr, loss_fn, training, optimizer=tx)
    delta = trees.tree_sub(params, payload)
    metrics["drift"] = trees.tree_norm(delta)  # ‖Δ_t^k‖₂ (Eq. 36)
    # Mean s = (‖Δw‖₂+δ)^(1−α)/Γ(2−α) over the client's steps that had a w_prev
    # (Eq. 8); the effective step is μ_t · s.
    metrics["fractional_factor"] = fractional_mean_factor(opt_state)
    if memory == "round":
      client_state = {"last_params": params,
                      "has_participated": jnp.ones((), bool)}
    return delta, client_state, metrics

  # Σ_k p_k Δ_k (FedAvg's mean), or the robust rule of ``config.server``.
  aggregate = server.global_delta_aggregate(ctx.aggregator, server_lr)

  cohort_metrics = None
  if hp["diagnostics"]:
    def cohort_metrics(client_metrics, weights, mask):
      del weights
      return metrics_lib.drift_stats_jnp(client_metrics["drift"], mask)

  return contract.FedAlgorithm("fofedavg", init, contract.broadcast_params,
                           client_update, aggregate, contract.eval_global_params,
                               cohort_metrics=cohort_metrics)


ENTRIES = (
    contract.AlgorithmEntry(
        "fofedavg", build, HPARAMS,
        "FOFedAvg: FedAvg with fractional-order SGD clients", robust_aggregation=True,
        asynchronous=True),
)
