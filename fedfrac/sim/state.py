"""What a simulation carries between rounds, its settings and its data arrays.

:class:`SimState` is the ``lax.scan`` carry (everything a checkpoint needs);
:class:`EngineConfig` the engine settings; :func:`data_arrays` the host arrays a
simulation passes into its compiled functions.

Randomness: one root key per run; round t uses ``fold_in(root, t)`` and, inside
it, one tag per purpose (:data:`SAMPLE`, :data:`CLIENT`, :data:`AGGREGATE`,
:data:`AVAILABILITY`); client k uses ``fold_in(fold_in(root_t, CLIENT), k)``, so
results do not depend on cohort order, chunk size or device count. Client
speeds (``config.system``) come from ``fold_in(root, SPEED_TAG)``, fixed for
the run.
"""
from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any, NamedTuple, Optional

import jax
import numpy as np

from fedfrac.algorithms.local_training import LocalTraining
from fedfrac.data.federated_data import FederatedData

# fold_in tags of the per-round key.
SAMPLE, CLIENT, AGGREGATE, AVAILABILITY = 0, 1, 2, 3
INIT_TAG = 0x7FFFFFFF     # folded into the root key for the initial model
SPEED_TAG = 0x7FFFFFF0    # folded into the root key for the clients' speeds


@dataclasses.dataclass(frozen=True)
class EngineConfig:
  """Engine settings.

  Attributes:
    rounds: deprecated and ignored (a run takes the rounds given to
      ``Simulation.run_chunk``); passing it warns.
    participation: client fraction C; |S_t| = max(ceil(C·K), 1).
    client_parallelism: ``vmap`` (all sampled clients at once), ``map``
      (``lax.map``, one client after another inside the same jit) or ``auto``
      (:func:`fedfrac.sim.execution.auto_parallelism`: ``map`` for convolutional
      models on CPU, ``vmap`` otherwise). Results are the same whichever runs.
    eval_batch_size: test examples per evaluation batch.
    availability: ``None`` (always available) or ``(p_leave, p_join)``: each
      client's availability is a two-state Markov chain; S_t is sampled from the
      available clients (padded slots are masked). Each rate is a scalar or a
      ``[K]`` array (per-client rates, e.g. asymmetric churn by vehicle class).
    cohort_rule: |S_t| under churn: ``"available"`` max(⌈C·|A_t|⌉, 1) of the
      |A_t| available clients (FO-RI-FedAvg paper §IV-N) or ``"slots"``
      ⌈C·K⌉ slots filled from the available clients (see
      :mod:`fedfrac.sim.churn`). No effect without churn.
    cohort_permutation_seed: ``None`` keeps the cohort sorted by client id; an int
      applies a fixed random permutation to the cohort order (results must not
      change — used to test order invariance).
    step_buckets: with ``vmap`` and dynamic local-step loops, the cohort is
      sorted by local step count and split into this many equal groups, run one
      group after another, each vmapped group only as long as its largest
      client (less masked work when client sizes differ). ``0`` = auto
      (:func:`fedfrac.sim.execution.auto_step_buckets`); ``1`` = one vmapped group.
    shard_clients: shard the cohort over all devices with ``shard_map`` (one
      mesh axis ``clients``); results equal a single-device run. ``"auto"``:
      shard when there is more than one device (several GPUs, or CPU cores
      split into devices with :func:`fedfrac.sim.devices.use_cpu_devices`).
    shard_client_state: ``False`` (default): every device holds every client's
      persistent state and data rows. ``True``: the ``[K, ...]`` client state
      (``SimState.clients``, ``available``, ``byzantine``), the client tables
      and the train rows are sharded along the ``clients`` mesh axis, about K/D
      clients per device (K padded to a multiple of D with dummy rows no round
      samples); each round gathers the cohort's rows from their devices and
      writes the updated rows back (:mod:`fedfrac.sim.client_rows`). Needs
      ``shard_clients`` True or ``"auto"`` (with ``"auto"`` on one device there
      is nothing to shard). Results equal the replicated engine to float
      rounding of cross-device sums. Not for :class:`BatchedSimulation`.
    device_invariant: ``False`` (default): with ``shard_clients`` each device
      forms its own vmapped groups of its share of the cohort, and results
      equal a single-device run to float rounding (a client's rounding depends
      on the group it is vmapped with). ``True``: the groups are those of one
      device, dealt whole to devices
      (:class:`fedfrac.sim.placement.ShardedGroups`), so 1, 2 or 4 devices
      give the same bits; devices then run in parallel only with at least as
      many groups (``step_buckets``) as devices. Not with
      ``shard_client_state`` (its evaluation sums across devices).
    attack: ``None`` or an :class:`fedfrac.sim.attacks.AttackConfig`.
    clock: ``None`` or a :class:`fedfrac.sim.clock.ClockConfig`: client speeds
      and bandwidths on a simulated clock, and the server that waits for them
      (synchronous rounds, or FedBuff / FedAsync, :mod:`fedfrac.sim.asynchronous`).
    system: ``None`` (every client runs its full local work, as if all were
      equally fast) or a :class:`fedfrac.ops.system.SystemConfig`: per-client
      speeds, a round deadline and what happens to clients too slow for it
      (:func:`fedfrac.ops.system.round_schedule`).
    matmul_precision: ``highest`` | ``tensorfloat32`` | ``bfloat16``: the
      precision of the traced matrix products (:mod:`fedfrac.sim.precision`).
  """
  rounds: Optional[int] = None
  participation: float = 1.0
  client_parallelism: str = "auto"
  eval_batch_size: int = 1024
  availability: Optional[tuple] = None
  cohort_rule: str = "available"
  cohort_permutation_seed: Optional[int] = None
  step_buckets: int = 0
  shard_clients: Any = False
  shard_client_state: bool = False
  device_invariant: bool = False
  attack: Optional[Any] = None
  system: Optional[Any] = None
  clock: Optional[Any] = None
  matmul_precision: str = "highest"

  def __post_init__(self):
    if self.rounds is not None:
      warnings.warn("EngineConfig(rounds=...) is deprecated and ignored: the engine never "
                    "read it (a run takes the rounds given to Simulation.run_chunk)",
                    DeprecationWarning, stacklevel=3)


