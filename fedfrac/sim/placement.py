"""Where a simulation's arrays live and how its cohort runs: one object, chosen once.

:func:`choose_placement` reads ``engine.shard_clients``,
``engine.shard_client_state``, ``engine.device_invariant`` and the devices JAX
sees, and returns one of four forms; :class:`fedfrac.sim.simulation.Simulation` and
:class:`fedfrac.sim.batched.BatchedSimulation` ask it instead of branching on
the settings:

* :class:`SingleDevice` — everything on the default device; the cohort runs
  there (vmap | map | step buckets, :func:`fedfrac.sim.execution.run_local`).
* :class:`ShardedCohort` — data and state replicated over the 1-D ``clients``
  mesh; each round's cohort is split over its devices with ``shard_map``
  (:func:`fedfrac.sim.execution.run_sharded`), each device forming the
  vmapped step-bucket groups of its own share.
* :class:`ShardedGroups` — as :class:`ShardedCohort`, but the groups are
  those one device forms of the whole cohort, dealt whole to devices
  (``engine.device_invariant``, :func:`fedfrac.sim.execution.run_sharded_groups`):
  1, 2 or 4 devices give the bits of one device.
* :class:`ShardedRows` — as :class:`ShardedCohort`, with the ``[K, ...]``
  client state, the client tables and the train rows sharded by client
  (:class:`fedfrac.sim.client_rows.ClientRows`); each round gathers the
  cohort's rows (the :class:`fedfrac.sim.client_rows.CohortRows` stage).

Every form computes the same numbers up to float rounding (a vmapped
client's rounding depends on the group it runs in; :class:`ShardedRows` also
sums across devices); :class:`ShardedGroups` equals :class:`SingleDevice` bit
for bit. Only where arrays live and what runs where differ.
"""
from __future__ import annotations

from typing import Any, Optional

import jax

from fedfrac.sim import devices, distributed, execution
from fedfrac.sim.client_rows import (ClientRows, CohortRows, check_shard_client_state,
                                     rows_by_client)
from fedfrac.sim.state import SimState


class SingleDevice:
  """Everything on the default device."""
  mesh: Any = None
  client_rows: Optional[ClientRows] = None
  num_shards = 1
  # Several runs of it vmapped into one program (BatchedSimulation).
  batchable = True
  # Evaluation shares the compiled metrics of every simulation of the process
  # (fedfrac.sim.evaluate.shared_program) rather than compiling its own.
  shared_evaluation = True

  def place_arrays(self, host: dict) -> dict:
    """The host data arrays (:func:`fedfrac.sim.state.data_arrays`) placed."""
    import jax.numpy as jnp
    return {k: jnp.asarray(v) for k, v in host.items()}

  def replicate(self, tree):
    """``tree`` placed where every device of the placement reads it."""
    return tree

  def place_state(self, state: SimState) -> SimState:
    """A state with K client rows (e.g. restored from a checkpoint) placed."""
    return self.replicate(state)

  def host_state(self, state: SimState) -> SimState:
    """``state`` as host NumPy with K client rows (what a checkpoint stores)."""
    return distributed.to_host(state)

  def abstract_state(self, state: SimState) -> SimState:
    """Abstract ``state`` (``ShapeDtypeStruct`` leaves) with its shardings."""
    return state

  def stages(self) -> tuple:
    """The round stages this placement needs."""
    return ()

  def local_cohort(self, cohort: int) -> int:
    """How many of a ``cohort``-client cohort one device forms its vmapped
    step-bucket groups from (:func:`fedfrac.sim.execution.choose_step_buckets`)."""
    return cohort

  def execute(self, program: execution.CohortProgram, payload, arrays, t, args):
    """The cohort's client updates ``(messages, states, metrics,
    executed_steps)``: ``program`` says how the clients run
    (:class:`fedfrac.sim.execution.CohortProgram`)."""
    return program.local(payload, arrays, t, args)

  def scan_rounds(self, round_fn, arrays, state: SimState, num_rounds: int):
    """``num_rounds`` rounds ``round_fn(arrays, state) -> (state, metrics)`` in
    one ``lax.scan`` (traced, inside the chunk's jit)."""
    return jax.lax.scan(lambda s, _: round_fn(arrays, s), state, None, length=num_rounds)

  def unpadded(self, arrays: dict, state: SimState):
    """Inside jit: ``(arrays, state)`` as the algorithm sees them (K client rows)."""
    return arrays, state


