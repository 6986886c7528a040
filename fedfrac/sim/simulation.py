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
from fedfrac.sim import attacks, churn, communication, devices, evaluate, execution
from fedfrac.sim.client_rows import ClientRows, check_shard_client_state, rows_by_client
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
    shard = config.shard_clients
    devices.check_shard_clients(shard)
    if shard == "auto":
      shard = jax.device_count() > 1
    self.mesh = devices.client_mesh() if shard else None
    self.num_shards = 1 if self.mesh is None else self.mesh.devices.size
    # engine.device_invariant: the groups of the whole cohort, as on one device
    # (execution.run_sharded_groups); else each device groups its own share.
    self.step_buckets = execution.choose_step_buckets(
        config.step_buckets, self.parallelism, training, self.num_steps,
        self.cohort if config.device_invariant else -(-self.cohort // self.num_shards))
    check_shard_client_state(config.shard_client_state, config.shard_clients)
    execution.check_device_invariant(config.device_invariant, config.shard_client_state)
    # engine.shard_client_state: per-client state and data sharded by client
    # over the mesh (fedfrac.sim.client_rows); without a mesh (shard_clients="auto"
    # on one device) there is nothing to shard.
    self.client_rows = None
    if config.shard_client_state and self.mesh is not None:
      host = rows_by_client(data_arrays(data, training), self.num_shards)
      self.client_rows = ClientRows(self.mesh, self.num_clients, host["x"].shape[0])
      self.arrays = self.client_rows.place_arrays(host)
    elif self.mesh is not None:
      # Data and state live replicated on every device of the mesh (on several
      # hosts: global arrays built from each process's identical copy).
      self.arrays = self.replicate(data_arrays(data, training))
    else:
      self.arrays = {k: jnp.asarray(v) for k, v in data_arrays(data, training).items()}
    churn.check_availability(config.availability, self.num_clients)
    churn.check_cohort_rule(config.cohort_rule)
    sizes = None
    if config.availability is not None and config.cohort_rule == "available":
      sizes = churn.cohort_sizes(config.participation, self.num_clients)
    self.evaluation = evaluate.task_evaluation(task)
    self.attack = attacks.active_attack(config.attack, self.evaluation.classification)
    self.plan = round_lib.RoundPlan(
        cohort=self.cohort, availability=config.availability,
        cohort_perm=self._cohort_perm, attack=self.attack,
        num_classes=data.num_classes, execute=self._execute, cohort_sizes=sizes,
        system=config.system, cohort_data=self.client_rows is not None)
    self._run_chunk_jit = jax.jit(self._run_chunk, static_argnums=(3,))
    self._compiled = {}
    self._evaluate_jit = jax.jit(self._evaluate)
    self._eval_params_jit = jax.jit(self._eval_params)
    self._eval_program = None
    self._comm = None

  # ------------------------------------------------------------------ state
  def init(self, seed, data: Optional[FederatedData] = None) -> SimState:
    """Initial state for ``seed``; params0 comes from ``fold_in(root, INIT)``.

    ``data`` (default: the simulation's own) is the dataset whose
    :class:`DataInfo` the algorithm's ``init`` sees (batched runs over several
    partitions initialise each run from its own partition, e.g. FibFL++'s ring
    order from its class proportions).
    """
    key = jax.random.PRNGKey(seed)
    params0 = self.model.init(jax.random.fold_in(key, INIT_TAG))
    info = (self.data if data is None else data).info()
    server, clients = self.algorithm.init(jax.random.fold_in(key, INIT_TAG - 1), params0,
                                          self.num_clients, info)
    available = jnp.ones((self.num_clients,), bool)
    byzantine = attacks.byzantine_clients(self.attack, self.num_clients, seed)
    state = SimState(server, clients, available, key, jnp.zeros((), jnp.int32),
                     byzantine)
    return self.place_state(state)

  def replicate(self, tree):
    """Place ``tree`` replicated over the client mesh (identity without one)."""
    return devices.replicate(self.mesh, tree)

  def place_state(self, state: SimState) -> SimState:
    """Place a state with K client rows (e.g. restored from a checkpoint) as
    this simulation's compiled functions take it: replicated over the mesh, or
    with ``shard_client_state`` padded to a multiple of the device count and
    sharded by client (:class:`fedfrac.sim.client_rows.ClientRows`)."""
    if self.client_rows is not None:
      return self.client_rows.place_state(state)
    return self.replicate(state)

  def host_state(self, state: SimState) -> SimState:
    """``state`` as host NumPy arrays with K client rows, whatever the placement
    (what a checkpoint stores; :meth:`place_state` places it back)."""
    if self.client_rows is not None:
      return self.client_rows.host_state(state)
    from fedfrac.sim import distributed
    return distributed.to_host(state)

  # ------------------------------------------------------------------ rounds
  def _algorithm_for(self, hp):
    if not hp:
      return self.algorithm
    if self.algorithm_fn is None:
      raise ValueError("hyper-parameter overrides need a Simulation built with algorithm_fn")
    return self.algorithm_fn(hp)

  def _execute(self, make_one, payload, arrays, t, args):
    """The cohort's client updates, on this device or sharded over the mesh."""
    def local(payload, arrays, t, args):
      return execution.run_local(make_one(payload, arrays, t), args, self.parallelism,
                                 self.step_buckets, self.training)
    if self.mesh is None:
      return local(payload, arrays, t, args)
    if self.client_rows is not None:
      # The cohort's data rows travel in ``args``; the sharded data arrays stay
      # where they are instead of being replicated into every device's share.
      arrays = {}
    if self.config.device_invariant and self.parallelism == "vmap":
      return execution.run_sharded_groups(make_one, self.mesh, payload, arrays, t, args,
                                          self.step_buckets, self.training)
    return execution.run_sharded(local, self.mesh, payload, arrays, t, args)

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
    rows = self.client_rows
    if rows is None:
      step = functools.partial(round_lib.run_round, self.plan, algorithm, arrays)
      return jax.lax.scan(lambda s, _: step(s), state, None, length=num_rounds)
    # Sharded client state: K rows inside (padding cut off), the carry pinned to
    # the row sharding after every round, padded back for the caller.
    arrays, state = rows.unpad_arrays(arrays), rows.unpad_state(state)

    def body(s, _):
      s, metrics = round_lib.run_round(self.plan, algorithm, arrays, s)
      return rows.constrain_state(s), metrics
    state, metrics = jax.lax.scan(body, state, None, length=num_rounds)
    return rows.pad_state(state), metrics

  def compile(self, num_rounds: int, state: Optional[SimState] = None) -> float:
    """Compile the chunk of ``num_rounds`` rounds ahead of time; returns seconds
    spent (0 if already compiled)."""
    num_rounds = int(num_rounds)
    if num_rounds in self._compiled:
      return 0.0
    if state is None:
      state = jax.eval_shape(self.init, 0)
      if self.client_rows is not None:
        state = jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
                             state, self.client_rows.state_shardings(state))
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
    return self._compiled[num_rounds](self.arrays, state, None)

  # ------------------------------------------------------------- evaluation
  def _evaluate(self, arrays, state, hp=None):
    with precision_lib.scope(self.config.matmul_precision):
      return self._evaluate_traced(arrays, state, hp)

  def _evaluate_traced(self, arrays, state, hp=None):
    if self.client_rows is not None:
      arrays = self.client_rows.unpad_arrays(arrays)
      state = self.client_rows.unpad_state(state)
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
    if self.client_rows is not None:   # rows sharded by client: one program of its own
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
