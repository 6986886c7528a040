"""The simulation engine, one concern per module.

* :mod:`~fedfrac.sim.state`: :class:`SimState` (scan carry), :class:`EngineConfig`,
  key tags, data arrays.
* :mod:`~fedfrac.sim.churn`: client availability and cohort sampling.
* :mod:`~fedfrac.sim.attacks`: Byzantine clients (:class:`AttackConfig`).
* :mod:`~fedfrac.sim.execution`: vmap | map | step buckets | shard_map.
* :mod:`~fedfrac.sim.devices`: CPU device count, client mesh.
* :mod:`~fedfrac.sim.round`: one round.
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
