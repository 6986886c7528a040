"""The reproduction figures on disk (``docs/images/reproduction/*.png``), for
``fedfrac-reproduce docs``: every figure registered in
:data:`fedfrac_lab.reproduce.doc_registry.FIGURES` (by
:mod:`fedfrac_lab.reproduce.doc_figures`) is drawn from the committed results, and
its PNG carries the digest of the data it was drawn from (and of the drawing
code) in a text chunk.

* ``fedfrac-reproduce docs`` draws the figures that are missing or whose digest
  differs from the results' (the others stay as they are, byte for byte), and
  removes a PNG of that folder that no registered figure draws any more.
* ``--check`` draws nothing: it names each figure that is missing, *stale* (its
  digest is not the one the results give now: a result, the figure's data or the
  drawing code changed since it was drawn) or left over.

The digest, not the PNG's bytes, is what is compared, so a check does not
depend on the fonts or the matplotlib build of the machine it runs on.
"""
from __future__ import annotations

import os
from typing import List, Tuple

from fedfrac_lab.reproduce import common, figure_data
from fedfrac_lab.reproduce.doc_registry import FIGURES


def registered() -> List[Tuple[figure_data.Figure, Tuple[str, ...]]]:
  """[(figure, the results files its paper's figures are drawn from)] of every
  registered paper, in registration order (the registry filled by
  :func:`fedfrac_lab.reproduce.docs.registry`, which ``fedfrac-reproduce docs`` calls
  first)."""
  out = []
  for make, sources in FIGURES.values():
    out += [(fig, sources) for fig in make()]
  return out


def drawn_digest(path: str) -> str:
  """The digest a committed PNG was drawn from ("" when it has none or is absent)."""
  from fedfrac_lab.reproduce.figure_draw import PNG_KEY, png_text
  if not os.path.exists(path):
    return ""
  with open(path, "rb") as f:
    return png_text(f.read()).get(PNG_KEY, "")


def wanted_digest(fig: figure_data.Figure) -> str:
  from fedfrac_lab.reproduce.figure_draw import code_digest
  return figure_data.digest(fig, code_digest())


def _leftovers(root: str, figures) -> List[str]:
  folder = os.path.join(root, figure_data.IMAGES)
  if not os.path.isdir(folder):
    return []
  names = {os.path.basename(fig.path) for fig, _ in figures}
  return sorted(os.path.join(figure_data.IMAGES, n) for n in os.listdir(folder)
                if n.endswith(".png") and n not in names)


def check(root: str = common.CHECKOUT_DIR) -> List[str]:
  """Every registered figure under ``root`` that is missing or stale, and every
  PNG of the figures' folder that no figure draws."""
  figures = registered()
  problems = []
  for fig, _ in figures:
    path = os.path.join(root, fig.path)
    have = drawn_digest(path)
    if not have:
      problems.append(f"{fig.path}: missing (the figure of {', '.join(fig.results)}); "
                      "run fedfrac-reproduce docs")
    elif have != wanted_digest(fig):
      problems.append(f"{fig.path}: stale: drawn from other data than "
                      f"{', '.join(fig.results)} give now (or by other drawing code); "
                      "run fedfrac-reproduce docs")
  problems += [f"{p}: no registered figure draws it" for p in _leftovers(root, figures)]
  return problems


def write(root: str = common.CHECKOUT_DIR) -> List[str]:
  """Draw every missing or stale figure under ``root``, remove the PNGs no figure
  draws; return a line per file written ("wrote PATH") or removed."""
  from fedfrac_lab.reproduce.figure_draw import draw
  from fedfrac.runner.checkpoint import atomic_write
  figures = registered()
  changed = []
  for fig, _ in figures:
    path = os.path.join(root, fig.path)
    want = wanted_digest(fig)
    if drawn_digest(path) == want:
      continue
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write(path, draw(fig, want))
    changed.append(f"wrote {path}")
  for rel in _leftovers(root, figures):
    os.remove(os.path.join(root, rel))
    changed.append(f"removed {os.path.join(root, rel)} (no registered figure draws it)")
  return changed