class SimState(NamedTuple):
  """The scan carry: everything a checkpoint needs."""
  server: Any
  clients: Any
  available: jax.Array   # [K] bool
  key: jax.Array         # root key of the run
  round: jax.Array       # int32, next round to run
  byzantine: Any = None  # [K] bool Byzantine clients (None: no attack)
  # The simulated clock (config.clock; None without one): the time, a float32
  # scalar, for synchronous rounds; an fedfrac.sim.asynchronous.AsyncState
  # (in-flight clients, kept model versions, time) for an asynchronous server.
  clock: Any = None


# vmap axes of a batched SimState: everything per run except the shared round
# (the Byzantine set too: it is drawn per run's seed, ``[R, K]`` when batched).
STATE_AXES = SimState(server=0, clients=0, available=0, key=0, round=None, byzantine=0,
                      clock=0)


def cohort_size(participation, num_clients) -> int:
  """|S_t| = max(ceil(C·K), 1)."""
  return max(int(math.ceil(participation * num_clients - 1e-9)), 1)


def data_arrays(data: FederatedData, training: LocalTraining) -> dict:
  """The arrays a simulation passes into its compiled functions (host NumPy)."""
  return {
      "x": data.x_train, "y": data.y_train,
      "client_index": data.client_index, "client_size": data.client_size,
      "num_steps": training.steps_for(data.client_size),
      "x_test": data.x_test, "y_test": data.y_test,
      "client_test_index": data.client_test_index,
      "client_test_size": data.client_test_size,
      # Per-test-sample inverse of a label normalisation (regression metrics in
      # physical units): y_phys = y * scale + center.
      "y_test_scale": (np.ones(len(data.y_test), np.float32)
                       if data.y_test_scale is None else data.y_test_scale),
      "y_test_center": (np.zeros(len(data.y_test), np.float32)
                        if data.y_test_center is None else data.y_test_center),
  }
