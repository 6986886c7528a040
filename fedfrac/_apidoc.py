"""The generated pages of the API reference (``docs/api``, ``make docs``).

Sphinx (autodoc + napoleon) renders the docstrings; this module writes the reST
sources that name what to render, from the package itself, so the reference
cannot miss a public function of ``fedfrac.ops`` or ``fedfrac.optim`` or a
registered algorithm:

* ``ops.rst``, ``optim.rst``, ``data.rst``: every public function and class
  defined in each module of ``fedfrac.ops`` / ``fedfrac.optim``, and in the data
  sources, partitioners, local files and federated layout;
* ``algorithms/<name>.rst``: one page per registered algorithm with its family,
  paper (:data:`fedfrac.catalog.PAPERS`), the paper equations its module's
  docstrings cite (:func:`fedfrac._equations.citations`), its hyper-parameters
  with defaults and allowed values (its :class:`~fedfrac.algorithms.schema.HParamSchema`),
  and the module's documentation;
* ``config.rst``: every key of :func:`fedfrac.config.base_config` with its default
  and the comment beside it in ``fedfrac/config.py``, and the values that come
  from the registries ``--list`` prints (data sources, partitions, models,
  algorithms).

``python -m fedfrac._apidoc write DIR`` writes them (``docs/api/conf.py`` does so
on every build); ``python -m fedfrac._apidoc check DIR/objects.inv`` exits 1
unless a built reference's inventory holds every public function and class of
``fedfrac.ops`` / ``fedfrac.optim``, the run API and every algorithm page.
"""
from __future__ import annotations

import ast
import functools
import importlib
import inspect
import io
import os
import pkgutil
import re
import sys
import tokenize
import zlib

# The folder under docs/api the generated pages go to.
GENERATED = "generated"
# Packages whose every public function and class the reference documents.
FULL_PACKAGES = ("fedfrac.ops", "fedfrac.optim")
DATA_MODULES = ("fedfrac.data.dataset", "fedfrac.data.sources", "fedfrac.data.partition",
                "fedfrac.data.files", "fedfrac.data.federated", "fedfrac.data.arrays")
# The run API: (module, names); the classes with their members.
RUN_API = (("fedfrac.runner.loop", ("run",)),
           ("fedfrac.runner.many", ("run_many",)),
           ("fedfrac.runner.records", ("Results", "RunRecord", "summarize")),
           ("fedfrac.runner.overview", ("ResultFigures", "results_figures", "rounds_figure",
                                        "ranking_figure", "save_sweep_figures")),
           ("fedfrac.runner.summary_table", ("format_table",)),
           ("fedfrac.sweep.run", ("run_sweep", "run")),
           ("fedfrac.models.adapter", ("flax_model", "FlaxAdapter")))
CONTRACT_API = (("fedfrac.algorithms.contract", ("FedAlgorithm", "BuildContext",
                                                 "AlgorithmEntry")),
                ("fedfrac.algorithms.client_view", ("ClientView", "step_budget")),
                ("fedfrac.algorithms", ("entry", "make", "hparams", "names", "register",
                                        "unregister")),
                ("fedfrac.algorithms.check", ("check_algorithm", "ContractError")),
                ("fedfrac.algorithms.server_optimizer", ("from_text", "aggregate_with",
                                                         "describe")),
                ("fedfrac.algorithms.schema", ("HParam", "HParamSchema")),
                ("fedfrac.algorithms.families", ("Family", "family")))


def public_objects(module_name: str) -> list:
  """``[(name, "function" | "class")]`` defined in ``module_name`` (not imported
  into it), without a leading underscore, in source order."""
  module = importlib.import_module(module_name)
  out = []
  for name, obj in vars(module).items():
    if name.startswith("_") or getattr(obj, "__module__", None) != module_name:
      continue
    if inspect.isclass(obj):
      out.append((name, "class"))
    elif inspect.isfunction(obj):
      out.append((name, "function"))
  return out


def package_modules(package: str) -> list:
  """The modules of ``package`` (not its ``__init__``), sorted."""
  pkg = importlib.import_module(package)
  return [f"{package}.{m.name}" for m in sorted(pkgutil.iter_modules(pkg.__path__),
                                                key=lambda m: m.name)]


