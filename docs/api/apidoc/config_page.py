"""The config page: every key of ``fedfrac.config.base_config()`` with its
default and the comment beside it in ``fedfrac/config_base.py``, and the values
the registries ``--list`` prints (data sources, partitions, models, algorithms)."""
from __future__ import annotations

import ast
import importlib
import io
import tokenize

from apidoc.rest import escape, table, title


def _comments(source: str) -> tuple:
  """``({line: trailing comment}, {line: comment-only text})`` of ``source``;
  a comment-only line right below a trailing comment, in its column, continues it."""
  trailing, alone = {}, {}
  code_lines = set()
  last = None   # (line, column) of the last trailing comment
  for tok in tokenize.generate_tokens(io.StringIO(source).readline):
    if tok.type in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                    tokenize.ENDMARKER):
      continue
    line, col = tok.start
    if tok.type != tokenize.COMMENT:
      code_lines.add(line)
      continue
    text = tok.string.lstrip("#").strip()
    if line in code_lines:
      trailing[line] = text
      last = (line, col)
    elif last and line == last[0] + 1 and col == last[1]:
      trailing[last[0]] += " " + text
      last = (line, col)
    else:
      alone[line] = text
  return trailing, alone


def _path(node) -> str:
  parts = []
  while isinstance(node, ast.Attribute):
    parts.append(node.attr)
    node = node.value
  return ".".join(reversed(parts)) if isinstance(node, ast.Name) and node.id == "c" else ""


def config_notes() -> tuple:
  """``({key: note}, {section: intro})`` from the comments of
  ``fedfrac.config.base_config`` (defined in :mod:`fedfrac.config_base`): a key's
  note is the comment beside it, a section's intro the comment blocks above its
  assignments."""
  from fedfrac import config_base
  with open(config_base.__file__, encoding="utf-8") as f:
    source = f.read()
  trailing, alone = _comments(source)
  func = next(n for n in ast.parse(source).body
              if isinstance(n, ast.FunctionDef) and n.name == "base_config")
  notes, intros = {}, {}
  for stmt in func.body:
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
      continue
    key = _path(stmt.targets[0])
    if not key:
      continue
    block, line = [], stmt.lineno - 1
    while line in alone:
      block.insert(0, alone[line])
      line -= 1
    call = stmt.value
    is_section = isinstance(call, ast.Call) and "ConfigDict" in (
        getattr(call.func, "attr", ""), getattr(call.func, "id", ""))
    section = key.split(".")[0] if "." in key or is_section else ""
    if block:
      intros.setdefault(section, []).append(" ".join(block))
    if stmt.lineno in trailing:
      notes[key] = trailing[stmt.lineno]
    if (isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Call)
        and getattr(call.args[0].func, "id", "") == "dict"):
      for kw in call.args[0].keywords:
        if kw.arg and kw.value.lineno in trailing:
          notes[f"{key}.{kw.arg}"] = trailing[kw.value.lineno]
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
  notes, intros = config_notes()
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
    rows = [(f"``{k}``", f"``{v!r}``", escape(notes.get(k, "")))
            for k, v in keys if (k.split(".")[0] if "." in k else "") == section]
    lines += table(("key", "default", "note"), rows)
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
