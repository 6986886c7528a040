"""The simulator: vmap over the sampled cohort, lax.scan over rounds (docs/design.md §2.2).

:class:`Simulation` wires one algorithm, dataset, model and task into compiled
functions: ``run_chunk`` runs rounds (:mod:`fedfrac.sim.round`) in one
``lax.scan`` inside one ``jit``, ``evaluate`` computes test metrics
(:mod:`fedfrac.sim.evaluate`). Between chunks the caller (:mod:`fedfrac.runner`)
evaluates, logs and checkpoints. Nothing here knows about files, flags or logging.

Pieces, each in its own module: key layout and carry (:mod:`fedfrac.sim.state`),
churn and sampling (:mod:`fedfrac.sim.churn`), Byzantine clients
(:mod:`fedfrac.sim.attacks`), vmap | map | step buckets | shard_map
(:mod:`fedfrac.sim.execution`, :mod:`fedfrac.sim.devices`), bytes on the wire
(:mod:`fedfrac.sim.communication`), several runs in one program
(:mod:`fedfrac.sim.batched`).
"""
from __future__ import annotations

import functools
import math
import time
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac.algorithms.contract import FedAlgorithm
from fedfrac.algorithms.local_training import LocalTraining
from fedfrac.algorithms.tasks import Task
from fedfrac.data.federated_data import FederatedData
from fedfrac.models.base import Model
from fedfrac.sim import asynchronous, attacks, churn, communication, deadlines, evaluate
from fedfrac.sim import clock as clock_lib
from fedfrac.sim import execution
from fedfrac.sim import placement as placement_lib
from fedfrac.sim import precision as precision_lib
from fedfrac.sim import round as round_lib
from fedfrac.sim.state import INIT_TAG, EngineConfig, SimState, cohort_size, data_arrays


