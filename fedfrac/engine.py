"""The simulator: vmap over the sampled cohort, lax.scan over rounds (DESIGN §2.2).

One round: availability update (churn) → sample S_t → gather client states →
(optional ``prepare_cohort``) → ``client_update`` over the cohort (vmap or
lax.map, same numbers) → scatter → ``aggregate`` (+ optional ``cohort_metrics``).
Rounds run in ``lax.scan`` chunks inside one ``jit``; between chunks the caller
(``fedfrac.experiment``) evaluates, logs and checkpoints.

Randomness: one root key per run; round t uses ``fold_in(root, t)`` and client k
``fold_in(fold_in(root_t, CLIENT), k)``, so results do not depend on cohort
order, chunk size or device count.

Adversarial clients (``EngineConfig.attack``): a fixed set of Byzantine clients
per seed (``ops.attacks.byzantine_mask``, kept in ``SimState.byzantine``) whose
uploaded messages are transformed after ``client_update`` (sign flip, Gaussian
noise, scaling), or whose labels are flipped (y -> C − 1 − y) in the view their
``client_update`` trains on. Honest clients run exactly as without an attack.

Nothing here knows about files, flags or logging.
"""
from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac.algorithms.base import ClientView, FedAlgorithm, LocalTraining, Task
from fedfrac.data.federated import FederatedData
from fedfrac.metrics import gini_jnp
from fedfrac.models.base import Model
from fedfrac.ops import attacks as attacks_lib

# fold_in tags for the per-round key.
_SAMPLE, _CLIENT, _AGGREGATE, _AVAILABILITY = 0, 1, 2, 3
_INIT_TAG = 0x7FFFFFFF
_ATTACK_TAG = 0x7FFFFFFE   # folded into a Byzantine client's key for its attack noise

PARALLELISM = ("vmap", "map", "auto")
ATTACKS = ("none", "sign_flip", "gaussian", "scaled", "label_flip")
MESSAGE_ATTACKS = ("sign_flip", "gaussian", "scaled")


@dataclasses.dataclass(frozen=True)
class AttackConfig:
  """Byzantine clients, fixed per seed.

  Attributes:
    kind: ``none``; ``sign_flip`` (upload −scale·m instead of the message m);
      ``gaussian`` (upload N(0, std² I) noise of the message's shape);
      ``scaled`` (upload scale·m); ``label_flip`` (train on labels C − 1 − y).
    fraction: share of the K clients that are Byzantine: round(fraction·K)
      clients chosen by ``ops.attacks.byzantine_mask(K, fraction, seed)``.
    scale: factor of ``sign_flip`` / ``scaled``.
    std: noise standard deviation of ``gaussian``.
    seed: seed of the Byzantine set; None = the run's seed.
  Message attacks change only floating-point leaves of the message.
  """
  kind: str = "none"
  fraction: float = 0.0
  scale: float = 1.0
  std: float = 1.0
  seed: Optional[int] = None

  @property
  def active(self) -> bool:
    return self.kind != "none"


def attack_message(message, attack: AttackConfig, byzantine, key):
  """The message a client uploads: attacked if ``byzantine`` (bool scalar), else
  ``message`` unchanged (bit for bit). ``key``: the client's round key."""
  leaves, treedef = jax.tree.flatten(message)
  floats = [i for i, x in enumerate(leaves) if jnp.issubdtype(jnp.result_type(x),
                                                               jnp.inexact)]
  honest = [leaves[i] for i in floats]
  if attack.kind == "sign_flip":
    bad = attacks_lib.sign_flip(honest, attack.scale)
  elif attack.kind == "scaled":
    bad = attacks_lib.scaled_update(honest, attack.scale)
  elif attack.kind == "gaussian":
    bad = attacks_lib.gaussian_attack(honest, jax.random.fold_in(key, _ATTACK_TAG),
                                      attack.std)
  else:
    return message
  out = list(leaves)
  for i, h, b in zip(floats, honest, bad):
    out[i] = jnp.where(byzantine, b, h)
  return jax.tree.unflatten(treedef, out)


