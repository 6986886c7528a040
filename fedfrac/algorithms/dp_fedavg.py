"""DP-FedAvg (McMahan, Ramage, Talwar, Zhang, ICLR 2018, Alg. 1): user-level DP.

User level: the clipping and noise act on each client's whole update, so the
guarantee covers all of a client's data. Record-level privacy of single
training examples (per-example clipping and noise at every local step) is
``dp_sgd`` (Abadi et al. 2016).

Clients run FedAvg's local training and upload their model delta Δ_k. The server
clips each delta to norm S, adds Gaussian noise of std σ·S to the sum and divides
by the fixed denominator D = cohort size (the fixed-denominator estimator; an
absent client of a churned round counts as a zero update):

    Δ̃_k = Δ_k · min(1, S / ‖Δ_k‖)
    w_{t+1} = w_t + η_g · (Σ_{k∈S_t} Δ̃_k + N(0, σ² S² I)) / D

Weights are uniform (w_k = 1): weighting by n_k would make one client's influence
data dependent and break the sensitivity bound S. With σ = 0, a clip norm above
every update norm and equal client sizes this is exactly FedAvg.

Privacy: each round is a sampled Gaussian mechanism with noise multiplier σ and
sampling rate q = |S_t| / K. The per-round ε at δ (RDP or PLD accountant from
``dp_accounting``, host side) is recorded as ``dp_epsilon`` in every round's row.
The engine samples a fixed-size cohort without replacement; the accountant
treats it as Poisson sampling with rate q, the usual approximation.
"""
from __future__ import annotations

import math

from fedfrac._validation import is_traced
from fedfrac.algorithms import contract, local_training, schema, tasks, trees
from fedfrac.ops import dp

HPARAMS = schema.HParamSchema({
    "noise_multiplier": schema.HParam(1.0, schema.non_negative,
                                      "noise multiplier σ; must be >= 0"),
    "clip_norm": schema.HParam(1.0, schema.positive, "clip norm S; must be > 0"),
    "delta": schema.HParam(1e-5, schema.interval(0, 1, lo_open=True, hi_open=True),
                           "target δ of the (ε, δ) guarantee; must be in (0, 1)"),
    "accountant": schema.HParam("rdp", schema.one_of(*dp.ACCOUNTANTS),
                                f"allowed values are {', '.join(dp.ACCOUNTANTS)}"),
    "server_lr": schema.HParam(1.0, schema.positive, "server learning rate; must be > 0"),
})


def sampling_rate(participation, num_clients) -> float:
  """q = |S_t| / K with |S_t| = max(ceil(C·K), 1) (the engine's cohort size)."""
  cohort = max(int(math.ceil(participation * num_clients - 1e-9)), 1)
  return cohort / num_clients


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
  training = ctx.training
  loss_fn = tasks.supervised_loss(ctx.model, ctx.task)
  server_lr = hp["server_lr"]
  clip_norm = hp["clip_norm"]
  noise_multiplier = hp["noise_multiplier"]
  if ctx.aggregator is not None and not ctx.aggregator.is_mean:
    raise ValueError(f"aggregator={ctx.aggregator.name!r}: dp_fedavg combines updates "
                     "with its own clipped, noised sum; use aggregator='mean'")

  def client_update(payload, client_state, view, key, round_index):
    delta, metrics = local_training.local_delta(payload, view, key, round_index, loss_fn,
                                                training)
    return delta, client_state, metrics

  def aggregate(server_state, client_states, messages, weights, mask, key):
    del weights   # uniform weighting keeps the sensitivity at S
    cohort = mask.shape[0]
    # McMahan et al. 2018, Alg. 1: clip, sum, add N(0, σ²S²), divide by fixed D.
    delta, info = dp.dp_aggregate(messages, mask, clip_norm, noise_multiplier, key,
                                  expected_cohort_size=cohort)
    params = trees.tree_add(server_state["params"], trees.tree_scale(delta, server_lr))
    metrics = {"clip_fraction": info["clip_fraction"], "mean_norm": info["mean_norm"],
               "noise_std": info["noise_std"]}
    return contract.ServerUpdate({"params": params}, client_states, metrics)

  host_metrics = None
  if not (is_traced(noise_multiplier) or is_traced(hp["delta"])):
    host_metrics = _epsilon_metric(
        float(noise_multiplier),
        sampling_rate(ctx.participation, ctx.data_info.num_clients),
        float(hp["delta"]), hp["accountant"])

  return contract.FedAlgorithm("dp_fedavg", contract.init_global_model,
                               contract.broadcast_params,
                           client_update, aggregate, contract.eval_global_params,
                               host_metrics=host_metrics)


def _epsilon_metric(noise_multiplier, q, delta, accountant):
  """``rounds_done -> {"dp_epsilon": ε}``, composing one round at a time (cached)."""
  acc = dp.PrivacyAccountant(noise_multiplier, q, delta, accountant)
  curve = [0.0]

  def metrics(rounds_done):
    rounds_done = int(rounds_done)
    while len(curve) <= rounds_done:
      curve.append(acc.step(1).epsilon)
    return {"dp_epsilon": curve[rounds_done]}
  return metrics


ENTRIES = (
    contract.AlgorithmEntry(
        "dp_fedavg", build, HPARAMS,
        "DP-FedAvg: user-level differential privacy (clip + Gaussian noise)"),
)
