"""One federated round (docs/design.md §2.2), a pure function of the scan carry.

availability update (churn) → sample S_t → (with ``config.system``) the
cohort's deadline schedule: steps each client runs, who uploads → gather the
cohort's client states → (optional ``prepare_cohort``) → ``client_update``
over the cohort (run as :mod:`fedfrac.sim.execution` decides) → scatter →
``aggregate`` (+ optional ``cohort_metrics``) → round metrics.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp

from fedfrac.algorithms.client_view import ClientView
from fedfrac.ops import system as system_lib
from fedfrac.sim import attacks, churn
from fedfrac.sim.state import AGGREGATE, AVAILABILITY, CLIENT, SAMPLE, SPEED_TAG, SimState


@dataclasses.dataclass(frozen=True)
class RoundPlan:
  """The fixed (trace-time) settings of a round.

  Attributes:
    cohort: |S_t|.
    availability: ``None`` or ``(p_leave, p_join)`` (see :mod:`fedfrac.sim.churn`).
    cohort_perm: ``None`` or a fixed ``[S]`` permutation of the cohort order.
    cohort_sizes: ``None`` or the ``[K + 1]`` table of |S_t| by |A_t|
      (:func:`fedfrac.sim.churn.cohort_sizes`; churn with the ``"available"``
      cohort rule).
    attack: ``None`` or an active :class:`fedfrac.sim.attacks.AttackConfig`.
    num_classes: classes of the labels (label flipping).
    execute: ``execute(make_one, payload, arrays, t, args) -> (messages,
      states, metrics, executed_steps)``: runs the per-client function
      ``make_one(payload, arrays, t)`` over the cohort ``args``
      (:mod:`fedfrac.sim.execution`; built where the clients run, e.g. inside
      ``shard_map``).
    system: ``None`` or a :class:`fedfrac.ops.system.SystemConfig` (client
      speeds, deadline, policy).
    cohort_data: gather the cohort's train rows ``x[client_index[ids]]``
      ``[S, n_max, ...]`` before running the clients, each client's view then
      holding its own rows (index ``0..n_max-1``) instead of the shared ``x``
      (``engine.shard_client_state``: ``x`` is sharded by row and stays so).
  """
  cohort: int
  availability: Optional[tuple]
  cohort_perm: Any
  attack: Any
  num_classes: int
  execute: Callable
  cohort_sizes: Any = None
  system: Any = None
  cohort_data: bool = False


def gather(tree, ids):
  """Rows ``ids`` of every leaf of a ``[K, ...]`` tree."""
  return jax.tree.map(lambda x: x[ids], tree)


def scatter(tree, ids, new, mask):
  """``tree`` with rows ``ids`` replaced by ``new`` where ``mask`` is True."""
  def put(full, rows):
    keep = mask.reshape(mask.shape + (1,) * (rows.ndim - 1))
    return full.at[ids].set(jnp.where(keep, rows, full[ids]))
  return jax.tree.map(put, tree, new)


def client_fn(algorithm, payload, arrays, t, attack, num_classes):
  """``one(client_state, index, size, num_steps, client_id, key, budget,
  byzantine, rows)``: one client's ``client_update`` (with its attack, if
  Byzantine); ``budget`` is its step budget (``None``: no deadline);
  ``byzantine`` ``None`` without an attack; ``rows`` ``None`` (the view sees
  the shared ``arrays["x"], arrays["y"]``) or the client's own ``(x [n_max, ...],
  y [n_max])`` (``RoundPlan.cohort_data``; ``index`` then counts 0..n_max-1)."""
  y_flipped = None
  if "y" in arrays:
    y_flipped = attacks.flipped_labels(attack, arrays["y"], num_classes)

  def one(client_state, index, size, num_steps, client_id, key, budget,
          byzantine=None, rows=None):
    if rows is None:
      x, y, flipped = arrays["x"], arrays["y"], y_flipped
    else:
      (x, y), flipped = rows, attacks.flipped_labels(attack, rows[1], num_classes)
    if flipped is not None:
      # Data poisoning: Byzantine clients see C-1-y (under vmap this is one
      # [S, N] int label array per round, only when label_flip is on).
      y = jnp.where(byzantine, flipped, y)
    view = ClientView(x, y, index, size, num_steps, client_id, budget)
    out = algorithm.client_update(payload, client_state, view, key, t)
    return attacks.attacked_output(attack, out, byzantine, key)
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


def system_schedule(system, arrays, state: SimState, ids, mask, step_cost=None):
  """The cohort's :class:`fedfrac.ops.system.RoundSchedule` under ``system``
  and its ``[S]`` step budgets ⌊T·s_k⌋. Speeds come from the run's root key
  (``SPEED_TAG``) and are indexed by client id: fixed per seed, whatever the
  cohort order. τ_k is the client's full local work ``num_steps``.
  ``step_cost`` (``[S]``, elastic algorithms) is each client's reported cost of
  one step (:func:`fedfrac.ops.system.round_schedule`)."""
  num_clients = arrays["num_steps"].shape[0]
  speeds = system_lib.client_speeds(system, jax.random.fold_in(state.key, SPEED_TAG),
                                    num_clients)[ids]
  needed = arrays["num_steps"][ids]
  schedule = system_lib.round_schedule(needed, speeds, system.deadline, system.policy,
                                       cohort=mask, step_cost=step_cost)
  budget = system_lib.affordable_steps(speeds, system.deadline, needed)
  return schedule, budget


def elastic_step_cost(algorithm, client_metrics):
  """``[S]`` float32 per-step cost an elastic algorithm's clients report."""
  if "step_cost" not in client_metrics:
    raise ValueError(f"algorithm {algorithm.name!r} has elastic=True: its client_update "
                     "must report the client metric 'step_cost' (cost of one local "
                     "step as a fraction of a full step, in [0, 1])")
  return jnp.asarray(client_metrics["step_cost"], jnp.float32)


