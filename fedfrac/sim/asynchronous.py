"""Buffered asynchronous aggregation on the simulated clock, inside the compiled loop.

The server of ``config.clock.server`` = ``fedbuff`` | ``fedasync``
(:mod:`fedfrac.algorithms.fedbuff`, :mod:`fedfrac.algorithms.fedasync`) runs as
the body of the chunk's ``lax.scan`` in place of a synchronous round: one scan
step is one server step. The carry's clock slot (``SimState.clock``) is an
:class:`AsyncState`: M in-flight slots (client, base model version, arrival
time, the server step that dispatched it), a ring of the last τ_max + 1
broadcast payloads (memory (τ_max + 1) × payload bytes) and the time.

Server step s (the time of the clock jumps to the K-th earliest arrival):

1. take the K slots with the earliest arrival times (ties: the lower slot first,
   a stable sort), in client-id order (the order a round's cohort is
   aggregated in), and their staleness τ = version − base version;
2. run their client updates, vmapped, each from its base payload in the ring,
   with the round index and key of the step that dispatched it (the key a
   synchronous round of that index gives the client);
3. apply them: the server rule's messages (staleness-weighted) through the
   client algorithm's own ``aggregate``; the new model becomes version + 1 in
   the ring;
4. dispatch K new clients at the current time with the new model: sampled as
   a synchronous round s + 1 samples its cohort (same key), from the clients
   not in flight (with availability windows: that have a window still to
   come); each starts at once or at its next window (eq. (3) of
   :mod:`fedfrac.sim.clock`) and arrives after eq. (1).

The initial state dispatches M clients at time 0 from version 0 (sampled as
round 0's cohort). With every client equally fast and M = K = the cohort, step
s takes exactly the clients of synchronous round s, so FedBuff with constant
staleness weights is FedAvg bit for bit (tested).

Staleness bound: writing version v + 1 overwrites version v + 1 − (τ_max + 1);
a slot still in flight from that version would later need it. The step counts
such overruns (``async/ring_overrun``) before writing, and
:func:`check_overrun` stops the run after the chunk with one line naming
``max_staleness`` and the staleness the clock produced. With equal speeds the
staleness is at most ⌈M/K⌉ − 1, the lower bound every config is checked
against before compute; under heterogeneous speeds a slow client can be
arbitrarily stale, and only the run can tell.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac.algorithms.client_view import ClientView
from fedfrac.algorithms.contract import server_update
from fedfrac.sim import churn, execution
from fedfrac.sim import clock as clock_lib
from fedfrac.sim import round as round_lib
from fedfrac.sim.state import AGGREGATE, CLIENT, SAMPLE, SimState


class AsyncState(NamedTuple):
  """The asynchronous server's part of the scan carry (M slots, R = τ_max + 1).

  Attributes:
    ids: ``[M]`` int32 the client training in each slot.
    base: ``[M]`` int32 the model version it downloaded.
    finish: ``[M]`` float32 the simulated time its update arrives.
    dispatched: ``[M]`` int32 the server step that dispatched it (its round
      index and key).
    ring: the broadcast payloads of the last R versions, leaves ``[R, ...]``;
      version v sits at ``v % R``.
    version: int32 scalar, the current model version (server steps applied).
    time: float32 scalar, the time of the last server step.
    overrun: int32 scalar, in-flight clients whose base version was
      overwritten (0 unless ``max_staleness`` is too small for the clock).
  """
  ids: jax.Array
  base: jax.Array
  finish: jax.Array
  dispatched: jax.Array
  ring: Any
  version: jax.Array
  time: jax.Array
  overrun: jax.Array


class AsyncPlan(NamedTuple):
  """The static settings of an asynchronous run."""
  server: Any             # fedfrac.algorithms.asynchronous.AsyncServer
  clock: Any              # fedfrac.sim.clock.ClockConfig
  payload_bytes: int
  message_bytes: int
  parallelism: str
  step_buckets: int
  training: Any           # LocalTraining


def _round_key(root, step, tag):
  return jax.random.fold_in(jax.random.fold_in(root, step), tag)


def _dispatch_times(plan: AsyncPlan, arrays, root, ids, now):
  """``[S]`` arrival times of clients ``ids`` dispatched at ``now``: each starts
  at ``now`` or, with availability windows, at its next window (eq. (3) of
  :mod:`fedfrac.sim.clock`), then takes eq. (1)."""
  rates = clock_lib.client_rates(plan.clock, root, arrays["num_steps"].shape[0])
  windows = clock_lib.window_arrays(plan.clock)
  start = now if windows is None else clock_lib.start_times(windows, ids, now)
  return start + clock_lib.durations(rates, ids, arrays["num_steps"][ids],
                                     plan.payload_bytes, plan.message_bytes)


def _can_start(plan: AsyncPlan, num_clients: int, now):
  """``[K]`` bool: clients with a window still to come at ``now`` (all of them
  without windows); only these are sampled."""
  windows = clock_lib.window_arrays(plan.clock)
  if windows is None:
    return jnp.ones((num_clients,), bool)
  return clock_lib.start_times(windows, jnp.arange(num_clients), now) < jnp.inf


def init_state(plan: AsyncPlan, algorithm, arrays, state: SimState) -> AsyncState:
  """M clients dispatched at time 0 from version 0 (sampled as round 0's cohort)."""
  server = plan.server
  m, r = server.concurrency, server.max_staleness + 1
  ids, _ = churn.sample_cohort(_round_key(state.key, 0, SAMPLE), state.available
                               & _can_start(plan, state.available.shape[0], 0.0), m)
  payload = algorithm.broadcast(state.server)
  ring = jax.tree.map(lambda x: jnp.broadcast_to(x, (r,) + jnp.shape(x)), payload)
  zero = jnp.zeros((), jnp.int32)
  return AsyncState(ids, jnp.zeros((m,), jnp.int32),
                    _dispatch_times(plan, arrays, state.key, ids, jnp.float32(0.0)),
                    jnp.zeros((m,), jnp.int32), ring, zero, jnp.zeros((), jnp.float32),
                    zero)


def staleness_histogram(tau, bins: int) -> list:
  """Float32 counts of τ = 0..bins-1 and (the last) τ >= bins: ``bins + 1``
  scalars, recorded per server step as ``async/staleness_count_<τ>``."""
  counts = jnp.zeros((bins + 1,), jnp.float32).at[jnp.minimum(tau, bins)].add(1.0)
  return [counts[i] for i in range(bins + 1)]


def server_step(plan: AsyncPlan, algorithm, arrays, state: SimState):
  """One server step (module docstring): ``(next state, metrics)``."""
  server = plan.server
  k, r = server.buffer_size, server.max_staleness + 1
  a: AsyncState = state.clock
  s, root = state.round, state.key
  # 1. the K earliest arrivals
  taken = jnp.argsort(a.finish, stable=True)[:k]
  taken = taken[jnp.argsort(a.ids[taken])]      # in client order, as a round's cohort
  ids, base, dispatched = a.ids[taken], a.base[taken], a.dispatched[taken]
  now = jnp.max(a.finish[taken])
  tau = a.version - base
  # 2. their client updates, each from its own base model
  payloads = jax.tree.map(lambda ring: ring[base % r], a.ring)
  keys = jax.vmap(lambda d, i: jax.random.fold_in(_round_key(root, d, CLIENT), i))(
      dispatched, ids)
  cohort_states = round_lib.gather(state.clients, ids)
  sizes = arrays["client_size"][ids]
  steps = arrays["num_steps"][ids]

  def one(client_state, index, size, num_steps, client_id, key, payload, t):
    view = ClientView(arrays["x"], arrays["y"], index, size, num_steps, client_id)
    return algorithm.client_update(payload, client_state, view, key, t)

  args = (cohort_states, arrays["client_index"][ids], sizes, steps, ids, keys, payloads,
          dispatched)
  deltas, new_states, client_metrics, done = execution.run_local(
      one, args, plan.parallelism, plan.step_buckets, plan.training)
  # 3. apply them through the client algorithm's aggregate
  mask = jnp.ones((k,), bool)
  params = algorithm.broadcast(state.server)
  messages = server.messages(deltas, payloads, params, tau)
  weights = (sizes.astype(jnp.float32) if server.weighting == "samples"
             else jnp.ones((k,), jnp.float32)) * mask
  clients = round_lib.scatter(state.clients, ids, new_states, mask)
  update = server_update(algorithm.aggregate(state.server, clients, messages, weights,
                                             mask, _round_key(root, s, AGGREGATE)),
                         algorithm.name)
  version = a.version + 1
  slot = version % r
  # A slot still in flight from the version about to be overwritten overruns
  # the bound (only the not-taken slots are still in flight).
  in_flight = jnp.ones_like(a.ids, bool).at[taken].set(False)
  overrun = jnp.sum(in_flight & (a.base == version - r)).astype(jnp.int32)
  ring = jax.tree.map(lambda ring, p: ring.at[slot].set(p), a.ring,
                      algorithm.broadcast(update.server))
  # 4. K new clients, sampled as synchronous round s + 1 samples its cohort
  busy = jnp.zeros_like(state.available).at[a.ids].set(in_flight)
  new_ids, _ = churn.sample_cohort(_round_key(root, s + 1, SAMPLE),
                                   ~busy & _can_start(plan, busy.shape[0], now), k)
  nxt = AsyncState(a.ids.at[taken].set(new_ids), a.base.at[taken].set(version),
                   a.finish.at[taken].set(_dispatch_times(plan, arrays, root, new_ids,
                                                          now)),
                   a.dispatched.at[taken].set(s + 1), ring, version, now,
                   a.overrun + overrun)
  metrics = round_lib.round_metrics(client_metrics, dict(update.metrics), weights, mask,
                                    ids)
  metrics["executed_steps"] = jnp.asarray(done, jnp.float32)
  metrics.update({
      "clock/time": now, "clock/step_time": now - a.time,
      "clients/staleness": tau.astype(jnp.float32),
      "async/staleness_mean": jnp.mean(tau.astype(jnp.float32)),
      "async/staleness_max": jnp.max(tau).astype(jnp.float32),
      **{f"async/staleness_count_{i}": c
         for i, c in enumerate(staleness_histogram(tau, r))},
      "async/ring_overrun": overrun.astype(jnp.float32),
  })
  return SimState(update.server, update.clients, state.available, root, s + 1,
                  state.byzantine, nxt), metrics


def check_overrun(metrics, server, key: str = "clock.options.max_staleness") -> None:
  """After a chunk: raise ``ValueError`` (one line) if an in-flight client's
  base version was overwritten (the ring was too short for this clock)."""
  over = np.asarray(metrics.get("async/ring_overrun", 0.0))
  if over.size and float(np.max(over)) > 0:
    worst = int(np.max(np.asarray(metrics["async/staleness_max"])))
    raise ValueError(
        f"{key}={server.max_staleness}: the clock produced a client more than "
        f"{server.max_staleness} server steps stale (an in-flight client's model "
        f"version left the ring of {server.max_staleness + 1}; largest staleness "
        f"applied so far {worst}); raise {key.rsplit('.', 1)[-1]} or lower "
        f"concurrency / the speed spread")
