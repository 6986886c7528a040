"""Checks of the config sections a run reads itself: top-level run fields,
``task``, ``log``, ``client``, ``server`` and ``methods`` (see :mod:`fedfrac.config`).

Each method's algorithm options are checked by the algorithm registry
(``algorithms.hparams``); its ``attack`` section by :mod:`fedfrac.sim.validate`.
"""
from __future__ import annotations

import difflib

import ml_collections

from fedfrac import algorithms
from fedfrac.algorithms import tasks
from fedfrac import config_base as config_lib
from fedfrac._validation import (ConfigError, check, fail, int32_count, int_at_least, is_int,
                                 is_num)
from fedfrac.optim import schedules
from fedfrac.sim import validate as engine_checks
from fedfrac.sim.state import cohort_size


MAX_SEED = 2**63 - 1   # the largest seed a PRNG key takes (a C long)


def check_seeds(seeds, key="seeds") -> None:
  """Seeds are distinct integers in ``0 .. MAX_SEED`` (a tuple, or one integer)."""
  shown = seeds
  if is_int(seeds):
    seeds = (seeds,)
  check(isinstance(seeds, (tuple, list)) and len(seeds) > 0
        and all(is_int(s) and s >= 0 for s in seeds), key, shown,
        "must be a non-empty tuple of integers >= 0")
  big = [s for s in seeds if s > MAX_SEED]
  check(not big, key, shown, f"seed {big[0] if big else ''} is too large; seeds are "
        f"integers in 0..{MAX_SEED} (2**63 - 1)")
  repeated = sorted({s for s in seeds if list(seeds).count(s) > 1})
  check(not repeated, key, shown,
        f"seed {repeated[0] if repeated else ''} is listed twice; each seed is one "
        f"independent run")


def validate_run(config) -> None:
  """Check seeds, rounds, participation, evaluation/checkpoint cadence, targets,
  ``on_divergence`` and the ``log`` section."""
  check_seeds(config.seeds)
  int_at_least(config, "rounds", 1)
  int32_count("rounds", config.rounds, "rounds")
  check(is_num(config.participation) and 0 < config.participation <= 1,
        "participation", config.participation, "must be in (0, 1]")
  int_at_least(config, "eval_every", 1)
  int_at_least(config, "checkpoint_every", 0)
  check(is_num(config.target_accuracy) and 0 <= config.target_accuracy <= 1,
        "target_accuracy", config.target_accuracy, "must be in [0, 1]")
  check(config.on_divergence in ("stop", "error"), "on_divergence",
        config.on_divergence, "allowed values are 'stop', 'error'")
  workers = config.get("workers", 1)
  check(is_int(workers) and workers >= 0, "workers", workers,
        "must be an integer >= 0 (0 = one process per CPU core or local device)")
  if is_int(workers) and workers != 1:
    check(not config.engine.get("cpu_devices", 0), "workers", workers,
          "runs each (method, seed) in a process of its own on one device; "
          "engine.cpu_devices needs workers=1")
  log = config.get("log", None)
  if log is not None:
    check(isinstance(log.get("tensorboard", False), bool), "log.tensorboard",
          log.get("tensorboard"), "must be True or False")


def validate_task(config) -> None:
  """Check ``config.task`` and ``target_rmse``."""
  t = config.task
  check(t.loss in ("cross_entropy", "mse", "huber"), "task.loss", t.loss,
        "allowed values are 'cross_entropy', 'mse', 'huber'")
  check(is_num(t.huber_delta) and t.huber_delta > 0, "task.huber_delta", t.huber_delta,
        "must be > 0")
  check(is_num(t.get("mape_eps", 1.0)) and t.get("mape_eps", 1.0) >= 0, "task.mape_eps",
        t.get("mape_eps"), "must be >= 0")
  check(t.get("mape_rule", "stabilized") in tasks.MAPE_RULES, "task.mape_rule",
        t.get("mape_rule"), "allowed values are " +
        ", ".join(repr(r) for r in tasks.MAPE_RULES))
  from fedfrac.data.sources import BEV_SOURCES
  regression = config.data.source in BEV_SOURCES
  if regression:
    check(t.loss in ("mse", "huber"), "task.loss", t.loss,
          f"data.source={config.data.source!r} has real-valued targets; allowed "
          f"values are 'mse', 'huber'")
  else:
    check(t.loss == "cross_entropy", "task.loss", t.loss,
          f"data.source={config.data.source!r} has class labels; the allowed value is "
          f"'cross_entropy'")
  check(is_num(config.target_rmse) and config.target_rmse >= 0, "target_rmse",
        config.target_rmse, "must be >= 0 (0 = off)")
  check_stop_at_target(config, regression)


def check_stop_at_target(config, regression) -> None:
  """``stop_at_target`` is True or False; True needs a target a run can reach
  later than its start (``target_accuracy`` > 0; regression: ``target_rmse`` >
  0) and an evaluation before the last round to stop at (``eval_every`` <
  ``rounds``)."""
  stop = config.get("stop_at_target", False)
  check(isinstance(stop, bool), "stop_at_target", stop, "must be True or False")
  if not stop:
    return
  if regression:
    check(config.target_rmse > 0, "stop_at_target", stop,
          "needs a target: set target_rmse > 0 (target_rmse=0 is off)")
  else:
    check(config.target_accuracy > 0, "stop_at_target", stop,
          "needs a target: set target_accuracy in (0, 1] (target_accuracy=0 is "
          "reached before any training)")
  check(config.eval_every < config.rounds, "stop_at_target", stop,
        f"needs an evaluation before the last round to stop at: eval_every="
        f"{config.eval_every} evaluates only after round {config.rounds} of "
        f"rounds={config.rounds}; set eval_every < rounds")


