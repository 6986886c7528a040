"""One module per algorithm; ``make`` builds a FedAlgorithm from a name and options.

``REGISTRY`` maps a public name to ``(module, preset)``: the module under
``fedfrac.algorithms`` defines ``HPARAMS`` (name -> HParam) and
``build(ctx, hp) -> FedAlgorithm``; ``preset`` overrides defaults, so named
reductions (e.g. RI-FedAvg = FO-RI-FedAvg with α = 1) share one module.
"""
from __future__ import annotations

import importlib

from fedfrac.algorithms.base import (BuildContext, ClientView, FedAlgorithm, HParam,
                                     LocalTraining, local_train, resolve_hparams)

REGISTRY = {
    "fedavg": ("fedavg", {}),
    "fedavgm": ("fedavgm", {}),
    "fedprox": ("fedprox", {}),
    "scaffold": ("scaffold", {}),
    "fednova": ("fednova", {}),
    "fedadam": ("fedopt", {"server_opt": "adam"}),
    "fedyogi": ("fedopt", {"server_opt": "yogi"}),
    "fedadagrad": ("fedopt", {"server_opt": "adagrad", "server_lr": 0.1}),
    "moon": ("moon", {}),
    "feddyn": ("feddyn", {}),
    "kuramoto_fedavg": ("kuramoto_fedavg", {}),
    "dp_fedavg": ("dp_fedavg", {}),
    "fofedavg": ("fofedavg", {}),
    "fo_ri_fedavg": ("fo_ri_fedavg", {}),
    "ri_fedavg": ("fo_ri_fedavg", {"alpha": 1.0}),
    "fo_fedavg": ("fo_ri_fedavg", {"lam": 0.0}),
    "fedrep": ("fedrep", {}),
    "rdfl": ("rdfl", {}),
    "fibfl": ("fibfl", {"gate": "none"}),
    "fibfl_plus": ("fibfl", {"gate": "accuracy"}),
    "fibfl_pp": ("fibfl_pp", {}),
}

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


def supports_robust_aggregation(name) -> bool:
  """Whether algorithm ``name`` combines updates via ``server.combine_deltas``
  (its module sets ``ROBUST_AGGREGATION = True``), so ``config.server`` applies."""
  mod, _ = _entry(name)
  return bool(getattr(mod, "ROBUST_AGGREGATION", False))


def _entry(name):
  if name not in REGISTRY:
    raise ValueError(f"algorithm name={name!r}: allowed values are {', '.join(REGISTRY)}")
  mod_name, preset = REGISTRY[name]
  return importlib.import_module(f"fedfrac.algorithms.{mod_name}"), dict(preset)


def hparams(name, given=None, prefix=""):
  """Resolved, validated hyper-parameters of algorithm ``name``."""
  mod, preset = _entry(name)
  preset.update(dict(given or {}))
  return resolve_hparams(name, mod.HPARAMS, preset, prefix)


def make(name, ctx: BuildContext, **given) -> FedAlgorithm:
  """Build algorithm ``name`` with options ``given`` (preset and defaults fill the rest)."""
  mod, _ = _entry(name)
  algorithm = mod.build(ctx, hparams(name, given))
  return algorithm._replace(name=name)
