"""One federated round (docs/design.md §2.2), a pure function of the scan carry.

FedAvg's path, with the stages of :mod:`fedfrac.sim.stages` composed around it::

  availability (churn) → sample S_t → cohort (deadlines, Byzantine flags)
  → broadcast → data (label flipping) → before_clients (the algorithm's cohort
  hook) → rows (sharded client rows) → client_update over the cohort, each
  client's output through ``client`` (message attacks) → uploads (elastic
  clients' schedule) → scatter → aggregate → server (a round nobody uploaded to
  keeps its states) → round metrics (+ server_metrics, metrics)

A plan without stages runs the plain path; each stage lives with its concern
(:mod:`~fedfrac.sim.churn`, :mod:`~fedfrac.sim.deadlines`,
:mod:`~fedfrac.sim.attacks`, :mod:`~fedfrac.sim.client_rows`) and is in the plan
only when the config asks for it.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp

from fedfrac.algorithms.client_view import ClientView
from fedfrac.algorithms.contract import server_update
from fedfrac.sim import churn
from fedfrac.sim.stages import Cohort, algorithm_stages
from fedfrac.sim.state import AGGREGATE, AVAILABILITY, CLIENT, SAMPLE, SimState


@dataclasses.dataclass(frozen=True)
class RoundPlan:
  """The fixed (trace-time) settings of a round.

  Attributes:
    cohort: |S_t|, the static number of cohort slots.
    execute: ``execute(make_one, payload, arrays, t, args) -> (messages,
      states, metrics, executed_steps)``: runs the per-client function
      ``make_one(payload, arrays, t)`` over the cohort ``args``
      (:mod:`fedfrac.sim.execution`, as the simulation's placement decides).
    cohort_perm: ``None`` or a fixed ``[S]`` permutation of the cohort order.
    cohort_sizes: ``None`` or the ``[K + 1]`` table of |S_t| by |A_t|
      (:func:`fedfrac.sim.churn.cohort_sizes`; churn with the ``"available"``
      cohort rule).
    stages: the :class:`fedfrac.sim.stages.Stage` values the config asks for,
      in the order their hooks run (the algorithm's own cohort hooks follow them).
  """
  cohort: int
  execute: Callable
  cohort_perm: Any = None
  cohort_sizes: Any = None
  stages: tuple = ()


def gather(tree, ids):
  """Rows ``ids`` of every leaf of a ``[K, ...]`` tree."""
  return jax.tree.map(lambda x: x[ids], tree)


def scatter(tree, ids, new, mask):
  """``tree`` with rows ``ids`` replaced by ``new`` where ``mask`` is True."""
  def put(full, rows):
    keep = mask.reshape(mask.shape + (1,) * (rows.ndim - 1))
    return full.at[ids].set(jnp.where(keep, rows, full[ids]))
  return jax.tree.map(put, tree, new)


def client_fn(algorithm, payload, arrays, t, stages=()):
  """``one(client_state, index, size, num_steps, client_id, key, budget,
  byzantine, rows)``: one client's ``client_update``, its output passed through
  each stage's ``client`` hook. ``budget`` is its step budget (``None``: no
  deadline); ``byzantine`` ``None`` without an attack; ``rows`` ``None`` (the
  view sees the shared ``arrays["x"], arrays["y"]``) or the client's own
  ``(x [n_max, ...], y [n_max])`` (``index`` then counts 0..n_max-1)."""
  def one(client_state, index, size, num_steps, client_id, key, budget,
          byzantine=None, rows=None):
    x, y = (arrays["x"], arrays["y"]) if rows is None else rows
    view = ClientView(x, y, index, size, num_steps, client_id, budget)
    out = algorithm.client_update(payload, client_state, view, key, t)
    for stage in stages:
      out = stage.client(out, byzantine, key)
    return out
  return one


def round_metrics(client_metrics, server_metrics, weights, mask, ids):
  """Scalars (weighted train metrics, cohort size) and ``clients/*`` arrays."""
  m = mask.astype(jnp.float32)
  count = jnp.maximum(m.sum(), 1.0)
  p = weights / jnp.maximum(weights.sum(), 1e-12)
  out = {"cohort": m.sum(), "clients/ids": ids, "clients/mask": mask}
  for name, value in client_metrics.items():
    value = jnp.asarray(value, jnp.float32)
    out[f"clients/{name}"] = value
    if value.ndim == 1:
      out[f"train_{name}"] = jnp.sum(p * value)
  if "loss" in client_metrics:
    loss = jnp.asarray(client_metrics["loss"], jnp.float32)
    mean = jnp.sum(m * loss) / count
    out["train_loss_var"] = jnp.sum(m * (loss - mean) ** 2) / count
  if "steps" in client_metrics:
    out["client_steps"] = jnp.sum(m * client_metrics["steps"])
  for name, value in server_metrics.items():
    out[f"server/{name}"] = jnp.asarray(value)
  return out


def run_round(plan: RoundPlan, algorithm, arrays, state: SimState):
  """One round: ``(next state, metrics)`` (the path in the module docstring)."""
  t = state.round
  key_t = jax.random.fold_in(state.key, t)
  stages = plan.stages + algorithm_stages(algorithm)
  available = state.available
  for stage in stages:
    available = stage.availability(available, jax.random.fold_in(key_t, AVAILABILITY), t)
  ids, mask = churn.sample_cohort(jax.random.fold_in(key_t, SAMPLE), available,
                                  plan.cohort, plan.cohort_perm, plan.cohort_sizes)
  anyone_sampled = jnp.any(mask)
  client_key = jax.random.fold_in(key_t, CLIENT)
  keys = jax.vmap(lambda i: jax.random.fold_in(client_key, i))(ids)
  payload = algorithm.broadcast(state.server)
  cohort_states = gather(state.clients, ids)
  cohort = Cohort(ids, mask, arrays["num_steps"][ids], keys, values={})
  for stage in stages:
    cohort = stage.cohort(cohort, arrays, state)
  for stage in stages:
    arrays = stage.data(arrays, cohort)
  for stage in stages:
    cohort_states = stage.before_clients(payload, cohort_states, arrays, cohort, t)
  index, rows = arrays["client_index"][ids], None
  for stage in stages:
    index, rows = stage.rows(arrays, index, rows)
  args = (cohort_states, index, arrays["client_size"][ids], cohort.num_steps, ids,
          cohort.keys, cohort.budget, cohort.byzantine, rows)

  def make_one(payload, arrays, t):
    return client_fn(algorithm, payload, arrays, t, stages)
  messages, new_states, client_metrics, done = plan.execute(make_one, payload, arrays,
                                                            t, args)
  for stage in stages:
    cohort = stage.uploads(cohort, client_metrics, arrays, state)
  mask = cohort.mask
  clients = scatter(state.clients, ids, new_states, mask)
  weights = arrays["client_size"][ids].astype(jnp.float32) * mask
  update = server_update(algorithm.aggregate(state.server, clients, messages, weights,
                                             mask, jax.random.fold_in(key_t, AGGREGATE)),
                         algorithm.name)
  server, clients = update.server, update.clients
  for stage in stages:
    server, clients = stage.server((server, clients), (state.server, state.clients),
                                   cohort)
  server_metrics = dict(update.metrics)
  for stage in stages:
    server_metrics = {**server_metrics, **stage.server_metrics(client_metrics, weights,
                                                               mask)}
  metrics = round_metrics(client_metrics, server_metrics, weights, mask, ids)
  # An empty cohort (every sampled slot unavailable) trains nobody: its masked
  # work is discarded, so it counts no executed steps.
  metrics["executed_steps"] = jnp.where(anyone_sampled, jnp.asarray(done, jnp.float32),
                                        0.0)
  for stage in stages:
    metrics.update(stage.metrics(cohort))
  return SimState(server, clients, available, state.key, t + 1,
                  state.byzantine, state.clock), metrics