@dataclasses.dataclass(frozen=True)
class EngineConfig:
  """Engine settings.

  Attributes:
    rounds: total rounds R.
    participation: client fraction C; |S_t| = max(ceil(C·K), 1).
    client_parallelism: ``vmap`` (all sampled clients at once), ``map``
      (``lax.map``, one client after another inside the same jit) or ``auto``
      (:func:`auto_parallelism`: ``map`` for convolutional models on CPU,
      ``vmap`` otherwise). Results are the same whichever runs.
    eval_batch_size: test examples per evaluation batch.
    availability: ``None`` (always available) or ``(p_leave, p_join)``: each
      client's availability is a two-state Markov chain; S_t is sampled from the
      available clients (padded slots are masked). Each rate is a scalar or a
      ``[K]`` array (per-client rates, e.g. asymmetric churn by vehicle class).
    cohort_permutation_seed: ``None`` keeps the cohort sorted by client id; an int
      applies a fixed random permutation to the cohort order (results must not
      change — used to test order invariance).
    step_buckets: with ``vmap`` and dynamic local-step loops, the cohort is
      sorted by local step count and split into this many equal groups, run one
      group after another, each vmapped group only as long as its largest
      client (less masked work when client sizes differ). ``0`` = auto
      (:func:`auto_step_buckets`); ``1`` = one vmapped group.
    shard_clients: shard the cohort over all devices with ``shard_map`` (one
      mesh axis ``clients``); results equal a single-device run. ``"auto"``:
      shard when there is more than one device (several GPUs, or CPU cores
      split into devices with :func:`use_cpu_devices`).
    attack: ``None`` or an :class:`AttackConfig` (Byzantine clients).
  """
  rounds: int
  participation: float = 1.0
  client_parallelism: str = "auto"
  eval_batch_size: int = 1024
  availability: Optional[tuple] = None
  cohort_permutation_seed: Optional[int] = None
  step_buckets: int = 0
  shard_clients: Any = False
  attack: Optional[AttackConfig] = None


class SimState(NamedTuple):
  """The scan carry: everything a checkpoint needs."""
  server: Any
  clients: Any
  available: jax.Array   # [K] bool
  key: jax.Array         # root key of the run
  round: jax.Array       # int32, next round to run
  byzantine: Any = None  # [K] bool Byzantine clients (None: no attack)


def cohort_size(participation, num_clients) -> int:
  """|S_t| = max(ceil(C·K), 1)."""
  return max(int(math.ceil(participation * num_clients - 1e-9)), 1)


def tree_bytes(tree) -> int:
  return int(sum(np.prod(x.shape, dtype=np.int64) * np.dtype(x.dtype).itemsize
                 for x in jax.tree.leaves(tree)))


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
  import os
  from jax._src import xla_bridge
  n = int(num_devices or os.cpu_count() or 1)
  if xla_bridge.backends_are_initialized():
    if jax.config.jax_num_cpu_devices == n:
      return True
    if strict:
      raise RuntimeError(
          f"use_cpu_devices({n}): JAX has already initialised its devices "
          f"({jax.device_count()}); call it right after `import jax`, or set "
          f"XLA_FLAGS=--xla_force_host_platform_device_count={n}")
    return False
  jax.config.update("jax_num_cpu_devices", n)
  return True


def client_mesh(devices=None):
  """A 1-D ``jax.sharding.Mesh`` named ``clients`` over ``devices`` (default: all
  devices, every host's under ``jax.distributed.initialize``)."""
  devices = list(jax.devices() if devices is None else devices)
  return jax.make_mesh((len(devices),), (CLIENT_AXIS,),
                       axis_types=(jax.sharding.AxisType.Auto,), devices=devices)


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


def _loop_steps(steps, client_metrics, training):
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


def _gather(tree, ids):
  return jax.tree.map(lambda x: x[ids], tree)


