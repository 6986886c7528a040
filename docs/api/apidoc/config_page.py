"""The config page: every key of ``fedfrac.config.base_config()`` with its
default, what its checks allow and its note, all from the key's one declaration
(its ``Field``, as ``fedfrac-run --list`` prints them), and the values
the registries ``--list`` prints (data sources, partitions, models, algorithms)."""
from __future__ import annotations

import importlib

from apidoc.rest import escape, table, title


def config_notes() -> tuple:
  """``({key: note}, {section: intro})`` from the config's declaration
  (:func:`fedfrac.config_base.schema`): a key's note is its field's ``doc``, a
  section's intro its section's ``doc`` (sub-sections' docs follow their
  section's)."""
  from fedfrac import config_base
  notes, intros = {}, {}

  def walk(section, prefix, top):
    for entry in section.entries:
      key = f"{prefix}{entry.name}"
      if hasattr(entry, "entries"):
        if entry.doc:
          intros.setdefault(top or entry.name, []).append(entry.doc)
        walk(entry, f"{key}.", top or entry.name)
      elif entry.doc:
        notes[key] = entry.doc
  walk(config_base.schema(), "", "")
  return notes, {k: " ".join(v) for k, v in intros.items()}


def config_keys() -> list:
  """``[(dotted key, default)]`` of every leaf of :func:`fedfrac.config.base_config`."""
  from fedfrac import config as config_lib
  out = []

  def walk(node, prefix):
    for k in node.keys():
      v = node[k]
      if hasattr(v, "keys"):
        walk(v, f"{prefix}{k}.")
      else:
        out.append((f"{prefix}{k}", v))
  walk(config_lib.base_config(), "")
  return out


def config_page() -> str:
  from fedfrac import algorithms, catalog, models
  from fedfrac.data import sources
  partition = importlib.import_module("fedfrac.data.partition")
  from fedfrac import config_base
  notes, intros = config_notes()
  allowed = {k: a for k, _, a, _ in config_base.schema().described()}
  keys = config_keys()
  lines = title("Config keys") + [
      "Every key of ``fedfrac.config.base_config()`` with its default; any of them is "
      "set in a config file or on the command line (``--config.<key>=<value>``) and "
      "validated before compute. Generated from the config and from the registries "
      "``fedfrac-run --list`` prints.", ""]
  sections = list(dict.fromkeys(k.split(".")[0] if "." in k else "" for k, _ in keys))
  for section in sections:
    lines += title(f"``{section}``" if section else "Run", "-")
    if intros.get(section):
      lines += [escape(intros[section]), ""]
    rows = [(f"``{k}``", f"``{v!r}``", escape(allowed.get(k, "")), escape(notes.get(k, "")))
            for k, v in keys if (k.split(".")[0] if "." in k else "") == section]
    lines += table(("key", "default", "allowed", "note"), rows)
  lines += title("Values from the registries", "-")
  for heading, key, descriptions in (
      ("Data sources", "data.source", sources.SOURCE_DESCRIPTIONS),
      ("Partitions", "data.partition", partition.SCHEME_DESCRIPTIONS),
      ("Models", "model.name", models.MODEL_DESCRIPTIONS)):
    lines += title(f"{heading} (``{key}``)", "~")
    lines += table(("value", "what"), [(f"``{n}``", escape(d))
                                        for n, d in descriptions.items()])
  lines += title("Algorithms (``methods.<label>.name``)", "~")
  lines += table(("name", "family", "options"), [
      (f":doc:`algorithms/{n}`", escape(catalog.family(n).title),
       ", ".join(f"``{k}``" for k, _ in algorithms.entry(n).schema.items()) or "none")
      for n in algorithms.names()])
  return "\n".join(lines)