class Simulation:
  """A compiled federated simulation of one algorithm on one dataset.

  Usage::

    sim = Simulation(algorithm, data, model, task, training, EngineConfig(...))
    state = sim.init(seed)
    state, round_metrics = sim.run_chunk(state, num_rounds)
    eval_metrics = sim.evaluate(state)
  """

  def __init__(self, algorithm: FedAlgorithm, data: FederatedData, model: Model,
               task: Task, training: LocalTraining, config: EngineConfig,
               algorithm_fn=None):
    """``algorithm_fn(hp) -> FedAlgorithm`` (optional) rebuilds the algorithm from a
    dict of possibly traced hyper-parameters; ``run_chunk``/``evaluate`` accept
    such a dict so runs can be vmapped over a hyper-parameter grid."""
    self.algorithm = algorithm
    self.algorithm_fn = algorithm_fn
    self.data = data
    self.model = model
    self.task = task
    self.training = training
    self.config = config
    self.num_clients = data.num_clients
    self.cohort = cohort_size(config.participation, self.num_clients)
    self.num_steps = training.steps_for(data.client_size)
    self._cohort_perm = None
    if config.cohort_permutation_seed is not None:
      self._cohort_perm = jnp.asarray(
          np.random.default_rng(config.cohort_permutation_seed).permutation(self.cohort))
    self.parallelism = execution.resolve_parallelism(config.client_parallelism, model)
    precision_lib.check_matmul_precision(config.matmul_precision)
    host = data_arrays(data, training)
    shard_clients = config.shard_clients
    if config.clock is not None and config.clock.asynchronous and shard_clients == "auto":
      shard_clients = False     # the asynchronous server runs on one device
    self.placement = placement_lib.choose_placement(
        shard_clients, config.shard_client_state, host, config.device_invariant,
        self.parallelism)
    self.step_buckets = execution.choose_step_buckets(
        config.step_buckets, self.parallelism, training, self.num_steps,
        self.placement.local_cohort(self.cohort))
    self.arrays = self.placement.place_arrays(host)
    churn.check_availability(config.availability, self.num_clients)
    churn.check_cohort_rule(config.cohort_rule)
    sizes = None
    if config.availability is not None and config.cohort_rule == "available":
      sizes = churn.cohort_sizes(config.participation, self.num_clients)
    self.evaluation = evaluate.task_evaluation(task)
    self.attack = attacks.active_attack(config.attack, self.evaluation.classification)
    self._comm = None
    self.async_plan = None
    if config.clock is not None:
      self._check_clock(config)
      if config.clock.asynchronous:
        payload_bytes, message_bytes = self.communication_bytes(
            jax.eval_shape(functools.partial(self._initial_state, 0)))
        self.async_plan = asynchronous.AsyncPlan(
            config.clock.options, config.clock, payload_bytes, message_bytes,
            self.parallelism, self.step_buckets, training)
    self.plan = round_lib.RoundPlan(
        cohort=self.cohort, execute=self._execute, cohort_perm=self._cohort_perm,
        cohort_sizes=sizes, stages=self.round_stages(config, data.num_classes))
    self._run_chunk_jit = jax.jit(self._run_chunk, static_argnums=(3,))
    self._compiled = {}
    self._evaluate_jit = jax.jit(self._evaluate)
    self._eval_params_jit = jax.jit(self._eval_params)
    self._eval_program = None

  @property
  def mesh(self):
    """The ``clients`` device mesh (``None`` on one device)."""
    return self.placement.mesh

  @property
  def num_shards(self) -> int:
    """Devices the cohort is split over."""
    return self.placement.num_shards

  @property
  def client_rows(self):
    """The :class:`~fedfrac.sim.client_rows.ClientRows` of a state sharded by
    client (``engine.shard_client_state``), else ``None``."""
    return self.placement.client_rows

  def round_stages(self, config: EngineConfig, num_classes: int) -> tuple:
    """The stages of a round the config asks for (:mod:`fedfrac.sim.stages`),
    in the order their hooks run; none for a plain run."""
    stages = []
    if config.availability is not None:
      stages.append(churn.Churn(config.availability))
    if config.system is not None:
      stages.append(deadlines.Deadlines(config.system, self.algorithm.elastic,
                                        self.algorithm.name))
    attack = attacks.attack_stage(self.attack, num_classes)
    if attack is not None:
      stages.append(attack)
    if config.clock is not None and not config.clock.asynchronous:
      stages.append(clock_lib.SyncClock(config.clock, *self.communication_bytes(
          jax.eval_shape(functools.partial(self._initial_state, 0)))))
    return tuple(stages) + self.placement.stages()

  def _check_clock(self, config: EngineConfig) -> None:
    """One line, before compute, for a clock this run cannot have."""
    clock = clock_lib.check_clock(config.clock)
    if config.shard_client_state:
      raise ValueError("clock: engine.shard_client_state=True is not supported with "
                       "a simulated clock; set it to False")
    windows = clock.trace is not None and clock.trace.windows is not None
    if windows and not clock.asynchronous:
      raise ValueError("clock.trace: its windows column is read by the asynchronous "
                       "servers (fedbuff, fedasync) only; clock.server is 'sync'")
    if not clock.asynchronous:
      if math.isfinite(clock.deadline) and config.system is not None:
        raise ValueError(f"clock.deadline={clock.deadline!r}: a round has one deadline; "
                         "leave system.deadline / system.policy / system.speed at their "
                         "defaults (the clock's deadline uses the clock's speeds)")
      return
    server = clock.options
    others = {"churn (config.churn)": config.availability,
              "system.policy / system.speed (the clock has its own speeds)":
                  config.system, "attack.kind": config.attack}
    for what, value in others.items():
      if value is not None:
        raise ValueError(f"clock.server={clock.server!r}: {what} is not supported by "
                         f"the asynchronous server; leave it at its default")
    if self.num_shards > 1:
      raise ValueError(f"clock.server={clock.server!r}: runs on one device (its "
                       f"server step is not sharded over devices); set "
                       f"engine.shard_clients=False or auto")
    if server.concurrency > self.num_clients:
      raise ValueError(f"clock.options.concurrency={server.concurrency}: must be <= "
                       f"the number of clients {self.num_clients}")
    unbounded = clock_lib.always_available(clock.trace)
    if windows and unbounded < server.concurrency:
      raise ValueError(f"clock.trace: {unbounded} clients have a last window that never "
                       f"ends (END inf); the server keeps clock.options.concurrency="
                       f"{server.concurrency} training at every time, so it needs at "
                       f"least that many")

  # ------------------------------------------------------------------ state
  def init(self, seed, data: Optional[FederatedData] = None) -> SimState:
    """Initial state for ``seed``; params0 comes from ``fold_in(root, INIT)``.

    ``data`` (default: the simulation's own) is the dataset whose
    :class:`DataInfo` the algorithm's ``init`` sees (batched runs over several
    partitions initialise each run from its own partition, e.g. FibFL++'s ring
    order from its class proportions).
    """
    state = self._initial_state(seed, data)
    if self.config.clock is not None:
      clock = (jnp.zeros((), jnp.float32) if self.async_plan is None else
               asynchronous.init_state(self.async_plan, self.algorithm, self.arrays,
                                       state))
      state = state._replace(clock=clock)
    return self.place_state(state)

  def _initial_state(self, seed, data: Optional[FederatedData] = None) -> SimState:
    key = jax.random.PRNGKey(seed)
    params0 = self.model.init(jax.random.fold_in(key, INIT_TAG))
    info = (self.data if data is None else data).info()
    server, clients = self.algorithm.init(jax.random.fold_in(key, INIT_TAG - 1), params0,
                                          self.num_clients, info)
    available = jnp.ones((self.num_clients,), bool)
    byzantine = attacks.byzantine_clients(self.attack, self.num_clients, seed)
    return SimState(server, clients, available, key, jnp.zeros((), jnp.int32), byzantine)

  def replicate(self, tree):
    """Place ``tree`` replicated over the client mesh (identity without one)."""
    return self.placement.replicate(tree)

  def place_state(self, state: SimState) -> SimState:
    """Place a state with K client rows (e.g. restored from a checkpoint) as
    this simulation's compiled functions take it: replicated over the mesh, or
    with ``shard_client_state`` padded to a multiple of the device count and
    sharded by client (:mod:`fedfrac.sim.placement`)."""
    return self.placement.place_state(state)

  def host_state(self, state: SimState) -> SimState:
    """``state`` as host NumPy arrays with K client rows, whatever the placement
    (what a checkpoint stores; :meth:`place_state` places it back)."""
    return self.placement.host_state(state)

  # ------------------------------------------------------------------ rounds
  def _algorithm_for(self, hp):
    if not hp:
      return self.algorithm
    if self.algorithm_fn is None:
      raise ValueError("hyper-parameter overrides need a Simulation built with algorithm_fn")
    return self.algorithm_fn(hp)

  def _execute(self, make_one, payload, arrays, t, args):
    """The cohort's client updates, on this device or sharded over the mesh."""
    program = execution.CohortProgram(make_one, self.parallelism, self.step_buckets,
                                      self.training)
    return self.placement.execute(program, payload, arrays, t, args)

  def run_round(self, algorithm, arrays, state: SimState):
    """One round of ``algorithm`` on ``arrays`` (traceable; for custom scans):
    ``(next state, metrics)``."""
    with precision_lib.scope(self.config.matmul_precision):
      return round_lib.run_round(self.plan, algorithm, arrays, state)

  def _run_chunk(self, arrays, state, hp, num_rounds):
    with precision_lib.scope(self.config.matmul_precision):
      return self._run_chunk_traced(arrays, state, hp, num_rounds)

  def _run_chunk_traced(self, arrays, state, hp, num_rounds):
    algorithm = self._algorithm_for(hp)
    return self.placement.scan_rounds(functools.partial(self._step, algorithm), arrays,
                                      state, num_rounds)

  def _step(self, algorithm, arrays, state: SimState):
    """One scan step: a synchronous round (timed when there is a clock) or a
    server step of the asynchronous server (:mod:`fedfrac.sim.asynchronous`)."""
    if self.async_plan is not None:
      return asynchronous.server_step(self.async_plan, algorithm, arrays, state)
    state, metrics = round_lib.run_round(self.plan, algorithm, arrays, state)
    if self.config.clock is not None:
      state, metrics = clock_lib.advance(state, metrics)
    return state, metrics

  def compile(self, num_rounds: int, state: Optional[SimState] = None) -> float:
    """Compile the chunk of ``num_rounds`` rounds ahead of time; returns seconds
    spent (0 if already compiled)."""
    num_rounds = int(num_rounds)
    if num_rounds in self._compiled:
      return 0.0
    if state is None:
      state = self.placement.abstract_state(jax.eval_shape(self.init, 0))
    t0 = time.perf_counter()
    self._compiled[num_rounds] = self._run_chunk_jit.lower(
        self.arrays, state, None, num_rounds).compile()
    return time.perf_counter() - t0

  def run_chunk(self, state: SimState, num_rounds: int):
    """Run ``num_rounds`` rounds in one compiled scan.

    Returns ``(state, metrics)``; each metric has a leading ``[num_rounds]`` axis
    (per-client entries ``clients/*`` are ``[num_rounds, S]``).
    """
    num_rounds = int(num_rounds)
    if num_rounds not in self._compiled:
      self.compile(num_rounds, state)
    state, metrics = self._compiled[num_rounds](self.arrays, state, None)
    if self.async_plan is not None:
      asynchronous.check_overrun(metrics, self.async_plan.server)
    return state, metrics

  # ------------------------------------------------------------- evaluation
  def _evaluate(self, arrays, state, hp=None):
    with precision_lib.scope(self.config.matmul_precision):
      return self._evaluate_traced(arrays, state, hp)

  def _evaluate_traced(self, arrays, state, hp=None):
    arrays, state = self.placement.unpadded(arrays, state)
    return evaluate.evaluate(self._algorithm_for(hp), self.model, self.task, arrays,
                             state, self.config.eval_batch_size)

  def _eval_params(self, state, hp=None):
    with precision_lib.scope(self.config.matmul_precision):
      return evaluate.eval_params(self._algorithm_for(hp), state)

  def shared_eval_program(self, arrays, params, in_axes=None):
    """The compiled metrics of evaluated ``params`` (``in_axes``: vmapped over
    runs, as :class:`~fedfrac.sim.batched.BatchedSimulation` does), shared with
    every simulation of this process that runs the same program
    (:func:`fedfrac.sim.evaluate.shared_program`)."""
    metrics = functools.partial(evaluate.evaluate_params, self.model, self.task,
                                self.algorithm.personalized,
                                batch_size=self.config.eval_batch_size)
    if in_axes is not None:
      metrics = jax.vmap(metrics, in_axes=in_axes)
    with precision_lib.scope(self.config.matmul_precision):
      return evaluate.shared_program(metrics, arrays, params)

  def evaluate(self, state: SimState):
    """Test metrics of the current state (global test set and per-client splits).

    Two programs: the algorithm's evaluated parameters (small, this method's
    own), then their metrics, one program shared by every simulation in the
    process whose evaluated parameters have the same structure
    (:func:`fedfrac.sim.evaluate.shared_program`)."""
    if not self.placement.shared_evaluation:   # a program of its own
      return self._evaluate_jit(self.arrays, state)
    params = self._eval_params_jit(state)
    if self._eval_program is None:
      self._eval_program = self.shared_eval_program(self.arrays, params)
    return self._eval_program(self.arrays, params)

  # ---------------------------------------------------------- communication
  def communication_bytes(self, state: SimState):
    """``(payload_bytes, message_bytes)`` per participating client, from shapes."""
    if self._comm is None:
      self._comm = communication.payload_and_message_bytes(
          self.algorithm, state, self.arrays, self.data.client_index.shape[1:])
    return self._comm
