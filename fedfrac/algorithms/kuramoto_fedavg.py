"""Kuramoto-FedAvg (Muhebwa, Selialia, Anwar, Osman; arXiv:2505.19605; docs/design.md §3.4).

Clients run FedAvg local training (the configured optax client optimizer; the
paper uses SGD with momentum 0.9) from the global model and upload their update
Δ_k = w_k − w_t. The server treats every update as an oscillator whose phase is
its angle θ_k to the mean update Δ̄ = Σ p_k Δ_k and re-weights the updates by
their phase offset from the mean phase (``fedfrac.ops.kuramoto_update``), with a
coupling strength that decays over rounds,

    κ_t = κ0 · exp(−β t),        t = 0, 1, ... (rounds aggregated so far),

in one of three weightings (``weighting``):

* ``"coupled"`` (default, stable): ρ_k ∝ p_k max(0, 1 + κ_t sin(θ̄ − θ_k)),
  w_{t+1} = w_t + Σ ρ_k Δ_k. κ_t = 0 is FedAvg exactly.
* ``"paper"``: the paper's equation literally, ρ_k = sin(θ̄ − θ_k)/Σ_j sin(θ̄ − θ_j),
  w_{t+1} = w_t + κ_t Σ ρ_k Δ_k; when the denominator is below ``eps`` (or a
  weight is not finite) the round falls back to ρ = p, i.e. w_t + κ_t Δ̄, and
  ``server/fallback`` is 1 for that round.
* ``"reference_code"``: what the authors' public code does, not the paper's
  equation: Δ̄ + κ_t/(K−1) Σ_i Σ_{j≠i} cos(φ_j − φ_i)(Δ_j − Δ̄), where φ_k is
  client k's mean local gradient norm, uploaded next to its update. κ_t = 0 is
  FedAvg exactly.

Round metrics (the engine stores them as ``server/<name>``): ``kappa`` (κ_t),
``fallback`` (0/1), ``order_parameter`` (|mean e^{iθ_k}|, 1 = all in phase),
``mean_phase`` (θ̄), ``phase_std``, ``phase_max``, ``weight_min``,
``weight_max``, ``denominator`` (Σ_j sin(θ̄ − θ_j)) and the per-client arrays
``phases [S]`` and ``weights [S]`` (cohort order; zero for absent clients). The
paper's synchronisation measure — the variance across participating clients of
their train loss in the round — is the engine's ``train_loss_var``.
"""
from __future__ import annotations

import jax.numpy as jnp

from fedfrac.algorithms import contract, local_training, scaffold, schema, tasks, trees
from fedfrac.ops import kuramoto

WEIGHTINGS = kuramoto.WEIGHTINGS
CLIENTS = ("fedavg", "scaffold")

HPARAMS = schema.HParamSchema({
    "kappa0": schema.HParam(0.1, schema.non_negative,
                            "initial coupling strength κ0; must be >= 0 "
                            "(paper values 0.005, 0.1, 0.3)"),
    "beta": schema.HParam(0.01, schema.non_negative,
                          "decay rate β of κ_t = κ0·exp(−β t); must be >= 0"),
    "weighting": schema.HParam("coupled", schema.one_of(*WEIGHTINGS),
                               f"allowed values are {', '.join(WEIGHTINGS)}"),
    "eps": schema.HParam(1e-8, schema.positive,
                         "'paper' fallback threshold on |Σ_j sin(θ̄ − θ_j)|; must be > 0"),
    "sync_clip": schema.HParam(0.0, schema.non_negative,
                               "'reference_code': element-wise clamp ±sync_clip of the "
                               "synchronisation term before κ (authors: 1e3, 10 with "
                               "SCAFFOLD clients); 0 = none; must be >= 0"),
    "clients": schema.HParam("fedavg", schema.one_of(*CLIENTS),
                             "allowed values are 'fedavg', 'scaffold' (SCAFFOLD clients "
                             "and control variates, the authors' shipped 'kuramoto')"),
})


