"""Several processes, one simulation: ``jax.distributed`` set-up and host reads.

JAX runs one process per host (or per GPU); every process runs the same
program, and after :func:`initialize` ``jax.devices()`` lists every process's
devices, so the ``clients`` mesh (:func:`fedfrac.sim.devices.client_mesh`)
spans them all and ``shard_clients`` splits the cohort over every process.
Each process builds identical data and initial state from the config and seed
(data loading and partitioning are deterministic) and places them as global
replicated arrays (:func:`fedfrac.sim.devices.replicate`).

The launch settings come from arguments or the environment:

* ``FEDFRAC_COORDINATOR``: ``host:port`` of process 0's coordinator
  (``auto``: let JAX detect SLURM, Open MPI or a TPU pod slice);
* ``FEDFRAC_NUM_PROCESSES``, ``FEDFRAC_PROCESS_ID``: process count and rank
  (taken from SLURM/Open MPI/TPU when the coordinator is ``auto``);
* ``FEDFRAC_LOCAL_DEVICE_IDS`` (optional): comma-separated local device ids this
  process uses (one process per GPU).

On a CPU backend the cross-process collectives run over gloo
(``jax_cpu_collectives_implementation``), which jax 0.10.2 ships.
"""
from __future__ import annotations

import os
from typing import Optional, Sequence

import jax
import numpy as np

ENV_COORDINATOR = "FEDFRAC_COORDINATOR"
ENV_NUM_PROCESSES = "FEDFRAC_NUM_PROCESSES"
ENV_PROCESS_ID = "FEDFRAC_PROCESS_ID"
ENV_LOCAL_DEVICE_IDS = "FEDFRAC_LOCAL_DEVICE_IDS"
CPU_COLLECTIVES = "gloo"

_initialized = False


def _int_setting(name: str, value) -> Optional[int]:
  if value is None or value == "":
    return None
  try:
    out = int(value)
  except (TypeError, ValueError):
    raise ValueError(f"{name}={value!r}: must be an integer >= 0") from None
  if out < 0:
    raise ValueError(f"{name}={value!r}: must be an integer >= 0")
  return out


def settings_from_env(environ=None) -> Optional[dict]:
  """The launch settings in ``environ`` (default ``os.environ``), or ``None``
  when ``FEDFRAC_COORDINATOR`` is unset (a single-process run).

  Returns ``{"coordinator_address", "num_processes", "process_id",
  "local_device_ids"}`` (``None`` entries: auto-detected by JAX).
  """
  env = os.environ if environ is None else environ
  coordinator = env.get(ENV_COORDINATOR, "").strip()
  if not coordinator:
    return None
  num = _int_setting(ENV_NUM_PROCESSES, env.get(ENV_NUM_PROCESSES))
  pid = _int_setting(ENV_PROCESS_ID, env.get(ENV_PROCESS_ID))
  ids = env.get(ENV_LOCAL_DEVICE_IDS, "").strip()
  local = None
  if ids:
    local = [_int_setting(ENV_LOCAL_DEVICE_IDS, i) for i in ids.split(",")]
  if coordinator == "auto":
    return {"coordinator_address": None, "num_processes": num, "process_id": pid,
            "local_device_ids": local}
  if ":" not in coordinator:
    raise ValueError(f"{ENV_COORDINATOR}={coordinator!r}: must be host:port or 'auto'")
  if num is None or pid is None:
    raise ValueError(f"{ENV_COORDINATOR}={coordinator!r} needs {ENV_NUM_PROCESSES} "
                     f"and {ENV_PROCESS_ID}")
  if num < 1 or pid >= num:
    raise ValueError(f"{ENV_PROCESS_ID}={pid}: must be in [0, "
                     f"{ENV_NUM_PROCESSES}={num})")
  return {"coordinator_address": coordinator, "num_processes": num, "process_id": pid,
          "local_device_ids": local}


def initialize(coordinator_address: Optional[str] = None,
               num_processes: Optional[int] = None, process_id: Optional[int] = None,
               local_device_ids: Optional[Sequence[int]] = None,
               timeout_s: int = 300) -> bool:
  """``jax.distributed.initialize`` with gloo collectives on CPU backends.

  Call before anything else runs a JAX operation. All-``None`` arguments let JAX
  detect the cluster (SLURM, Open MPI, TPU pod slices). ``timeout_s`` bounds the
  wait for the other processes. Returns True (False if already initialised by
  this function).
  """
  global _initialized
  if _initialized:
    return False
  # gloo is only used by the CPU client; GPU/TPU backends use their own.
  jax.config.update("jax_cpu_collectives_implementation", CPU_COLLECTIVES)
  kwargs = {}
  if local_device_ids is not None:
    kwargs["local_device_ids"] = list(local_device_ids)
  jax.distributed.initialize(coordinator_address=coordinator_address,
                             num_processes=num_processes, process_id=process_id,
                             initialization_timeout=int(timeout_s), **kwargs)
  _initialized = True
  return True


def initialize_from_env(environ=None, timeout_s: int = 300) -> bool:
  """:func:`initialize` with :func:`settings_from_env`; False (nothing done)
  when ``FEDFRAC_COORDINATOR`` is unset."""
  settings = settings_from_env(environ)
  if settings is None:
    return False
  return initialize(timeout_s=timeout_s, **settings)


def is_writer() -> bool:
  """Whether this process writes files (process 0; True without distribution)."""
  return jax.process_index() == 0


def to_host(tree):
  """Every leaf as a host NumPy array, on every process.

  Leaves that are not fully addressable here (sharded over other processes'
  devices) are gathered with ``multihost_utils.process_allgather``; replicated
  and local leaves are read directly.
  """
  from jax.experimental import multihost_utils

  def one(x):
    if isinstance(x, jax.Array) and not x.is_fully_addressable \
        and not x.is_fully_replicated:
      return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)
  return jax.tree.map(one, tree)
