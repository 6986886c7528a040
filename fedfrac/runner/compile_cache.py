"""JAX's persistent compilation cache for fedfrac's command lines.

``fedfrac-run`` (``python -m fedfrac.main``), ``fedfrac-sweep`` and
``fedfrac-reproduce`` call :func:`enable` before they compile anything, so a
second run of the same programs (``make run`` again, a resumed reproduction, the
next sweep over the same methods) loads each compiled program from disk instead
of compiling it (``fedfrac-bench`` and the GPU campaign's worker do not: they
time compilation). Where the cache lives (:func:`directory`):

* ``FEDFRAC_COMPILE_CACHE=DIR``: ``DIR``; ``FEDFRAC_COMPILE_CACHE=off`` (or
  ``0``, ``false``, ``no``, ``none``): fedfrac sets no cache (JAX's own settings,
  e.g. ``JAX_COMPILATION_CACHE_DIR``, still apply);
* else ``JAX_COMPILATION_CACHE_DIR`` when it is set (JAX's own variable);
* else the per-user ``$XDG_CACHE_HOME/fedfrac/jax`` (``~/.cache/fedfrac/jax``).

Every program is cached, however short its compilation
(``jax_persistent_cache_min_compile_time_secs=0``, JAX's default is 1 s, which
leaves out the evaluation programs and the small ones that run between chunks;
``jax_persistent_cache_min_entry_size_bytes=0``). The settings are also put in
the environment (``JAX_COMPILATION_CACHE_DIR``, ...), so the worker processes a
command starts (``config.workers``, the sweep's queue) read and fill the same
cache. JAX keys an entry by the program, the compile options, the device kind
and the jax / jaxlib versions, so a changed program or an upgrade simply misses;
``jax_persistent_cache_enable_xla_caches`` is left at JAX's default (it adds XLA's
GPU autotuning cache under the same directory; it does nothing on a CPU). The
cache grows with every new program: delete the directory to clear it.

:func:`counts` returns this process's hits and misses (JAX's own monitoring
events, ``/jax/compilation_cache/cache_hits`` and ``cache_misses``).
"""
from __future__ import annotations

import os
import sys
from typing import Optional

ENV = "FEDFRAC_COMPILE_CACHE"
OFF = ("off", "0", "false", "no", "none")
JAX_DIR = "JAX_COMPILATION_CACHE_DIR"
# JAX's options (and the environment variables worker processes read them from).
SETTINGS = {"jax_persistent_cache_min_compile_time_secs": 0.0,
            "jax_persistent_cache_min_entry_size_bytes": 0}

_EVENTS = {"/jax/compilation_cache/cache_hits": "hits",
           "/jax/compilation_cache/cache_misses": "misses"}
_counts = {"hits": 0, "misses": 0}
_listening = False


def default_directory(environ=None) -> str:
  """``$XDG_CACHE_HOME/fedfrac/jax``, or ``~/.cache/fedfrac/jax``."""
  environ = os.environ if environ is None else environ
  base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(base, "fedfrac", "jax")


def directory(environ=None) -> Optional[str]:
  """The cache directory the settings in ``environ`` (default ``os.environ``)
  ask for, or None when ``FEDFRAC_COMPILE_CACHE`` turns fedfrac's cache off."""
  environ = os.environ if environ is None else environ
  setting = environ.get(ENV, "").strip()
  if setting.lower() in OFF:
    return None
  if setting:
    return os.path.abspath(os.path.expanduser(setting))
  if environ.get(JAX_DIR):
    return environ[JAX_DIR]
  return default_directory(environ)


def _count(event, **_):
  name = _EVENTS.get(event)
  if name:
    _counts[name] += 1


def counts() -> dict:
  """``{"hits": n, "misses": m}``: programs this process loaded from the cache
  and programs it compiled and wrote there, since :func:`enable`."""
  return dict(_counts)


def enable(environ=None) -> Optional[str]:
  """Turn on the persistent compilation cache as :func:`directory` says, in
  this process and (through ``os.environ``) in every process it starts;
  returns the directory, or None when it is off or cannot be created (one
  line on stderr then; the command runs on without a cache)."""
  global _listening
  path = directory(environ)
  if path is None:
    return None
  try:
    os.makedirs(path, exist_ok=True)
  except OSError as e:
    print(f"compile cache off: cannot create {path} ({e.strerror}); set {ENV}=DIR "
          f"to use another directory or {ENV}=off", file=sys.stderr)
    return None
  import jax
  jax.config.update("jax_compilation_cache_dir", path)
  os.environ[JAX_DIR] = path
  for name, value in SETTINGS.items():
    if name.upper() not in os.environ:   # a value the user set is kept
      jax.config.update(name, value)
      os.environ[name.upper()] = str(value)
  if not _listening:
    jax.monitoring.register_event_listener(_count)
    _listening = True
  return path
