"""FedBuff (Nguyen et al., "Federated Learning with Buffered Asynchronous
Aggregation", AISTATS 2022, Alg. 1): the server applies an update once K client
updates have arrived.

M clients train at once, each from the global model version it downloaded.
When K updates Δ_k (computed from a model τ_k server steps old) are in the
buffer, the server steps

  w ← w + η_g Σ_k p_k s(τ_k) Δ_k                       (Alg. 1, server lines 9–13)

with p_k = 1/K (``weighting="uniform"``, the paper) or n_k / Σ n_j
(``"samples"``, FedAvg's), a staleness function s
(:mod:`fedfrac.algorithms.asynchronous`) and server rate η_g, then K new clients
start from the new model. The weighted mean and the addition are the client
algorithm's own ``aggregate`` (FedAvg's, FedProx's, FOFedAvg's; its server
rule — a robust aggregator, a server optimizer — applies to the buffer): this
module hands it the messages η_g s(τ_k) Δ_k. With every client equally fast,
M = K = the cohort, ``staleness="constant"``, ``weighting="samples"`` and
η_g = 1 each step is a synchronous FedAvg round, bit for bit.

Memory: the server keeps the last τ_max + 1 global models
(``max_staleness``), (τ_max + 1) × the payload's bytes.
"""
from __future__ import annotations

import jax

from fedfrac.algorithms import asynchronous, schema

HPARAMS = schema.HParamSchema({
    "buffer_size": schema.HParam(5, schema.positive_int,
                                 "updates per server step K; an integer >= 1"),
    **asynchronous.COMMON,
    "weighting": schema.HParam("samples", schema.one_of(*asynchronous.WEIGHTING),
                               f"one of {', '.join(asynchronous.WEIGHTING)}"),
    "server_lr": schema.HParam(1.0, schema.positive, "server learning rate η_g; > 0"),
}, checks=(
    lambda hp: (None if hp["buffer_size"] <= hp["concurrency"] else
                f"buffer_size={hp['buffer_size']}: must be <= concurrency="
                f"{hp['concurrency']} (the server cannot wait for more updates "
                f"than clients are training)"),
    lambda hp: asynchronous.check_bound(hp, hp["buffer_size"]),
))


def build(hp: dict) -> asynchronous.AsyncServer:
  kind, a, b, lr = hp["staleness"], hp["staleness_a"], hp["staleness_b"], hp["server_lr"]

  def messages(deltas, base, params, tau):
    del base, params
    scale = lr * asynchronous.staleness_weight(kind, tau, a, b)    # η_g s(τ_k)
    return jax.tree.map(lambda d: d * scale.reshape((-1,) + (1,) * (d.ndim - 1)),
                        deltas)

  return asynchronous.AsyncServer("fedbuff", hp["buffer_size"], hp["concurrency"],
                                  hp["max_staleness"], hp["weighting"], messages)


ENTRY = asynchronous.AsyncEntry(
    "fedbuff", build, HPARAMS,
    "FedBuff: apply K buffered, staleness-weighted client updates per server step")