def coupling(kappa0, beta, t):
  """κ_t = κ0 · exp(−β t) (paper, decaying coupling strength); traced-safe."""
  t = jnp.asarray(t, jnp.float32)
  return jnp.asarray(kappa0, jnp.float32) * jnp.exp(-jnp.asarray(beta, jnp.float32) * t)


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
  training = ctx.training
  loss_fn = tasks.supervised_loss(ctx.model, ctx.task)
  weighting = hp["weighting"]
  if weighting not in WEIGHTINGS:   # static: reject before tracing
    raise ValueError(f"weighting={weighting!r}: allowed values are {', '.join(WEIGHTINGS)}")
  kappa0, beta, eps, sync_clip = hp["kappa0"], hp["beta"], hp["eps"], hp["sync_clip"]
  with_phase = weighting == "reference_code"
  # clients="scaffold": SCAFFOLD's clients, control variates and server c-update
  # (fedfrac.algorithms.scaffold with its options written out here, so a change of
  # SCAFFOLD's defaults cannot move this path: the authors' server averages the
  # control variates plainly, uniform weighting); the model step is ours.
  base = (scaffold.build(ctx, dict(scaffold.HPARAMS.defaults(), weighting="uniform"))
          if hp["clients"] == "scaffold" else None)

  def init(key, params0, num_clients, data_info):
    round0 = jnp.zeros((), jnp.int32)
    if base is not None:
      server, clients = base.init(key, params0, num_clients, data_info)
      return dict(server, round=round0), clients
    return {"params": params0, "round": round0}, None

  def broadcast(server_state):
    if base is not None:
      return base.broadcast(server_state)
    return contract.broadcast_params(server_state)

  def client_update(payload, client_state, view, key, round_index):
    if base is not None:
      message, client_state, metrics = base.client_update(payload, client_state, view,
                                                          key, round_index)
    else:
      delta, metrics = local_training.local_delta(payload, view, key, round_index,
                                                  loss_fn, training)
      message = {"delta": delta}
    if with_phase:
      # φ_k: the client's mean local gradient norm (authors' code).
      message["phase_signal"] = metrics["grad_norm"]
    return message, client_state, metrics

  def aggregate(server_state, client_states, messages, weights, mask, key):
    kappa = coupling(kappa0, beta, server_state["round"])
    update, info = kuramoto.kuramoto_update(
        messages["delta"], weights, kappa, weighting, eps,
        phase_signal=messages.get("phase_signal"), mask=mask, sync_clip=sync_clip)
    # Kuramoto-FedAvg server step: w_{t+1} = w_t + (mode's combined update).
    params = trees.tree_add(server_state["params"], update)
    part = jnp.asarray(mask, bool)
    any_part = jnp.any(part)
    m = jnp.maximum(jnp.sum(part.astype(jnp.float32)), 1.0)
    theta, w = info["phases"], info["weights"]
    mean_phase = info["mean_phase"]
    metrics = {
        "kappa": kappa,
        "fallback": info["fallback"].astype(jnp.float32),
        "order_parameter": info["order_parameter"],
        "mean_phase": mean_phase,
        "phase_std": jnp.sqrt(jnp.sum(jnp.where(part, (theta - mean_phase) ** 2, 0.0)) / m),
        "phase_max": jnp.max(jnp.where(part, theta, 0.0)),
        "weight_min": jnp.where(any_part, jnp.min(jnp.where(part, w, jnp.inf)), 0.0),
        "weight_max": jnp.where(any_part, jnp.max(jnp.where(part, w, -jnp.inf)), 0.0),
        "denominator": info["denominator"],
        "phases": theta,
        "weights": w,
    }
    server = {"params": params, "round": server_state["round"] + 1}
    if base is not None:   # SCAFFOLD's server control variate c ← c + Σ q_k Δc_k
      update = base.aggregate(
          {"params": server_state["params"], "c": server_state["c"]}, client_states,
          messages, weights, mask, key)
      client_states = update.clients
      server["c"] = update.server["c"]
      metrics["control_norm"] = update.metrics["control_norm"]
    return contract.ServerUpdate(server, client_states, metrics)

  return contract.FedAlgorithm("kuramoto_fedavg", init, broadcast,
                           client_update, aggregate, contract.eval_global_params)


ENTRIES = (
    contract.AlgorithmEntry(
        "kuramoto_fedavg", build, HPARAMS,
        "Kuramoto-FedAvg: phase-coupled weighting of client updates"),
)
