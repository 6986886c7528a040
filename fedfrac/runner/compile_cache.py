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

Entries are verified (:func:`verify_entries`, when a command starts): JAX
neither checks nor replaces an entry it cannot use (an empty one left by a
full disk warns and recompiles on every run; a valid entry of another program
under this key stops the run with an ``AssertionError``). The command records
each entry's SHA-256 in ``fedfrac-entries.json`` when it ends; an entry that
no longer matches, or (never recorded) that does not decompress, is removed,
so its program compiles and is saved again. Said once, in one line. A
directory that cannot be written is used for reading only (one line; nothing
is saved); one that holds bad entries it cannot remove is not used at all.

:func:`counts` returns this process's hits and misses (JAX's own monitoring
events, ``/jax/compilation_cache/cache_hits`` and ``cache_misses``).
"""
from __future__ import annotations

import atexit
import hashlib
import json
import os
import sys
import time
import zlib
from typing import Optional

ENV = "FEDFRAC_COMPILE_CACHE"
OFF = ("off", "0", "false", "no", "none")
JAX_DIR = "JAX_COMPILATION_CACHE_DIR"
# JAX's options (and the environment variables worker processes read them from).
SETTINGS = {"jax_persistent_cache_min_compile_time_secs": 0.0,
            "jax_persistent_cache_min_entry_size_bytes": 0}
MIN_ENTRY = "jax_persistent_cache_min_entry_size_bytes"
NO_WRITES = 2**62          # its value when the directory cannot be written
ENTRY_SUFFIX = "-cache"    # JAX's file name of an entry: <key>-cache
INDEX = "fedfrac-entries.json"   # {entry file: [size, mtime_ns, sha256]}
WRITING_NS = 60 * 10**9    # an entry this young and never recorded is left alone

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


def _decompresses(data: bytes) -> bool:
  """Whether ``data`` is a compressed entry as JAX writes them (zstd when JAX
  has it, else zlib)."""
  if not data:
    return False
  try:
    zlib.decompress(data)
    return True
  except zlib.error:
    pass
  for name in ("compression.zstd", "zstandard"):
    try:
      module = __import__(name, fromlist=["_"])
    except ImportError:
      continue
    try:
      if name == "zstandard":
        module.ZstdDecompressor().decompressobj().decompress(data)
      else:
        module.decompress(data)
      return True
    except Exception:   # noqa: BLE001  (any decoder error: not an entry)
      return False
  return False


def _read_index(path) -> dict:
  try:
    with open(os.path.join(path, INDEX)) as f:
      index = json.load(f)
    return index if isinstance(index, dict) else {}
  except (OSError, ValueError):
    return {}


def _entries(path) -> dict:
  """``{entry file: (size, mtime_ns)}`` of the cache directory ``path``."""
  out = {}
  for name in os.listdir(path):
    if name.endswith(ENTRY_SUFFIX):
      try:
        st = os.stat(os.path.join(path, name))
      except OSError:
        continue
      out[name] = (st.st_size, st.st_mtime_ns)
  return out


def _record(path, name, stat) -> Optional[list]:
  """``[size, mtime_ns, sha256]`` of entry ``name`` when it decompresses."""
  try:
    with open(os.path.join(path, name), "rb") as f:
      data = f.read()
  except OSError:
    return None
  return [stat[0], stat[1], hashlib.sha256(data).hexdigest()] if _decompresses(
      data) else None


def verify_entries(path) -> tuple:
  """``(bad, index)``: the entries of ``path`` that are not what was saved (an
  entry recorded in the index whose content changed, or one never recorded
  that does not decompress: empty, truncated; one younger than a minute may be
  being written and is left alone) and the index of the good ones."""
  index, bad, good = _read_index(path), [], {}
  now_ns = time.time_ns()
  for name, stat in sorted(_entries(path).items()):
    known = index.get(name)
    if (isinstance(known, list) and len(known) == 3 and tuple(known[:2]) == stat):
      good[name] = known
      continue
    if known is None and now_ns - stat[1] < WRITING_NS:
      continue      # perhaps being written by another command right now
    record = _record(path, name, stat)
    if record is None or (isinstance(known, list) and len(known) == 3
                          and record[2] != known[2]):
      bad.append(name)
    else:
      good[name] = record
  return bad, good


def _write_index(path, index) -> None:
  from fedfrac.runner.checkpoint import unique_tmp
  tmp = unique_tmp(os.path.join(path, f".{INDEX}"))
  try:
    with open(tmp, "w") as f:
      json.dump(index, f)
    os.replace(tmp, os.path.join(path, INDEX))
  except OSError:
    try:
      os.remove(tmp)
    except OSError:
      pass


def _record_new_entries(path, index) -> None:
  """At exit: add the entries saved during the command (by it or its workers)
  to the index, with their SHA-256 (only those that decompress)."""
  current = _entries(path)
  if not current:
    return
  merged = dict(_read_index(path))
  merged.update(index)
  for name, stat in current.items():
    known = merged.get(name)
    if not (isinstance(known, list) and tuple(known[:2]) == stat):
      record = _record(path, name, stat)
      if record is not None:
        merged[name] = record
  merged = {n: r for n, r in merged.items() if n in current}
  _write_index(path, merged)


def _writable(path) -> Optional[str]:
  """None when a file can be written in ``path``, else why not."""
  probe = os.path.join(path, f".write_probe{os.getpid()}")
  try:
    with open(probe, "w"):
      pass
    os.remove(probe)
    return None
  except OSError as e:
    return e.strerror or type(e).__name__


def _say(line):
  print(line, file=sys.stderr)


def enable(environ=None) -> Optional[str]:
  """Turn on the persistent compilation cache as :func:`directory` says, in
  this process and (through ``os.environ``) in every process it starts;
  returns the directory, or None when it is off or cannot be used (one line
  on stderr then; the command runs on without a cache). Entries are verified
  first and bad ones removed (one line, see the module docstring); a
  directory that cannot be written is only read (one line)."""
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
  if _enabled.get("path") == path:   # already on in this process
    return path
  read_only = _writable(path)
  try:
    bad, index = verify_entries(path)
  except OSError as e:
    _say(f"compile cache off: cannot read {path} ({e.strerror}); compiling every "
         f"program")
    return None
  removed = []
  for name in bad:
    try:
      os.remove(os.path.join(path, name))
      removed.append(name)
    except OSError:
      pass
  if len(removed) < len(bad):
    _say(f"compile cache off: {len(bad)} entries in {path} are empty, truncated or "
         f"changed since saved, and cannot be removed ({read_only or 'not allowed'}); "
         f"compiling every program without the cache")
    return None
  if removed:
    _say(f"compile cache {path}: removed {len(removed)} entries that were empty, "
         f"truncated or changed since saved; their programs compile and are saved again")
  import jax
  jax.config.update("jax_compilation_cache_dir", path)
  os.environ[JAX_DIR] = path
  for name, value in SETTINGS.items():
    if name.upper() not in os.environ:   # a value the user set is kept
      jax.config.update(name, value)
      os.environ[name.upper()] = str(value)
  if read_only:
    _say(f"compile cache {path} cannot be written ({read_only}): loading the programs "
         f"it holds, compiling the others without saving them")
    jax.config.update(MIN_ENTRY, NO_WRITES)   # JAX then writes nothing there
    os.environ[MIN_ENTRY.upper()] = str(NO_WRITES)
  else:
    _write_index(path, index)
    atexit.register(_record_new_entries, path, index)
  _enabled["path"] = path
  if not _listening:
    jax.monitoring.register_event_listener(_count)
    _listening = True
  return path


_enabled: dict = {}
