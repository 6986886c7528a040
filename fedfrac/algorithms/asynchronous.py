"""What an asynchronous server is: the shared pieces of FedBuff and FedAsync.

An :class:`AsyncServer` says how many updates the server waits for (K, the
buffer), how many clients train at once (M, the concurrency), how many past
global models it keeps (the staleness bound τ_max: a ring of τ_max + 1
broadcast payloads, memory (τ_max + 1) × payload bytes), how arrivals are
weighted, and how each arrived update is turned into the message the client
algorithm's own ``aggregate`` then applies (:mod:`fedfrac.sim.asynchronous`
runs it inside the compiled loop). One module per rule:
:mod:`fedfrac.algorithms.fedbuff` (Nguyen et al., AISTATS 2022, Alg. 1) and
:mod:`fedfrac.algorithms.fedasync` (Xie et al. 2019, Alg. 1).

Staleness functions s(τ) of an update computed from a model τ server steps old
(Xie et al. 2019, §5.2; FedBuff uses the polynomial one):

  constant     s(τ) = 1
  polynomial   s(τ) = (1 + τ)^(−a)
  hinge        s(τ) = 1 if τ <= b, else 1 / (a (τ − b) + 1)

Which client updates can run asynchronously is the client algorithm's entry
flag ``asynchronous`` (:class:`fedfrac.algorithms.contract.AlgorithmEntry`): its
update starts from any global model version it is given, its message is a model
delta Δ_k = w_k − w_base, and its ``aggregate`` adds a weighted mean of the
messages to the global model (FedAvg, FedProx, FOFedAvg). Methods with
server-side control variates or state updated from the whole cohort, or
decentralised ones, are refused before compute.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax.numpy as jnp

from fedfrac.algorithms import schema

STALENESS = ("constant", "polynomial", "hinge")
WEIGHTING = ("samples", "uniform")


def staleness_weight(kind: str, tau, a=0.5, b=4):
  """s(τ) of ``kind`` (module docstring) for integer staleness ``tau [K]``: float32."""
  tau = jnp.asarray(tau, jnp.float32)
  if kind == "constant":
    return jnp.ones_like(tau)
  if kind == "polynomial":
    return (1.0 + tau) ** (-jnp.float32(a))
  if kind == "hinge":
    return jnp.where(tau <= b, 1.0, 1.0 / (jnp.float32(a) * (tau - b) + 1.0))
  raise ValueError(f"staleness={kind!r}: allowed values are {', '.join(STALENESS)}")


class AsyncServer(NamedTuple):
  """A buffered asynchronous server rule (static settings and two functions).

  Attributes:
    name: ``fedbuff`` or ``fedasync``.
    buffer_size: K, updates applied per server step.
    concurrency: M, clients training at any time (K <= M <= number of clients).
    max_staleness: τ_max; the ring keeps τ_max + 1 global model versions.
    weighting: ``samples`` (p_k = n_k / Σ n_j over the K arrivals, FedAvg's) or
      ``uniform`` (p_k = 1/K, the FedBuff paper's).
    messages: ``messages(deltas, base, params, tau) -> messages'`` with leaves
      ``[K, ...]`` (``base``: the payload each update started from; ``params``
      the current global model; ``tau [K]`` int32 staleness): what the client
      algorithm's ``aggregate`` averages and adds.
  """
  name: str
  buffer_size: int
  concurrency: int
  max_staleness: int
  weighting: str
  messages: Callable

  def ring_bytes(self, payload_bytes: int) -> int:
    """Memory of the kept global model versions: (τ_max + 1) × payload bytes."""
    return (self.max_staleness + 1) * int(payload_bytes)


class AsyncEntry(NamedTuple):
  """A registered asynchronous server: ``build(hp) -> AsyncServer`` and its options."""
  name: str
  build: Callable
  schema: schema.HParamSchema
  summary: str = ""

  def make(self, given=None, prefix: str = "clock.options.") -> AsyncServer:
    """The server with options ``given`` (checked; one line naming a bad key)."""
    return self.build(self.schema.resolve(self.name, dict(given or {}), prefix))


# Options both rules share.
COMMON = {
    "concurrency": schema.HParam(10, schema.positive_int,
                                 "clients training at once M; an integer >= 1"),
    "max_staleness": schema.HParam(
        8, schema.non_negative_int,
        "staleness bound τ_max (the ring keeps τ_max + 1 models); an integer >= 0"),
    "staleness": schema.HParam("polynomial", schema.one_of(*STALENESS),
                               f"one of {', '.join(STALENESS)}"),
    "staleness_a": schema.HParam(0.5, schema.non_negative, "exponent / slope a; >= 0"),
    "staleness_b": schema.HParam(4, schema.non_negative_int,
                                 "hinge b; an integer >= 0"),
}


def lowest_bound(concurrency: int, buffer_size: int) -> int:
  """The smallest τ_max any clock allows: with every client equally fast the
  server applies arrivals first in, first out, and a client waits through
  ⌈M/K⌉ − 1 server steps between its download and its update's step."""
  return -(-concurrency // buffer_size) - 1


def check_bound(hp, buffer_size: int):
  """``max_staleness`` below :func:`lowest_bound`: the message (``None`` if fine)."""
  low = lowest_bound(hp["concurrency"], buffer_size)
  if hp["max_staleness"] < low:
    return (f"max_staleness={hp['max_staleness']}: must be >= ceil(concurrency / "
            f"buffer_size) - 1 = {low} (with concurrency={hp['concurrency']}, "
            f"buffer_size={buffer_size}, an update is at least that stale even when "
            f"every client is equally fast)")
  return None
