"""System heterogeneity: per-client compute speeds, round deadlines and what a
client manages to run before the deadline (pure, jittable, vmappable).

Time unit: one local step at speed 1 takes one time unit, so client k needs
τ_k / s_k units for its τ_k = E·⌈n_k/B⌉ steps at speed s_k. A round's deadline T
and a policy decide what each client runs:

  * ``none``    — every client runs τ_k steps; the round lasts max_k τ_k / s_k.
  * ``drop``    — a client that cannot finish τ_k steps by T (τ_k / s_k > T)
    sends nothing (participation mask False, 0 steps); the round lasts
    max over finishers of τ_k / s_k, or T when anyone was dropped.
  * ``partial`` — client k runs min(τ_k, ⌊T·s_k⌋) steps (FedNova's setting of
    variable local work, Wang et al. 2020); a client with 0 steps sends
    nothing; the round lasts max_k steps_k / s_k ≤ T.

Elastic clients (an algorithm with ``FedAlgorithm.elastic``, e.g. FedEL) fit
their work into the budget themselves: a step that trains only part of the model
costs c_k ∈ [0, 1] of a full step, and the client picks c_k so that
τ_k·c_k ≤ ⌊T·s_k⌋. Under every policy such a client runs all τ_k steps and takes
τ_k·c_k / s_k time units; one with c_k = 0 (it could not afford even its
cheapest part) trains nothing and sends nothing, and counts as dropped (under
``drop`` the round then lasts T, as for any dropped client). Its steps count as
whole steps in ``steps_run`` (a step is a step whatever it trains); the
cost-weighted work Σ_k steps_k·c_k is ``cost_steps``, and a client counts as a
straggler when it does less than its full work (steps_k·c_k < τ_k).

Speeds are fixed per seed: log-normal s_k = exp(σ·z_k), z_k ~ N(0, 1) (median 1),
per-group constants, or all equal. Everything is elementwise over clients or a
max/sum over them, so results do not depend on the order of the clients.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from fedfrac._validation import finite_in_float32

POLICIES = ("none", "drop", "partial")
SPEED_MODELS = ("equal", "lognormal", "groups")


class RoundSchedule(NamedTuple):
  """What the clients run in one round under a deadline.

  Attributes:
    steps: ``[K]`` int32 local steps each client runs.
    participate: ``[K]`` bool, the client uploads this round.
    wall_time: ``[]`` float32 simulated duration of the round.
    dropped: ``[]`` int32 clients of the cohort that send nothing.
    stragglers: ``[]`` int32 clients of the cohort running fewer than τ_k steps.
    steps_run: ``[]`` int32 total steps run by the cohort.
    cost_steps: ``[]`` float32 total cost-weighted steps Σ_k steps_k·c_k, in
      full steps (= ``steps_run`` without elastic clients).
  """
  steps: jax.Array
  participate: jax.Array
  wall_time: jax.Array
  dropped: jax.Array
  stragglers: jax.Array
  steps_run: jax.Array
  cost_steps: jax.Array


def sample_speeds(key: jax.Array, num_clients: int, model: str = "lognormal",
                  sigma: ArrayLike = 0.0,
                  group_speeds: ArrayLike | Sequence[float] | None = None,
                  groups: ArrayLike | Sequence[int] | None = None) -> jax.Array:
  """Per-client compute speeds ``[K]`` float32 (> 0), fixed by ``key``.

  Args:
    key: PRNG key (derive it from the run's seed so speeds are fixed per seed).
    num_clients: K (static).
    model: ``"equal"`` (all 1), ``"lognormal"`` (exp(σ z), z ~ N(0, 1)) or
      ``"groups"`` (``group_speeds[groups[k]]``).
    sigma: σ >= 0 of the log-normal.
    group_speeds: ``[G]`` positive speeds (``groups`` model).
    groups: ``[K]`` int group of each client (``groups`` model).
  """
  if model == "equal":
    return jnp.ones((num_clients,), jnp.float32)
  if model == "lognormal":
    z = jax.random.normal(key, (num_clients,), jnp.float32)
    return jnp.exp(jnp.asarray(sigma, jnp.float32) * z)
  if model == "groups":
    return jnp.asarray(group_speeds, jnp.float32)[jnp.asarray(groups, jnp.int32)]
  raise ValueError(f"system.speed={model!r}: allowed values are {', '.join(SPEED_MODELS)}")


def steps_needed(client_size: ArrayLike, batch_size: int, local_epochs: int) -> jax.Array:
  """τ_k = E·⌈n_k / B⌉ local steps for E epochs: ``[K]`` int32."""
  n = jnp.asarray(client_size, jnp.int32)
  return (local_epochs * ((n + batch_size - 1) // batch_size)).astype(jnp.int32)


def round_schedule(needed: ArrayLike, speeds: ArrayLike, deadline: ArrayLike, policy: str,
                   cohort: ArrayLike | None = None,
                   step_cost: ArrayLike | None = None) -> RoundSchedule:
  """Steps, participation and duration of one round (module docstring).

  Args:
    needed: ``[K]`` int τ_k, steps for the full local work.
    speeds: ``[K]`` float s_k > 0 (steps per time unit).
    deadline: T > 0 (may be ``inf``; traced is fine).
    policy: ``"none"`` | ``"drop"`` | ``"partial"`` (static).
    cohort: optional ``[K]`` bool, the clients sampled this round (others run
      nothing and are not counted).
    step_cost: optional ``[K]`` float c_k ∈ [0, 1], the cost of one step of
      elastic clients as a fraction of a full step (then ``policy`` neither
      drops nor truncates: every cohort client with c_k > 0 runs τ_k steps
      taking τ_k·c_k / s_k; c_k = 0 means dropped). ``None``: c_k = 1, the
      policy decides.
  Returns:
    :class:`RoundSchedule`.
  """
  if policy not in POLICIES:
    raise ValueError(f"system.policy={policy!r}: allowed values are {', '.join(POLICIES)}")
  needed = jnp.asarray(needed, jnp.int32)
  speeds = jnp.asarray(speeds, jnp.float32)
  cohort = jnp.ones(needed.shape, bool) if cohort is None else jnp.asarray(cohort, bool)
  deadline = jnp.asarray(deadline, jnp.float32)
  if step_cost is not None:
    cost = jnp.clip(jnp.asarray(step_cost, jnp.float32), 0.0, 1.0)
    steps = jnp.where(cost > 0, needed, 0)
  elif policy == "none":
    steps = needed
  elif policy == "drop":
    steps = jnp.where(needed.astype(jnp.float32) / speeds <= deadline, needed, 0)
  else:
    fit = jnp.floor(jnp.minimum(deadline * speeds, jnp.float32(2 ** 30)))
    steps = jnp.minimum(needed, fit.astype(jnp.int32))
  steps = jnp.where(cohort, steps, 0).astype(jnp.int32)
  participate = cohort & ((steps > 0) | (needed == 0))
  if step_cost is None:
    cost = jnp.ones(needed.shape, jnp.float32)
  work = steps.astype(jnp.float32) * cost                    # cost-weighted steps
  times = jnp.where(participate, work / speeds, 0.0)
  dropped = jnp.sum(cohort & ~participate).astype(jnp.int32)
  wall = jnp.max(times, initial=0.0)
  if policy == "drop":
    wall = jnp.where(dropped > 0, deadline, wall)
  short = steps < needed if step_cost is None else work < needed.astype(jnp.float32)
  return RoundSchedule(steps, participate, wall, dropped,
                       jnp.sum(cohort & short).astype(jnp.int32),
                       jnp.sum(steps).astype(jnp.int32), jnp.sum(work))


def _number(v):
  return (isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
          and not (isinstance(v, float) and math.isnan(v)))


def validate_system(system: Mapping[str, Any], prefix: str = "system") -> None:
  """Check a ``config.system`` mapping; one ``ValueError`` naming key, value and
  what is allowed.

  Keys: ``speed`` (``equal`` | ``lognormal`` | ``groups``), ``sigma`` (>= 0),
  ``group_speeds`` (list of > 0, ``groups`` model), ``deadline`` (> 0 or
  ``inf``/None = no deadline), ``policy`` (``none`` | ``drop`` | ``partial``).
  Unknown keys are an error too.
  """
  allowed_keys = ("speed", "sigma", "group_speeds", "groups", "deadline", "policy")
  for k in system:
    if k not in allowed_keys:
      raise ValueError(f"config.{prefix}.{k}: unknown key; allowed keys are "
                       f"{', '.join(allowed_keys)}")

  def fail(key, value, allowed):
    raise ValueError(f"config.{prefix}.{key}={value!r}: {allowed}")

  speed = system.get("speed", "equal")
  if speed not in SPEED_MODELS:
    fail("speed", speed, f"allowed values are {', '.join(SPEED_MODELS)}")
  sigma = system.get("sigma", 0.0)
  if not (_number(sigma) and finite_in_float32(sigma) and sigma >= 0):
    fail("sigma", sigma, "must be a number >= 0, finite in float32")
  if speed == "groups":
    gs = system.get("group_speeds", None)
    if not gs or not all(_number(s) and finite_in_float32(s) and s > 0 for s in gs):
      fail("group_speeds", gs, "must be a non-empty list of speeds > 0, finite in "
           "float32")
    groups = system.get("groups", ()) or ()
    if not all(isinstance(g, (int, np.integer)) and not isinstance(g, bool)
               and 0 <= g < len(gs) for g in groups):
      fail("groups", groups, f"must be empty (client k in group k mod "
           f"{len(gs)}) or list each client's group in 0..{len(gs) - 1}")
  deadline = system.get("deadline", None)
  if deadline is not None and not (_number(deadline) and deadline > 0 and (
      deadline == math.inf or finite_in_float32(deadline))):
    fail("deadline", deadline, "must be a number > 0, finite in float32 or inf (or "
         "None for no deadline)")
  policy = system.get("policy", "none")
  if policy not in POLICIES:
    fail("policy", policy, f"allowed values are {', '.join(POLICIES)}")
  if policy != "none" and deadline is None:
    fail("deadline", deadline, f"must be set (> 0) for policy={policy!r}")


class SystemConfig(NamedTuple):
  """``config.system`` as the engine uses it (static, hashable).

  Attributes:
    speed: ``"equal"`` | ``"lognormal"`` | ``"groups"`` (:func:`sample_speeds`).
    sigma: σ of the log-normal speeds.
    group_speeds: ``(G,)`` speeds of the groups (``groups`` model).
    groups: ``(K,)`` group of each client, or ``()`` = client k in group k mod G.
    deadline: T > 0 in time units (one step at speed 1 = 1 unit); ``inf`` = none.
    policy: ``"none"`` | ``"drop"`` | ``"partial"`` (module docstring).
  """
  speed: str = "equal"
  sigma: float = 0.0
  group_speeds: tuple = ()
  groups: tuple = ()
  deadline: float = math.inf
  policy: str = "none"


def client_speeds(system: SystemConfig, key: jax.Array, num_clients: int) -> jax.Array:
  """``[K]`` speeds of all clients of a run for ``system``, fixed by ``key``
  (the same in every round; indexed by client id, so cohort order is irrelevant)."""
  groups = None
  if system.speed == "groups":
    g = len(system.group_speeds)
    groups = (np.asarray(system.groups, np.int32) if len(system.groups)
              else np.arange(num_clients, dtype=np.int32) % g)
  return sample_speeds(key, num_clients, system.speed, system.sigma,
                       system.group_speeds or None, groups)


def affordable_steps(speeds: ArrayLike, deadline: ArrayLike, needed: ArrayLike) -> jax.Array:
  """``[K]`` int32 local steps each client can afford before the deadline,
  ⌊T·s_k⌋ (capped at 2^30); ``needed`` where there is no deadline (T = inf)."""
  deadline = jnp.asarray(deadline, jnp.float32)
  fit = jnp.floor(jnp.minimum(deadline * jnp.asarray(speeds, jnp.float32),
                              jnp.float32(2 ** 30))).astype(jnp.int32)
  return jnp.where(jnp.isinf(deadline), jnp.asarray(needed, jnp.int32), fit)
