"""What a caller of :func:`fedfrac.run` / :func:`fedfrac.run_many` brings besides
the config: ``algorithms={name: entry}``, ``model=`` (a flax module) and
``data=`` (arrays or a federated dataset).

:func:`prepare` registers the algorithms (:func:`fedfrac.algorithms.register`)
and the model (:func:`fedfrac.models.register`), checks every key of the config
as the command line does (:func:`fedfrac.config_keys.check_keys`: a config built
in Python with ``c.client.learning_rate = 0.5`` is refused with "did you mean
'lr'?" instead of running with the default), checks the data
(:func:`fedfrac.data.arrays.user_data`) and returns the config the run uses
(a copy naming the model), the checked data and what a workdir's fingerprint
records of them (the data's digest, the module's repr), all before any compute.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional

from fedfrac import algorithms as algorithms_lib
from fedfrac import config_keys
from fedfrac import models as models_lib
from fedfrac.data import arrays as arrays_lib
from fedfrac.data import federated as federated_lib


class UserInputs(NamedTuple):
  """``config``: the config to run (the caller's, or a copy naming ``model``);
  ``data``: None (``config.data`` builds the data), a Dataset to partition
  per seed, or a FederatedData used as it is; ``fingerprint``: extra entries
  for a workdir's fingerprint."""
  config: Any
  data: Any
  fingerprint: dict


def model_name(module) -> str:
  """The ``model.name`` a flax module given as ``model=`` runs under: its class name
  (``own_<name>`` when that is a built-in model's name)."""
  adapter = module if isinstance(module, models_lib.FlaxAdapter) else None
  inner = adapter.module if adapter is not None else module
  name = type(inner).__name__
  return f"own_{name}" if name in models_lib.MODELS else name


def prepare(config, data=None, algorithms: Optional[dict] = None, model=None,
            digest: bool = False) -> UserInputs:
  """Register ``algorithms`` and ``model``, check ``data`` (see the module
  docstring); ``digest``: record the data's SHA-256 for a workdir."""
  if algorithms is not None:
    if not isinstance(algorithms, dict):
      raise TypeError(f"algorithms={algorithms!r}: expected a dict {{name: entry}}")
    for name, entry in algorithms.items():
      algorithms_lib.register(entry, name=name)
  config_keys.check_keys(config)   # after registering: their options are known
  extra = {}
  if model is not None:
    name = model_name(model)
    adapter = models_lib.register(name, model)
    config = config.copy_and_resolve_references()
    config.model.name = name
    extra["model.module"] = f"{adapter.module!r} head={adapter.head!r}"
  checked = None
  if data is not None:
    checked = arrays_lib.user_data(
        data, regression=config.task.loss != "cross_entropy",
        test_fraction=float(config.data.get("test_fraction", 0.2)),
        split_seed=int(config.data.get("split_seed", 0)))
    federated_lib.check_test_groups(config.data, checked)
    extra["data.source"] = "data= (arrays given to the run)"
    if digest:
      extra["data.arrays"] = arrays_lib.digest(checked)
  return UserInputs(config, checked, extra)
