"""FibFL and FibFL+ (Hedjam, "FIRMA: FIbonacci Ring Model Aggregation", Alg. 1–2).

Server-free ring gossip with private heads. Every round each client trains its
model in two phases (E_h head epochs with the extractor frozen, then E_e
extractor epochs with the head frozen; persistent per-client optimizer states,
Adam in the paper) and then every extractor is mixed with its ring neighbours
from a snapshot (synchronous):

* FibFL:  φ_i ← γ φ_i + (1−γ)(α φ_L + β φ_R), α = 1/ϕ, β = 1/ϕ²
  with ϕ the golden ratio (FIRMA, FibFL update).
* FibFL+ (``gate="accuracy"``): g_j = a_j·1[a_j ≥ τ] with a_j the local training
  accuracy (accuracy after local training, before mixing, on the client's whole
  train set); w_L = g_L/(g_L+g_R); a_L = α/2 + w_L/2, a_R = β/2 + w_R/2 and
  φ_i ← γ φ_i + (1−γ)(a_L φ_L + a_R φ_R); a client whose two neighbours are both
  gated out keeps its own extractor.

The two differ only in the mixing matrix, so ``gate`` may also be a traced
number (1: the accuracy gate, 0: none; a hyper-parameter override of a vmapped
batch of runs): FibFL and FibFL+ runs then share one compiled program, each
run mixing with its own matrix (both N×N matrices are formed, one is applied).

The mixing is one N×N matrix (:func:`fedfrac.ops.ring.fibonacci_mixing_matrix`)
applied to the stacked extractors; heads never enter it. Ring order is the
client order. Full participation only. The uplink message is the extractor, sent
to both neighbours: 2·N·p_e bytes per round (FIRMA Table 2).
"""
from __future__ import annotations

import jax.numpy as jnp

from fedfrac._validation import is_traced
from fedfrac.algorithms import contract, firma, schema
from fedfrac.ops import ring


HPARAMS = schema.HParamSchema({
    "gamma": schema.HParam(0.5, schema.unit_interval, "self-retention γ; must be in [0, 1]"),
    "gate": schema.HParam("none", schema.one_of("none", "accuracy"),
                          "allowed values are 'none' (FibFL), 'accuracy' (FibFL+) "
                          "(or a traced 0 / 1 in a vmapped batch of runs)"),
    "tau": schema.HParam(0.35, schema.unit_interval, "gate threshold τ; must be in [0, 1]"),
    "head_epochs": schema.HParam(1, lambda v: isinstance(v, int) and v >= 1,
                                 "E_h; must be an integer >= 1"),
    "extractor_epochs": schema.HParam(20, lambda v: isinstance(v, int) and v >= 1,
                                      "E_e; must be an integer >= 1"),
    "sweep": schema.HParam("synchronous", schema.one_of("synchronous", "sequential"),
                           "allowed values are 'synchronous', 'sequential'"),
    **firma.COMPAT_HPARAMS,
})


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
  training, model, task = ctx.training, ctx.model, ctx.task
  firma.check_epoch_mode(training, "fibfl")
  num_clients = ctx.data_info.num_clients
  if num_clients < 2:
    raise ValueError(f"data.num_clients={num_clients}: a ring needs at least 2 clients")
  # A traced gate (FibFL and FibFL+ runs in one program): 1 gates, 0 does not.
  gate_on = jnp.asarray(hp["gate"]) > 0.5 if is_traced(hp["gate"]) else None
  gated = gate_on is not None or hp["gate"] == "accuracy"
  per_client = firma.per_client_init(hp)
  opt = training.optimizer
  e_h, e_e = hp["head_epochs"], hp["extractor_epochs"]

  def init(key, params0, n, data_info):
    del data_info
    params = firma.initial_models(model, key, params0, n, per_client)
    clients = {"params": params,
               "opt_head": firma.stacked_init(opt, params["head"]),
               "opt_ext": firma.stacked_init(opt, params["extractor"]),
               "acc": jnp.zeros((n,), jnp.float32)}
    return {"order": jnp.arange(n, dtype=jnp.int32)}, clients

  def broadcast(server_state):
    del server_state
    return {}

  def client_update(payload, cs, view, key, round_index):
    del payload
    lr = training.lr_schedule(round_index)
    params, opt_h, opt_e, metrics = firma.two_phase_train(
        cs["params"], cs["opt_head"], cs["opt_ext"], view, key, lr, model, task,
        training, e_h, e_e)
    acc = firma.train_accuracy(model, params, view, training.dynamic_steps)
    metrics["train_accuracy"] = acc
    cs = {"params": params, "opt_head": opt_h, "opt_ext": opt_e, "acc": acc}
    # What a client sends to each neighbour: its extractor.
    return params["extractor"], cs, metrics

  def mixing_matrix(server_state, client_states):
    gates = client_states["acc"] if gated else None
    m = ring.fibonacci_mixing_matrix(num_clients, hp["gamma"],
                                     order=server_state["order"], gates=gates,
                                     tau=hp["tau"], passes=1, sweep=hp["sweep"])
    if gate_on is None:
      return m
    plain = ring.fibonacci_mixing_matrix(num_clients, hp["gamma"],
                                         order=server_state["order"], gates=None,
                                         passes=1, sweep=hp["sweep"])
    return jnp.where(gate_on, m, plain)

  def aggregate(server_state, client_states, messages, weights, mask, key):
    del messages, weights, mask, key
    m = mixing_matrix(server_state, client_states)
    metrics = {"spectral_gap": firma.spectral_gap(m)}
    if gated:
      out = firma.gated_out(client_states["acc"], hp["tau"], server_state["order"])
      metrics["gated_out"] = out if gate_on is None else jnp.where(gate_on, out, 0.0)
    return contract.ServerUpdate(server_state, firma.mix_extractors(client_states, m),
                                 metrics)

  def eval_params(server_state, client_state):
    del server_state
    return client_state["params"]

  name = "fibfl" if not gated else "fibfl_plus" if gate_on is None else "fibfl_or_plus"
  return contract.FedAlgorithm(name, init, broadcast,
                               client_update, aggregate, eval_params, personalized=True,
                               comm=firma.ring_communication(1))


ENTRIES = (
    contract.AlgorithmEntry(
        "fibfl", build, HPARAMS.with_defaults(gate="none"),
        "FibFL: Fibonacci ring model aggregation",
        full_participation=True, decentralised=True, needs_head=True),
    contract.AlgorithmEntry(
        "fibfl_plus", build, HPARAMS.with_defaults(gate="accuracy"),
        "FibFL+: FibFL with an accuracy gate",
        full_participation=True, decentralised=True, needs_head=True),
)
