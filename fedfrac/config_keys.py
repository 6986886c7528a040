"""Config keys checked against the base config and the method schemas.

Every key a run reads is a field of :func:`fedfrac.config.base_config`; a method
entry ``methods.<label>`` holds ``name``, options of its algorithm's schema and
``client`` / ``server`` / ``attack`` sections whose keys are those of the
top-level sections. Anything else is a typo that would otherwise be ignored
(``c.data.alhpa = 0.05`` leaves ``data.alpha`` at its default), and a field a
config deleted is one the run would miss. The checks here raise
:class:`fedfrac.config.ConfigError` with one line naming the key, "did you mean"
the closest known key, and what the section does hold:

* :func:`check_keys`: a whole config (a config file's ``get_config()``);
* :func:`check_override_key`: one ``KEY`` of a ``KEY=VALUE`` override;
* :func:`set_method_option`: ``--config.methods.<label>.<option>=<text>``.
"""
from __future__ import annotations

import difflib
from collections.abc import Mapping

import ml_collections

from fedfrac.config_base import METHOD_SECTIONS, base_config, config_section
from fedfrac._validation import ConfigError, fail

# Sections whose keys are names the config chooses (not fields of the base config):
# ``methods`` (method labels, each checked against its schema),
# ``churn.per_class`` (client groups) and ``clock.options`` (the asynchronous
# server's options, checked against its schema by fedfrac.sim.validate).
FREE_SECTIONS = ("methods", "churn.per_class", "clock.options")

# Common names for a field, suggested when difflib finds nothing close.
ALIASES = {"learning_rate": "lr", "lr_rate": "lr", "num_rounds": "rounds",
           "epochs": "local_epochs", "local_epoch": "local_epochs", "seed": "seeds",
           "clients": "num_clients", "n_clients": "num_clients", "batch": "batch_size",
           "optimiser": "optimizer", "dirichlet_alpha": "alpha"}


def did_you_mean(word, choices) -> str:
  """``"did you mean 'x'? "`` for the known key closest to ``word`` (or ``""``)."""
  choices = [str(c) for c in choices]
  alias = ALIASES.get(str(word))
  if alias in choices:
    return f"did you mean {alias!r}? "
  close = difflib.get_close_matches(str(word), choices, n=1)
  return f"did you mean {close[0]!r}? " if close else ""


def unknown_key_message(path, key, value, known, where) -> str:
  """``config.<path>[=<value>]: unknown key '<key>'; did you mean ...? <where> has
  keys: ...`` (the command line's message for an override naming a missing key)."""
  shown = "" if value is None else f"={value!r}"
  return (f"config.{path}{shown}: unknown key {key!r}; {did_you_mean(key, known)}"
          f"{where} has keys: {', '.join(sorted(map(str, known)))}")


def _is_section(v) -> bool:
  return isinstance(v, (ml_collections.ConfigDict, Mapping))


def _method_problems(label, entry, unknown, bad):
  """Unknown keys of ``methods.<label>`` (algorithm options by its schema)."""
  from fedfrac import algorithms
  path = f"methods.{label}"
  if not _is_section(entry):
    bad.append(f"config.{path}={entry!r}: must be a section with name=<algorithm> "
               f"(e.g. ml_collections.ConfigDict(dict(name='fedavg')))")
    return
  name = entry.get("name", None)
  if name not in algorithms.names():
    return      # validation names the allowed algorithms
  schema = algorithms.entry(name).schema
  for key in entry.keys():
    value = entry[key]
    if key == "name":
      continue
    if key in METHOD_SECTIONS:
      if not _is_section(value):
        bad.append(f"config.{path}.{key}={value!r}: must be a section of {key} "
                   f"overrides")
        continue
      defaults = base_config()[key]
      for sub in value.keys():
        if sub not in defaults:
          unknown.append(f"config.{path}.{key}.{sub}={value[sub]!r}: unknown {key} "
                         f"option {sub!r}; {did_you_mean(sub, defaults.keys())}allowed: "
                         f"{', '.join(defaults.keys())}")
    elif key not in schema:
      unknown.append(f"config.{path}.{key}={value!r}: "
                     f"{schema.unknown_message(name, key)}")


