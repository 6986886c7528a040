"""The simulation engine, one concern per module.

* :mod:`~fedfrac.sim.state`: :class:`SimState` (scan carry), :class:`EngineConfig`,
  key tags, data arrays.
* :mod:`~fedfrac.sim.round`: one round, FedAvg's path.
* :mod:`~fedfrac.sim.stages`: the stage contract (what composes around the path)
  and the algorithm's cohort hooks.
* :mod:`~fedfrac.sim.churn`: client availability (a stage) and cohort sampling.
* :mod:`~fedfrac.sim.deadlines`: client speeds and round deadlines (a stage).
* :mod:`~fedfrac.sim.attacks`: Byzantine clients (:class:`AttackConfig`; stages).
* :mod:`~fedfrac.sim.client_rows`: client state and rows sharded by client.
* :mod:`~fedfrac.sim.placement`: where arrays live and how the cohort runs,
  chosen once (single device | sharded cohort | sharded rows).
* :mod:`~fedfrac.sim.execution`: vmap | map | step buckets | shard_map.
* :mod:`~fedfrac.sim.devices`: CPU device count, client mesh.
* :mod:`~fedfrac.sim.evaluate`: test metrics per task kind.
* :mod:`~fedfrac.sim.communication`: bytes per client.
* :mod:`~fedfrac.sim.simulation`: :class:`Simulation`.
* :mod:`~fedfrac.sim.batched`: :class:`BatchedSimulation`.
"""
from fedfrac.sim.attacks import ATTACKS, MESSAGE_ATTACKS, AttackConfig, attack_message
from fedfrac.sim.batched import BatchedSimulation
from fedfrac.sim.communication import tree_bytes
from fedfrac.sim.devices import CLIENT_AXIS, client_mesh, use_cpu_devices
from fedfrac.sim.execution import (PARALLELISM, auto_parallelism, auto_step_buckets,
                                   executed_steps, is_convolutional)
from fedfrac.sim.simulation import Simulation
from fedfrac.sim.state import (CLIENT, STATE_AXES, EngineConfig, SimState, cohort_size,
                               data_arrays)