def system_metrics(schedule):
  """Round metrics of the deadline schedule: simulated wall-clock duration
  (time units, one step at speed 1 = 1), clients dropped, stragglers (clients
  running fewer than τ_k steps, or for elastic clients doing less than their
  full work), local steps run by the cohort (each step of an elastic client
  counts as one, whatever part of the model it trains), the cost-weighted steps
  (in full steps; = steps run for other algorithms), and whether anything was
  aggregated (0: nobody uploaded, the server state is unchanged)."""
  return {"system/wall_time": schedule.wall_time.astype(jnp.float32),
          "system/dropped": schedule.dropped.astype(jnp.float32),
          "system/stragglers": schedule.stragglers.astype(jnp.float32),
          "system/steps_run": schedule.steps_run.astype(jnp.float32),
          "system/cost_steps": schedule.cost_steps.astype(jnp.float32),
          "system/aggregated": jnp.any(schedule.participate).astype(jnp.float32)}


def run_round(plan: RoundPlan, algorithm, arrays, state: SimState):
  """One round: ``(next state, metrics)``.

  With ``plan.system`` the cohort's clients run the steps of their deadline
  schedule (``num_steps`` replaced, 0 for dropped clients), only clients that
  upload are in ``mask``, each client's view carries its step budget, and a
  round in which nobody uploads leaves the server (and client) states as they
  were. An ``elastic`` algorithm's clients run their full local work within
  their budget; the schedule (duration, who uploads) follows from the per-step
  cost they report.
  """
  t = state.round
  key_t = jax.random.fold_in(state.key, t)
  available = churn.next_availability(plan.availability, state.available,
                                      jax.random.fold_in(key_t, AVAILABILITY), t)
  ids, mask = churn.sample_cohort(jax.random.fold_in(key_t, SAMPLE), available,
                                  plan.cohort, plan.cohort_perm, plan.cohort_sizes)
  anyone_sampled = jnp.any(mask)
  client_key = jax.random.fold_in(key_t, CLIENT)
  keys = jax.vmap(lambda i: jax.random.fold_in(client_key, i))(ids)
  payload = algorithm.broadcast(state.server)
  cohort_states = gather(state.clients, ids)
  byzantine = None if state.byzantine is None else state.byzantine[ids]
  num_steps, budget = arrays["num_steps"][ids], None
  elastic = plan.system is not None and algorithm.elastic
  if plan.system is not None:
    schedule, budget = system_schedule(plan.system, arrays, state, ids, mask)
    if elastic:
      cohort_mask = mask
      num_steps = jnp.where(mask, num_steps, 0)
    else:
      num_steps, mask = schedule.steps, schedule.participate
  if algorithm.prepare_cohort is not None:
    y = arrays["y"]
    if byzantine is not None and plan.attack.kind == "label_flip":
      y = attacks.cohort_poisoned_labels(arrays, ids, byzantine, plan.num_classes)
    views = ClientView(arrays["x"], y, arrays["client_index"][ids],
                       arrays["client_size"][ids], num_steps, ids, budget)
    cohort_states = algorithm.prepare_cohort(payload, cohort_states, views, keys, mask, t)
  index, rows = arrays["client_index"][ids], None
  if plan.cohort_data:
    # Each device gathers the rows it holds; the [S, n_max, ...] cohort rows
    # then go to the devices that train them.
    rows = (arrays["x"][index], arrays["y"][index])
    index = jnp.broadcast_to(jnp.arange(index.shape[1], dtype=index.dtype), index.shape)
  args = (cohort_states, index, arrays["client_size"][ids], num_steps, ids, keys,
          budget, byzantine, rows)
  def make_one(payload, arrays, t):
    return client_fn(algorithm, payload, arrays, t, plan.attack, plan.num_classes)
  messages, new_states, client_metrics, done = plan.execute(make_one, payload, arrays,
                                                            t, args)
  if elastic:
    schedule, _ = system_schedule(plan.system, arrays, state, ids, cohort_mask,
                                  elastic_step_cost(algorithm, client_metrics))
    mask = schedule.participate
  clients = scatter(state.clients, ids, new_states, mask)
  weights = arrays["client_size"][ids].astype(jnp.float32) * mask
  out = algorithm.aggregate(state.server, clients, messages, weights, mask,
                            jax.random.fold_in(key_t, AGGREGATE))
  server, clients = out[0], out[1]
  if plan.system is not None:
    # Nobody uploaded (e.g. every client missed the deadline): nothing to
    # aggregate, the round leaves the states as they were.
    anyone = jnp.any(mask)
    server, clients = jax.tree.map(lambda new, old: jnp.where(anyone, new, old),
                                   (server, clients), (state.server, state.clients))
  server_metrics = out[2] if len(out) > 2 else {}
  if algorithm.cohort_metrics is not None:
    server_metrics = {**server_metrics,
                      **algorithm.cohort_metrics(client_metrics, weights, mask)}
  metrics = round_metrics(client_metrics, server_metrics, weights, mask, ids)
  # An empty cohort (every sampled slot unavailable) trains nobody: its masked
  # work is discarded, so it counts no executed steps.
  metrics["executed_steps"] = jnp.where(anyone_sampled, jnp.asarray(done, jnp.float32), 0.0)
  if plan.system is not None:
    metrics.update(system_metrics(schedule))
  if byzantine is not None:
    metrics["clients/byzantine"] = byzantine
    metrics["byzantine_clients"] = jnp.sum((byzantine & mask).astype(jnp.float32))
  return SimState(server, clients, available, state.key, t + 1,
                  state.byzantine), metrics
