"""``base_config()``, gathered from each section's schema (:func:`schema`; a key
is declared once, by the layer that reads it: :mod:`fedfrac.config_schema`), and
the readers of its sections: the method labels a run runs, each method's options
and its ``client`` / ``server`` / ``attack`` sections with its overrides applied.
Everything here is re-exported by :mod:`fedfrac.config`; the section checks
(``fedfrac.<pkg>.validate``) import it from here, below
:func:`fedfrac.config.validate` that runs them.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import sys
import warnings

import ml_collections

from fedfrac._validation import check, fail
from fedfrac.algorithms import server as server_lib
from fedfrac.config_schema import Section


def import_config_file(path):
  """Import the config file ``path`` afresh and return the module (its
  ``get_config()`` builds the config).

  A file inside a package, every folder from it up to the top holding an
  ``__init__.py`` (``configs/firma/digits.py``), is imported under its dotted
  name (``configs.firma.digits``) with its top package importable from where it
  lies, so config files reuse each other with ordinary imports (``from
  configs.firma import digits``) whatever the working directory."""
  path = os.path.abspath(path)
  parts = [os.path.splitext(os.path.basename(path))[0]]
  folder = os.path.dirname(path)
  while os.path.isfile(os.path.join(folder, "__init__.py")):
    parts.insert(0, os.path.basename(folder))
    folder = os.path.dirname(folder)
  if len(parts) > 1:
    import_package(parts[0], os.path.join(folder, parts[0]))
    name = ".".join(parts)
  else:
    label = os.path.relpath(path).replace(os.sep, "_").replace(".", "_")
    name = f"fedfrac_config_{label}"
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def import_package(name, folder):
  """Make the package in ``folder`` importable as ``name`` (its sub-packages and
  modules then import as usual), unless ``name`` already is that package."""
  known = sys.modules.get(name)
  target = os.path.realpath(folder)
  if known is not None and target in map(os.path.realpath, getattr(known, "__path__", ())):
    return known
  spec = importlib.util.spec_from_file_location(
      name, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder])
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module
  spec.loader.exec_module(module)
  return module


def sibling_config(config_file, name):
  """Deprecated: import the sibling as a module (``from configs.bev import base``;
  ``configs/`` is a package). The config module ``name`` beside ``config_file``
  (pass ``__file__``), loaded by :func:`import_config_file`."""
  warnings.warn("fedfrac.config.sibling_config is deprecated: configs/ is a package, "
                "import the sibling config (from configs.<folder> import <name>), or "
                "load a file with fedfrac.config_base.import_config_file",
                DeprecationWarning, stacklevel=2)
  return import_config_file(os.path.join(os.path.dirname(os.path.abspath(config_file)),
                                         name))


@functools.lru_cache(maxsize=None)
def schema() -> Section:
  """The config's one declaration: every key with its default, meaning and
  check, each section owned by the layer that reads it (see
  :mod:`fedfrac.config_schema`). Imported here, when first asked for, as the
  config is the one way in to every layer."""
  from fedfrac.data.schema import DATA
  from fedfrac.models.schema import MODEL
  from fedfrac.runner.schema import CLIENT, LOG, METHODS, RUN, SERVER, TASK
  from fedfrac.sim.schema import ATTACK, CHURN, CLOCK, ENGINE, SYSTEM
  return Section("", "Run", RUN + (DATA, MODEL, CLIENT, TASK, ENGINE, CHURN, SYSTEM,
                                   CLOCK, SERVER, ATTACK, METHODS, LOG))


def base_config() -> ml_collections.ConfigDict:
  """Every field a run reads, at its default (:func:`schema`)."""
  return schema().defaults()


def check_key(config, dotted, node=None, prefix=None) -> None:
  """Run the checks :func:`schema` declares for the key ``dotted`` (``"only"``,
  ``"data.alpha"``) on its value in ``config`` (or in ``node``, the section
  holding it, found at ``config.<prefix>``)."""
  section, _, name = dotted.rpartition(".")
  if node is None:
    node = config
    for part in section.split(".") if section else ():
      node = node[part]
  field = schema()
  for part in dotted.split("."):
    field = field[part]
  where = section if prefix is None else prefix
  for c in field.checks():
    c(f"{where}.{name}" if where else name, node[name], node)


def method_labels(config):
  """The labels of the methods to run: all, or those named by ``config.only``."""
  labels = list(config.methods.keys())
  check_key(config, "only")
  if config.only:
    wanted = [s.strip() for s in config.only.split(",") if s.strip()]
    check(wanted, "only", config.only, f"names no method label; labels are "
          f"{', '.join(labels)} ('' runs all)")
    for w in wanted:
      if w not in labels:
        fail("only", config.only, f"unknown method label {w!r}; labels are "
              f"{', '.join(labels)}")
    labels = [l for l in labels if l in wanted]
  return labels


# Sections a method entry may override for itself (``methods.<label>.<section>``).
METHOD_SECTIONS = ("client", "server", "attack", "clock")


def method_options(method_cfg) -> dict:
  """Algorithm options of one ``methods.<label>`` entry (without name and the
  per-method ``client`` / ``server`` / ``attack`` overrides)."""
  return {k: v for k, v in method_cfg.items()
          if k != "name" and k not in METHOD_SECTIONS}


def config_section(config, section) -> ml_collections.ConfigDict:
  """``config.<section>``; the defaults when a hand-built config lacks it."""
  value = config.get(section, None)
  return base_config()[section] if value is None else value


def section_config(config, label, section) -> ml_collections.ConfigDict:
  """``config.<section>`` with ``methods.<label>.<section>`` overrides applied."""
  merged = ml_collections.ConfigDict(config_section(config, section).to_dict())
  overrides = config.methods[label].get(section, None)
  if overrides:
    for k, v in overrides.items():
      if k not in merged:
        fail(f"methods.{label}.{section}.{k}", v,
              f"unknown {section} option; allowed: {', '.join(merged.keys())}")
      merged[k] = v
  return merged


def client_config(config, label) -> ml_collections.ConfigDict:
  """``config.client`` with the method's ``client`` overrides applied."""
  return section_config(config, label, "client")


def server_config(config, label) -> ml_collections.ConfigDict:
  """``config.server`` with the method's ``server`` overrides applied."""
  return section_config(config, label, "server")


def attack_config(config, label) -> ml_collections.ConfigDict:
  """``config.attack`` with the method's ``attack`` overrides applied."""
  return section_config(config, label, "attack")


def aggregator_spec_of(sc) -> server_lib.AggregatorSpec:
  return server_lib.AggregatorSpec(name=sc.aggregator, trim_beta=sc.trim_beta,
                                   num_byzantine=sc.num_byzantine, multi=sc.multi)


def aggregator_spec(config, label) -> server_lib.AggregatorSpec:
  """The :class:`AggregatorSpec` of method ``label``."""
  return aggregator_spec_of(server_config(config, label))


def files_source(config, data_dir, format="auto", **options):
  """``config`` reading local files: ``data.source="files"``, ``data.dir=data_dir``,
  ``data.files.format=format`` and any other ``data.files`` option. Every config
  of a tfds dataset works this way, as does the command-line override
  ``--config.data.source=files --config.data.dir=DIR``."""
  config.data.source = "files"
  config.data.dir = data_dir
  config.data.files.format = format
  for key, value in options.items():
    if key not in config.data.files:
      fail(f"data.files.{key}", value,
            f"unknown option; allowed: {', '.join(config.data.files.keys())}")
    config.data.files[key] = value
  return config
