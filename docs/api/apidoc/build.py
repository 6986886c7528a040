"""Every generated page of the reference, written under ``docs/api/generated``
on each build (``docs/api/conf.py``)."""
from __future__ import annotations

import os

from apidoc.algorithms import algorithm_page, algorithms_index
from apidoc.config_page import config_page
from apidoc.modules import DATA_MODULES, RUN_API, modules_page, package_modules

# The folder under docs/api the generated pages go to.
GENERATED = "generated"


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


def write_text(path: str, text: str) -> None:
  """Write ``text`` to ``path`` unless it holds it already (so Sphinx rebuilds
  only what changed)."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
  if old != text:
    with open(path, "w", encoding="utf-8") as f:
      f.write(text)


def write(directory: str) -> list:
  """Write :func:`sources` under ``directory``; returns the paths written."""
  written = []
  for rel, text in sources().items():
    path = os.path.join(directory, rel)
    write_text(path, text)
    written.append(path)
  return written
