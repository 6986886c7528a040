"""Config files loaded by path and checked like command-line overrides.

A config file (``--config=configs/x.py`` or ``configs/x.py:arg``) is a Python
file whose ``get_config()`` (or ``get_config(arg)``) returns the experiment's
``ml_collections.ConfigDict``, built from :func:`fedfrac.config.base_config`.
:func:`load_config_file` imports it, calls it and checks what comes back: a
ConfigDict, every key known to the base config or its method's schema, no base
field deleted (:func:`fedfrac.config_keys.check_keys`). Whatever goes wrong is
one :class:`fedfrac.config.ConfigError` line that starts with
``--config=<file>``: a missing file, a file that does not import, no
``get_config``, a ``get_config`` that returns a dict or None or raises (with the
file's line), a value of the wrong type set inside the file, a misspelt or
deleted key. ``fedfrac-run``, ``fedfrac-sweep`` and ``fedfrac-reproduce`` load
config files through it.
"""
from __future__ import annotations

import os
import re
import traceback
from typing import Optional

import ml_collections

from fedfrac._validation import ConfigError
from fedfrac.config_base import import_config_file
from fedfrac.config_keys import check_keys, set_key

# ConfigDict's message for a value of the wrong type set on an existing field.
_TYPE_ERROR = re.compile(r"Could not override field '(?P<key>[^']*)' \(reference\)\. "
                         r"(?P<value>.*) is of original type <class '(?P<given>[^']*)'> "
                         r"and cannot be casted to type <class '(?P<field>[^']*)'>", re.S)


def split_spec(spec: str) -> tuple[str, Optional[str]]:
  """``(file, argument or None)`` of ``--config``'s ``file.py[:argument]``."""
  if os.path.isfile(spec) or ":" not in spec:
    return spec, None
  path, arg = spec.split(":", 1)
  return path, arg


def _line_in(error: BaseException, path: str) -> str:
  """``", line N (<source>)"`` of the deepest frame of ``error`` in ``path``."""
  target = os.path.realpath(path)
  frames = [f for f in traceback.extract_tb(error.__traceback__)
            if os.path.realpath(f.filename) == target]
  if not frames:
    return ""
  frame = frames[-1]
  source = f" ({frame.line.strip()})" if frame.line else ""
  return f", line {frame.lineno}{source}"


def _raised_message(error: BaseException, path: str) -> str:
  where = _line_in(error, path)
  match = _TYPE_ERROR.search(str(error)) if isinstance(error, TypeError) else None
  if match:
    value = repr(match["value"]) if match["given"] == "str" else match["value"]
    return (f"sets a value of the wrong type{where}: config field {match['key']!r} "
            f"holds {match['field']} values, got {value} ({match['given']})")
  text = " ".join(str(error).split())
  return f"the config file raised {type(error).__name__}: {text}{where}"


def load_module(path: str, spec: str):
  """Import the config file ``path`` (``spec`` = the ``--config`` text, for messages)."""
  lead = f"--config={spec}"
  if not os.path.exists(path):
    raise ConfigError(f"{lead}: no such file")
  if os.path.isdir(path):
    raise ConfigError(f"{lead}: is a directory; give a config file (configs/<name>.py)")
  if not path.endswith(".py"):
    raise ConfigError(f"{lead}: not a Python file; a config file is a .py file with a "
                      f"get_config() function")
  try:
    return import_config_file(path)
  except SyntaxError as e:
    raise ConfigError(f"{lead}: cannot load the config file (SyntaxError: {e.msg}, "
                      f"line {e.lineno})") from e
  except Exception as e:  # the file's own top-level code failed
    raise ConfigError(f"{lead}: {_raised_message(e, path)}") from e


def call_get_config(get_config, path: str, arg: Optional[str] = None,
                    spec: Optional[str] = None) -> ml_collections.ConfigDict:
  """``get_config()`` (or ``get_config(arg)``) of the config file ``path``, its
  result checked (a ConfigDict whose keys the base config and the method schemas
  know); any fault is one :class:`ConfigError` line ``--config=<spec>: ...``."""
  lead = f"--config={spec or path}"
  try:
    config = get_config() if arg is None else get_config(arg)
  except Exception as e:  # the file's own code failed
    raise ConfigError(f"{lead}: {_raised_message(e, path)}") from e
  if not isinstance(config, ml_collections.ConfigDict):
    what = "None (a missing return statement?)" if config is None else (
        f"a {type(config).__name__}")
    raise ConfigError(f"{lead}: get_config() returned {what}; it must return an "
                      f"ml_collections.ConfigDict, e.g. fedfrac.config.base_config() "
                      f"with the values it changes")
  check_keys(config, lead)
  return config


def checked_module(module, path: str):
  """``module`` (a loaded config file) with its ``get_config`` replaced by one
  that checks what it returns (:func:`call_get_config`)."""
  get_config = getattr(module, "get_config", None)
  if callable(get_config):
    def checked_get_config(*args):
      return call_get_config(get_config, path, *args)
    module.get_config = checked_get_config
  return module


def split_overrides(argv) -> tuple:
  """``(argv without them, [(key, text)])``: the command line's overrides
  ``--config.<key>=<value>`` (or ``--config.<key> <value>``; text None when no
  value follows) taken out of ``argv``, up to a ``--``."""
  kept, overrides, i = [], [], 0
  while i < len(argv):
    arg = argv[i]
    if arg == "--":
      kept.extend(argv[i:])
      break
    if arg.startswith("--config.") and i > 0:
      key, equals, text = arg[len("--config."):].partition("=")
      if not equals and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
        i, text, equals = i + 1, argv[i + 1], "="
      overrides.append((key, text if equals else None))
    else:
      kept.append(arg)
    i += 1
  return kept, overrides


def apply_overrides(config, overrides) -> ml_collections.ConfigDict:
  """``config`` with the overrides ``[(key, text)]`` of :func:`split_overrides`
  set, each text parsed like the key's value (:func:`fedfrac.config_keys.set_key`:
  an unknown key, a value of the wrong type or a missing value is one
  :class:`ConfigError` line)."""
  for key, text in overrides:
    if text is None and isinstance(_value_at(config, key), bool):
      text = "True"     # --config.progress alone, as a boolean flag
    if text is None:
      raise ConfigError(f"--config.{key}: give a value (--config.{key}=<value>)")
    set_key(config, key, text=text, where=f"--config.{key}={text}")
  return config


def _value_at(config, key):
  node = config
  for part in key.split("."):
    if not hasattr(node, "keys") or part not in node:
      return None
    node = node[part]
  return node


def load_config_file(spec: str, arg: Optional[str] = None,
                     overrides=()) -> ml_collections.ConfigDict:
  """The checked ``get_config()`` of the config file ``spec`` (``file.py`` or
  ``file.py:arg``; ``arg`` overrides the part after the colon), with the
  command line's ``overrides`` (:func:`apply_overrides`) applied.

  Raises :class:`ConfigError` with one line ``--config=<spec>: ...`` on any of
  the faults listed in the module docstring.
  """
  path, spec_arg = split_spec(spec)
  arg = spec_arg if arg is None else arg
  module = load_module(path, spec)
  get_config = getattr(module, "get_config", None)
  if not callable(get_config):
    raise ConfigError(f"--config={spec}: the file defines no get_config() function; a "
                      f"config file's get_config() returns fedfrac.config.base_config() "
                      f"with the values it changes")
  return apply_overrides(call_get_config(get_config, path, arg, spec), overrides)
