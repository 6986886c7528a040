"""Checks of the engine's config sections: ``engine``, ``churn``, ``system``,
``clock`` and ``attack``
(see :mod:`fedfrac.config`). The rules the engine itself enforces on an
:class:`EngineConfig` are the same functions, called here on the config."""
from __future__ import annotations

from fedfrac._validation import ConfigError, check, is_num
from fedfrac.ops import system as system_lib
from fedfrac.sim import attacks, client_rows, placement
from fedfrac.sim.schema import ATTACK, CHURN, CLOCK, ENGINE


def _engine_rule(rule, value, prefix=""):
  """Run an engine rule; its ValueError becomes a :class:`ConfigError`."""
  try:
    rule(value)
  except ValueError as e:
    raise ConfigError(f"config.{prefix}{e}") from None


def validate_engine(config) -> None:
  """Check ``config.engine``, ``config.churn`` and ``config.system`` (the ``attack`` sections are
  checked per method by :func:`validate_attack`): every key by its declaration
  (:mod:`fedfrac.sim.schema`), then the rules that relate several keys
  (``shard_client_state`` True needs ``shard_clients`` True or ``'auto'``;
  ``device_invariant`` not with ``shard_client_state``;
  per-class churn needs a source with client groups)."""
  from fedfrac.data import sources
  from fedfrac.data.validate import BEV_CLASSES
  ENGINE.check(config.engine, "engine", config)
  e = config.engine
  _engine_rule(lambda v: client_rows.check_shard_client_state(
      v, e.get("shard_clients", False)), e.get("shard_client_state", False))
  _engine_rule(lambda v: placement.check_device_invariant(
      v, e.get("shard_client_state", False)), e.get("device_invariant", False))
  CHURN.check(config.churn, "churn", config)
  ch = config.churn
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
  validate_clock(config)


def validate_clock(config) -> None:
  """Check ``config.clock``: the distributions, the server and its options
  (:mod:`fedfrac.algorithms.fedbuff`, :mod:`fedfrac.algorithms.fedasync`), that
  every method's client update can run under an asynchronous server, and the
  trace (against ``data.num_clients``)."""
  from fedfrac import config_base
  if config.get("clock", None) is None:
    return
  CLOCK.check(config.clock, "clock", config)
  running = set(config_base.method_labels(config))
  for label in config.methods.keys():   # a method's clock overrides apply to it
    cc = config_base.section_config(config, label, "clock")
    if config.methods[label].get("clock", None) is not None:
      CLOCK.check(cc, f"methods.{label}.clock", config)
    if label in running:   # whether its update can run asynchronously: if it runs
      _validate_clock_section(config, cc, label)
  _check_options_are_read(config)


def _check_options_are_read(config) -> None:
  """``clock.options`` only an asynchronous server reads: options no method
  reads (a sweep axis over them would change nothing) are one line. A method's
  own ``clock.options`` replace the shared ones whole."""
  from fedfrac import config_base
  from fedfrac.sim.clock import ASYNCHRONOUS_SERVERS as asynchronous
  shared_read = False
  for label in config.methods.keys():
    own = (config.methods[label].get("clock", None) or {}).get("options", None)
    server = config_base.section_config(config, label, "clock").get("server", "none")
    if own and server not in asynchronous:
      first = sorted(own)[0]
      raise ConfigError(f"config.methods.{label}.clock.options.{first}={own[first]!r}: "
                        f"only an asynchronous server (fedbuff, fedasync) reads "
                        f"clock.options, and method {label!r} runs with "
                        f"clock.server={server!r}")
    shared_read |= own is None and server in asynchronous
  shared = dict(config.clock.get("options", {}) or {})
  if shared and not shared_read:
    first = sorted(shared)[0]
    raise ConfigError(f"config.clock.options.{first}={shared[first]!r}: no method reads "
                      f"it: only an asynchronous server (fedbuff, fedasync) reads "
                      f"clock.options, and each method runs with server none or sync or "
                      f"has its own methods.<label>.clock.options (they replace the "
                      f"shared ones whole; address those)")


def _validate_clock_section(config, cc, label) -> None:
  from fedfrac import algorithms
  from fedfrac.sim import clock as clock_lib
  server = cc.get("server", "none")   # its allowed values: fedfrac.sim.schema.CLOCK
  if server == "none":
    return
  method = config.methods[label].name
  try:
    clock_lib.check_clock(CLOCK.build(clock_lib.ClockConfig, cc, elsewhere=("trace",),
                                      server=server))
    if server != "sync":
      algorithms.async_server(server, dict(cc.get("options", {}) or {}), method)
    if cc.get("trace", ""):
      clock_lib.read_trace(cc.trace, int(config.data.num_clients))
  except ValueError as e:
    raise ConfigError(f"config.{e}") from None


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
  """Check an ``attack`` section ``ac`` found at ``config.<prefix>``: its kind
  with the task (label flipping needs class labels), its other keys by their
  declarations (:data:`fedfrac.sim.schema.ATTACK`)."""
  classification = config.task.loss == "cross_entropy"
  try:
    attacks.check_kind(ac.kind, classification)
  except ValueError as e:
    # The engine names the key "attack.kind"; here it sits at <prefix>.kind.
    raise ConfigError(f"config.{prefix}{str(e)[len('attack'):]}") from None
  ATTACK.check(ac, prefix, config)
