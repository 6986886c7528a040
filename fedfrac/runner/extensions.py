"""Your own algorithms and models for worker processes: what this process
registered (:func:`fedfrac.algorithms.register`, :func:`fedfrac.models.register`),
packed when a worker starts (:func:`pack_extensions`: by value with cloudpickle
when it is installed, so a class or function defined in a notebook travels too;
else by reference, which needs them importable from a module file) and
registered again in the worker (:func:`install_extensions`). Used by the work
queue (:mod:`fedfrac.runner.work_queue`) and the runs of
:mod:`fedfrac.runner.parallel`.
"""
from __future__ import annotations

import os
import pickle
import sys


def user_extensions() -> dict:
  """What this process registered itself: ``{"algorithms": {name: entry},
  "models": {name: adapter}}`` (empty dicts when nothing)."""
  from fedfrac import algorithms, models
  return {"algorithms": algorithms.user_entries(), "models": dict(models.USER_MODELS)}


def _main_is_a_file(main) -> bool:
  """Whether worker processes can import ``__main__`` (a script file; not a
  notebook, an interactive interpreter or ``python -``)."""
  path = getattr(main, "__file__", None)
  return bool(path) and os.path.isfile(path)


def _names(names) -> str:
  return f"{', '.join(repr(n) for n in names)} {'is' if len(names) == 1 else 'are'}"


def pack_extensions() -> tuple:
  """``(blob, problem)``: :func:`user_extensions` pickled for worker processes
  (``blob`` None when there is nothing to send), or why they cannot be sent."""
  ext = user_extensions()
  if not any(ext.values()):
    return None, None
  try:
    import cloudpickle
    return cloudpickle.dumps(ext), None
  except ImportError:
    pass
  except Exception as e:   # an object cloudpickle cannot serialise (a lock, a file...)
    return None, f"{_names([n for p in ext.values() for n in p])} cannot be pickled " \
                 f"({type(e).__name__}: {e})"
  main = sys.modules.get("__main__")
  unpicklable, in_main = [], []
  for part in ext.values():
    for name, obj in part.items():
      try:
        blob = pickle.dumps(obj)
      except Exception:
        unpicklable.append(name)
        continue
      if b"__main__" in blob and not _main_is_a_file(main):
        in_main.append(name)
  if unpicklable:
    return None, (f"{_names(unpicklable)} cannot be pickled by reference; install "
                  f"cloudpickle or define them in a module file")
  if in_main:
    return None, (f"{_names(in_main)} defined in this process's __main__ (a notebook), "
                  f"which worker processes cannot import; install cloudpickle or define "
                  f"them in a module file")
  return pickle.dumps(ext), None


def extensions_for_workers():
  """:func:`pack_extensions`'s blob; RuntimeError (one line) when they cannot be sent."""
  blob, problem = pack_extensions()
  if problem:
    raise RuntimeError(f"worker processes cannot run: {problem}")
  return blob


def cannot_ship(log=print) -> bool:
  """Whether your own algorithms or models cannot be sent to worker processes
  (then ``log`` says so in one line: the sweep runs in this process)."""
  problem = pack_extensions()[1]
  if problem:
    log(f"running in this process: {problem}")
  return bool(problem)


def install_extensions(blob) -> None:
  """In a worker process: register what :func:`pack_extensions` packed."""
  if blob is None:
    return
  from fedfrac import algorithms, models
  ext = pickle.loads(blob)
  for name, entry in ext["algorithms"].items():
    algorithms.register(entry, name=name, replace=True)
  for name, adapter in ext["models"].items():
    models.register(name, adapter)
