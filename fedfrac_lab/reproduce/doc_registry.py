"""The registry of generated doc spans, results tables and figures: ``BLOCKS``
filled by the :func:`block` decorator, ``RESULT_TABLES`` by :func:`result_table`,
``FIGURES`` by :func:`figures`. The block modules
(:mod:`fedfrac_lab.reproduce.doc_blocks` and its siblings) register into it;
``fedfrac-reproduce docs`` (:mod:`fedfrac_lab.reproduce.docs`) reads it.
"""
from __future__ import annotations

from typing import Callable, Dict, List, NamedTuple, Tuple


class Block(NamedTuple):
  name: str
  doc: str
  inline: bool
  render: Callable[[], str]
  sources: Tuple[str, ...]


BLOCKS: Dict[str, Block] = {}
RESULT_TABLES: Dict[str, Tuple[Callable[[], str], Tuple[str, ...]]] = {}
# paper -> (a function returning its reproduction figures' data, the results files
# they are drawn from): :mod:`fedfrac_lab.reproduce.figure_files` draws and checks them.
FIGURES: Dict[str, Tuple[Callable[[], List], Tuple[str, ...]]] = {}


def block(name: str, doc: str, *sources: str, inline: bool = False):
  """Register the decorated function as generated block ``name`` of ``doc``,
  rendered from the results files ``sources``."""
  def register(fn):
    if name in BLOCKS:
      raise ValueError(f"block {name!r} registered twice")
    BLOCKS[name] = Block(name, doc, inline, fn, sources)
    return fn
  return register


def result_table(path: str, *sources: str):
  """Register the decorated function as the renderer of results table ``path``."""
  def register(fn):
    RESULT_TABLES[path] = (fn, sources)
    return fn
  return register


def figures(paper: str, *sources: str):
  """Register the decorated function as the maker of ``paper``'s reproduction
  figures (a list of :class:`fedfrac_lab.reproduce.figure_data.Figure`), drawn from the
  results files ``sources``."""
  def register(fn):
    if paper in FIGURES:
      raise ValueError(f"figures of {paper!r} registered twice")
    FIGURES[paper] = (fn, sources)
    return fn
  return register