def escape(text: str) -> str:
  """``text`` as plain reST (markup characters escaped)."""
  return re.sub(r"([\\`*_|<>\[\]])", r"\\\1", str(text))


def _title(text: str, char: str = "=") -> list:
  return [text, char * len(text), ""]


def _object_directives(module_name: str, names=None, members: bool = True) -> list:
  objects = public_objects(module_name)
  kinds = dict(objects)
  chosen = [n for n, _ in objects] if names is None else list(names)
  lines = []
  for name in chosen:
    kind = kinds.get(name, "class" if inspect.isclass(
        getattr(importlib.import_module(module_name), name)) else "function")
    lines.append(f".. auto{kind}:: {module_name}.{name}")
    if kind == "class" and members:
      lines.append("   :members:")
    lines.append("")
  return lines


def module_section(module_name: str, names=None, heading: str = "-") -> list:
  """A module's docstring and its public functions and classes (or ``names``)."""
  return (_title(f"``{module_name}``", heading) + [f".. automodule:: {module_name}", ""]
          + _object_directives(module_name, names))


def modules_page(title: str, intro: str, modules, names=None) -> str:
  lines = _title(title) + [intro, ""]
  for module_name in modules:
    lines += module_section(module_name, None if names is None else names.get(module_name))
  return "\n".join(lines)


# --------------------------------------------------------------- docstrings

# Google-style section headers napoleon reads (their bodies are left as written).
_SECTION = re.compile(r"\s*(Args|Arguments|Parameters|Returns?|Yields?|Raises|Attributes|"
                      r"Examples?|Notes?|Warnings?|See Also|References|Keyword Args|"
                      r"Keyword Arguments|Other Parameters|Methods|Todo):\s*$")
_BULLET = re.compile(r"([*+-]|\d+\.|\(\w\)|•)\s+")
_OPTION = re.compile(r"--?\w[\w-]*(?:[ =][^\s]+)?\s{2,}\S")
_LITERAL = re.compile(r"(``.+?``)")
_EMPHASIS = re.compile(r"(?<![\w*\\])\*(?=[^\s*])[^*\n]*?(?<=[^\s*\\])\*(?![\w*])")


def _escape_markup(text: str) -> str:
  """``|`` (norms, set sizes: never a substitution here) and ``*`` that opens no
  emphasis, escaped outside ``inline literals``."""
  parts = _LITERAL.split(text)
  for i in range(0, len(parts), 2):
    part = parts[i].replace("|", "\\|")
    keep = [(m.start(), m.end()) for m in _EMPHASIS.finditer(part)]
    out, last = [], 0
    for start, end in keep:
      out.append(part[last:start].replace("*", "\\*"))
      out.append(part[start:end])
      last = end
    out.append(part[last:].replace("*", "\\*"))
    parts[i] = "".join(out)
  return "".join(parts)


def _escaped_line(indent: int, text: str) -> str:
  item = _BULLET.match(text)
  head = text[:item.end()] if item else ""
  return " " * indent + head + _escape_markup(text[len(head):])


def _start_literal(out: list, indent: int) -> int:
  """End ``out`` with a literal-block introducer for lines indented by ``indent``
  (a ``Flags:`` line above becomes ``Flags::``, else a ``::`` line is added);
  returns the introducer's indent."""
  last = next((i for i in range(len(out) - 1, -1, -1) if out[i].strip()), None)
  if last is not None:
    above = len(out[last]) - len(out[last].lstrip())
    if above < indent and out[last].rstrip().endswith(":"):
      if not out[last].rstrip().endswith("::"):
        out[last] = out[last].rstrip() + ":"
      del out[last + 1:]
      out.append("")
      return above
  intro = max(indent - 2, 0)
  if out and out[-1].strip():
    out.append("")
  out += [" " * intro + "::", ""]
  return intro