def validate_client(cc, prefix) -> None:
  """Check a ``client`` section ``cc`` found at ``config.<prefix>``."""
  check(cc.optimizer in schedules.OPTIMIZERS, f"{prefix}.optimizer", cc.optimizer,
        f"allowed values are {', '.join(schedules.OPTIMIZERS)}")
  check(is_num(cc.lr) and cc.lr > 0, f"{prefix}.lr", cc.lr, "must be > 0")
  check(is_num(cc.momentum) and 0 <= cc.momentum < 1, f"{prefix}.momentum",
        cc.momentum, "must be in [0, 1)")
  check(is_num(cc.weight_decay) and cc.weight_decay >= 0, f"{prefix}.weight_decay",
        cc.weight_decay, "must be >= 0")
  check(cc.schedule in schedules.SCHEDULES, f"{prefix}.schedule", cc.schedule,
        f"allowed values are {', '.join(schedules.SCHEDULES)}")
  check(is_num(cc.final_lr_fraction) and 0 <= cc.final_lr_fraction <= 1,
        f"{prefix}.final_lr_fraction", cc.final_lr_fraction, "must be in [0, 1]")
  check(is_num(cc.lr_decay) and 0 < cc.lr_decay <= 1, f"{prefix}.lr_decay",
        cc.lr_decay, "must be in (0, 1]")
  check(is_int(cc.batch_size) and cc.batch_size >= 1, f"{prefix}.batch_size",
        cc.batch_size, "must be an integer >= 1")
  check(is_int(cc.local_steps) and cc.local_steps >= 0, f"{prefix}.local_steps",
        cc.local_steps, "must be an integer >= 0 (0 = epoch mode)")
  int32_count(f"{prefix}.local_steps", cc.local_steps, "local steps")
  if cc.local_steps == 0:
    check(is_int(cc.local_epochs) and cc.local_epochs >= 1, f"{prefix}.local_epochs",
          cc.local_epochs, "must be an integer >= 1 (or set local_steps > 0)")
    int32_count(f"{prefix}.local_epochs", cc.local_epochs, "local steps (epochs x "
                "batches per epoch)")


def validate_server(config, sc, prefix, label=None) -> None:
  """Check a ``server`` section; with ``label``, also that the method supports it."""
  spec = config_lib.aggregator_spec_of(sc)
  cohort = cohort_size(config.participation, config.data.num_clients)
  try:
    spec.check(cohort, prefix=f"{prefix}.")
  except ValueError as e:
    raise ConfigError(f"config.{e}") from None
  if label is not None and not spec.is_mean:
    name = config.methods[label].name
    if not algorithms.entry(name).robust_aggregation:
      supported = [n for n, e in algorithms.REGISTRY.items() if e.robust_aggregation]
      fail(f"{prefix}.aggregator", spec.name,
                      f"algorithm {name!r} (method {label!r}) does not combine client "
                      f"updates through server.combine_deltas; robust aggregators work "
                      f"with {', '.join(supported)}")


def validate_methods(config) -> None:
  """Check ``client``, ``server``, ``attack`` and every selected method (its
  name, options and per-method section overrides)."""
  validate_client(config.client, "client")
  validate_server(config, config_lib.config_section(config, "server"), "server")
  engine_checks.validate_attack(config, config_lib.config_section(config, "attack"),
                                "attack")
  check(len(config.methods) > 0, "methods", "{}", "must name at least one method")
  # Every method's name and options, selected by ``only`` or not: a typo in a
  # method not run today is still reported now, not on the day it runs.
  for label in config.methods:
    mc = config.methods[label]
    name = mc.get("name", None) if isinstance(mc, ml_collections.ConfigDict) else None
    if name not in algorithms.names():
      close = difflib.get_close_matches(str(name), algorithms.names(), n=1)
      hint = f"did you mean {close[0]!r}? " if close else ""
      fail(f"methods.{label}.name", name,
           f"{hint}allowed values are {', '.join(algorithms.names())}")
    try:
      algorithms.entry(name).hparams(config_lib.method_options(mc),
                                     prefix=f"methods.{label}.")
    except ConfigError:
      raise
    except ValueError as e:
      raise ConfigError(f"config.{e}") from None
  # The sections, options and participation rules of the methods that run.
  for label in config_lib.method_labels(config):
    mc = config.methods[label]
    name = mc.get("name", None)
    validate_client(config_lib.client_config(config, label), f"methods.{label}.client")
    server_prefix = "server" if "server" not in mc else f"methods.{label}.server"
    validate_server(config, config_lib.server_config(config, label), server_prefix, label)
    attack_prefix = "attack" if "attack" not in mc else f"methods.{label}.attack"
    engine_checks.validate_attack(config, config_lib.attack_config(config, label),
                                  attack_prefix)
    entry = algorithms.entry(name)
    if entry.full_participation:
      check(config.participation == 1, "participation", config.participation,
            f"must be 1 for method {label!r} ({name}: every client takes part "
            f"in every round)")
      check(config.churn.p_leave == 0 and config.churn.p_join == 1, "churn.p_leave",
            config.churn.p_leave, f"must be 0 (with churn.p_join=1) for method "
            f"{label!r} ({name}: every client takes part in every round)")
      system = config.get("system", None)
      if system is not None:
        check(system.policy == "none" or system.deadline == float("inf"),
              "system.policy", system.policy,
              f"must be 'none' (or system.deadline inf) for method {label!r} "
              f"({name}: every client takes part in every round, none may miss "
              f"the deadline)")
