"""FedAsync (Xie, Koyejo, Gupta, "Asynchronous Federated Optimization", 2019,
Alg. 1): every arrived update is mixed into the global model at once.

M clients train at once; when client k's model w_k, trained from a global model
τ server steps old, arrives, the server sets

  w ← (1 − α_τ) w + α_τ w_k,   α_τ = α s(τ)              (Alg. 1, eq. (2))

and one new client starts from the new model (K = 1). The client uploads its
delta Δ_k = w_k − w_base, so w_k = w_base + Δ_k and the step is
w ← w + α_τ (w_base + Δ_k − w): this module hands the client algorithm's
``aggregate`` (a weighted mean over one update, then an addition) the message
α_τ (w_base + Δ_k − w). The client's payload must be the global model (FedAvg,
FedProx, FOFedAvg broadcast their parameters).

Memory: the last τ_max + 1 global models (``max_staleness``).
"""
from __future__ import annotations

import jax

from fedfrac.algorithms import asynchronous, schema

HPARAMS = schema.HParamSchema({
    **asynchronous.COMMON,
    "alpha": schema.HParam(0.6, schema.interval(0, 1, lo_open=True),
                           "mixing weight α; in (0, 1]"),
}, checks=(lambda hp: asynchronous.check_bound(hp, 1),))


def build(hp: dict) -> asynchronous.AsyncServer:
  kind, a, b, alpha = hp["staleness"], hp["staleness_a"], hp["staleness_b"], hp["alpha"]

  def messages(deltas, base, params, tau):
    mix = alpha * asynchronous.staleness_weight(kind, tau, a, b)     # α s(τ)

    def one(d, w0, w):
      m = mix.reshape((-1,) + (1,) * (d.ndim - 1))
      return m * (w0 + d - w[None])
    return jax.tree.map(one, deltas, base, params)

  return asynchronous.AsyncServer("fedasync", 1, hp["concurrency"], hp["max_staleness"],
                                  "uniform", messages)


ENTRY = asynchronous.AsyncEntry(
    "fedasync", build, HPARAMS,
    "FedAsync: mix each arrived client model in with weight alpha * s(staleness)")