def plain_docstring_to_rst(lines: list) -> list:
  """The package's docstrings are plain text with formulas (``|S_t|``,
  ``‖Δw‖``, indented equation lines); as reST, ``|x|`` would be a substitution
  and an indented line without a blank line before it an error. This keeps the
  text and makes it valid reST: ``|`` and stray ``*`` escaped, and a blank line
  wherever the indentation changes (an indented formula becomes an indented
  block), except in napoleon sections (``Args:`` ...), literal blocks (after
  ``::``), doctests and the continuation lines of a list item or an option; an
  indented block of command-line flags or a shell command becomes a literal
  block."""
  out: list = []
  prev_indent = None      # content indent of the previous text line
  bullet_indent = None    # indent of the list item being continued
  option_indent = None    # indent of the option (``--flag VALUE  text``) being continued
  section_below = None    # indent of a napoleon section header
  literal_below = None    # indent of the line that introduced a literal block
  for line in lines:
    if not line.strip():
      out.append(line)
      continue
    indent = len(line) - len(line.lstrip())
    text = line.lstrip()
    if literal_below is not None:
      if indent > literal_below:
        out.append(line)
        continue
      literal_below = None
      if out[-1].strip():
        out.append("")
    if section_below is not None:
      if indent > section_below:
        out.append(_escaped_line(indent, text))
        continue
      section_below = None
      if out[-1].strip():
        out.append("")
    if text.startswith(">>>"):
      out.append(line)
      prev_indent = None
      continue
    bullet = _BULLET.match(text)
    option = _OPTION.match(text)
    if indent > 0 and (option is not None or text.endswith(" \\")):
      # A block of command-line flags or a shell command: kept verbatim.
      literal_below = _start_literal(out, indent)
      out.append(line)
      prev_indent, bullet_indent, option_indent = None, None, None
      continue
    continues = (indent == prev_indent
                 or (bullet is not None and bullet_indent == indent)
                 or (option_indent is not None and indent > option_indent)
                 or (option is not None and option_indent == indent))
    header = _SECTION.match(line) is not None
    if (header or (prev_indent is not None and not continues)) and out and out[-1].strip():
      out.append("")
    if header:
      out.append(line)
      section_below, prev_indent, bullet_indent, option_indent = indent, None, None, None
      continue
    out.append(_escaped_line(indent, text))
    if text.rstrip().endswith("::"):
      out.append("")
      literal_below, prev_indent, bullet_indent, option_indent = indent, None, None, None
      continue
    if option is not None:
      option_indent, prev_indent, bullet_indent = indent, indent, None
    elif bullet is not None:
      bullet_indent, prev_indent, option_indent = indent, indent + bullet.end(), None
    elif option_indent is not None and indent > option_indent:
      prev_indent = option_indent
    else:
      prev_indent, option_indent = indent, None
      if bullet_indent is not None and indent <= bullet_indent:
        bullet_indent = None
  return out


def process_docstring(app, what, name, obj, options, lines) -> None:
  """Sphinx ``autodoc-process-docstring`` handler: :func:`plain_docstring_to_rst`
  in place, before napoleon reads the sections."""
  del app, what, name, obj, options
  lines[:] = plain_docstring_to_rst(list(lines))


# --------------------------------------------------------------- algorithms


def algorithm_module(name: str) -> str:
  from fedfrac import algorithms
  return algorithms.entry(name).build.__module__


@functools.lru_cache(maxsize=None)
def _citations() -> tuple:
  from fedfrac import _equations
  return tuple(_equations.citations()[0])


def equation_rows(module_name: str) -> list:
  """``[(paper, equation, target)]`` the docstrings of ``module_name`` cite."""
  return [(r.paper, r.equation, r.target) for r in _citations()
          if r.target == module_name or r.target.startswith(module_name + ".")]


def hparam_rows(name: str) -> list:
  """``[(option, default repr, allowed)]`` of algorithm ``name``'s schema."""
  from fedfrac import algorithms, catalog
  return [(key, repr(hp.default), catalog.allowed_text(hp))
          for key, hp in algorithms.entry(name).schema.items()]


def _table(header, rows) -> list:
  lines = [".. list-table::", "   :header-rows: 1", ""]
  for row in [header] + list(rows):
    lines.append(f"   * - {row[0]}")
    lines += [f"     - {cell}" for cell in row[1:]]
  return lines + [""]


