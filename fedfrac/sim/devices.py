"""Devices of a sharded cohort: CPU device count, the ``clients`` mesh, replication."""
from __future__ import annotations

import os
from typing import Optional

import jax
import numpy as np

CLIENT_AXIS = "clients"


def use_cpu_devices(num_devices: Optional[int] = None, strict: bool = True) -> bool:
  """Split this host's CPU into ``num_devices`` XLA devices (default: one per
  core), so that ``shard_clients`` runs clients on every core at once.

  XLA:CPU runs one program's operations one after another, and the small
  per-client operations of a federated round do not split across threads; one
  device per core runs a share of the cohort on each core (measured on 2
  cores: the two devices' work overlaps almost completely). JAX fixes its
  devices when it first runs an operation, so call this right after
  ``import jax`` (the same as ``XLA_FLAGS=--xla_force_host_platform_device_count=N``).
  Returns True if the setting took effect; with ``strict=False`` a too-late call
  returns False instead of raising.
  """
  n = int(num_devices or os.cpu_count() or 1)
  try:
    # JAX accepts the setting until its backends start (then only an unchanged value).
    jax.config.update("jax_num_cpu_devices", n)
  except RuntimeError:
    if strict:
      raise RuntimeError(
          f"use_cpu_devices({n}): JAX has already initialised its devices "
          f"({jax.device_count()}); call it right after `import jax`, or set "
          f"XLA_FLAGS=--xla_force_host_platform_device_count={n}") from None
    return False
  return True


SHARD_CLIENTS = (True, False, "auto")


def check_shard_clients(shard) -> None:
  """Raise ValueError unless ``engine.shard_clients`` is True, False or 'auto'."""
  if shard not in SHARD_CLIENTS:
    raise ValueError(f"engine.shard_clients={shard!r}: allowed values are True, "
                     f"False, 'auto'")


def client_mesh(devices=None):
  """A 1-D ``jax.sharding.Mesh`` named ``clients`` over ``devices`` (default: all
  devices, every host's under ``jax.distributed.initialize``)."""
  devices = list(jax.devices() if devices is None else devices)
  return jax.make_mesh((len(devices),), (CLIENT_AXIS,),
                       axis_types=(jax.sharding.AxisType.Auto,), devices=devices)


def replicate(mesh, tree):
  """Place ``tree`` replicated over ``mesh`` (identity when ``mesh`` is None)."""
  if mesh is None:
    return tree
  from jax.sharding import NamedSharding, PartitionSpec as P
  if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(tree)):
    # Under tracing (e.g. ``jax.eval_shape(sim.init, 0)`` for ahead-of-time
    # compilation) there are no host values to place: shapes pass through.
    return tree
  host = jax.tree.map(np.asarray, jax.device_get(tree))
  return jax.device_put(host, NamedSharding(mesh, P()))