def _walk(node, base, prefix, unknown, missing, bad):
  where = "config" + (f".{prefix}" if prefix else "")
  for key in node.keys():
    path = f"{prefix}.{key}" if prefix else str(key)
    value = node[key]
    if key not in base:
      unknown.append(unknown_key_message(path, key, value, base.keys(), where))
      continue
    if path == "methods":
      if not _is_section(value):
        bad.append(f"config.methods={value!r}: must be a section of method entries")
        continue
      for label in value.keys():
        _method_problems(label, value[label], unknown, bad)
      continue
    if path in FREE_SECTIONS or not _is_section(base[key]):
      continue
    if not _is_section(value):
      bad.append(f"config.{path}={value!r}: must be a section with keys "
                 f"{', '.join(sorted(base[key].keys()))}")
      continue
    _walk(value, base[key], path, unknown, missing, bad)
  for key in base.keys():
    if key not in node:
      missing.append(f"{prefix}.{key}" if prefix else str(key))


def key_problems(config) -> tuple[list, list, list]:
  """``(unknown, missing, bad)``: messages for keys ``config`` has that the base
  config and the method schemas do not, dotted paths of base fields it lacks,
  and messages for sections replaced by a value that is not a section."""
  unknown, missing, bad = [], [], []
  _walk(config, base_config(), "", unknown, missing, bad)
  return unknown, missing, bad


def check_keys(config, source="") -> None:
  """Raise :class:`ConfigError` when ``config`` sets a key that nothing reads or
  lacks a field of the base config; ``source`` (e.g. ``--config=x.py``) starts
  the message. One line: the first problem in full, then the other keys named."""
  unknown, missing, bad = key_problems(config)
  lead = f"{source}: " if source else ""
  if unknown or bad:
    first, *rest = bad + unknown
    also = "; also: " + ", ".join(m.split(":", 1)[0] for m in rest) if rest else ""
    raise ConfigError(f"{lead}{first}{also}")
  if missing:
    names = ", ".join(f"config.{m}" for m in missing)
    raise ConfigError(f"{lead}the config lacks {names}, "
                      f"{'a field' if len(missing) == 1 else 'fields'} of "
                      f"fedfrac.config.base_config() that every run reads (was it "
                      f"deleted, or a section replaced by a partial one?); start from "
                      f"base_config() and change values instead of removing them")


def check_override_key(config, dotted) -> None:
  """Raise :class:`ConfigError` unless ``config.<dotted>`` can be set: an
  existing key, a new client group under ``churn.per_class``, or a method path
  :func:`set_method_option` accepts."""
  parts = dotted.split(".")
  if not all(parts):
    raise ConfigError(f"config.{dotted}: not a key (empty part)")
  if parts[0] == "methods" and not _exists(config, parts):
    _method_target(config, dotted)
    return
  node = config
  for i, part in enumerate(parts):
    parent = ".".join(parts[:i])
    if parent in FREE_SECTIONS and i == len(parts) - 1:
      return
    if not _is_section(node) or part not in node:
      known = node.keys() if _is_section(node) else []
      where = "config" + (f".{parent}" if parent else "")
      if not _is_section(node):
        raise ConfigError(f"config.{dotted}: config.{parent} is a value, not a section")
      raise ConfigError(unknown_key_message(dotted, part, None, known, where))
    node = node[part]


def _exists(config, parts) -> bool:
  node = config
  for part in parts:
    if not _is_section(node) or part not in node:
      return False
    node = node[part]
  return True


def parse_value(text, like=None):
  """A command-line value: a Python literal (``0.9``, ``True``, ``(64,)``,
  ``'sgd'``) or else the text itself; the text itself when ``like`` (the
  option's current value) is a string; an int becomes a float when ``like`` is
  a float, and one value a tuple of it when ``like`` is a tuple."""
  import ast
  if isinstance(like, str):
    return text
  try:
    value = ast.literal_eval(text)
  except (ValueError, SyntaxError):
    value = text
  if isinstance(like, bool) and isinstance(value, str) and value.lower() in (
      "true", "false"):
    value = value.lower() == "true"
  if isinstance(like, float) and isinstance(value, int) and not isinstance(value, bool):
    value = float(value)
  if isinstance(like, tuple) and not isinstance(value, (tuple, list, str)):
    value = (value,)
  return value