def algorithm_page(name: str, documented: set) -> str:
  """The page of algorithm ``name``; ``documented`` holds the modules whose
  members an earlier page already rendered (they are then not indexed again)."""
  from fedfrac import algorithms, catalog
  entry = algorithms.entry(name)
  module_name = algorithm_module(name)
  caps = ", ".join(entry.capabilities()) or "none"
  lines = _title(f"``{name}``") + [
      escape(entry.summary) + ".", "",
      f"- **Family:** {escape(catalog.family(name).title)}",
      f"- **Paper:** {escape(catalog.PAPERS.get(name, 'not recorded'))}",
      f"- **Capabilities:** {caps}",
      f"- **Module:** ``{module_name}``", ""]
  if name in catalog.STAND_INS:
    lines += [".. note::", f"   Stand-in: {escape(catalog.STAND_INS[name])}.", ""]
  lines += _title("Equations", "-")
  eqs = equation_rows(module_name)
  if eqs:
    grouped: dict = {}
    for p, e, t in eqs:
      grouped.setdefault((p, e), []).append(f"``{t}``")
    lines += _table(("paper", "equation", "implemented in"),
                    [(escape(p), escape(e), ", ".join(ts)) for (p, e), ts in grouped.items()])
  else:
    lines += ["Its module's docstrings cite no numbered paper equation; the module "
              "notes below say what it implements.", ""]
  lines += _title("Hyper-parameters", "-")
  rows = hparam_rows(name)
  if rows:
    lines += [f"Options of ``config.methods.<label>`` with ``name={name!r}`` "
              "(defaults of this name's preset):", ""]
    lines += _table(("option", "default", "allowed"),
                    [(f"``{k}``", f"``{d}``", escape(a)) for k, d, a in rows])
  else:
    lines += ["No options.", ""]
  lines += _title("Module", "-") + [f".. automodule:: {module_name}", "   :members:"]
  if module_name in documented:
    lines.append("   :no-index:")
  documented.add(module_name)
  return "\n".join(lines + [""])


def algorithms_index() -> str:
  from fedfrac import catalog
  lines = _title("Algorithms") + [
      "Every algorithm is a :class:`~fedfrac.algorithms.contract.FedAlgorithm` of pure "
      "functions, registered by name with an "
      ":class:`~fedfrac.algorithms.contract.AlgorithmEntry` (its ``build``, the "
      ":class:`~fedfrac.algorithms.schema.HParamSchema` of its options and its "
      "capabilities); ``fedfrac.algorithms.entry(name)`` is the registry's one way in. "
      "The families are :data:`fedfrac.catalog.FAMILIES`.", ""]
  lines += _title("The contract and the registry", "-")
  for module_name, names in CONTRACT_API:
    lines += _title(f"``{module_name}``", "~") + _object_directives(module_name, names)
  lines += _title("Registered algorithms", "-")
  for fam in catalog.FAMILIES:
    members = [n for n in fam.names]
    lines += _title(fam.title, "~")
    lines += [f"- :doc:`{n}` -- {escape(_summary(n))}" for n in members] + [""]
  lines += [".. toctree::", "   :hidden:", ""]
  lines += [f"   {n}" for fam in catalog.FAMILIES for n in fam.names]
  return "\n".join(lines + [""])


def _summary(name: str) -> str:
  from fedfrac import algorithms
  return algorithms.entry(name).summary


# ------------------------------------------------------------------- config


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
  lines = _title("Config keys") + [
      "Every key of ``fedfrac.config.base_config()`` with its default; any of them is "
      "set in a config file or on the command line (``--config.<key>=<value>``) and "
      "validated before compute. Generated from the config and from the registries "
      "``fedfrac-run --list`` prints.", ""]
  sections = list(dict.fromkeys(k.split(".")[0] if "." in k else "" for k, _ in keys))
  for section in sections:
    lines += _title(f"``{section}``" if section else "Run", "-")
    if intros.get(section):
      lines += [escape(intros[section]), ""]
    rows = [(f"``{k}``", f"``{v!r}``", escape(notes.get(k, "")))
            for k, v in keys if (k.split(".")[0] if "." in k else "") == section]
    lines += _table(("key", "default", "note"), rows)
  lines += _title("Values from the registries", "-")
  for title, key, descriptions in (
      ("Data sources", "data.source", sources.SOURCE_DESCRIPTIONS),
      ("Partitions", "data.partition", partition.SCHEME_DESCRIPTIONS),
      ("Models", "model.name", models.MODEL_DESCRIPTIONS)):
    lines += _title(f"{title} (``{key}``)", "~")
    lines += _table(("value", "what"), [(f"``{n}``", escape(d))
                                        for n, d in descriptions.items()])
  lines += _title("Algorithms (``methods.<label>.name``)", "~")
  lines += _table(("name", "family", "options"), [
      (f":doc:`algorithms/{n}`", escape(catalog.family(n).title),
       ", ".join(f"``{k}``" for k, _ in algorithms.entry(n).schema.items()) or "none")
      for n in algorithms.names()])
  return "\n".join(lines)


