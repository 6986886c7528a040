"""Checks of the config sections a run reads itself: top-level run fields,
``task``, ``log``, ``client``, ``server`` and ``methods`` (see :mod:`fedfrac.config`):
every key by its declaration in :mod:`fedfrac.runner.schema`, then the rules
that relate several keys.

Each method's algorithm options are checked by the algorithm registry
(``algorithms.hparams``); its ``attack`` section by :mod:`fedfrac.sim.validate`.
"""
from __future__ import annotations

import difflib

import ml_collections

from fedfrac import algorithms
from fedfrac import config_base as config_lib
from fedfrac._validation import ConfigError, check, fail
from fedfrac.runner.schema import CLIENT, LOG, RUN, TASK
from fedfrac.sim import validate as engine_checks
from fedfrac.sim.state import cohort_size


def validate_run(config) -> None:
  """Check the top-level run fields (seeds, rounds, participation, evaluation
  and checkpoint cadence, targets, ``on_divergence``, ``workers``) and the
  ``log`` section by their declarations (:mod:`fedfrac.runner.schema`), then
  the rules that relate several keys."""
  for field in RUN:
    if field.name in config:
      config_lib.check_key(config, field.name)
  workers = config.get("workers", 1)
  if workers != 1:
    check(not config.engine.get("cpu_devices", 0), "workers", workers,
          "runs each (method, seed) in a process of its own on one device; "
          "engine.cpu_devices needs workers=1")
  LOG.check(config.get("log", None), "log", config)


def validate_task(config) -> None:
  """Check ``config.task`` by its declaration (:data:`fedfrac.runner.schema.TASK`),
  the loss that the data's labels allow, and ``stop_at_target`` with its target."""
  TASK.check(config.task, "task", config)
  t = config.task
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
  check_stop_at_target(config, regression)


def check_stop_at_target(config, regression) -> None:
  """``stop_at_target`` True needs a target a run can reach later than its start
  (``target_accuracy`` > 0; regression: ``target_rmse`` > 0) and an evaluation
  before the last round to stop at (``eval_every`` < ``rounds``)."""
  stop = config.get("stop_at_target", False)
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
  """Check a ``client`` section ``cc`` found at ``config.<prefix>`` by its
  declaration (:data:`fedfrac.runner.schema.CLIENT`)."""
  CLIENT.check(cc, prefix)


def validate_server(config, sc, prefix, label=None) -> None:
  """Check a ``server`` section as one :class:`AggregatorSpec` with the cohort
  size; with ``label``, also that the method supports it."""
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


def __getattr__(name):
  """``check_seeds`` and ``MAX_SEED`` moved to :mod:`fedfrac.runner.schema` with the
  ``seeds`` field they check; the old path works for one release."""
  if name in ("check_seeds", "MAX_SEED"):
    import warnings
    from fedfrac.runner import schema
    warnings.warn(f"fedfrac.runner.validate.{name} moved: use "
                  f"fedfrac.runner.schema.{name}", DeprecationWarning, stacklevel=2)
    return getattr(schema, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
