"""How a cohort's ``client_update`` calls run: vmap | map | step buckets | shard.

Every way trains the same clients for the same steps on the same batches; they
differ in two measured ways:

* float rounding: vmapping batches the clients' matrix products and reductions
  into larger XLA operations whose float32 summation order differs from one
  client at a time, so losses and parameters agree to rounding (about 1e-6
  relative per round), and the difference can grow over rounds (3.5e-5 relative
  in losses after 30 quickstart rounds; accuracies were equal);
* ``executed_steps`` (a cost measure, :func:`executed_steps`): the local steps
  the program executes, masked padding included. A vmapped group runs as long as
  its largest client, ``map`` runs each client only its own steps, so vmap
  reports more (e.g. 108 against 98). ``client_steps``, the steps that train, is
  the same for both. A round whose cohort is empty (every sampled client
  unavailable) trains nobody and counts 0.

* ``vmap``: all S clients at once (one batched program).
* ``map``: ``lax.map``, one client after another inside the same jit.
* step buckets: with dynamic local-step loops, the cohort sorted by step count
  and run as ``groups`` vmapped groups, each only as long as its largest client.
* shard: the cohort split over the ``clients`` mesh axis with ``shard_map``,
  each device running its share in one of the ways above; with
  ``engine.device_invariant`` the step-bucket groups of the whole cohort are
  dealt whole to devices instead (:func:`run_sharded_groups`), so any device
  count gives the bits of one device.

A cohort is given as ``args = (client_states, client_index [S, n], client_size
[S], num_steps [S], client_ids [S], keys [S, 2], budget [S] | None, byzantine
[S] | None, rows (x [S, n, ...], y [S, n]) | None)`` and a per-client function
``one(*args_of_one_client) -> (message, state, metrics)``.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac.models.base import Model
from fedfrac.ops import lockstep
from fedfrac.sim.devices import CLIENT_AXIS

PARALLELISM = ("vmap", "map", "auto")
# The name of the vmapped cohort axis (fedfrac.ops.lockstep).
LOCKSTEP_AXIS = "cohort"


def is_convolutional(model: Model) -> bool:
  """Whether ``model`` has convolution kernels (4-D parameters)."""
  shapes = jax.eval_shape(model.init, jax.random.PRNGKey(0))
  return any(len(x.shape) == 4 for x in jax.tree.leaves(shapes))


def auto_parallelism(model: Model, backend: Optional[str] = None) -> str:
  """``client_parallelism="auto"``: ``map`` for convolutional models on CPU, else ``vmap``.

  Measured on a 2-core CPU (CNNMnist, 10 clients × 12 steps): one client at a
  time keeps each step's matmuls large and cache-resident, while vmapping
  per-client weights turns every layer into a batched (or grouped) product that
  XLA:CPU runs slower; MLP cohorts are faster vmapped. On GPU/TPU, vmap fills the
  device.
  """
  backend = backend or jax.default_backend()
  if backend == "cpu" and is_convolutional(model):
    return "map"
  return "vmap"


def check_parallelism(parallelism) -> None:
  """Raise ValueError unless ``engine.client_parallelism`` is allowed."""
  if parallelism not in PARALLELISM:
    raise ValueError(f"engine.client_parallelism={parallelism!r}: allowed values "
                     f"are {', '.join(PARALLELISM)}")


def check_step_buckets(setting) -> None:
  """Raise ValueError unless ``engine.step_buckets`` is an integer >= 0."""
  if not isinstance(setting, int) or isinstance(setting, bool) or setting < 0:
    raise ValueError(f"engine.step_buckets={setting!r}: must be an "
                     f"integer >= 0 (0 = auto)")


def resolve_parallelism(parallelism: str, model: Model) -> str:
  """``vmap`` or ``map`` for the setting ``engine.client_parallelism``."""
  check_parallelism(parallelism)
  return auto_parallelism(model) if parallelism == "auto" else parallelism


def executed_steps(steps, groups: int, unroll: int = 1, dynamic: bool = True,
                   max_steps: Optional[int] = None):
  """Local steps a cohort actually executes, masked ones included.

  ``steps [S]`` are the clients' step counts; the cohort runs as ``groups``
  vmapped groups of the step-sorted cohort (``groups=S``: one client at a time),
  each group as long as its largest client rounded up to ``unroll`` (or
  ``max_steps`` for every client when the loop is a static scan). Works on NumPy
  and traced arrays.
  """
  xp = jnp if isinstance(steps, jax.Array) else np
  s = steps.shape[0]
  if not dynamic:
    return xp.asarray(s * max_steps)
  m = -(-s // groups)
  pad = groups * m - s
  srt = xp.sort(steps)
  if pad:
    srt = xp.concatenate([xp.zeros((pad,), srt.dtype), srt])
  top = srt.reshape(groups, m).max(axis=1)
  return (m * (-(-top // unroll) * unroll)).sum()


def loop_steps(steps, client_metrics, training):
  """Per-client step counts for :func:`executed_steps`: ``num_steps``, or the
  client's reported ``steps`` metric when larger (algorithms with several local
  loops — FIRMA/FedRep's head and extractor phases, each over the client's own
  steps — run E_h + E_e epochs, not one)."""
  reported = client_metrics.get("steps") if isinstance(client_metrics, dict) else None
  if reported is None or not training.dynamic_steps:
    return steps
  return jnp.maximum(steps, jnp.round(reported).astype(steps.dtype))


def auto_step_buckets(client_steps, cohort: int, unroll: int = 1, target: float = 0.1,
                      max_buckets: int = 8, samples: int = 64, seed: int = 0) -> int:
  """``step_buckets=0``: the fewest groups (≤ ``max_buckets``) whose expected
  masked-step fraction is at most ``target`` (else the least wasteful count).

  The expectation is over ``samples`` random cohorts of ``cohort`` clients drawn
  from ``client_steps`` (exact with full participation).
  """
  client_steps = np.asarray(client_steps)
  rng = np.random.default_rng(seed)
  k = client_steps.shape[0]
  draws = ([client_steps] if cohort >= k else
           [client_steps[rng.choice(k, cohort, replace=False)] for _ in range(samples)])
  best, best_waste = 1, None
  for g in range(1, min(max_buckets, cohort) + 1):
    done = sum(float(d.sum()) for d in draws)
    run = sum(float(executed_steps(d, g, unroll)) for d in draws)
    waste = 1.0 - done / max(run, 1.0)
    if waste <= target:
      return g
    if best_waste is None or waste < best_waste - 1e-12:
      best, best_waste = g, waste
  return best


def choose_step_buckets(setting, parallelism, training, num_steps, local_cohort) -> int:
  """Vmapped groups of a (device's) cohort: 1 for ``map`` or static loops, else
  ``engine.step_buckets`` (capped at the cohort) or :func:`auto_step_buckets`."""
  check_step_buckets(setting)
  if parallelism == "map" or not training.dynamic_steps:
    return 1
  if setting:
    return min(setting, local_cohort)
  return auto_step_buckets(num_steps, local_cohort, training.unroll)


def group_cohort(args, groups):
  """The cohort ``args`` as ``groups`` vmapped groups of the step-sorted cohort.

  The cohort is sorted by step count (stable) and padded at the front to
  ``groups × m`` slots (m = ⌈S/groups⌉) with zero-step copies of the first
  client. Returns ``(grouped args [groups, m, ...], order [groups·m], pad)``
  for :func:`ungroup_cohort`.
  """
  steps = args[3]
  s = steps.shape[0]
  m = -(-s // groups)
  pad = groups * m - s
  order = jnp.argsort(steps, stable=True)
  order = jnp.concatenate([jnp.full((pad,), order[0], order.dtype), order])
  grouped = jax.tree.map(lambda x: x[order], args)
  grouped = grouped[:3] + (jnp.where(jnp.arange(groups * m) < pad, 0, grouped[3]),) \
      + grouped[4:]
  grouped = jax.tree.map(lambda x: x.reshape((groups, m) + x.shape[1:]), grouped)
  return grouped, order, pad


def ungroup_cohort(out, order, pad):
  """Outputs ``[groups, m, ...]`` of :func:`group_cohort`'s groups back in
  cohort order ``[S, ...]`` (padding slots dropped)."""
  inverse = jnp.argsort(order[pad:], stable=True) + pad
  n = order.shape[0]
  return jax.tree.map(lambda x: x.reshape((n,) + x.shape[2:])[inverse], out)


def run_groups(one, grouped):
  """Groups ``[G, m, ...]`` one after another (``lax.map``), each vmapped over
  its ``m`` clients on the named cohort axis (:mod:`fedfrac.ops.lockstep`)."""
  group = lockstep.vmap(one, LOCKSTEP_AXIS)
  if jax.tree.leaves(grouped)[0].shape[0] == 1:   # one group: no loop around it
    return jax.tree.map(lambda x: x[None], group(*jax.tree.map(lambda x: x[0], grouped)))
  return jax.lax.map(lambda a: group(*a), grouped)


@dataclasses.dataclass(frozen=True)
class CohortProgram:
  """How a cohort's clients run, whatever the placement:
  ``make_one(payload, arrays, t)`` builds the per-client function (on each
  device, inside ``shard_map``), run as ``parallelism`` (``vmap`` | ``map``) in
  ``step_buckets`` vmapped groups under ``training``'s loop settings."""
  make_one: Callable
  parallelism: str
  step_buckets: int
  training: Any

  def local(self, payload, arrays, t, args):
    """The cohort (or one device's share of it), as :func:`run_local` runs it."""
    return run_local(self.make_one(payload, arrays, t), args, self.parallelism,
                     self.step_buckets, self.training)


def run_local(one, args, parallelism, step_buckets, training):
  """The cohort (or this device's share of it) as vmap / map / step buckets.

  Returns ``(messages, states, metrics, executed_steps)`` in cohort order.
  """
  steps = args[3]
  s = steps.shape[0]
  if parallelism == "map":
    out = jax.lax.map(lambda a: one(*a), args)
    return out + (executed_steps(loop_steps(steps, out[2], training), s,
                                 training.unroll, training.dynamic_steps,
                                 training.max_steps),)
  groups = min(step_buckets, s)
  if groups == 1:
    out = lockstep.vmap(one, LOCKSTEP_AXIS)(*args)
    return out + (executed_steps(loop_steps(steps, out[2], training), 1,
                                 training.unroll, training.dynamic_steps,
                                 training.max_steps),)
  # Sort by step count, pad to groups × m with zero-step copies of the first
  # client, run the groups one after another, and restore the cohort order.
  grouped, order, pad = group_cohort(args, groups)
  out = ungroup_cohort(run_groups(one, grouped), order, pad)
  return out + (executed_steps(loop_steps(steps, out[2], training), groups,
                               training.unroll, training.dynamic_steps,
                               training.max_steps),)


def run_sharded(local, mesh, payload, arrays, t, args):
  """The cohort split over the ``clients`` mesh axis with ``shard_map``.

  ``local(payload, arrays, t, args)`` runs one device's share as
  :func:`run_local` does; the outputs are then replicated, so aggregation sees
  the same stacked cohort in the same order as a single-device run. The cohort
  is padded to a multiple of the device count with zero-step copies of its
  first client (dropped afterwards).
  """
  from jax.sharding import NamedSharding, PartitionSpec as P
  d = mesh.devices.size
  s = args[3].shape[0]
  m = -(-s // d)
  # Deal the clients to devices in snake order of decreasing step count, so
  # every device gets a similar amount of work; pad slots (zero steps, copies
  # of the first client) come last. rows[j] = cohort slot at sharded slot j.
  order = jnp.argsort(-args[3], stable=True)
  order = jnp.concatenate([order, jnp.full((d * m - s,), -1, order.dtype)])
  snake = np.arange(d * m).reshape(m, d)    # [row, device] -> rank
  snake[1::2] = snake[1::2, ::-1]
  rows = order[snake.T.reshape(-1)]         # device-major: slot j·m + row
  valid = rows >= 0
  rows = jnp.where(valid, rows, 0)
  args = jax.tree.map(lambda x: x[rows], args)
  args = args[:3] + (jnp.where(valid, args[3], 0),) + args[4:]

  def shard(payload, arrays, t, args):
    messages, states, metrics, done = local(payload, arrays, t, args)
    return messages, states, metrics, jnp.reshape(done, (1,))

  # check_vma=False: each device runs plain per-client code on its shard, with
  # no replication typing. With the default check_vma=True, replicated inputs
  # (the payload) are "invariant" and gradients taken with respect to them
  # inside client_update would be summed over devices by shard_map's autodiff
  # unless every algorithm pcast them to "varying" (and every scan carry
  # initialised from constants would need the same cast).
  spec = P(CLIENT_AXIS)
  messages, states, metrics, done = jax.shard_map(
      shard, mesh=mesh, in_specs=(P(), P(), P(), spec),
      out_specs=(spec, spec, spec, spec), check_vma=False)(payload, arrays, t, args)
  out = jax.lax.with_sharding_constraint((messages, states, metrics),
                                         NamedSharding(mesh, P()))
  # Back to cohort order: cohort slot i sits at sharded slot inverse[i].
  inverse = jnp.argsort(jnp.where(valid, rows, s + jnp.arange(d * m)), stable=True)[:s]
  out = jax.tree.map(lambda x: x[inverse], out)
  return out + (done.sum(),)


def run_sharded_groups(make_one, mesh, payload, arrays, t, args, step_buckets,
                       training):
  """The cohort split over the ``clients`` mesh axis so that any device count
  gives the bits of one device (``engine.device_invariant``).

  A vmapped client's float rounding depends on the group it is vmapped with
  (the group's width, and :func:`fedfrac.ops.lockstep.shared_min`: how many of
  its local steps run in the loop without a per-step select), so
  :func:`run_sharded` (each device groups its own share) differs from one
  device in the last bits. Here the groups are those one device forms
  (:func:`group_cohort` of the whole cohort into ``step_buckets`` groups of m
  clients), padded with zero-step groups to a multiple of the device count D
  and dealt whole to devices; each device runs its ⌈G/D⌉ groups one after
  another (:func:`run_groups`). Every client thus runs in the same group, at
  the same width, with the same loop split as on one device; only the groups'
  order in time differs. ``make_one(payload, arrays, t)`` builds the
  per-client function on each device. Returns ``(messages, states, metrics,
  executed_steps)`` in cohort order; D devices run in parallel only when
  there are at least D groups.
  """
  from jax.sharding import NamedSharding, PartitionSpec as P
  d = mesh.devices.size
  steps = args[3]
  groups = max(1, min(step_buckets, steps.shape[0]))
  grouped, order, pad = group_cohort(args, groups)
  per_device = -(-groups // d)
  extra = per_device * d - groups
  if extra:
    # Zero-step copies of the first group fill the last devices: a gather and a
    # ``where`` (a concatenation followed by ``.at[...].set`` right before
    # shard_map partitioned wrongly on forced CPU devices, docs/scaling.md).
    slots = jnp.arange(groups + extra)
    grouped = jax.tree.map(lambda x: x[jnp.where(slots < groups, slots, 0)], grouped)
    grouped = grouped[:3] + (jnp.where((slots < groups)[:, None], grouped[3], 0),) \
        + grouped[4:]

  def shard(payload, arrays, t, grouped):
    return run_groups(make_one(payload, arrays, t), grouped)

  spec = P(CLIENT_AXIS)
  out = jax.shard_map(shard, mesh=mesh, in_specs=(P(), P(), P(), spec),
                      out_specs=(spec, spec, spec), check_vma=False)(
                          payload, arrays, t, grouped)
  out = jax.lax.with_sharding_constraint(out, NamedSharding(mesh, P()))
  out = jax.tree.map(lambda x: x[:groups], out)
  out = ungroup_cohort(out, order, pad)
  return out + (executed_steps(loop_steps(steps, out[2], training), groups,
                               training.unroll, training.dynamic_steps,
                               training.max_steps),)
