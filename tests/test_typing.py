"""Every public function of the typed packages (``fedfrac.ops``, ``fedfrac.optim``,
``fedfrac.data`` and the algorithm contract) annotates all its parameters and its
return type, so ``mypy`` (``[tool.mypy]`` in pyproject.toml) checks their callers."""
from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterator

TYPED_PACKAGES = ("fedfrac.ops", "fedfrac.optim", "fedfrac.data")
TYPED_MODULES = ("fedfrac.algorithms.contract",)


def _module_names() -> list[str]:
  names = list(TYPED_MODULES)
  for package_name in TYPED_PACKAGES:
    package = importlib.import_module(package_name)
    names.append(package_name)
    names += [m.name for m in pkgutil.iter_modules(package.__path__, package_name + ".")]
  return names


def _as_function(obj: object) -> Callable | None:
  """The plain function behind ``obj`` (unwrapping decorators, static and class
  methods and property getters), or None when ``obj`` is not one."""
  if isinstance(obj, (staticmethod, classmethod)):
    obj = obj.__func__
  elif isinstance(obj, property):
    obj = obj.fget
  if callable(obj):
    obj = inspect.unwrap(obj)
  return obj if inspect.isfunction(obj) else None


def _public_functions(module) -> Iterator[tuple[str, Callable, bool]]:
  """(qualified name, function, takes self/cls) for the module-level functions
  and the methods of the classes defined in ``module`` whose names do not start
  with an underscore."""
  for name, obj in vars(module).items():
    if name.startswith("_"):
      continue
    if inspect.isclass(obj):
      if obj.__module__ != module.__name__:
        continue
      for attr, member in vars(obj).items():
        fn = None if attr.startswith("_") else _as_function(member)
        if fn is not None:
          yield f"{module.__name__}.{name}.{attr}", fn, not isinstance(member, staticmethod)
    elif (fn := _as_function(obj)) is not None and fn.__module__ == module.__name__:
      yield f"{module.__name__}.{name}", fn, False


def _missing_annotations(fn: Callable, bound: bool) -> list[str]:
  sig = inspect.signature(fn)
  params = list(sig.parameters.values())[1 if bound else 0:]
  missing = [p.name for p in params if p.annotation is inspect.Parameter.empty]
  if sig.return_annotation is inspect.Signature.empty:
    missing.append("return")
  return missing


def test_scanner_sees_the_typed_packages():
  """The walk reaches module functions, methods and properties (so an empty
  result below means annotated, not unseen)."""
  found = {name for m in _module_names()
           for name, _, _ in _public_functions(importlib.import_module(m))}
  for name in ("fedfrac.ops.aggregate.weighted_mean", "fedfrac.ops.dp.PrivacyAccountant.step",
               "fedfrac.optim.fractional.fractional", "fedfrac.data.partition_schemes.dirichlet",
               "fedfrac.data.dataset.Dataset.input_shape",
               "fedfrac.algorithms.contract.AlgorithmEntry.make"):
    assert name in found, name


def test_public_functions_are_fully_annotated():
  missing = [f"{name}: {', '.join(gaps)}"
             for m in _module_names()
             for name, fn, bound in _public_functions(importlib.import_module(m))
             if (gaps := _missing_annotations(fn, bound))]
  assert not missing, ("public functions with unannotated parameters or return "
                       f"({len(missing)}):\n" + "\n".join(missing))