# ------------------------------------------------------------------- output


def sources() -> dict:
  """``{relative path: reST text}`` of every generated page."""
  from fedfrac import algorithms
  pages = {
      "ops.rst": modules_page(
          "fedfrac.ops", "The pure, vmappable math of the papers: no engine, no I/O. "
          "Every public function and class of each module.", package_modules("fedfrac.ops")),
      "optim.rst": modules_page(
          "fedfrac.optim", "optax gradient transformations and schedules used by the "
          "clients. Every public function and class of each module.",
          package_modules("fedfrac.optim")),
      "data.rst": modules_page(
          "Data sources and partitioners", "Where a run's data comes from and how it "
          "is split over clients; ``data.source`` and ``data.partition`` pick them "
          "(:doc:`config`).", DATA_MODULES),
      "running.rst": modules_page(
          "Running experiments", "``ff.run`` / ``ff.run_many`` (the same as "
          "``fedfrac.runner.run`` / ``run_many``), what they return, the two figures "
          "of a run and its summary table, and sweeps from Python.",
          [m for m, _ in RUN_API], dict(RUN_API)),
      "config.rst": config_page(),
      "algorithms/index.rst": algorithms_index(),
  }
  documented: set = set()
  for name in algorithms.names():
    pages[f"algorithms/{name}.rst"] = algorithm_page(name, documented)
  return pages


def write(directory: str) -> list:
  """Write :func:`sources` under ``directory``; returns the paths written (a
  file whose text is unchanged is left alone, so Sphinx rebuilds only what changed)."""
  written = []
  for rel, text in sources().items():
    path = os.path.join(directory, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
    if old != text:
      with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    written.append(path)
  return written


def expected_objects() -> set:
  """``{(domain:role, name)}`` a built reference must hold."""
  from fedfrac import algorithms
  out = set()
  for package in FULL_PACKAGES:
    for module_name in package_modules(package):
      for name, kind in public_objects(module_name):
        out.add((f"py:{kind}", f"{module_name}.{name}"))
  for module_name, names in RUN_API:
    kinds = dict(public_objects(module_name))
    out |= {(f"py:{kinds[n]}", f"{module_name}.{n}") for n in names}
  out |= {("std:doc", f"{GENERATED}/algorithms/{n}") for n in algorithms.names()}
  out |= {("std:doc", f"{GENERATED}/config")}
  return out


def inventory(path: str) -> set:
  """``{(domain:role, name)}`` of a Sphinx ``objects.inv``."""
  with open(path, "rb") as f:
    for _ in range(4):
      f.readline()
    text = zlib.decompress(f.read()).decode("utf-8")
  out = set()
  for line in text.splitlines():
    m = re.match(r"(.+?)\s+(\S+:\S+)\s+-?\d+\s", line)
    if m:
      out.add((m.group(2), m.group(1)))
  return out


def main(argv=None) -> int:
  argv = sys.argv[1:] if argv is None else list(argv)
  if len(argv) != 2 or argv[0] not in ("write", "check"):
    print("usage: python -m fedfrac._apidoc write DIR | check OBJECTS_INV", file=sys.stderr)
    return 2
  if argv[0] == "write":
    write(argv[1])
    return 0
  missing = sorted(expected_objects() - inventory(argv[1]))
  for role, name in missing:
    print(f"error: the built reference lacks {role} {name}", file=sys.stderr)
  if not missing:
    print(f"{argv[1]}: every public function of {', '.join(FULL_PACKAGES)}, the run "
          "API and every algorithm page are in the reference")
  return 1 if missing else 0


if __name__ == "__main__":
  sys.exit(main())
