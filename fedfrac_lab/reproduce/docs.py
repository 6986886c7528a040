"""``fedfrac-reproduce docs``: every figure README.md, REPRODUCTION.md and the
guide's reproductions page (docs/api/guide/reproducing.md) quote from a results
file is rendered from that file (and so are the figures docs/design.md quotes from
the committed runs), and so is every results table that can be rendered from a
committed results JSON.

  fedfrac-reproduce docs            # rewrite the generated spans and tables in place
  fedfrac-reproduce docs --check    # exit 1 naming what differs, what is missing
                                    # and any result figure outside a generated span

A doc marks each generated span

  <!-- BEGIN generated: fedfrac-reproduce docs --block=NAME -->TEXT<!-- END generated -->

TEXT is one line inside a table cell or a sentence (an *inline* block) or whole
lines (the markers then sit on lines of their own). One registry holds every
block: ``BLOCKS`` (name -> the doc it belongs to, the results files it reads and
a function that returns its markdown), filled by :mod:`fedfrac_lab.reproduce.doc_blocks`
with the :func:`block` decorator; ``RESULT_TABLES`` (results markdown -> a
function that renders it from its JSON) likewise with :func:`result_table`. The
registry (:mod:`fedfrac_lab.reproduce.doc_registry`) sits below the block modules
and this command, which re-exports it. To add a figure to a doc: write the
function, register it, put the markers in the doc and run ``fedfrac-reproduce
docs``; the docs test then keeps the two in step.

The user guide's reproduction pages (``PAGES``, reST) mark a span with reST
comments on lines of their own, ``.. BEGIN generated: fedfrac-reproduce docs
--block=NAME`` and ``.. END generated``. The reproduction figures they show
(``docs/images/reproduction/*.png``, registered with
:func:`fedfrac_lab.reproduce.doc_registry.figures`) are drawn when missing or stale
and checked by ``--check`` (:mod:`fedfrac_lab.reproduce.figure_files`).

``--check`` also reports *stray figures* (in README.md, REPRODUCTION.md and the
guide's reproducing page; design.md keeps measurements of its own beside its
spans): in REPRODUCTION.md any digit in an "ours vs published" column outside a
generated span, and in all three a mean ± std or an "N of M … agree" count outside
a generated span (code and the measurement sections of ``FREE_SECTIONS`` aside).
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import textwrap
from typing import List, Tuple

from fedfrac_lab.reproduce import common, figure_files
from fedfrac_lab.reproduce.doc_registry import (  # noqa: F401  (re-exported)
  BLOCKS, RESULT_TABLES, Block, block, result_table)

# The user guide's reproduction pages (reST), one per paper: their generated
# spans sit between reST comments (``RST_BEGIN`` … ``RST_END``) on lines of their own.
PAGES = tuple(f"docs/api/guide/reproductions/{paper}.rst"
              for paper in ("fofedavg", "fo_ri_fedavg", "firma", "kuramoto"))
GUIDE_REPRODUCING = "docs/api/guide/reproducing.md"
GUIDE_ASYNCHRONOUS = "docs/api/guide/asynchronous.md"     # its study paragraph
DOCS = ("README.md", "REPRODUCTION.md", "docs/design.md", GUIDE_REPRODUCING,
        GUIDE_ASYNCHRONOUS) + PAGES
# The docs whose every result figure must sit in a generated span (design.md
# also reports measurements of its own, with their commands, between its spans).
STRAY_CHECKED = ("README.md", "REPRODUCTION.md", GUIDE_REPRODUCING)
BEGIN = "<!-- BEGIN generated: fedfrac-reproduce docs --block={name} -->"
END = "<!-- END generated -->"
SPAN = re.compile(r"<!-- BEGIN generated: fedfrac-reproduce docs --block=([\w.-]+) -->"
                  r"(.*?)<!-- END generated -->", re.S)
RST_BEGIN = ".. BEGIN generated: fedfrac-reproduce docs --block={name}"
RST_END = ".. END generated"
RST_SPAN = re.compile(r"^\.\. BEGIN generated: fedfrac-reproduce docs --block=([\w.-]+)$"
                      r"(.*?)^\.\. END generated$", re.S | re.M)
# Columns whose cells may hold a figure only inside a generated span.
RESULT_COLUMNS = {"REPRODUCTION.md": ("ours vs published",)}
# Sections (by heading) that report measurements of their own (quickstart, speed),
# not results files: the stray-figure check leaves them alone.
FREE_SECTIONS = {"README.md": ("Two commands",)}
MEAN_STD = re.compile(r"\d\s*±\s*\d")
AGREE_COUNT = re.compile(r"\b\d+\s*(?:/|of)\s*\d+\b[^|.\n]{0,60}\bagree")


def registry():
  """BLOCKS and RESULT_TABLES, filled (the blocks live in doc_blocks), and the
  figures (doc_figures)."""
  from fedfrac_lab.reproduce import (doc_blocks, doc_blocks_design,  # noqa: F401
                                 doc_blocks_design_runs,
                                 doc_blocks_estimates, doc_blocks_firma_files,
                                 doc_blocks_fo_ri, doc_blocks_sensitivity, doc_blocks_fractional,
                                 doc_blocks_other, doc_blocks_readme, doc_figures,
                                 doc_pages)                    # (register on import)
  return BLOCKS, RESULT_TABLES


def _rst(doc: str) -> bool:
  return doc.endswith(".rst")


# Prose a block renders (a paragraph, a bullet) is wrapped to this width; table
# rows, headings, code and indented lines stay as they are.
WRAP = 100


def wrap_prose(text: str) -> str:
  """``text`` with every prose line longer than :data:`WRAP` wrapped at spaces (a
  bullet's continuation indented under it), outside fenced code; a table row,
  heading, directive, comment or indented line is left whole."""
  out, fenced = [], False
  for line in text.split("\n"):
    if line.lstrip().startswith("```"):
      fenced = not fenced
    if (fenced or len(line) <= WRAP or line[:1] in " \t|#<`+=:."
        or line.startswith(".. ")):
      out.append(line)
      continue
    indent = "  " if line.startswith(("- ", "* ")) else ""
    out += textwrap.wrap(line, WRAP, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False)
  return "\n".join(out)


def rendered(b: Block) -> str:
  """The text between a block's markers: its markdown, on lines of its own
  unless inline (in a reST page: its reST, set off by blank lines). An inline
  block must stay one line without a cell separator."""
  text = b.render().strip("\n")
  if b.inline:
    if "\n" in text or "|" in text:
      raise ValueError(f"inline block {b.name!r} renders a newline or '|': {text!r}")
    return text
  text = wrap_prose(text)
  return f"\n\n{text}\n\n" if _rst(b.doc) else f"\n{text}\n"


def spans(text: str, doc: str = "") -> List[Tuple[str, int, int, str]]:
  """[(name, start, end, content)] of every generated span of a doc (``doc``: its
  path, which says whether its markers are markdown's or reST's)."""
  pattern = RST_SPAN if _rst(doc) else SPAN
  return [(m.group(1), m.start(), m.end(), m.group(2)) for m in pattern.finditer(text)]


def _begin(doc: str, name: str) -> str:
  return (RST_BEGIN if _rst(doc) else BEGIN).format(name=name)


def render_doc(doc: str, text: str) -> str:
  """``text`` with every generated span re-rendered (unknown names are kept as
  they are; :func:`check_doc` reports them)."""
  blocks, _ = registry()
  out, last = [], 0
  for name, start, end, _ in spans(text, doc):
    out.append(text[last:start])
    if name in blocks and blocks[name].doc == doc:
      out.append(_begin(doc, name) + rendered(blocks[name]) + (RST_END if _rst(doc) else END))
    else:
      out.append(text[start:end])
    last = end
  return "".join(out) + text[last:]


def _first_difference(a: str, b: str) -> str:
  la, lb = a.splitlines(), b.splitlines()
  for i, (x, y) in enumerate(zip(la, lb)):
    if x != y:
      return f"line {i + 1} of the block: committed {x[:160]!r}, rendered {y[:160]!r}"
  return f"committed {len(la)} lines, rendered {len(lb)}"


def _masked(text: str) -> str:
  """``text`` with generated spans, fenced code and inline code blanked out (line
  breaks kept, so line numbers still match)."""
  def blank(m):
    return re.sub(r"[^\n]", " ", m.group(0))
  text = SPAN.sub(blank, text)
  text = re.sub(r"```.*?```", blank, text, flags=re.S)
  return re.sub(r"`[^`\n]*`", blank, text)


def stray_figures(doc: str, text: str) -> List[str]:
  """Figures outside generated spans where the doc may only quote results through
  them (see the module docstring); none for a doc outside ``STRAY_CHECKED``."""
  problems = []
  if doc not in STRAY_CHECKED:
    return problems
  lines, original = _masked(text).splitlines(), text.splitlines()
  free, heading = FREE_SECTIONS.get(doc, ()), ""
  columns: List[int] = []
  for i, line in enumerate(lines):
    if original[i].startswith("#"):
      heading = original[i].lstrip("#").strip()
    if heading in free:
      continue
    where = f"{doc}:{i + 1}"
    for pattern, what in ((MEAN_STD, "a mean ± std"), (AGREE_COUNT, "an agreement count")):
      m = pattern.search(line)
      if m:
        problems.append(f"{where}: {what} outside a generated span: "
                        f"{original[i].strip()[:160]!r}")
    if line.startswith("|"):
      cells = [c.strip() for c in line.strip().strip("|").split("|")]
      if i + 1 < len(lines) and lines[i + 1].startswith("|---"):
        columns = [k for k, c in enumerate(cells) if c in RESULT_COLUMNS.get(doc, ())]
        continue
      for k in columns:
        if k < len(cells) and re.search(r"\d", cells[k]):
          problems.append(f"{where}: a figure in column "
                          f"{RESULT_COLUMNS[doc][0]!r} outside a generated span: "
                          f"{cells[k][:120]!r}")
    else:
      columns = []
  return problems


def check_doc(doc: str, text: str) -> List[str]:
  """Everything wrong with one doc: spans that differ from their rendering, spans
  of unknown or foreign blocks, registered blocks the doc lacks, stray figures."""
  blocks, _ = registry()
  problems, seen = [], set()
  for name, _, _, content in spans(text, doc):
    seen.add(name)
    b = blocks.get(name)
    if b is None:
      problems.append(f"{doc}: unknown block {name!r}")
    elif b.doc != doc:
      problems.append(f"{doc}: block {name!r} belongs to {b.doc}")
    else:
      want = rendered(b)
      if content != want:
        problems.append(f"{doc}: block {name!r} differs from the results "
                        f"({', '.join(b.sources)}): {_first_difference(content, want)}")
  for name, b in blocks.items():
    if b.doc == doc and name not in seen:
      problems.append(f"{doc}: block {name!r} is missing (its figures come from "
                      f"{', '.join(b.sources)})")
  return problems + stray_figures(doc, text)


def check_tables() -> List[str]:
  """Committed results tables that differ from their rendering."""
  _, tables = registry()
  problems = []
  for path, (render, sources) in tables.items():
    with open(common.find_file(path), encoding="utf-8") as f:
      committed = f.read()
    want = render()
    if committed != want:
      problems.append(f"{path}: differs from its rendering from {', '.join(sources)}: "
                      f"{_first_difference(committed, want)}")
  return problems


def main(argv=None):
  p = argparse.ArgumentParser(prog="fedfrac-reproduce docs",
                              description=__doc__.split("\n\n")[0])
  p.add_argument("--check", action="store_true",
                 help="change nothing; exit 1 listing every difference")
  p.add_argument("--root", default=common.CHECKOUT_DIR,
                 help="the checkout whose docs (DOCS) to render")
  p.add_argument("--block", default="", help="print one block's rendering and stop")
  args = p.parse_args(sys.argv[1:] if argv is None else list(argv))
  blocks, tables = registry()
  if args.block:
    if args.block not in blocks:
      print(f"error: block={args.block!r}: unknown; allowed: {', '.join(blocks)}",
            file=sys.stderr)
      return 2
    print(rendered(blocks[args.block]).strip("\n"))
    return 0
  problems = []
  for doc in DOCS:
    path = os.path.join(args.root, doc)
    with open(path, encoding="utf-8") as f:
      text = f.read()
    if args.check:
      problems += check_doc(doc, text)
    else:
      new = render_doc(doc, text)
      if new != text:
        common.write_text(path, new)
        print(f"wrote {path}", file=sys.stderr)
      problems += check_doc(doc, new)
  if args.check:
    problems += check_tables() + figure_files.check(args.root)
  else:
    for path, (render, _) in tables.items():
      target = os.path.join(args.root, path)
      text = render()
      old = None
      if os.path.exists(target):
        with open(target, encoding="utf-8") as f:
          old = f.read()
      if text != old:
        common.write_text(target, text)
        print(f"wrote {target}", file=sys.stderr)
    for line in figure_files.write(args.root):
      print(line, file=sys.stderr)
  for line in problems:
    print(line, file=sys.stderr)
  return 1 if problems else 0
