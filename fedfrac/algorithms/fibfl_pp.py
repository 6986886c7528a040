"""FibFL++ (Hedjam, "FIRMA: FIbonacci Ring Model Aggregation"), the full protocol.

FibFL+ (accuracy-gated Fibonacci ring mixing of extractors, private heads,
two-phase local training with persistent per-client optimizer states) plus:

* ring order σ* by 2-opt on the clients' class-proportion vectors, minimising
  Σ_p cos(q_σ(p), q_σ(p+1)) — computed once at ``init`` from the train class
  counts and stored in the server state (data, so runs over different
  partitions share one compiled program);
* K_g = ⌈N/2⌉ gossip passes per round with per-pass retention
  γ_in = γ_r^(1/K_g) (FIRMA Prop. 2–3); γ_r is cosine-annealed from γ_start to
  γ_end over the post-warm-up rounds;
* sweep ``"sequential"`` (default; the in-place pass of Alg. 3, Gauss–Seidel
  along σ*) or ``"synchronous"`` (every pass reads a snapshot) — both one N×N
  matrix applied to the stacked extractors;
* a FedAvg warm-up for the first W = ⌊R/6⌋ rounds (FIRMA §4.5 "FedAvg warmup",
  Alg. 3 l.7–9): every client trains its full model jointly for max(E_h, E_e)
  epochs (its own persistent warm-up optimizer state) and the FULL model,
  extractor and head, is replaced by its sample-weighted average (the mixing
  matrix 1pᵀ, weights n_i/n). Heads become private only after round W. This is
  the default in both modes (``warmup_heads=None`` → True). The named option
  ``warmup_heads=False`` keeps the earlier fedfrac behaviour, an extractor-only
  warm-up with heads private from round 1 (not in the paper; useful to isolate
  what the shared warm-up head contributes).
  ``warmup_optimizer`` says what happens to the per-client warm-up optimizer
  state at each warm-up average: ``"keep"`` (default; the authors' code, where
  each client's Adam state persists across the average untouched), ``"reset"``
  (a fresh state, as if the averaged model were a new start) or ``"average"``
  (the clients' floating state, Adam's first and second moments, averaged with
  the weights n_i/n of the params; step counts kept). An ablation of what moves
  a model whose last ReLU layer the average left dead (docs/design.md §3.3).

``compat="reference_code"`` also uses a per-client random initial model, the raw
dot product as 2-opt cost, synchronous passes and W = max(1, ⌊R/6⌋).

Server metrics each round: spectral gap of the round's mixing matrix, γ_r, the
number of clients gated out, and the ring cost before/after 2-opt with the
saving in percent. Traffic: 2·K_g·N·p_e bytes per ring round (FIRMA Table 2);
warm-up rounds are star rounds (N uploads and N downloads of the averaged
part).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from fedfrac.algorithms import contract, firma, schema, tasks
from fedfrac.ops import ring
from fedfrac.ops import fibfl_schedule, ring_order


_OPTIONAL_BOOL = lambda v: v is None or isinstance(v, bool)

# What happens to each client's warm-up optimizer state at every warm-up average:
# kept as it is (the authors' code and the default), reset to a fresh state, or
# averaged across clients with the same weights as the params.
WARMUP_OPTIMIZER = ("keep", "reset", "average")

HPARAMS = schema.HParamSchema({
    "gamma_start": schema.HParam(0.4, schema.unit_interval, "must be in [0, 1]"),
    "gamma_end": schema.HParam(0.05, schema.unit_interval, "must be in [0, 1]"),
    "tau": schema.HParam(0.35, schema.unit_interval, "gate threshold τ; must be in [0, 1]"),
    "head_epochs": schema.HParam(1, lambda v: isinstance(v, int) and v >= 1,
                                 "E_h; must be an integer >= 1"),
    "extractor_epochs": schema.HParam(20, lambda v: isinstance(v, int) and v >= 1,
                                      "E_e; must be an integer >= 1"),
    "passes": schema.HParam(None, lambda v: v is None or (isinstance(v, int) and v >= 1),
                            "K_g; None (= ceil(N/2)) or an integer >= 1"),
    "warmup_rounds": schema.HParam(None, lambda v: v is None or (isinstance(v, int)
                                                                 and v >= 0),
                                   "W; None (= floor(R/6)) or an integer >= 0"),
    "sweep": schema.HParam(None, schema.one_of(None, "sequential", "synchronous"),
                           "allowed values are None (by compat), 'sequential', "
                           "'synchronous'"),
    "ring_cost": schema.HParam(None, schema.one_of(None, "cosine", "dot"),
                               "allowed values are None (by compat), 'cosine', 'dot'"),
    "warmup_heads": schema.HParam(None, _OPTIONAL_BOOL,
                                  "None (= True, the paper's full-model warm-up) or a "
                                  "bool; False averages only extractors in warm-up"),
    "warmup_optimizer": schema.HParam("keep", schema.one_of(*WARMUP_OPTIMIZER),
                                      "allowed values are 'keep', 'reset', 'average'"),
    **firma.COMPAT_HPARAMS,
})


def resolved_options(hp, num_clients, rounds):
  """Static choices after applying ``compat`` defaults."""
  ref = hp["compat"] == "reference_code"
  passes = hp["passes"] or fibfl_schedule.fibfl_pp_passes(num_clients)
  if hp["warmup_rounds"] is None:
    warmup = fibfl_schedule.fibfl_pp_warmup(rounds, min_rounds=1 if ref else 0)
  else:
    warmup = min(int(hp["warmup_rounds"]), rounds)
  return {
      "passes": int(passes),
      "warmup": int(warmup),
      "sweep": hp["sweep"] or ("synchronous" if ref else "sequential"),
      "ring_cost": hp["ring_cost"] or ("dot" if ref else "cosine"),
      # FIRMA §4.5 / Alg. 3 l.9: the warm-up averages the full model, heads
      # included, in both modes; False is the extractor-only variant.
      "warmup_heads": True if hp["warmup_heads"] is None else hp["warmup_heads"],
      "warmup_optimizer": hp["warmup_optimizer"],
      "per_client_init": firma.per_client_init(hp),
  }


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
  training, model, task = ctx.training, ctx.model, ctx.task
  firma.check_epoch_mode(training, "fibfl_pp")
  num_clients, rounds = ctx.data_info.num_clients, ctx.rounds
  if num_clients < 2:
    raise ValueError(f"data.num_clients={num_clients}: a ring needs at least 2 clients")
  o = resolved_options(hp, num_clients, rounds)
  passes, warmup = o["passes"], o["warmup"]
  opt = training.optimizer
  e_h, e_e = hp["head_epochs"], hp["extractor_epochs"]
  e_w = max(e_h, e_e)

  def init(key, params0, n, data_info):
    order, before, after = ring_order.two_opt_ring(
        firma.class_proportions(data_info.class_counts), cost=o["ring_cost"])
    params = firma.initial_models(model, key, params0, n, o["per_client_init"])
    clients = {"params": params,
               "opt_head": firma.stacked_init(opt, params["head"]),
               "opt_ext": firma.stacked_init(opt, params["extractor"]),
               "opt_warm": firma.stacked_init(opt, params),
               "acc": jnp.zeros((n,), jnp.float32)}
    saving = 100.0 * (before - after) / max(abs(before), 1e-12)
    server = {"round": jnp.zeros((), jnp.int32),
              "order": jnp.asarray(order, jnp.int32),
              "weights": firma.size_weights(data_info),
              "ring_cost_before": jnp.asarray(before, jnp.float32),
              "ring_cost_after": jnp.asarray(after, jnp.float32),
              "ring_saving_pct": jnp.asarray(saving, jnp.float32)}
    return server, clients

  def broadcast(server_state):
    del server_state
    return {}

  def ring_round(cs, view, key, lr):
    params, opt_h, opt_e, metrics = firma.two_phase_train(
        cs["params"], cs["opt_head"], cs["opt_ext"], view, key, lr, model, task,
        training, e_h, e_e)
    return {**cs, "params": params, "opt_head": opt_h, "opt_ext": opt_e}, metrics

  def warmup_round(cs, view, key, lr):
    # FedAvg warm-up: the full model trained jointly, own persistent state.
    params, opt_w, m = firma.train_phase(
        cs["params"], cs["opt_warm"], view, key, lr,
        tasks.supervised_loss(model, task), training, e_w)
    metrics = {"head_loss": m["loss"], "loss": m["loss"], "steps": m["steps"]}
    return {**cs, "params": params, "opt_warm": opt_w}, metrics

  def client_update(payload, cs, view, key, round_index):
    del payload
    lr = training.lr_schedule(round_index)
    if warmup > 0:
      cs, metrics = jax.lax.cond(round_index < warmup, warmup_round, ring_round,
                                 cs, view, key, lr)
    else:
      cs, metrics = ring_round(cs, view, key, lr)
    acc = firma.train_accuracy(model, cs["params"], view, training.dynamic_steps)
    metrics["train_accuracy"] = acc
    cs = {**cs, "acc": acc}
    # What a client sends to each neighbour: its extractor.
    return cs["params"]["extractor"], cs, metrics

  def aggregate(server_state, client_states, messages, weights, mask, key):
    del messages, weights, mask, key
    t = server_state["round"]
    gamma_r = fibfl_schedule.fibfl_pp_gamma(t, warmup, rounds, hp["gamma_start"], hp["gamma_end"])
    gates = client_states["acc"]
    m_ring = ring.fibonacci_mixing_matrix(
        num_clients, fibfl_schedule.per_pass_retention(gamma_r, passes),
        order=server_state["order"], gates=gates, tau=hp["tau"], passes=passes,
        sweep=o["sweep"])
    in_warmup = t < warmup
    m_avg = firma.uniform_average_matrix(server_state["weights"])
    m = jnp.where(in_warmup, m_avg, m_ring)
    new_states = firma.mix_extractors(client_states, m)
    if o["warmup_heads"] and warmup > 0:
      # Alg. 3 l.9: the warm-up FedAvg averages the heads too (heads private
      # only after round W).
      params = new_states["params"]
      heads = jax.tree.map(lambda h, a: jnp.where(in_warmup, a, h), params["head"],
                           ring.apply_mixing(m_avg, params["head"]))
      new_states = {**new_states, "params": {**params, "head": heads}}
    if warmup > 0 and o["warmup_optimizer"] != "keep":
      if o["warmup_optimizer"] == "reset":
        at_average = firma.stacked_init(opt, new_states["params"])
      else:
        at_average = firma.average_optimizer_state(m_avg, new_states["opt_warm"])
      opt_warm = jax.tree.map(lambda old, new: jnp.where(in_warmup, new, old),
                              new_states["opt_warm"], at_average)
      new_states = {**new_states, "opt_warm": opt_warm}
    metrics = {"spectral_gap": firma.spectral_gap(m),
               "gamma": gamma_r,
               "warmup": in_warmup.astype(jnp.float32),
               "gated_out": jnp.where(in_warmup, 0.0, firma.gated_out(
                   gates, hp["tau"], server_state["order"])),
               "ring_cost_before": server_state["ring_cost_before"],
               "ring_cost_after": server_state["ring_cost_after"],
               "ring_saving_pct": server_state["ring_saving_pct"]}
    return contract.ServerUpdate({**server_state, "round": t + 1}, new_states, metrics)

  def eval_params(server_state, client_state):
    del server_state
    return client_state["params"]

  ring_comm = firma.ring_communication(passes)
  head_bytes = firma.tree_nbytes_of(lambda: model.init(jax.random.PRNGKey(0))["head"])

  def comm(payload_bytes, message_bytes, participants, round_index=None):
    if round_index is not None and round_index < warmup:
      # Star round: every client uploads and downloads the averaged part.
      sent = message_bytes + (head_bytes if o["warmup_heads"] else 0)
      return participants * sent, participants * sent
    return ring_comm(payload_bytes, message_bytes, participants)

  return contract.FedAlgorithm("fibfl_pp", init, broadcast, client_update, aggregate,
                               eval_params, personalized=True, comm=comm)


def ring_summary(class_counts, cost="cosine"):
  """Host-side 2-opt report for a ``[K, C]`` class-count table:
  ``{"order", "cost_before", "cost_after", "saving_pct"}``."""
  order, before, after = ring_order.two_opt_ring(firma.class_proportions(class_counts),
                                           cost=cost)
  return {"order": order.tolist(), "cost_before": before, "cost_after": after,
          "saving_pct": 100.0 * (before - after) / max(abs(before), 1e-12)}


ENTRIES = (
    contract.AlgorithmEntry(
        "fibfl_pp", build, HPARAMS,
        "FibFL++: the full FIRMA ring protocol",
        full_participation=True, decentralised=True, needs_head=True),
)
