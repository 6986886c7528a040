"""fedfrac: vectorised federated-learning simulation in JAX.

    import fedfrac as ff
    results = ff.run(config)          # config from fedfrac.config.base_config()

Your own arrays, flax module and algorithm (the guide's "Your own method, data and
model", docs/api/guide/own_method.md):

    results = ff.run(config, data=(x, y), model=module, algorithms={"mine": build})
    params = results.final_params("mine_label")
"""
from fedfrac._version import __version__  # noqa: F401
from fedfrac.startup import interrupt_exits

with interrupt_exits("fedfrac was starting (importing JAX and fedfrac)"):
  from fedfrac import algorithms, data, metrics, models, ops, optim, runner, sim
  from fedfrac.algorithms.contract import FedAlgorithm
  from fedfrac.algorithms.client_view import ClientView
  from fedfrac._validation import ConfigError
  from fedfrac.config_base import base_config
  from fedfrac.runner import Results, run, run_many
  from fedfrac.sim import BatchedSimulation, EngineConfig, Simulation
del interrupt_exits



def __getattr__(name):
  # ``ff.engine`` was a second name of the engine package ``ff.sim``: one release
  # of warning, then it goes.
  if name == "engine":
    import warnings
    warnings.warn("ff.engine is deprecated and will be removed: use ff.sim (the same package)",
                  DeprecationWarning, stacklevel=2)
    return sim
  # The sweep runner, for notebooks (ff.sweep.run): imported when first asked for,
  # since it loads matplotlib (about half a second).
  if name == "sweep":
    import importlib
    return importlib.import_module("fedfrac.sweep")
  if name in ("reproduce", "bench", "campaign"):
    raise AttributeError(
        f"fedfrac.{name} moved to the lab above the library: "
        f"import fedfrac_lab.{name} (in a clone of the repository)")
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
