"""reST for the generated pages: escaping, titles and tables, and the package's
plain-text docstrings made valid reST (:func:`plain_docstring_to_rst`, run on
every docstring autodoc reads, before napoleon)."""
from __future__ import annotations

import re


def escape(text: str) -> str:
  """``text`` as plain reST (markup characters escaped)."""
  return re.sub(r"([\\`*_|<>\[\]])", r"\\\1", str(text))


def title(text: str, char: str = "=") -> list:
  return [text, char * len(text), ""]


def table(header, rows) -> list:
  lines = [".. list-table::", "   :header-rows: 1", ""]
  for row in [header] + list(rows):
    lines.append(f"   * - {row[0]}")
    lines += [f"     - {cell}" for cell in row[1:]]
  return lines + [""]


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