def _scatter(tree, ids, new, mask):
  def put(full, rows):
    keep = mask.reshape(mask.shape + (1,) * (rows.ndim - 1))
    return full.at[ids].set(jnp.where(keep, rows, full[ids]))
  return jax.tree.map(put, tree, new)


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
    self.arrays = {k: jnp.asarray(v) for k, v in data_arrays(data, training).items()}
    if config.cohort_permutation_seed is not None:
      self._cohort_perm = jnp.asarray(
          np.random.default_rng(config.cohort_permutation_seed).permutation(self.cohort))
    else:
      self._cohort_perm = None
    parallelism = config.client_parallelism
    if parallelism not in PARALLELISM:
      raise ValueError(f"engine.client_parallelism={parallelism!r}: allowed values "
                       f"are {', '.join(PARALLELISM)}")
    self.parallelism = (auto_parallelism(model) if parallelism == "auto"
                        else parallelism)
    if not isinstance(config.step_buckets, int) or config.step_buckets < 0:
      raise ValueError(f"engine.step_buckets={config.step_buckets!r}: must be an "
                       f"integer >= 0 (0 = auto)")
    shard = config.shard_clients
    if shard not in (True, False, "auto"):
      raise ValueError(f"engine.shard_clients={shard!r}: allowed values are True, "
                       f"False, 'auto'")
    if shard == "auto":
      shard = jax.device_count() > 1
    self.mesh = client_mesh() if shard else None
    self.num_shards = 1 if self.mesh is None else self.mesh.devices.size
    local = -(-self.cohort // self.num_shards)
    if self.parallelism == "map" or not training.dynamic_steps:
      buckets = 1
    elif config.step_buckets:
      buckets = min(config.step_buckets, local)
    else:
      buckets = auto_step_buckets(self.num_steps, local, training.unroll)
    self.step_buckets = buckets
    if self.mesh is not None:
      # Data and state live replicated on every device of the mesh (on several
      # hosts: global arrays built from each process's identical copy).
      self.arrays = self.replicate(data_arrays(data, training))
    if config.availability is not None:
      for name, rate in zip(("p_leave", "p_join"), config.availability):
        if np.ndim(rate) not in (0, 1) or (np.ndim(rate) == 1 and
                                            np.shape(rate)[0] != self.num_clients):
          raise ValueError(f"engine.availability {name}: a scalar or one rate per "
                           f"client ({self.num_clients}), got shape {np.shape(rate)}")
    self.attack = config.attack if config.attack is not None and config.attack.active \
        else None
    if self.attack is not None:
      if self.attack.kind not in ATTACKS:
        raise ValueError(f"attack.kind={self.attack.kind!r}: allowed values are "
                         f"{', '.join(ATTACKS)}")
      if self.attack.kind == "label_flip" and task.name != "classification":
        raise ValueError("attack.kind='label_flip': needs a classification task, "
                         f"got {task.name!r}")
    self._run_chunk_jit = jax.jit(self._run_chunk, static_argnums=(3,))
    self._compiled = {}
    self._evaluate_jit = jax.jit(self._evaluate)
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
    params0 = self.model.init(jax.random.fold_in(key, _INIT_TAG))
    info = (self.data if data is None else data).info()
    server, clients = self.algorithm.init(jax.random.fold_in(key, _INIT_TAG - 1), params0,
                                          self.num_clients, info)
    available = jnp.ones((self.num_clients,), bool)
    byzantine = None
    if self.attack is not None:
      attack_seed = seed if self.attack.seed is None else self.attack.seed
      if isinstance(attack_seed, jax.core.Tracer):   # under eval_shape: shape only
        attack_seed = 0
      byzantine = jnp.asarray(attacks_lib.byzantine_mask(
          self.num_clients, self.attack.fraction, int(attack_seed)))
    state = SimState(server, clients, available, key, jnp.zeros((), jnp.int32),
                     byzantine)
    return state if self.mesh is None else self.replicate(state)

  def replicate(self, tree):
    """Place ``tree`` replicated over the client mesh (identity without one)."""
    if self.mesh is None:
      return tree
    from jax.sharding import NamedSharding, PartitionSpec as P
    host = jax.tree.map(np.asarray, jax.device_get(tree))
    return jax.device_put(host, NamedSharding(self.mesh, P()))

  # ------------------------------------------------------------------ rounds
  def _sample(self, key, available):
    """Cohort ids ``[S]`` (sorted) and participation mask ``[S]``."""
    k, s = self.num_clients, self.cohort
    if s == k:
      ids = jnp.arange(k, dtype=jnp.int32)
    else:
      scores = jax.random.uniform(key, (k,)) + jnp.where(available, 0.0, 2.0)
      ids = jnp.sort(jnp.argsort(scores)[:s]).astype(jnp.int32)
    if self._cohort_perm is not None:
      ids = ids[self._cohort_perm]
    return ids, available[ids]

  def _next_availability(self, available, key, t):
    if self.config.availability is None:
      return available
    p_leave, p_join = self.config.availability
    u = jax.random.uniform(key, available.shape)
    stay = jnp.where(available, u >= p_leave, u < p_join)
    # Round 0 starts from the all-available state.
    return jnp.where(t == 0, available, stay)

  def _algorithm_for(self, hp):
    if not hp:
      return self.algorithm
    if self.algorithm_fn is None:
      raise ValueError("hyper-parameter overrides need a Simulation built with algorithm_fn")
    return self.algorithm_fn(hp)

  def _cohort_poisoned_labels(self, arrays, ids, byzantine):
    """Train labels ``[N]`` with every row owned by a label-flipping client of the
    cohort flipped (the shared ``y`` of ``prepare_cohort``'s views; partitions
    give each row to one client)."""
    rows = arrays["client_index"][ids]                                # [S, n_max]
    owned = jnp.broadcast_to(byzantine[:, None], rows.shape).astype(jnp.int32)
    hit = jnp.zeros(arrays["y"].shape, jnp.int32).at[rows].max(owned) > 0
    return jnp.where(hit, attacks_lib.label_flip(arrays["y"], self.data.num_classes),
                     arrays["y"])

  def _client_fn(self, algorithm, payload, arrays, t):
    attack = self.attack
    y_flipped = None
    if attack is not None and attack.kind == "label_flip":
      y_flipped = attacks_lib.label_flip(arrays["y"], self.data.num_classes)

    def one(client_state, index, size, num_steps, client_id, key, byzantine=None):
      y = arrays["y"]
      if y_flipped is not None:
        # Data poisoning: Byzantine clients see C-1-y (under vmap this is one
        # [S, N] int label array per round, only when label_flip is on).
        y = jnp.where(byzantine, y_flipped, y)
      view = ClientView(arrays["x"], y, index, size, num_steps, client_id)
      out = algorithm.client_update(payload, client_state, view, key, t)
      if attack is not None and attack.kind in MESSAGE_ATTACKS:
        out = (attack_message(out[0], attack, byzantine, key),) + tuple(out[1:])
      return out
    return one

  def _run_clients(self, algorithm, payload, arrays, t, client_states, ids, keys,
                   byzantine=None):
    """``client_update`` over the cohort; returns ``(messages, states, metrics,
    executed_steps)`` in cohort order, whichever way the cohort is run."""
    args = (client_states, arrays["client_index"][ids], arrays["client_size"][ids],
            arrays["num_steps"][ids], ids, keys)
    if byzantine is not None:
      args = args + (byzantine,)
    if self.mesh is None:
      return self._run_local(algorithm, payload, arrays, t, args)
    return self._run_sharded(algorithm, payload, arrays, t, args)

  def _run_local(self, algorithm, payload, arrays, t, args):
    """The cohort (or this device's share of it) as vmap / map / step buckets."""
    one = self._client_fn(algorithm, payload, arrays, t)
    steps = args[3]
    s = steps.shape[0]
    training = self.training
    if self.parallelism == "map":
      out = jax.lax.map(lambda a: one(*a), args)
      return out + (executed_steps(_loop_steps(steps, out[2], training), s,
                                   training.unroll, training.dynamic_steps,
                                   training.max_steps),)
    groups = min(self.step_buckets, s)
    if groups == 1:
      out = jax.vmap(one)(*args)
      return out + (executed_steps(_loop_steps(steps, out[2], training), 1,
                                   training.unroll, training.dynamic_steps,
                                   training.max_steps),)
    # Sort by step count, pad to groups × m with zero-step copies of the first
    # client, run the groups one after another, and restore the cohort order.
    m = -(-s // groups)
    pad = groups * m - s
    order = jnp.argsort(steps, stable=True)
    order = jnp.concatenate([jnp.full((pad,), order[0], order.dtype), order])
    grouped = jax.tree.map(lambda x: x[order], args)
    grouped = grouped[:3] + (jnp.where(jnp.arange(groups * m) < pad, 0, grouped[3]),) \
        + grouped[4:]
    grouped = jax.tree.map(lambda x: x.reshape((groups, m) + x.shape[1:]), grouped)
    out = jax.lax.map(lambda a: jax.vmap(one)(*a), grouped)
    inverse = jnp.argsort(order[pad:], stable=True) + pad
    out = jax.tree.map(lambda x: x.reshape((groups * m,) + x.shape[2:])[inverse], out)
    return out + (executed_steps(_loop_steps(steps, out[2], training), groups,
                                 training.unroll, training.dynamic_steps,
                                 training.max_steps),)

  def _run_sharded(self, algorithm, payload, arrays, t, args):
    """The cohort split over the ``clients`` mesh axis with ``shard_map``.

    Each device runs its share as :meth:`_run_local` does; the outputs are then
    replicated, so aggregation sees the same stacked cohort in the same order as
    a single-device run. The cohort is padded to a multiple of the device count
    with zero-step copies of its first client (dropped afterwards).
    """
    from jax.sharding import NamedSharding, PartitionSpec as P
    d = self.num_shards
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

    def local(payload, arrays, t, args):
      messages, states, metrics, done = self._run_local(algorithm, payload, arrays, t,
                                                        args)
      return messages, states, metrics, jnp.reshape(done, (1,))

    # check_vma=False: each device runs plain per-client code on its shard, with
    # no replication typing. With the default check_vma=True, replicated inputs
    # (the payload) are "invariant" and gradients taken with respect to them
    # inside client_update would be summed over devices by shard_map's autodiff
    # unless every algorithm pcast them to "varying" (and every scan carry
    # initialised from constants would need the same cast).
    spec = P(CLIENT_AXIS)
    messages, states, metrics, done = jax.shard_map(
        local, mesh=self.mesh, in_specs=(P(), P(), P(), spec),
        out_specs=(spec, spec, spec, spec), check_vma=False)(payload, arrays, t, args)
    out = jax.lax.with_sharding_constraint((messages, states, metrics),
                                           NamedSharding(self.mesh, P()))
    # Back to cohort order: cohort slot i sits at sharded slot inverse[i].
    inverse = jnp.argsort(jnp.where(valid, rows, s + jnp.arange(d * m)), stable=True)[:s]
    out = jax.tree.map(lambda x: x[inverse], out)
    return out + (done.sum(),)

  def _round(self, algorithm, arrays, state: SimState):
    t = state.round
    key_t = jax.random.fold_in(state.key, t)
    available = self._next_availability(state.available,
                                        jax.random.fold_in(key_t, _AVAILABILITY), t)
    ids, mask = self._sample(jax.random.fold_in(key_t, _SAMPLE), available)
    client_key = jax.random.fold_in(key_t, _CLIENT)
    keys = jax.vmap(lambda i: jax.random.fold_in(client_key, i))(ids)
    payload = algorithm.broadcast(state.server)
    cohort_states = _gather(state.clients, ids)
    byzantine = None if state.byzantine is None else state.byzantine[ids]
    if algorithm.prepare_cohort is not None:
      y = arrays["y"]
      if byzantine is not None and self.attack.kind == "label_flip":
        y = self._cohort_poisoned_labels(arrays, ids, byzantine)
      views = ClientView(arrays["x"], y, arrays["client_index"][ids],
                         arrays["client_size"][ids], arrays["num_steps"][ids], ids)
      cohort_states = algorithm.prepare_cohort(payload, cohort_states, views, keys, mask, t)
    messages, new_states, client_metrics, done = self._run_clients(
        algorithm, payload, arrays, t, cohort_states, ids, keys, byzantine)
    clients = _scatter(state.clients, ids, new_states, mask)
    weights = arrays["client_size"][ids].astype(jnp.float32) * mask
    out = algorithm.aggregate(state.server, clients, messages, weights, mask,
                                   jax.random.fold_in(key_t, _AGGREGATE))
    server, clients = out[0], out[1]
    server_metrics = out[2] if len(out) > 2 else {}
    if algorithm.cohort_metrics is not None:
      server_metrics = {**server_metrics,
                        **algorithm.cohort_metrics(client_metrics, weights, mask)}
    metrics = self._round_metrics(client_metrics, server_metrics, weights, mask, ids)
    metrics["executed_steps"] = jnp.asarray(done, jnp.float32)
    if byzantine is not None:
      metrics["clients/byzantine"] = byzantine
      metrics["byzantine_clients"] = jnp.sum((byzantine & mask).astype(jnp.float32))
    return SimState(server, clients, available, state.key, t + 1,
                    state.byzantine), metrics

  @staticmethod
  def _round_metrics(client_metrics, server_metrics, weights, mask, ids):
    m = mask.astype(jnp.float32)
    count = jnp.maximum(m.sum(), 1.0)
    p = weights / jnp.maximum(weights.sum(), 1e-12)
    out = {"cohort": m.sum(), "clients/ids": ids, "clients/mask": mask}
    for name, value in client_metrics.items():
      value = jnp.asarray(value, jnp.float32)
      out[f"clients/{name}"] = value
      if value.ndim == 1:
        out[f"train_{name}"] = jnp.sum(p * value)
    if "loss" in client_metrics:
      loss = jnp.asarray(client_metrics["loss"], jnp.float32)
      mean = jnp.sum(m * loss) / count
      out["train_loss_var"] = jnp.sum(m * (loss - mean) ** 2) / count
    if "steps" in client_metrics:
      out["client_steps"] = jnp.sum(m * client_metrics["steps"])
    for name, value in server_metrics.items():
      out[f"server/{name}"] = jnp.asarray(value)
    return out

  def _run_chunk(self, arrays, state, hp, num_rounds):
    algorithm = self._algorithm_for(hp)
    return jax.lax.scan(lambda s, _: self._round(algorithm, arrays, s), state, None,
                        length=num_rounds)

  def compile(self, num_rounds: int, state: Optional[SimState] = None) -> float:
    """Compile the chunk of ``num_rounds`` rounds ahead of time; returns seconds
    spent (0 if already compiled)."""
    num_rounds = int(num_rounds)
    if num_rounds in self._compiled:
      return 0.0
    if state is None:
      state = jax.eval_shape(self.init, 0)
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
  def _stats(self, out, y, scale, center):
    """Task stats; regression stats are in physical units (per-sample inverse)."""
    if self.task.name == "regression":
      return self.task.example_stats(out, y, scale, center)
    return self.task.example_stats(out, y)

  def _example_stats(self, params, x, y, scale, center):
    """Per-example stats dict over a test array, in batches of eval_batch_size."""
    n = x.shape[0]
    b = min(self.config.eval_batch_size, n)
    nb = -(-n // b)
    pad = nb * b - n

    def pad_rows(a):
      return jnp.pad(a, ((0, pad),) + ((0, 0),) * (a.ndim - 1)).reshape(
          (nb, b) + a.shape[1:])

    def batch_stats(args):
      xb, yb, sb, cb = args
      return self._stats(self.model.apply(params, xb), yb, sb, cb)
    stats = jax.lax.map(batch_stats, tuple(map(pad_rows, (x, y, scale, center))))
    return jax.tree.map(lambda s: s.reshape(-1)[:n], stats)

  def _evaluate(self, arrays, state, hp=None):
    algorithm = self._algorithm_for(hp)
    test_index, test_size = arrays["client_test_index"], arrays["client_test_size"]
    valid = jnp.arange(test_index.shape[1])[None, :] < test_size[:, None]
    has_test = test_size > 0
    if not algorithm.personalized:
      first = jax.tree.map(lambda x: x[0], state.clients)
      params = algorithm.eval_params(state.server, first)
      stats = self._example_stats(params, arrays["x_test"], arrays["y_test"],
                                  arrays["y_test_scale"], arrays["y_test_center"])
      sums = {k: jnp.sum(v * valid, axis=1) for k, v in
              ((k, v[test_index]) for k, v in stats.items())}
      out = {k: jnp.mean(v) for k, v in stats.items()}
    else:
      def client_stats(client_state, index, ok):
        params = algorithm.eval_params(state.server, client_state)
        out = self.model.apply(params, arrays["x_test"][index])
        s = self._stats(out, arrays["y_test"][index], arrays["y_test_scale"][index],
                        arrays["y_test_center"][index])
        return {k: jnp.sum(v * ok) for k, v in s.items()}
      sums = jax.vmap(client_stats)(state.clients, test_index, valid)
      total = jnp.maximum(test_size.sum(), 1)
      out = {k: jnp.sum(v) / total for k, v in sums.items()}
    per_client = {k: v / jnp.maximum(test_size, 1) for k, v in sums.items()}
    out = self._finish_eval(out, per_client, has_test)
    return out

  def _finish_eval(self, out, per_client, has_test):
    result = {}
    if self.task.name == "classification":
      result["accuracy"] = out["correct"]
      result["loss"] = out["loss"]
      client_metric = per_client["correct"]
      name = "client_accuracy"
    else:
      # Physical units (labels de-normalised per sample); *_macro = mean over
      # clients with test data of each client's metric.
      result["rmse"] = jnp.sqrt(out["sq_err"])
      result["mae"] = out["abs_err"]
      result["mape"] = out["ape"] / jnp.maximum(out["ape_count"], 1e-12)
      result["rmse_norm"] = jnp.sqrt(out["sq_err_norm"])
      result["loss"] = out["loss"]
      client_metric = jnp.sqrt(per_client["sq_err"])
      name = "client_rmse"
    w = has_test.astype(jnp.float32)
    n = jnp.maximum(w.sum(), 1.0)
    if self.task.name != "classification":
      result["rmse_macro"] = jnp.sum(w * client_metric) / n
      result["mae_macro"] = jnp.sum(w * per_client["abs_err"]) / n
      has_ape = has_test & (per_client["ape_count"] > 0)
      client_mape = per_client["ape"] / jnp.maximum(per_client["ape_count"], 1e-12)
      result["mape_macro"] = (jnp.sum(jnp.where(has_ape, client_mape, 0.0)) /
                              jnp.maximum(has_ape.sum(), 1))
      result["clients/client_mae"] = per_client["abs_err"]
      result["clients/client_mape"] = client_mape
    result[f"{name}_mean"] = jnp.sum(w * client_metric) / n
    result[f"{name}_min"] = jnp.min(jnp.where(has_test, client_metric, jnp.inf))
    result[f"{name}_max"] = jnp.max(jnp.where(has_test, client_metric, -jnp.inf))
    result[f"{name}_gini"] = gini_jnp(client_metric, has_test)
    result[f"clients/{name}"] = client_metric
    result["clients/has_test"] = has_test
    return result

  def evaluate(self, state: SimState):
    """Test metrics of the current state (global test set and per-client splits)."""
    return self._evaluate_jit(self.arrays, state)

  # ---------------------------------------------------------- communication
  def communication_bytes(self, state: SimState):
    """``(payload_bytes, message_bytes)`` per participating client, from shapes."""
    if self._comm is None:
      payload = jax.eval_shape(self.algorithm.broadcast, state.server)
      first = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype),
                           state.clients)
      scalar = jax.ShapeDtypeStruct((), jnp.int32)

      def message_of(p, c, idx, size, steps, cid, k):
        view = ClientView(self.arrays["x"], self.arrays["y"], idx, size, steps, cid)
        return self.algorithm.client_update(p, c, view, k, jnp.zeros((), jnp.int32))[0]
      message = jax.eval_shape(
          message_of, payload, first,
          jax.ShapeDtypeStruct(self.data.client_index.shape[1:], jnp.int32),
          scalar, scalar, scalar, jax.ShapeDtypeStruct((2,), jnp.uint32))
      self._comm = (tree_bytes(payload), tree_bytes(message))
    return self._comm


def _pad_to(a, shape):
  """Pad ``a`` up to ``shape`` by repeating its last entries (index tables stay valid)."""
  pad = [(0, t - n) for n, t in zip(a.shape, shape)]
  if not any(p[1] for p in pad):
    return a
  return np.pad(a, pad, mode="edge")


# vmap axes of a batched SimState: everything per run except the shared round.
STATE_AXES = SimState(server=0, clients=0, available=0, key=0, round=None)


class BatchedSimulation:
  """R independent runs of one :class:`Simulation`, vmapped into one program.

  Runs may differ in seed (initial model and sampling stream), in their data
  (per-seed partitions: index tables are padded to common shapes; arrays equal
  across runs are shared, not copied) and in hyper-parameters (a dict of
  scalars per run, passed to the simulation's ``algorithm_fn``). Results equal
  separate runs.

  All runs advance in lockstep, so the round counter ``SimState.round`` is one
  unbatched scalar shared by every run: a ``lax.cond`` on the round inside an
  algorithm (e.g. FibFL++'s warm-up) stays a branch instead of becoming a
  select that executes both sides for every run.
  """

  def __init__(self, sim: Simulation, run_data, run_hps=None):
    self.sim = sim
    self.run_data = list(run_data)
    self.num_runs = len(run_data)
    per_run = [data_arrays(d, sim.training) for d in run_data]
    for d in run_data:
      if d.num_clients != sim.num_clients:
        raise ValueError(
            f"batched runs need equal client counts; got {d.num_clients} and "
            f"{sim.num_clients} (a partition dropped clients for some seed)")
    self.arrays, self.in_axes = {}, {}
    for key in per_run[0]:
      values = [a[key] for a in per_run]
      if all(v is values[0] or (v.shape == values[0].shape and np.array_equal(v, values[0]))
             for v in values[1:]):
        self.arrays[key], self.in_axes[key] = jnp.asarray(values[0]), None
      else:
        shape = tuple(np.max([v.shape for v in values], axis=0))
        if key in ("x", "y", "x_test", "y_test") and len({v.shape for v in values}) > 1:
          raise ValueError(f"batched runs need equal {key} shapes across runs")
        self.arrays[key] = jnp.asarray(np.stack([_pad_to(v, shape) for v in values]))
        self.in_axes[key] = 0
    hps = run_hps if run_hps is not None else [None] * self.num_runs
    if any(hps):
      keys = sorted(hps[0])
      self.hp = {k: jnp.asarray([h[k] for h in hps], jnp.float32) for k in keys}
      hp_axes = {k: 0 for k in keys}
    else:
      self.hp, hp_axes = None, None
    in_axes = self.in_axes

    def chunk(arrays, states, hp, num_rounds):
      return jax.vmap(lambda a, st, h: sim._run_chunk(a, st, h, num_rounds),
                      in_axes=(in_axes, STATE_AXES, hp_axes),
                      out_axes=(STATE_AXES, 0))(arrays, states, hp)
    self._chunk = jax.jit(chunk, static_argnums=(3,))
    self._eval = jax.jit(jax.vmap(sim._evaluate,
                                  in_axes=(self.in_axes, STATE_AXES, hp_axes)))
    self._compiled = {}

  def init(self, seeds) -> SimState:
    """Stacked initial states, one per run (``seeds`` has one entry per run)."""
    if len(seeds) != self.num_runs:
      raise ValueError(f"seeds: need one seed per run ({self.num_runs}), got {len(seeds)}")
    states = [self.sim.init(s, d) for s, d in zip(seeds, self.run_data)]
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *[st._replace(round=None)
                                                        for st in states])
    return stacked._replace(round=states[0].round)

  def compile(self, num_rounds, states) -> float:
    num_rounds = int(num_rounds)
    if num_rounds in self._compiled:
      return 0.0
    t0 = time.perf_counter()
    self._compiled[num_rounds] = self._chunk.lower(
        self.arrays, states, self.hp, num_rounds).compile()
    return time.perf_counter() - t0

  def run_chunk(self, states, num_rounds):
    """``num_rounds`` rounds of every run: metrics gain a leading ``[R]`` axis."""
    if int(num_rounds) not in self._compiled:
      self.compile(num_rounds, states)
    return self._compiled[int(num_rounds)](self.arrays, states, self.hp)

  def compile_eval(self, states) -> float:
    """Compile ``evaluate`` ahead of time (so run timings exclude it); seconds."""
    if getattr(self, "_eval_compiled", None) is not None:
      return 0.0
    t0 = time.perf_counter()
    self._eval_compiled = self._eval.lower(self.arrays, states, self.hp).compile()
    return time.perf_counter() - t0

  def evaluate(self, states):
    if getattr(self, "_eval_compiled", None) is not None:
      return self._eval_compiled(self.arrays, states, self.hp)
    return self._eval(self.arrays, states, self.hp)
