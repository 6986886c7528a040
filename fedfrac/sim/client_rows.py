"""Per-client state and data sharded along the ``clients`` mesh axis
(``engine.shard_client_state``).

The replicated engine keeps every ``[K, ...]`` array on every device: the
persistent client state ``SimState.clients`` (SCAFFOLD's control variates c_k,
FedDyn's ∇L_k(θ_k^{t-1}), FibFL's private heads, DP accounting, ...), the
availability and Byzantine masks ``[K]``, the index tables ``client_index
[K, n_max]``, ``client_size [K]``, ``num_steps [K]``, ``client_test_index``,
``client_test_size`` and the train rows ``x [N, ...]``, ``y [N]``. With
:class:`ClientRows` each of these is placed with ``NamedSharding(mesh,
P("clients"))``: device d of D holds rows ``[d·K'/D, (d+1)·K'/D)`` of the
client axis (``K' = ⌈K/D⌉·D``: K padded with zero dummy rows that no round
samples) and about N/D train rows, laid out client by client
(:func:`rows_by_client`) so that a device holds exactly its own clients' rows
(padded to the largest device's count).

Inside the compiled chunk the padded rows are cut off (``x[:K]``; XLA keeps the
uneven ``K`` rows on the same devices), so algorithms see the same ``[K, ...]``
arrays as in the replicated engine; every round's carry is pinned to the row
sharding with ``jax.lax.with_sharding_constraint``, and the chunk's result is
padded back (``jnp.pad``, no communication). A round gathers the cohort's rows
``x[ids]`` (each device gathers the rows it owns, then one all-reduce of the
``[S, ...]`` cohort) and writes the updated rows back with ``x.at[ids].set``
(each device updates only its own rows); the cohort's data rows
``x[client_index[ids]]`` travel to the devices that train them the same way.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

from fedfrac.sim.devices import CLIENT_AXIS
from fedfrac.sim.stages import Stage
from fedfrac.sim.state import SimState

# Arrays of :func:`fedfrac.sim.state.data_arrays` with one row per client.
CLIENT_TABLES = ("client_index", "client_size", "num_steps", "client_test_index",
                 "client_test_size")
# Train rows (``[N, ...]``), sharded by row.
DATA_ROWS = ("x", "y")


def check_shard_client_state(value, shard_clients) -> None:
  """Raise ValueError unless ``engine.shard_client_state`` is True or False, and
  True only with a device mesh to shard over (``engine.shard_clients`` True or
  ``'auto'``)."""
  if not isinstance(value, bool):
    raise ValueError(f"engine.shard_client_state={value!r}: allowed values are True, "
                     f"False")
  if value and shard_clients is False:
    raise ValueError("engine.shard_client_state=True: needs engine.shard_clients=True "
                     "or 'auto' (a device mesh to shard over); got "
                     "engine.shard_clients=False")


def rows_by_client(arrays: dict, num_devices: int = 1) -> dict:
  """``arrays`` with the train rows ``x``, ``y`` laid out by owning device and
  ``client_index`` remapped, so every lookup ``x[client_index[k, j]]`` gives the
  same row as before. Host NumPy.

  Clients are dealt to ``num_devices`` devices in blocks of K'/D consecutive ids
  (K' = ⌈K/D⌉·D, the row sharding of the client tables). A row belongs to the
  lowest client id whose index row names it (padding included); rows no client
  names are dropped (training reads ``x`` only through ``client_index``). Device
  d's rows come in client order and are padded with zero rows up to the largest
  device's count R, so ``x`` has D·R rows and sharding it by row puts every
  client's rows on the device that holds its state (R = N/D, no padding, when
  every device's clients have as many rows). Returns ``arrays`` itself when the
  layout is already so.
  """
  index = np.asarray(arrays["client_index"])
  n = arrays["x"].shape[0]
  k = index.shape[0]
  per_device = -(-k // num_devices)
  owner = np.full((n,), k, np.int64)
  np.minimum.at(owner, index.reshape(-1), np.repeat(np.arange(k), index.shape[1]))
  rows = np.flatnonzero(owner < k)
  rows = rows[np.argsort(owner[rows], kind="stable")]      # kept rows, client order
  device = owner[rows] // per_device
  counts = np.bincount(device, minlength=num_devices)
  width = int(counts.max()) if rows.size else 0
  first = np.concatenate([[0], np.cumsum(counts)[:-1]])
  position = device * width + np.arange(rows.size) - first[device]
  if num_devices * width == n and np.array_equal(position, rows):
    return arrays
  new_position = np.zeros((n,), np.int64)
  new_position[rows] = position
  out = dict(arrays)
  for name in DATA_ROWS:
    value = np.asarray(arrays[name])
    placed = np.zeros((num_devices * width,) + value.shape[1:], value.dtype)
    placed[position] = value[rows]
    out[name] = placed
  out["client_index"] = new_position[index].astype(index.dtype)
  return out


def _pad(x, rows):
  """``x`` with zero rows appended up to ``rows`` (NumPy on the host, jnp inside jit)."""
  if x.shape[0] == rows:
    return x
  widths = [(0, rows - x.shape[0])] + [(0, 0)] * (x.ndim - 1)
  return jnp.pad(x, widths) if isinstance(x, jax.Array) else np.pad(np.asarray(x), widths)


class ClientRows:
  """Placement of a simulation's per-client rows over ``mesh`` (1-D, ``clients``).

  ``num_clients`` K, ``num_rows`` N (train rows). Padded sizes: ``padded_clients``
  K' = ⌈K/D⌉·D and ``padded_rows`` ⌈N/D⌉·D; each device holds K'/D client rows
  and N'/D train rows.
  """

  def __init__(self, mesh, num_clients: int, num_rows: int):
    self.mesh = mesh
    self.num_devices = int(mesh.devices.size)
    self.num_clients = int(num_clients)
    d = self.num_devices
    self.padded_clients = -(-self.num_clients // d) * d
    self.padded_rows = -(-int(num_rows) // d) * d
    self.rows = NamedSharding(mesh, P(CLIENT_AXIS))
    self.replicated = NamedSharding(mesh, P())

  # ----------------------------------------------------------------- state
  def _is_client_row(self, x) -> bool:
    shape = getattr(x, "shape", ())
    return len(shape) >= 1 and shape[0] in (self.num_clients, self.padded_clients)

  def _map_state(self, state: SimState, rows, other) -> SimState:
    """``rows`` on the per-client leaves (client state with a leading K axis,
    ``available``, ``byzantine``), ``other`` on every other leaf."""
    def client_leaf(x):
      return rows(x) if self._is_client_row(x) else other(x)
    return SimState(jax.tree.map(other, state.server),
                    jax.tree.map(client_leaf, state.clients),
                    rows(state.available), other(state.key), other(state.round),
                    None if state.byzantine is None else rows(state.byzantine))

  def state_shardings(self, state: SimState) -> SimState:
    """The sharding of every leaf of ``state``."""
    return self._map_state(state, lambda x: self.rows, lambda x: self.replicated)

  def place_state(self, state: SimState) -> SimState:
    """``state`` (K rows, host or device) padded to K' rows and placed: per-client
    leaves sharded by row, the rest replicated. Under tracing (``eval_shape``)
    only the padding applies."""
    padded = self._map_state(state, lambda x: _pad(x, self.padded_clients), lambda x: x)
    if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(padded)):
      return padded
    host = jax.tree.map(np.asarray, jax.device_get(padded))
    return jax.device_put(host, self.state_shardings(host))

  def unpad_state(self, state: SimState) -> SimState:
    """Inside jit: the padded state cut to K rows, still sharded by row."""
    return self.constrain_state(
        self._map_state(state, lambda x: x[:self.num_clients], lambda x: x))

  def constrain_state(self, state: SimState) -> SimState:
    """Inside jit: pin every leaf of ``state`` to its sharding (the scan carry
    stays sharded by row from round to round)."""
    return jax.lax.with_sharding_constraint(state, self.state_shardings(state))

  def pad_state(self, state: SimState) -> SimState:
    """Inside jit: the K-row state padded back to K' rows, sharded by row."""
    return self.constrain_state(
        self._map_state(state, lambda x: _pad(x, self.padded_clients), lambda x: x))

  def host_state(self, state: SimState) -> SimState:
    """``state`` as host NumPy with the padding removed (K rows: the shapes of
    the replicated engine, so checkpoints do not depend on the device count)."""
    from fedfrac.sim import distributed
    host = distributed.to_host(state)
    return self._map_state(host, lambda x: x[:self.num_clients], lambda x: x)

  # ---------------------------------------------------------------- arrays
  def place_arrays(self, arrays: dict) -> dict:
    """Host data arrays placed: client tables padded to K' rows and train rows
    to N' rows, both sharded by row; test arrays replicated."""
    out = {}
    for name, value in arrays.items():
      if name in CLIENT_TABLES:
        out[name] = jax.device_put(_pad(np.asarray(value), self.padded_clients), self.rows)
      elif name in DATA_ROWS:
        out[name] = jax.device_put(_pad(np.asarray(value), self.padded_rows), self.rows)
      else:
        out[name] = jax.device_put(np.asarray(value), self.replicated)
    return out

  def unpad_arrays(self, arrays: dict) -> dict:
    """Inside jit: client tables cut to K rows (train rows keep their padding:
    no index points at it), sharded by row."""
    out = dict(arrays)
    for name in CLIENT_TABLES:
      if name in out:
        out[name] = jax.lax.with_sharding_constraint(out[name][:self.num_clients],
                                                     self.rows)
    return out


class CohortRows(Stage):
  """The cohort's train rows gathered before its clients run
  (``engine.shard_client_state``): each device gathers the rows it holds, and
  the ``[S, n_max, ...]`` cohort rows then go to the devices that train them;
  each client's view reads its own rows (index ``0..n_max-1``) instead of the
  shared ``x``, which stays sharded by row."""

  def rows(self, arrays, index, rows):
    rows = (arrays["x"][index], arrays["y"][index])
    return jnp.broadcast_to(jnp.arange(index.shape[1], dtype=index.dtype), index.shape), rows