def _method_target(config, path):
  """Check the method path ``path`` (``methods.<label>.<option>``,
  ``methods.<label>.<section>.<key>`` or ``methods.<new label>.name``) and return
  ``(kind, default)``: kind ``"name"``, ``"section"`` or ``"option"``, default the
  value the option would otherwise have (for parsing), else raise ConfigError."""
  from fedfrac import algorithms
  parts = path.split(".")
  if len(parts) < 3 or parts[0] != "methods" or not all(parts):
    raise ConfigError(f"config.{path}: unknown key; method options are set as "
                      f"methods.<label>.<option>")
  label = parts[1]
  if label not in config.methods:
    if parts[2:] == ["name"]:
      return "name", None
    fail(f"methods.{label}", "(absent)",
         f"unknown method label {label!r}; {did_you_mean(label, config.methods.keys())}"
         f"labels are {', '.join(config.methods.keys())} (add one with "
         f"--config.methods.{label}.name=<algorithm>)")
  if parts[2] in METHOD_SECTIONS:
    section = parts[2]
    defaults = config_section(config, section)
    if len(parts) != 4 or parts[3] not in defaults:
      key = ".".join(parts[3:])
      raise ConfigError(
          f"config.{path}: unknown {section} option {key!r}; "
          f"{did_you_mean(key, defaults.keys())}allowed: {', '.join(defaults.keys())}")
    return "section", defaults[parts[3]]
  if len(parts) != 3:
    raise ConfigError(f"config.{path}: unknown key {parts[3]!r}; method options are "
                      f"single values")
  name = config.methods[label].get("name", None)
  if name not in algorithms.names():
    fail(f"methods.{label}.name", name, f"allowed values are "
         f"{', '.join(algorithms.names())}")
  schema = algorithms.entry(name).schema
  if parts[2] not in schema:
    raise ConfigError(f"config.{path}: {schema.unknown_message(name, parts[2])}")
  return "option", schema.options[parts[2]].default


def set_method_value(config, path, value=None, text=None) -> None:
  """Set the method path ``path`` (see :func:`set_method_option`) to ``value``,
  or to ``text`` parsed like the option's default when ``text`` is given."""
  from fedfrac import algorithms
  kind, default = _method_target(config, path)
  if text is not None:
    value = parse_value(text, default)
  parts = path.split(".")
  label = parts[1]
  with config.unlocked():
    if kind == "name":
      if value not in algorithms.names():
        fail(f"methods.{label}.name", value, f"{did_you_mean(value, algorithms.names())}"
             f"allowed values are {', '.join(algorithms.names())}")
      config.methods[label] = ml_collections.ConfigDict(dict(name=value))
      return
    method = config.methods[label]
    if kind == "section":
      section = parts[2]
      if section not in method:
        method[section] = ml_collections.ConfigDict()
      sub = method[section]
      if not hasattr(sub, "unlocked"):
        sub = method[section] = ml_collections.ConfigDict(dict(sub))
      with sub.unlocked():
        sub[parts[3]] = value
      return
    method[parts[2]] = value


def set_method_option(config, path, text) -> None:
  """Apply the override ``--config.methods.<label>.<option>=<text>`` (or
  ``methods.<label>.<client|server|attack>.<key>=<text>``) that the config file
  does not mention: the option must be one the method's algorithm accepts (its
  schema) or a key of that section; raises :class:`ConfigError` otherwise.
  ``methods.<new label>.name=<algorithm>`` adds a method."""
  set_method_value(config, path, text=text)


def _any_type(dotted) -> bool:
  """Whether the schema declares ``dotted`` a key of several types."""
  from fedfrac.config_base import schema
  entry = schema()
  try:
    for part in dotted.split("."):
      entry = entry[part]
  except (KeyError, TypeError):
    return False
  return bool(getattr(entry, "any_type", False))


def set_key(config, dotted, value=None, text=None, where=None) -> None:
  """Set ``config.<dotted>`` to ``value`` (or to ``text`` parsed like the key's
  current value, :func:`parse_value`) after checking the key
  (:func:`check_override_key`; a method option the config does not mention yet
  is added, :func:`set_method_value`) and the value's type: a float field takes
  an int or a number written as text (``nan``, ``inf``, which validation then
  refuses with its own message). ``where`` (e.g. ``--config.rounds=abc``) starts
  the message of a value of the wrong type."""
  check_override_key(config, dotted)
  parts = dotted.split(".")
  if parts[0] == "methods" and not _exists(config, parts):
    set_method_value(config, dotted, value, text)
    return
  target = config
  for p in parts[:-1]:
    target = target[p]
  current = target.get(parts[-1], None)
  if text is not None:
    # A key of several types (config_schema.Field.any_type) is held untyped: its
    # text is read as a literal (True, 0.5), not as text like its default "auto".
    value = parse_value(text, None if _any_type(dotted) else current)
  if isinstance(current, float) and isinstance(value, str):
    try:
      value = float(value)
    except ValueError:
      pass
  try:
    with config.unlocked():
      target[parts[-1]] = value
  except TypeError:
    kind = type(current).__name__
    raise ConfigError(f"{where or f'config.{dotted}={value!r}'}: config.{dotted} holds "
                      f"{kind} values (default {current!r}); {value!r} is a "
                      f"{type(value).__name__}") from None
