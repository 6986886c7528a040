"""Which objects the reference renders: the packages documented in full, the
data modules, the run API and the algorithm contract, and the reST pages that
list a module's public functions and classes for autodoc."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

from apidoc.rest import title

# Packages whose every public function and class the reference documents.
FULL_PACKAGES = ("fedfrac.ops", "fedfrac.optim")
DATA_MODULES = ("fedfrac.data.dataset", "fedfrac.data.sources", "fedfrac.data.partition",
                "fedfrac.data.files", "fedfrac.data.federated", "fedfrac.data.federated_data",
                "fedfrac.data.arrays")
# The run API: (module, names); the classes with their members.
RUN_API = (("fedfrac.runner.loop", ("run",)),
           ("fedfrac.runner.many", ("run_many",)),
           ("fedfrac.runner.records", ("Results", "RunRecord", "summarize")),
           ("fedfrac.runner.overview", ("ResultFigures", "results_figures", "rounds_figure",
                                        "ranking_figure", "save_sweep_figures")),
           ("fedfrac.runner.finals", ("Final", "ranked", "summary_finals")),
           ("fedfrac.runner.summary_table", ("format_table",)),
           ("fedfrac.sweep.run", ("run_sweep", "run")),
           ("fedfrac.models.adapter", ("flax_model", "FlaxAdapter")))
CONTRACT_API = (("fedfrac.algorithms.contract", ("FedAlgorithm", "BuildContext",
                                                 "AlgorithmEntry")),
                ("fedfrac.algorithms.client_view", ("ClientView", "step_budget")),
                ("fedfrac.algorithms", ("entry", "make", "hparams", "names", "register",
                                        "unregister")),
                ("fedfrac.algorithms.check", ("check_algorithm", "ContractError")),
                ("fedfrac.algorithms.server_optimizer", ("from_text", "aggregate_with",
                                                         "describe")),
                ("fedfrac.algorithms.schema", ("HParam", "HParamSchema")),
                ("fedfrac.algorithms.families", ("Family", "family")))


def public_objects(module_name: str) -> list:
  """``[(name, "function" | "class")]`` defined in ``module_name`` (not imported
  into it), without a leading underscore, in source order."""
  module = importlib.import_module(module_name)
  out = []
  for name, obj in vars(module).items():
    if name.startswith("_") or getattr(obj, "__module__", None) != module_name:
      continue
    if inspect.isclass(obj):
      out.append((name, "class"))
    elif inspect.isfunction(obj):
      out.append((name, "function"))
  return out


def package_modules(package: str) -> list:
  """The modules of ``package`` (not its ``__init__``), sorted."""
  pkg = importlib.import_module(package)
  return [f"{package}.{m.name}" for m in sorted(pkgutil.iter_modules(pkg.__path__),
                                                key=lambda m: m.name)]


def object_directives(module_name: str, names=None, members: bool = True) -> list:
  objects = public_objects(module_name)
  kinds = dict(objects)
  chosen = [n for n, _ in objects] if names is None else list(names)
  lines = []
  for name in chosen:
    kind = kinds.get(name, "class" if inspect.isclass(
        getattr(importlib.import_module(module_name), name)) else "function")
    lines.append(f".. auto{kind}:: {module_name}.{name}")
    if kind == "class" and members:
      lines.append("   :members:")
    lines.append("")
  return lines


def module_section(module_name: str, names=None, heading: str = "-") -> list:
  """A module's docstring and its public functions and classes (or ``names``)."""
  return (title(f"``{module_name}``", heading) + [f".. automodule:: {module_name}", ""]
          + object_directives(module_name, names))


def modules_page(heading: str, intro: str, modules, names=None) -> str:
  lines = title(heading) + [intro, ""]
  for module_name in modules:
    lines += module_section(module_name, None if names is None else names.get(module_name))
  return "\n".join(lines)
