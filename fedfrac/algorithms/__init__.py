"""One module per algorithm; the registry maps a public name to its entry.

Every algorithm module lists its :class:`AlgorithmEntry` values in ``ENTRIES``
(name, ``build(ctx, hp) -> FedAlgorithm``, the :class:`HParamSchema` of its
options, and its capabilities); one module may register several names that
differ only in defaults (RI-FedAvg = FO-RI-FedAvg with α = 1). ``make`` builds an
algorithm from a name and options; ``entry(name)`` is the registry's one way in.

Your own algorithm joins the registry with :func:`register` (or
``ff.run(config, algorithms={name: entry})``): an :class:`AlgorithmEntry`, or
just a ``build(ctx, hp) -> FedAlgorithm`` function (no options). Its name then
works as ``config.methods.<label>.name`` everywhere a built-in name does; before
anything compiles, its functions are traced once on abstract arrays
(:func:`check_algorithm`, here as in :mod:`fedfrac.algorithms.check`), so a
mistake in what they return is named in one line (:class:`ContractError`, a
:class:`fedfrac.config.ConfigError`). Runs spread over worker processes
(``config.workers``) receive the registered entries
(:mod:`fedfrac.runner.parallel`).
"""
from __future__ import annotations

from fedfrac.algorithms.contract import (AlgorithmEntry, BuildContext, FedAlgorithm,
                                         ServerUpdate)
from fedfrac.algorithms.client_view import ClientView
from fedfrac.algorithms.check import ContractError, check_algorithm
from fedfrac.algorithms.local_training import LocalTraining, local_train
from fedfrac.algorithms.schema import HParam, HParamSchema
from fedfrac.algorithms.asynchronous import AsyncEntry, AsyncServer
from fedfrac.algorithms import fedasync, fedbuff
from fedfrac.algorithms import (dp_fedavg, dp_sgd, fdse, fedavg, fedavgm, fedbm, feddyn,
                                fedel, fednova, fedopt, fedprox, fedrep, fibfl, fibfl_pp,
                                fo_ri_fedavg, fofedavg, kuramoto_fedavg, moon, rdfl,
                                scaffold, sparse_secagg)

# Registration order is the order of names(), --list and the quickstart table.
_MODULES = (fedavg, fedavgm, fedprox, scaffold, fednova, fedopt, moon, feddyn,
            kuramoto_fedavg, dp_fedavg, dp_sgd, sparse_secagg, fdse, fedbm, fedel,
            fofedavg, fo_ri_fedavg, fedrep, rdfl, fibfl, fibfl_pp)


def _register(modules) -> dict:
  registry = {}
  for module in modules:
    for e in module.ENTRIES:
      if e.name in registry:
        raise ValueError(f"algorithm {e.name!r} is registered twice")
      registry[e.name] = e
  return registry


REGISTRY: dict = _register(_MODULES)   # name -> AlgorithmEntry
BUILTIN = frozenset(REGISTRY)          # the names fedfrac itself registers
_BUILTIN_ENTRIES = dict(REGISTRY)

# Options each algorithm runs with in configs/quickstart.py (digits, 10 clients);
# a "client" entry overrides the shared client optimizer settings.
_INV_SQRT = {"client": {"schedule": "inv_sqrt"}}   # μ_t, η_t = lr/sqrt(t+1)
_SMALL_PROBE = {"num_directions": 4, "grid": 16, "probe_batch": 32}
# FIRMA-family entries use 1 head + 1 extractor epoch so the quickstart stays fast;
# the paper's setting (E_h = 1, E_e = 20, ...) is configs/firma/digits.py.
_FIRMA_QUICK = {"head_epochs": 1, "extractor_epochs": 1,
                "client": {"optimizer": "adam", "lr": 0.01}}
QUICKSTART = {
    "fedavg": {},
    "fedavgm": {},
    "fedprox": {},
    "scaffold": {},
    "fednova": {},
    "fedadam": {},
    "fedyogi": {},
    "fedadagrad": {},
    "moon": {},
    "feddyn": {},
    "kuramoto_fedavg": {"weighting": "coupled", "kappa0": 0.3, "beta": 0.01},
    "dp_fedavg": {"noise_multiplier": 0.1, "clip_norm": 1.0},
    "dp_sgd": {"noise_multiplier": 0.5, "clip_norm": 1.0},
    "sparse_secagg": {"fraction": 0.25},
    "fofedavg": dict(_INV_SQRT),
    "fo_ri_fedavg": {**_SMALL_PROBE, **_INV_SQRT},
    "ri_fedavg": {**_SMALL_PROBE, **_INV_SQRT},
    "fo_fedavg": dict(_INV_SQRT),
    "fedrep": {"head_epochs": 1, "extractor_epochs": 1},
    "rdfl": {},
    "fibfl": dict(_FIRMA_QUICK),
    "fibfl_plus": dict(_FIRMA_QUICK),
    "fibfl_pp": dict(_FIRMA_QUICK),
}


def quickstart_methods():
  """label -> options for the quickstart comparison (every registered algorithm)."""
  return {name: dict(QUICKSTART.get(name, {})) for name in REGISTRY}


def names():
  return tuple(REGISTRY)


def _as_entry(entry, name=None) -> AlgorithmEntry:
  """``entry`` as an :class:`AlgorithmEntry` named ``name`` (default its own);
  a plain ``build(ctx, hp)`` function becomes an entry without options."""
  if isinstance(entry, AlgorithmEntry):
    if name is not None and entry.name != name:
      import dataclasses
      entry = dataclasses.replace(entry, name=name)
    return entry
  if callable(entry):
    label = name or getattr(entry, "__name__", "")
    return AlgorithmEntry(label, entry, HParamSchema({}),
                          summary=f"{label}: user algorithm ({_where(entry)})")
  raise TypeError(f"algorithm {name or entry!r}: expected an AlgorithmEntry or a "
                  f"build(ctx, hp) -> FedAlgorithm function, got "
                  f"{type(entry).__name__}")


