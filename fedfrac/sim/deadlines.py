"""Client speeds and round deadlines as a stage of the round (``config.system``).

Each client has a speed fixed per seed; each round the cohort's schedule
(:func:`fedfrac.ops.system.round_schedule`) decides how many local steps each
client runs and who uploads. The schedule goes through the cohort's per-client
step counts and upload mask (masked steps, no new loop); a round in which
nobody uploads keeps the server and client states. An ``elastic`` algorithm's
clients run their full local work within their budget, and the schedule is
recomputed from the per-step cost they report (docs/design.md §2.2).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from fedfrac.ops import system as system_lib
from fedfrac.sim.stages import Cohort, Stage, keep_unless_uploaded
from fedfrac.sim.state import SPEED_TAG, SimState


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


def elastic_step_cost(name, client_metrics):
  """``[S]`` float32 per-step cost the clients of elastic algorithm ``name`` report."""
  if "step_cost" not in client_metrics:
    raise ValueError(f"algorithm {name!r} has elastic=True: its client_update "
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


class Deadlines(Stage):
  """The deadline schedule of ``system`` (a :class:`fedfrac.ops.system.SystemConfig`).

  Before the clients run, each client's ``num_steps`` becomes its scheduled
  steps (0 for dropped clients), only clients that upload stay in the mask, and
  each view carries its step budget. For an ``elastic`` algorithm (named
  ``algorithm``, for the error of a missing ``step_cost``) the sampled clients
  run their full work and the schedule follows, after they ran, from the
  per-step cost they report.
  """
  NAME = "deadlines"

  def __init__(self, system, elastic: bool = False, algorithm: str = ""):
    self.system = system
    self.elastic = elastic
    self.algorithm = algorithm

  def cohort(self, cohort: Cohort, arrays, state) -> Cohort:
    schedule, budget = system_schedule(self.system, arrays, state, cohort.ids, cohort.mask)
    if self.elastic:
      return cohort._replace(num_steps=jnp.where(cohort.mask, cohort.num_steps, 0),
                             budget=budget)
    return cohort._replace(num_steps=schedule.steps, mask=schedule.participate,
                           budget=budget).with_value(self.NAME, schedule)

  def uploads(self, cohort: Cohort, client_metrics, arrays, state) -> Cohort:
    if not self.elastic:
      return cohort
    schedule, _ = system_schedule(self.system, arrays, state, cohort.ids, cohort.mask,
                                  elastic_step_cost(self.algorithm, client_metrics))
    return cohort._replace(mask=schedule.participate).with_value(self.NAME, schedule)

  def server(self, new, old, cohort: Cohort):
    # Nobody uploaded (e.g. every client missed the deadline): nothing to
    # aggregate, the round leaves the states as they were.
    return keep_unless_uploaded(new, old, cohort.mask)

  def metrics(self, cohort: Cohort) -> dict:
    return system_metrics(cohort.value(self.NAME))
