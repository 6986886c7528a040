"""A sweep's grid: parsing ``--set`` / ``--sweep`` / ``--grid``, setting keys of a
config, the sweep points (config axes × methods × seeds × one grid) with their
ids, and the sweep's fingerprint."""
from __future__ import annotations

import ast
import itertools
import json

from fedfrac import (
  algorithms,
  config_files,
  config_keys,
)
from fedfrac import config as config_lib
from fedfrac import config_base
from fedfrac._version import __version__
from fedfrac.algorithms import server_optimizer
from fedfrac._validation import ConfigError
from fedfrac.sweep import checks as sweep_checks
from fedfrac.runner import points as points_lib
from fedfrac.runner.factories import CLIENT_LR


def parse_value(text):
  """A Python literal when ``text`` parses as one, else the string itself."""
  try:
    return ast.literal_eval(text)
  except (ValueError, SyntaxError):
    return text


def parse_assignment(text, flag, many=False):
  """``KEY=VALUE`` (or ``KEY=V1,V2`` with ``many``) -> (key, value or [values]);
  raises :class:`fedfrac.sweep.checks.UsageError` when malformed."""
  UsageError = sweep_checks.UsageError
  if "=" not in text:
    raise UsageError(f"{flag}={text}: expected KEY=VALUE")
  key, raw = text.split("=", 1)
  key = key.strip()
  if not key:
    raise UsageError(f"{flag}={text}: empty key")
  if not many:
    return key, parse_value(raw)
  sep = ";" if ";" in raw else ","
  parts = raw.split(sep)
  if not raw.strip():
    raise UsageError(f"{flag}={text}: no values")
  empty = [i + 1 for i, p in enumerate(parts) if not p.strip()]
  if empty:
    raise UsageError(f"{flag}={text}: value {empty[0]} of {len(parts)} is empty; give "
                     f"the values separated by single {sep!r}")
  values = [parse_value(p.strip()) for p in parts]
  return key, values


def load_config(path):
  """The checked ``get_config()`` of the config file ``path`` (``file.py`` or
  ``file.py:arg``): :func:`fedfrac.config_files.load_config_file`, which raises
  :class:`fedfrac.config.ConfigError` in one line for a bad file or key."""
  return config_files.load_config_file(path)


def set_key(config, dotted, value, flag="--set"):
  """Set ``config.<dotted>`` (creating method options that are not there yet);
  unknown keys and values of the wrong type raise ConfigError
  (:func:`fedfrac.sweep.checks.set_key`)."""
  sweep_checks.set_key(config, dotted, value, flag)


# ------------------------------------------------------------------ points


def grid_targets(config, grid, grid_methods):
  """Method labels of ``config`` that the ``grid`` ({option: values}) applies to."""
  if not grid:
    return []
  labels = config_base.method_labels(config)
  option = next(iter(grid))
  with_option = [l for l in labels if option == CLIENT_LR or option in
                 algorithms.hparams(config.methods[l].name,
                                    config_base.method_options(config.methods[l]))]
  unknown = [t for t in grid_methods if t not in labels]
  if unknown:
    raise SystemExit(f"--grid_methods: unknown method label {unknown[0]!r}; labels are "
                     f"{', '.join(labels)}")
  return list(grid_methods) or with_option


def config_key(config) -> dict:
  """``config`` as a JSON dict without the keys a point does not depend on
  (its seeds, which each point names itself, and the progress switch). An
  optax server optimizer given as an object is the text of its settings
  (:func:`fedfrac.algorithms.server_optimizer.describe`), not just its type."""
  out = json.loads(config.to_json_best_effort(sort_keys=True))
  for label, method in config.methods.items():
    value = method.get("server_optimizer", None) if hasattr(method, "get") else None
    if server_optimizer.is_transformation(value):
      out["methods"][label]["server_optimizer"] = server_optimizer.plain(value)
  out.pop("seeds", None)
  out.pop("progress", None)
  return out


def expand(base, axes, seeds, grid=None, grid_methods=()):
  """Every point of the sweep, in table order: config point × method label ×
  grid value × seed. Each is a dict with ``id``, ``axes`` (the config point),
  ``axes_index``, ``label`` (method label), ``run_label`` (with the grid value),
  ``grid`` (value or None), ``seed`` and ``config`` (the point's config with
  ``only`` = its method). Every key of ``base`` is checked first, as the
  command line checks a config file's (:func:`fedfrac.config_keys.check_keys`)."""
  config_keys.check_keys(base)
  if grid is not None and len(grid) != 1:
    raise sweep_checks.UsageError(f"--grid: give exactly one option, got {sorted(grid)}")
  option = next(iter(grid)) if grid else None
  points = []
  for axes_index, (point, config) in enumerate(sweep_points(base, axes)):
    targets = grid_targets(config, grid, list(grid_methods))
    for label in config_base.method_labels(config):
      single = config.copy_and_resolve_references()
      single.only = label
      key = config_key(single)
      values = list(grid[option]) if label in targets else [None]
      for value in values:
        for seed in seeds:
          points.append({
              "id": points_lib.point_id({"config": key, "seed": int(seed),
                                         "grid": None if value is None else [option, value]}),
              "axes": point, "axes_index": axes_index, "label": label,
              "run_label": label if value is None else f"{label}[{option}={value}]",
              "grid": value, "seed": int(seed), "config": single, "option": option})
  ids = [p["id"] for p in points]
  if len(set(ids)) != len(ids):
    raise sweep_checks.UsageError("the sweep names the same point twice (a value "
                                  "repeated in --sweep or --grid, or a seed in --seeds)")
  return points


def fingerprint(base, axes, grid, grid_methods, metric_names, batch):
  """What every point of this sweep depends on besides its own id; a point
  directory refuses points of a sweep whose fingerprint differs."""
  return {"config": config_key(base), "axes": [k for k, _ in axes],
          "grid": sorted(grid) if grid else None, "grid_methods": sorted(grid_methods),
          "metrics": list(metric_names), "batch": bool(batch),
          "fedfrac": __version__}


def sweep_points(base, axes):
  """(point, config) for every combination of the ``axes`` [(key, values)]: the
  config is a copy of ``base`` with the point's keys set, validated."""
  for combo in itertools.product(*[values for _, values in axes]):
    config = base.copy_and_resolve_references()
    point = {}
    for (key, _), value in zip(axes, combo):
      set_key(config, key, value, "--sweep")
      point[key] = value
    try:
      config_lib.validate(config)
    except ConfigError as e:
      if not point:
        raise
      where = ", ".join(f"{k}={v!r}" for k, v in point.items())
      raise ConfigError(f"sweep point {where}: {e}") from None
    yield point, config


def header(config, sets=()) -> str:
  """Title of a sweep's table from the resolved config (after ``--set``): dataset,
  partition and its parameter, clients, participation, rounds, seeds, and the
  ``--set`` overrides."""
  from fedfrac.runner.plots import describe_config
  text = f"Sweep: {describe_config(config)}"
  return text + (f" (set {', '.join(sets)})" if sets else "")