def _where(fn) -> str:
  module = getattr(fn, "__module__", None) or "?"
  return f"{module}.{getattr(fn, '__qualname__', getattr(fn, '__name__', '?'))}"


def register(entry, *, name=None, replace=False) -> AlgorithmEntry:
  """Add your own algorithm to the registry; returns its entry.

  Args:
    entry: an :class:`AlgorithmEntry` (name, ``build(ctx, hp) -> FedAlgorithm``,
      :class:`HParamSchema` of its options, capabilities), or a ``build(ctx, hp)``
      function (registered under ``name`` or its ``__name__``, with no options).
    name: register under this name instead of the entry's own.
    replace: allow replacing a built-in algorithm of the same name. A name you
      registered before is always replaced (re-running a notebook cell).
  Raises:
    ValueError: the name is empty or not an identifier, or a built-in name
      without ``replace``; TypeError: ``entry`` is neither of the above.
  """
  e = _as_entry(entry, name)
  if not (isinstance(e.name, str) and e.name.isidentifier()):
    raise ValueError(f"algorithm name={e.name!r}: must be a Python identifier "
                     f"(letters, digits, underscores), e.g. 'my_fedavg'")
  if not callable(e.build):
    raise TypeError(f"algorithm {e.name!r}: build={e.build!r} is not callable; "
                    f"expected build(ctx, hp) -> FedAlgorithm")
  _check_build_arguments(e)
  if not isinstance(e.schema, HParamSchema):
    raise TypeError(f"algorithm {e.name!r}: schema is a {type(e.schema).__name__}; "
                    f"expected an HParamSchema (HParamSchema({{}}) for no options)")
  if e.name in BUILTIN and not replace and REGISTRY.get(e.name) is not e:
    raise ValueError(f"algorithm name={e.name!r} is a built-in algorithm; choose "
                     f"another name, or pass replace=True to replace it")
  REGISTRY[e.name] = e
  return e


def _check_build_arguments(e: AlgorithmEntry) -> None:
  """TypeError naming the algorithm when ``e.build`` cannot be called as
  ``build(ctx, hp)`` (e.g. ``def build(ctx)``); a callable whose signature
  Python cannot read is let through."""
  import inspect
  try:
    signature = inspect.signature(e.build)
  except (TypeError, ValueError):
    return
  try:
    signature.bind(None, None)
  except TypeError:
    raise TypeError(f"algorithm {e.name!r}: build(ctx, hp) takes (ctx, hp), the build "
                    f"context and a dict of its options; got "
                    f"{getattr(e.build, '__name__', 'build')}{signature}") from None


def unregister(name) -> None:
  """Remove an algorithm you registered (a replaced built-in comes back)."""
  if name in BUILTIN:
    REGISTRY[name] = _BUILTIN_ENTRIES[name]
  else:
    REGISTRY.pop(name, None)


def user_entries() -> dict:
  """``{name: entry}`` of the algorithms registered with :func:`register`
  (replaced built-ins included), in registration order."""
  return {n: e for n, e in REGISTRY.items() if _BUILTIN_ENTRIES.get(n) is not e}


def is_builtin(name) -> bool:
  """Whether ``name`` is fedfrac's own algorithm (not registered or replaced by you)."""
  return name in _BUILTIN_ENTRIES and REGISTRY.get(name) is _BUILTIN_ENTRIES[name]


def entry(name) -> AlgorithmEntry:
  """The registry entry of algorithm ``name``; a one-line error for an unknown name."""
  if name not in REGISTRY:
    import difflib
    close = difflib.get_close_matches(str(name), list(REGISTRY), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ValueError(f"algorithm name={name!r}: {hint}allowed values are "
                     f"{', '.join(REGISTRY)}")
  return REGISTRY[name]


def supports_robust_aggregation(name) -> bool:
  """Whether algorithm ``name`` combines updates via ``server.combine_deltas``, so
  ``config.server`` applies (its entry's ``robust_aggregation``)."""
  return entry(name).robust_aggregation


def hparams(name, given=None, prefix=""):
  """Resolved, validated hyper-parameters of algorithm ``name``."""
  return entry(name).hparams(given, prefix)


def make(name, ctx: BuildContext, **given) -> FedAlgorithm:
  """Build algorithm ``name`` with options ``given`` (its defaults fill the rest)."""
  return entry(name).make(ctx, **given)


# Asynchronous servers (config.clock.server; fedfrac.sim.asynchronous runs them).
ASYNC_SERVERS = {e.name: e for e in (fedbuff.ENTRY, fedasync.ENTRY)}


def async_server(server: str, options=None, method=None) -> AsyncServer:
  """The :class:`AsyncServer` ``server`` with ``options``; with ``method`` (a
  client algorithm's name), refused in one line unless that algorithm's entry
  says its client update runs asynchronously."""
  if server not in ASYNC_SERVERS:
    raise ValueError(f"clock.server={server!r}: allowed values are sync, "
                     f"{', '.join(ASYNC_SERVERS)}")
  if method is not None and not entry(method).asynchronous:
    able = ", ".join(n for n, e in REGISTRY.items() if e.asynchronous)
    raise ValueError(f"clock.server={server!r}: method name={method!r} cannot run "
                     f"asynchronously (its server keeps state built from the whole "
                     f"cohort, or it does not send model deltas); methods that can: "
                     f"{able}")
  return ASYNC_SERVERS[server].make(options)
