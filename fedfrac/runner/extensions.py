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

import ast
import os
import pickle
import sys
from typing import Optional


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


def _is_main_guard(node) -> bool:
  """Whether ``node`` is ``if __name__ == "__main__":`` (either side)."""
  test = getattr(node, "test", None)
  if not (isinstance(node, ast.If) and isinstance(test, ast.Compare)
          and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
    return False
  sides = [test.left, test.comparators[0]]
  return (any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
          and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides))


def unguarded_main() -> Optional[str]:
  """Why worker processes cannot start from here, or None: this call runs in
  the top-level code of a script (``python script.py``, ``python -m module``)
  outside an ``if __name__ == "__main__":`` block. A spawned worker starts by
  importing that script again, which would run its top-level code, the
  experiment included, in every worker: they and this process would wait on
  each other without end. A notebook, ``python -c`` or a call under the guard
  is fine."""
  main = sys.modules.get("__main__")
  spec_name = getattr(getattr(main, "__spec__", None), "name", None) or ""
  if not _main_is_a_file(main) or spec_name.endswith("__main__"):
    return None   # workers do not import it again (multiprocessing.spawn)
  frame = sys._getframe(1)
  while frame is not None and not (frame.f_globals is vars(main)
                                   and frame.f_code.co_name == "<module>"):
    frame = frame.f_back
  if frame is None:
    return None   # the script's top-level code is not what calls
  path = main.__file__
  try:
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read())
  except (OSError, SyntaxError, ValueError):
    return None
  line = frame.f_lineno
  if any(_is_main_guard(n) and n.body[0].lineno <= line <= (n.body[-1].end_lineno or line)
         for n in tree.body):
    return None
  return (f"{os.path.basename(path)} runs this at its top level (line {line}) without "
          f"an `if __name__ == \"__main__\":` guard, and every worker process would "
          f"import it and run it again; put the script's code under that guard to use "
          f"worker processes")


def unimportable_main() -> Optional[str]:
  """Why a spawned worker cannot start from here, or None: ``__main__`` names a
  file that does not exist (``python -`` reading the script from standard input
  is ``<stdin>``), which every spawned worker imports first and dies on.
  ``python -c`` and notebooks have no ``__file__``: workers do not import them."""
  main = sys.modules.get("__main__")
  path = getattr(main, "__file__", None)
  if not path or getattr(main, "__spec__", None) is not None or os.path.isfile(path):
    return None
  return (f"this script's __main__ is {path!r} (read from standard input, or its file "
          f"is gone), which a spawned worker process imports first and cannot; save "
          f"the script to a file to use worker processes")


def workers_problem(payload=None) -> Optional[str]:
  """Why this process cannot hand work to worker processes, or None: an
  unguarded script (:func:`unguarded_main`), your own algorithms or models that
  cannot be sent (:func:`pack_extensions`), or a ``payload`` (the configs of
  the work, e.g. with an optax server optimizer) that cannot be pickled."""
  problem = unimportable_main() or unguarded_main() or pack_extensions()[1]
  if problem or payload is None:
    return problem
  try:
    pickle.dumps(payload)
  except Exception as e:   # a local function inside a config value
    return (f"the config cannot be sent to worker processes ({type(e).__name__}: "
            f"{e}; e.g. an optax server optimizer given as an object: give it by "
            f"name, server_optimizer='adam(0.01)')")
  return None


def extensions_for_workers():
  """:func:`pack_extensions`'s blob; RuntimeError (one line) when they cannot be
  sent or the main script has no ``__main__`` guard (:func:`unguarded_main`)."""
  guard = unimportable_main() or unguarded_main()
  if guard:
    raise RuntimeError(f"worker processes cannot start: {guard}")
  blob, problem = pack_extensions()
  if problem:
    raise RuntimeError(f"worker processes cannot run: {problem}")
  return blob


def cannot_ship(log=print, payload=None) -> bool:
  """Whether the work cannot go to worker processes (:func:`workers_problem`;
  then ``log`` says why in one line: the sweep runs in this process)."""
  problem = workers_problem(payload)
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
