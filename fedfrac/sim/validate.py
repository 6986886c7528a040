"""Checks of the engine's config sections: ``engine``, ``churn``, ``system`` and ``attack``
(see :mod:`fedfrac.config`). The rules the engine itself enforces on an
:class:`EngineConfig` are the same functions, called here on the config."""
from __future__ import annotations

from fedfrac._validation import ConfigError, check, int_at_least, is_int, is_num
from fedfrac.ops import system as system_lib
from fedfrac.sim import attacks, churn, client_rows, devices, execution, placement, precision


def _engine_rule(rule, value, prefix=""):
  """Run an engine rule; its ValueError becomes a :class:`ConfigError`."""
  try:
    rule(value)
  except ValueError as e:
    raise ConfigError(f"config.{prefix}{e}") from None


def validate_engine(config) -> None:
  """Check ``config.engine``, ``config.churn`` and ``config.system`` (the ``attack`` sections are
  checked per method by :func:`validate_attack`).

  Engine keys: ``client_parallelism``, ``unroll``, ``dynamic_steps``,
  ``shard_clients``, ``shard_client_state`` (True needs ``shard_clients`` True or
  ``'auto'``), ``device_invariant`` (not with ``shard_client_state``),
  ``step_buckets``, ``cpu_devices``, ``eval_batch_size``,
  ``matmul_precision``."""
  from fedfrac.data import sources
  from fedfrac.data.validate import BEV_CLASSES
  e = config.engine
  _engine_rule(execution.check_parallelism, e.client_parallelism)
  int_at_least(config, "engine.unroll", 0)
  check(isinstance(e.get("dynamic_steps", False), bool), "engine.dynamic_steps",
        e.get("dynamic_steps", False), "must be True or False")
  _engine_rule(devices.check_shard_clients, e.get("shard_clients", False))
  _engine_rule(lambda v: client_rows.check_shard_client_state(
      v, e.get("shard_clients", False)), e.get("shard_client_state", False))
  _engine_rule(lambda v: placement.check_device_invariant(
      v, e.get("shard_client_state", False)), e.get("device_invariant", False))
  if "step_buckets" in e:
    _engine_rule(execution.check_step_buckets, e.step_buckets)
  if "cpu_devices" in e:
    int_at_least(config, "engine.cpu_devices", 0)
  int_at_least(config, "engine.eval_batch_size", 1)
  _engine_rule(precision.check_matmul_precision, e.get("matmul_precision", "highest"))
  ch = config.churn
  check(is_num(ch.p_leave) and 0 <= ch.p_leave <= 1, "churn.p_leave", ch.p_leave,
        "must be in [0, 1]")
  check(is_num(ch.p_join) and 0 <= ch.p_join <= 1, "churn.p_join", ch.p_join,
        "must be in [0, 1]")
  _engine_rule(churn.check_cohort_rule, ch.get("cohort_rule", "available"))
  bev_source = config.data.source in sources.BEV_SOURCES
  for cls, rates in ch.get("per_class", {}).items():
    check(bev_source, f"churn.per_class.{cls}", rates,
          f"per-class churn needs a source with client groups "
          f"({', '.join(sources.BEV_SOURCES)}); data.source={config.data.source!r}")
    check(cls in BEV_CLASSES, f"churn.per_class.{cls}", rates,
          f"unknown vehicle class {cls!r}; allowed: {', '.join(BEV_CLASSES)}")
    check(isinstance(rates, (tuple, list)) and len(rates) == 2
          and all(is_num(r) and 0 <= r <= 1 for r in rates),
          f"churn.per_class.{cls}", rates, "must be (p_leave, p_join), each in [0, 1]")
  validate_system(config)


def validate_system(config) -> None:
  """Check ``config.system`` (client speeds, deadline, policy) with
  :func:`fedfrac.ops.system.validate_system`."""
  if config.get("system", None) is None:
    return
  try:
    system_lib.validate_system(config.system.to_dict())
  except ValueError as e:
    raise ConfigError(str(e)) from None


def validate_attack(config, ac, prefix) -> None:
  """Check an ``attack`` section ``ac`` found at ``config.<prefix>``."""
  classification = config.task.loss == "cross_entropy"
  try:
    attacks.check_kind(ac.kind, classification)
  except ValueError as e:
    # The engine names the key "attack.kind"; here it sits at <prefix>.kind.
    raise ConfigError(f"config.{prefix}{str(e)[len('attack'):]}") from None
  check(is_num(ac.fraction) and 0 <= ac.fraction <= 1, f"{prefix}.fraction",
        ac.fraction, "must be in [0, 1]")
  check(is_num(ac.scale), f"{prefix}.scale", ac.scale, "must be a finite number")
  check(is_num(ac.std) and ac.std >= 0, f"{prefix}.std", ac.std, "must be >= 0")
  check(is_int(ac.seed) and ac.seed >= -1, f"{prefix}.seed", ac.seed,
        "must be an integer >= 0, or -1 for the run's seed")