class ShardedCohort(SingleDevice):
  """Data and state replicated over ``mesh``; each cohort split over its devices."""

  def __init__(self, mesh):
    self.mesh = mesh
    self.num_shards = int(mesh.devices.size)

  def place_arrays(self, host: dict) -> dict:
    # On several hosts: global arrays built from each process's identical copy.
    return self.replicate(host)

  def replicate(self, tree):
    return devices.replicate(self.mesh, tree)

  def local_cohort(self, cohort: int) -> int:
    return -(-cohort // self.num_shards)   # each device groups its own share

  def execute(self, program, payload, arrays, t, args):
    return execution.run_sharded(program.local, self.mesh, payload, arrays, t, args)


class ShardedGroups(ShardedCohort):
  """As :class:`ShardedCohort`, with the vmapped groups of the whole cohort, as
  one device forms them, dealt whole to the devices (``engine.device_invariant``):
  every client runs in the group, at the width and with the loop split it has
  on one device, so any device count gives one device's bits. Devices run in
  parallel only with at least as many groups (``engine.step_buckets``) as
  devices (:func:`fedfrac.sim.execution.run_sharded_groups`)."""

  def local_cohort(self, cohort: int) -> int:
    return cohort   # the groups of the whole cohort, as on one device

  def execute(self, program, payload, arrays, t, args):
    return execution.run_sharded_groups(program.make_one, self.mesh, payload, arrays, t,
                                        args, program.step_buckets, program.training)


class ShardedRows(ShardedCohort):
  """Per-client state, client tables and train rows sharded by client over ``mesh``."""
  batchable = False
  shared_evaluation = False

  def __init__(self, mesh, host: dict):
    super().__init__(mesh)
    self.source = host
    self.layout = rows_by_client(host, self.num_shards)
    self.client_rows = ClientRows(mesh, host["client_index"].shape[0],
                                  self.layout["x"].shape[0])

  def place_arrays(self, host: dict) -> dict:
    layout = self.layout if host is self.source else rows_by_client(host, self.num_shards)
    return self.client_rows.place_arrays(layout)

  def place_state(self, state: SimState) -> SimState:
    return self.client_rows.place_state(state)

  def host_state(self, state: SimState) -> SimState:
    return self.client_rows.host_state(state)

  def abstract_state(self, state: SimState) -> SimState:
    return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
                        state, self.client_rows.state_shardings(state))

  def stages(self) -> tuple:
    return (CohortRows(),)

  def execute(self, program, payload, arrays, t, args):
    # The cohort's data rows travel in ``args``; the sharded data arrays stay
    # where they are instead of being replicated into every device's share.
    return execution.run_sharded(program.local, self.mesh, payload, {}, t, args)

  def scan_rounds(self, round_fn, arrays, state: SimState, num_rounds: int):
    # K rows inside (padding cut off), the carry pinned to the row sharding
    # after every round, padded back for the caller.
    rows = self.client_rows
    arrays, state = self.unpadded(arrays, state)

    def body(s, _):
      s, metrics = round_fn(arrays, s)
      return rows.constrain_state(s), metrics
    state, metrics = jax.lax.scan(body, state, None, length=num_rounds)
    return rows.pad_state(state), metrics

  def unpadded(self, arrays: dict, state: SimState):
    return self.client_rows.unpad_arrays(arrays), self.client_rows.unpad_state(state)


Placement = SingleDevice   # the type of every form (each subclasses it)


def check_device_invariant(setting, shard_client_state=False) -> None:
  """Raise ValueError unless ``engine.device_invariant`` is True or False (and
  False with ``shard_client_state``, whose evaluation sums across devices)."""
  if not isinstance(setting, bool):
    raise ValueError(f"engine.device_invariant={setting!r}: must be True or False")
  if setting and shard_client_state:
    raise ValueError("engine.device_invariant=True: not with engine.shard_client_state="
                     "True (its evaluation sums over devices); allowed value here is False")


def choose_placement(shard_clients, shard_client_state, host: dict,
                     device_invariant: bool = False,
                     parallelism: str = "vmap") -> Placement:
  """The placement of ``engine.shard_clients`` / ``engine.shard_client_state`` /
  ``engine.device_invariant`` on the devices JAX sees, for the host data arrays
  ``host`` (:func:`fedfrac.sim.state.data_arrays`) and the cohort's
  ``parallelism`` (``vmap`` | ``map``). ``shard_clients="auto"`` shards when
  there is more than one device; ``shard_client_state`` without a mesh to shard
  over (``"auto"`` on one device) places nothing by row; ``device_invariant``
  deals one device's vmapped groups to the devices (:class:`ShardedGroups`;
  with ``map`` every client runs alone, in no group, so :class:`ShardedCohort`
  already gives one device's bits)."""
  devices.check_shard_clients(shard_clients)
  check_shard_client_state(shard_client_state, shard_clients)
  check_device_invariant(device_invariant, shard_client_state)
  shard = jax.device_count() > 1 if shard_clients == "auto" else shard_clients
  if not shard:
    return SingleDevice()
  mesh = devices.client_mesh()
  if shard_client_state:
    return ShardedRows(mesh, host)
  if device_invariant and parallelism == "vmap":
    return ShardedGroups(mesh)
  return ShardedCohort(mesh)
