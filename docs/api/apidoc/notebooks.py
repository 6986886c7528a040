"""The notebooks under ``notebooks/`` as pages of the user guide: each becomes a
Markdown page (read by myst-parser) with its text, its code and the outputs it
was committed with. Nothing is executed: the notebook tests run them; here they
are only read.

Markdown cells are kept as written, code cells become ``python`` blocks, text
outputs (printed lines, a cell's value) ``text`` blocks, and PNG figures files
beside the page. Widget outputs (the progress bar) and the stderr of a cell (its
warnings and progress lines) are left out: they are the state of one session, not
what the notebook shows.
"""
from __future__ import annotations

import base64
import json
import os
import re

# The notebooks the guide renders, in the order its pages list them.
NOTEBOOKS = ("your_own_method_and_data", "quickstart", "ops_tour", "fractional_optimizer")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _text(value) -> str:
  return "".join(value) if isinstance(value, list) else str(value)


def _fence(text: str, lang: str) -> list:
  """A fenced block longer than any backtick run inside it."""
  run = max((len(m) for m in re.findall(r"`+", text)), default=0)
  fence = "`" * max(3, run + 1)
  return [f"{fence}{lang}", text.rstrip("\n"), fence, ""]


def _stream_text(text: str) -> str:
  """Printed text as a terminal leaves it: colour codes dropped, a line
  rewritten with carriage returns kept as its last state."""
  lines = [line.split("\r")[-1] for line in _ANSI.sub("", text).split("\n")]
  return "\n".join(lines)


def outputs(cell: dict, name: str, index: int) -> tuple:
  """``(markdown lines, {file name: bytes})`` of a code cell's committed outputs."""
  lines: list = []
  files: dict = {}
  for k, out in enumerate(cell.get("outputs", [])):
    kind = out.get("output_type")
    if kind == "stream":
      if out.get("name") == "stdout":
        text = _stream_text(_text(out.get("text", "")))
        if text.strip():
          lines += _fence(text, "text")
      continue
    if kind == "error":
      lines += _fence(_ANSI.sub("", "\n".join(out.get("traceback", []))), "text")
      continue
    data = out.get("data", {})
    if "application/vnd.jupyter.widget-view+json" in data:
      continue
    if "image/png" in data:
      file = f"{name}_{index}_{k}.png"
      files[file] = base64.b64decode(_text(data["image/png"]))
      lines += [f"![Output of cell {index + 1}]({file})", ""]
    elif "text/plain" in data:
      lines += _fence(_text(data["text/plain"]), "text")
  return lines, files


def page(path: str) -> tuple:
  """``(Markdown text, {file name: bytes})`` of the notebook at ``path``."""
  name = os.path.splitext(os.path.basename(path))[0]
  with open(path, encoding="utf-8") as f:
    notebook = json.load(f)
  lines = []
  files: dict = {}
  for i, cell in enumerate(notebook.get("cells", [])):
    source = _text(cell.get("source", "")).rstrip("\n")
    if cell.get("cell_type") == "markdown":
      lines += [source, ""]
    elif cell.get("cell_type") == "code":
      if source.strip():
        lines += _fence(source, "python")
      more, images = outputs(cell, name, i)
      lines += more
      files.update(images)
  lines = "\n".join(lines).split("\n")
  if not any(line.startswith("# ") for line in lines):
    lines = [f"# {name}", ""] + lines
  source_note = (f"*This page is `notebooks/{name}.ipynb` with the outputs it was "
                 "committed with; run it with Jupyter (`pip install -e '.[notebooks]'`).*")
  first = next(i for i, line in enumerate(lines) if line.startswith("# "))
  lines[first + 1:first + 1] = ["", source_note]
  return "\n".join(lines).rstrip("\n") + "\n", files


def write(notebook_dir: str, out_dir: str) -> list:
  """Write the page of every notebook of :data:`NOTEBOOKS` (and its figures)
  under ``out_dir``; returns the pages written."""
  from apidoc.build import write_text
  os.makedirs(out_dir, exist_ok=True)
  written = []
  for name in NOTEBOOKS:
    text, files = page(os.path.join(notebook_dir, f"{name}.ipynb"))
    target = os.path.join(out_dir, f"{name}.md")
    write_text(target, text)
    for file, data in files.items():
      with open(os.path.join(out_dir, file), "wb") as f:
        f.write(data)
    written.append(target)
  return written
