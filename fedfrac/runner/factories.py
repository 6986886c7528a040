"""Config -> task, local training, engine settings and a :class:`Simulation`.

Each factory reads one section of the config (validated by its owner, see
:func:`fedfrac.config.validate`) and builds the object the engine takes.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac import algorithms
from fedfrac import _validation, config_base
from fedfrac import models
from fedfrac.algorithms import contract, local_training, tasks
from fedfrac.data import augment
from fedfrac.ops import system as system_lib
from fedfrac.optim import schedules
from fedfrac.sim import attacks, devices
from fedfrac.sim.evaluate import task_evaluation
from fedfrac.sim.simulation import Simulation
from fedfrac.sim import clock as clock_lib
from fedfrac.sim import schema as sim_schema
from fedfrac.sim.state import EngineConfig, cohort_size


def make_task(config):
  """The :class:`Task` of ``config.task`` (cross-entropy: classification)."""
  if config.task.loss == "cross_entropy":
    return tasks.classification_task()
  return tasks.regression_task(config.task.loss, config.task.huber_delta,
                               config.task.get("mape_eps", 1.0),
                               config.task.get("mape_rule", "stabilized"))


def default_unroll(max_steps, dynamic_steps=False):
  """Local steps per loop iteration when ``engine.unroll=0``.

  A static scan on CPU is unrolled fully up to 16 steps (loop overhead dominates
  there); dynamic loops (which stop at each client's own step count) and other
  backends use 1.
  """
  if jax.default_backend() == "cpu" and not dynamic_steps:
    return int(max(1, min(max_steps, 16)))
  return 1


def make_training(client_cfg, client_size, rounds, unroll=0,
                  dynamic_steps=False) -> local_training.LocalTraining:
  """LocalTraining from a (merged) client config and the clients' sizes.

  ``dynamic_steps=True`` makes local-step loops run each client's own step count
  (see :class:`fedfrac.algorithms.base.LocalTraining`).
  """
  tx = schedules.client_optimizer(client_cfg.optimizer, momentum=client_cfg.momentum,
                                  weight_decay=client_cfg.weight_decay)
  sched = schedules.lr_schedule(client_cfg.schedule, client_cfg.lr, rounds,
                                client_cfg.final_lr_fraction, client_cfg.lr_decay)
  steps = client_cfg.local_steps or None
  epochs = None if steps else client_cfg.local_epochs
  b = client_cfg.batch_size
  sizes = np.asarray(client_size)
  max_steps = steps if steps else int(epochs * np.ceil(sizes.max() / b))
  return local_training.LocalTraining(
      optimizer=tx, lr_schedule=sched, batch_size=b, local_epochs=epochs,
      local_steps=steps, max_steps=max(int(max_steps), 1),
      unroll=unroll or default_unroll(max_steps, dynamic_steps),
      dynamic_steps=bool(dynamic_steps))


def churn_rates(config, fed_data=None):
  """``None`` (no churn) or ``(p_leave, p_join)`` for the engine.

  Scalars from ``config.churn.p_leave/p_join``; with ``config.churn.per_class``
  (group -> (p_leave, p_join), asymmetric churn) per-client ``[K]`` arrays built
  from ``fed_data.client_group`` (BEV: vehicle class), other groups keeping the
  scalar rates.
  """
  ch = config.churn
  per_class = dict(ch.get("per_class", {}) or {})
  if not per_class:
    if ch.p_leave > 0 or ch.p_join < 1:
      return (float(ch.p_leave), float(ch.p_join))
    return None
  if fed_data is None or fed_data.client_group is None:
    raise ValueError("config.churn.per_class needs data with client groups "
                     "(vehicle classes of a BEV source)")
  groups = np.asarray(fed_data.client_group).astype(str)
  p_leave = np.full(groups.shape, float(ch.p_leave), np.float32)
  p_join = np.full(groups.shape, float(ch.p_join), np.float32)
  for cls, (leave, join) in per_class.items():
    sel = groups == cls
    p_leave[sel], p_join[sel] = float(leave), float(join)
  return (p_leave, p_join)


def engine_attack(config, label):
  """The engine's :class:`AttackConfig` of method ``label`` (None: no attack)."""
  ac = config_base.attack_config(config, label)
  if ac.kind == "none":
    return None
  return attacks.AttackConfig(kind=ac.kind, fraction=float(ac.fraction),
                              scale=float(ac.scale), std=float(ac.std),
                              seed=None if ac.seed < 0 else int(ac.seed))


def system_config(config):
  """The engine's :class:`fedfrac.ops.system.SystemConfig` from ``config.system``;
  ``None`` for the default (equal speeds, policy ``none``: today's rounds)."""
  sc = config.get("system", None)
  if sc is None:
    return None
  values = sim_schema.SYSTEM.values(sc)
  policy, speed, deadline = values["policy"], values["speed"], values["deadline"]
  if policy == "none" and speed == "equal":
    return None
  return sim_schema.SYSTEM.build(
      system_lib.SystemConfig, sc, speed=speed, sigma=float(values["sigma"]),
      group_speeds=tuple(float(v) for v in (values["group_speeds"] or ())),
      groups=tuple(int(g) for g in (values["groups"] or ())),
      deadline=math.inf if deadline is None else float(deadline), policy=policy)


def clock_config(config, label=None, num_clients=None):
  """The engine's :class:`fedfrac.sim.clock.ClockConfig` from ``config.clock``
  (``None`` for ``server="none"``); with ``label`` the asynchronous server is
  checked against that method, with ``num_clients`` the trace is read."""
  if config.get("clock", None) is None:
    return None
  cc = config.clock if label is None else config_base.section_config(config, label, "clock")
  if cc.get("server", "none") == "none":
    return None
  server = cc.server
  options = None
  if server != "sync":
    method = None if label is None else config.methods[label].name
    options = algorithms.async_server(server, dict(cc.get("options", {}) or {}), method)
  trace = None
  if cc.get("trace", "") and num_clients is not None:
    trace = clock_lib.read_trace(cc.trace, num_clients)
  return clock_lib.check_clock(sim_schema.CLOCK.build(
      clock_lib.ClockConfig, cc, trace=trace, server=server, options=options,
      deadline=float(sim_schema.CLOCK.values(cc)["deadline"])))


# engine.* keys that are not EngineConfig fields: the local training's loop
# (make_training) and the process's CPU devices (fedfrac.sim.devices, at start-up).
ENGINE_KEYS_READ_ELSEWHERE = ("unroll", "dynamic_steps", "cpu_devices")


def engine_config(config, label=None, fed_data=None) -> EngineConfig:
  """Engine settings of the run (with ``label``: that method's attack settings;
  with ``fed_data``: per-client churn rates from ``config.churn.per_class``)."""
  churn = churn_rates(config, fed_data)
  attack = None if label is None else engine_attack(config, label)
  return sim_schema.ENGINE.build(
      EngineConfig, config.engine, elsewhere=ENGINE_KEYS_READ_ELSEWHERE,
      participation=config.participation, availability=churn,
      cohort_rule=sim_schema.CHURN.values(config.churn)["cohort_rule"], attack=attack,
      system=system_config(config),
      clock=clock_config(config, label, None if fed_data is None else fed_data.num_clients))


# Override key of the client learning rate η0 (``client.lr``) in a vmapped grid.
CLIENT_LR = "client.lr"


def with_client_lr(ctx: contract.BuildContext, lr) -> contract.BuildContext:
  """``ctx`` whose local training uses client learning rate ``lr`` (η0, possibly a
  traced scalar) under the method's own schedule (``client.schedule``: constant,
  inv_sqrt η0/sqrt(t+1), cosine, exponential; every schedule is linear in η0).

  The learning rate reaches an algorithm only through
  ``ctx.training.lr_schedule`` (the client optimizers have unit rate), so a grid
  over η0 is one program whose runs differ in this scalar alone.
  """
  cc = ctx.client_cfg
  if cc is None:
    raise ValueError(f"{CLIENT_LR} override needs the client settings "
                     f"(BuildContext.client_cfg)")
  sched = schedules.lr_schedule(cc.schedule, lr, ctx.rounds, cc.final_lr_fraction,
                                cc.lr_decay)
  return dataclasses.replace(ctx, training=dataclasses.replace(ctx.training,
                                                               lr_schedule=sched))


def make_with_overrides(name, ctx, options, overrides):
  """Algorithm ``name`` built with ``options`` updated by ``overrides`` (a dict of
  possibly traced hyper-parameters: one point of a vmapped grid). The key
  ``"client.lr"`` (:data:`CLIENT_LR`) sets the client learning rate η0 instead of
  an algorithm option (:func:`with_client_lr`)."""
  overrides = dict(overrides)
  if CLIENT_LR in overrides:
    ctx = with_client_lr(ctx, overrides.pop(CLIENT_LR))
  return algorithms.make(name, ctx, **{**options, **overrides})


def check_methods(config, fed_data) -> None:
  """Build every selected method's algorithm on ``fed_data`` (no compilation), so a
  method that cannot run with its merged config (e.g. FedNova with
  ``client.optimizer='adamw'``) stops the run before any method computes.

  An algorithm registered with :func:`fedfrac.algorithms.register` is also
  traced once on abstract arrays (:func:`fedfrac.algorithms.check.check_algorithm`).

  Raises:
    ConfigError naming the method, the key and what is allowed, or its subclass
    :class:`fedfrac.algorithms.ContractError` naming the function of your
    algorithm that returned what the engine cannot use.
  """
  from fedfrac.algorithms import check
  for label in config_base.method_labels(config):
    method = config.methods[label]
    check_batch_size(config, label, fed_data)
    check_local_steps(config, label, fed_data)
    try:
      ctx = build_context(config, label, fed_data)
      algorithm = algorithms.make(method.name, ctx, **config_base.method_options(method))
    except _validation.ConfigError:
      raise
    except ValueError as e:
      raise _validation.ConfigError(
          f"config.{e} (method {label!r}, algorithm {method.name!r}); nothing has run "
          f"yet") from None
    if algorithms.entry(method.name).needs_head:
      _check_head(ctx.model, label, method.name)
    if not algorithms.is_builtin(method.name):   # your own: traced once, abstractly
      try:
        check.check_algorithm(algorithm, ctx, fed_data,
                              cohort_size(config.participation, fed_data.num_clients))
      except check.ContractError as e:
        # A headless model is the likely cause (vmap over the empty head: "got
        # empty"); say so rather than pass on the trace's own words.
        _check_head(ctx.model, label, method.name, failure=str(e))
        raise check.ContractError(f"config.methods.{label}: {e}; nothing has run "
                                  f"yet") from e


def _check_head(model, label, name, failure=None) -> None:
  """ConfigError when ``model``'s head has no parameters (a flax module given
  without naming its head) and algorithm ``name`` needs one: it is marked
  ``needs_head``, or (your own algorithm) it failed with ``failure`` when
  traced on the headless model."""
  params = jax.eval_shape(model.init, jax.ShapeDtypeStruct((2,), jnp.uint32))
  if jax.tree.leaves(params["head"]):
    return
  parts = ", ".join(map(repr, params["extractor"])) or "(none)"
  why = ("uses the model's head apart from its extractor (keeps it per client, or "
         "reads the features that enter it)" if failure is None else
         "failed when traced on the model's parameters, whose \"head\" entry is empty "
         "(an algorithm that keeps the head per client or reads its features needs "
         "one; AlgorithmEntry(needs_head=True) says so first)")
  raise _validation.ConfigError(
      f"config.methods.{label}: algorithm {name!r} {why}, and model {model.name!r} has "
      f"none: name its head with ff.models.flax_model(module, head='...') (its "
      f"top-level submodules are {parts}) or name that submodule 'head'; nothing has "
      f"run yet")


def check_local_steps(config, label, fed_data) -> None:
  """Refuse (:class:`ConfigError`) local epochs of method ``label`` whose step
  count on the largest client (epochs x batches per epoch) does not fit the int32
  step counters of local training."""
  cc = config_base.client_config(config, label)
  if cc.local_steps or not len(fed_data.client_size):
    return
  batches = int(math.ceil(int(np.max(fed_data.client_size)) / cc.batch_size))
  if cc.local_epochs * batches > _validation.INT32_MAX:
    key = ("client" if "local_epochs" not in config.methods[label].get("client", {})
           else f"methods.{label}.client")
    _validation.fail(f"{key}.local_epochs", cc.local_epochs,
                     f"gives {cc.local_epochs * batches} local steps on the largest "
                     f"client ({batches} batches per epoch), beyond the int32 step "
                     f"counters (2**31 - 1); give at most "
                     f"{_validation.INT32_MAX // batches}")


def check_batch_size(config, label, fed_data) -> None:
  """Refuse (:class:`ConfigError`) a client batch size of method ``label``
  larger than any client's training data: every local step would compute on
  that many rows, nearly all of them padding."""
  batch = config_base.client_config(config, label).batch_size
  largest = int(np.max(fed_data.client_size)) if len(fed_data.client_size) else 0
  if largest and batch > largest:
    key = ("client" if "batch_size" not in config.methods[label].get("client", {})
           else f"methods.{label}.client")
    _validation.fail(f"{key}.batch_size", batch,
                    f"larger than any client's training data (the largest client holds "
                    f"{largest} examples), so each local step would compute on {batch} "
                    f"rows, nearly all padding; give at most {largest} (a full batch)")


def build_context(config, label, fed_data, all_client_sizes=None) -> contract.BuildContext:
  """What method ``label``'s algorithm is built from on ``fed_data``: the model,
  task, local-training plan (its static step count from ``all_client_sizes``,
  default this dataset's), data info and the method's merged client/aggregator
  settings."""
  task = make_task(config)
  num_outputs = fed_data.num_classes if task_evaluation(task).classification else 1
  try:
    model = models.build(config.model, fed_data.input_shape, num_outputs,
                         fed_data.input_scale, config.data.get("input_mean", ()),
                         config.data.get("input_std", ()))
  except ValueError as e:
    raise _validation.ConfigError(f"config.{e}") from None
  client_cfg = config_base.client_config(config, label)
  sizes = fed_data.client_size if all_client_sizes is None else all_client_sizes
  training = make_training(client_cfg, sizes, config.rounds, config.engine.unroll,
                           config.engine.get("dynamic_steps", False))
  augmentation = augment.build(config.data.get("augment", ""), fed_data.input_shape,
                               fed_data.input_scale, config.data.get("input_mean", ()))
  if augmentation is not None:
    training = dataclasses.replace(training, augment=augmentation)
  return contract.BuildContext(model=model, task=task, training=training,
                               data_info=fed_data.info(), rounds=config.rounds,
                               client_cfg=client_cfg,
                               aggregator=config_base.aggregator_spec(config, label),
                               participation=float(config.participation))


def build_simulation(config, label, fed_data, all_client_sizes=None,
                     traced_options=False) -> Simulation:
  """Everything for one method on one federated dataset.

  ``all_client_sizes`` (default: this dataset's) sets the static local-step scan
  length, so batched runs over several partitions share one program;
  ``traced_options`` lets the simulation rebuild the algorithm from traced option
  overrides (hyper-parameter grids, :func:`make_with_overrides`).
  """
  ctx = build_context(config, label, fed_data, all_client_sizes)
  method = config.methods[label]
  options = config_base.method_options(method)
  algorithm = algorithms.make(method.name, ctx, **options)
  algorithm_fn = None
  if traced_options:
    algorithm_fn = functools.partial(make_with_overrides, method.name, ctx, options)
  return Simulation(algorithm, fed_data, ctx.model, ctx.task, ctx.training,
                    engine_config(config, label, fed_data), algorithm_fn=algorithm_fn)


def apply_cpu_devices(config):
  """``engine.cpu_devices > 0``: split the CPU into that many devices if JAX has
  not started yet (warn otherwise); see :func:`fedfrac.sim.devices.use_cpu_devices`."""
  n = int(config.engine.get("cpu_devices", 0) or 0)
  if n and not devices.use_cpu_devices(n, strict=False):
    warnings.warn(f"config.engine.cpu_devices={n} ignored: JAX had already started "
                  f"with {jax.device_count()} device(s); set it before any JAX "
                  f"operation or use XLA_FLAGS=--xla_force_host_platform_device_count={n}")
