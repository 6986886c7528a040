"""The generated pages of the API reference (``docs/api``, ``make docs``).

Sphinx (autodoc + napoleon) renders the docstrings; this package writes the reST
sources that name what to render, from fedfrac itself, so the reference cannot
miss a public function of ``fedfrac.ops`` or ``fedfrac.optim`` or a registered
algorithm. It is used only to build the documentation, so it lives beside it
rather than in the runtime package:

* :mod:`apidoc.rest`: reST escaping, titles and tables, and the package's
  plain-text docstrings made valid reST (run on every docstring autodoc reads);
* :mod:`apidoc.modules`: ``ops.rst``, ``optim.rst``, ``data.rst``, ``running.rst``
  -- every public function and class of ``fedfrac.ops`` / ``fedfrac.optim``, the
  data modules and the run API;
* :mod:`apidoc.algorithms`: ``algorithms/<name>.rst``, one page per registered
  algorithm with its family, paper (:data:`fedfrac.catalog.PAPERS`), the paper
  equations its module's docstrings cite, its hyper-parameters with defaults and
  allowed values, and the module's documentation;
* :mod:`apidoc.config_page`: ``config.rst``, every key of
  :func:`fedfrac.config.base_config` with its default and the note it is declared with,
  and the values of the registries ``--list`` prints;
* :mod:`apidoc.notebooks`: the notebooks under ``notebooks/`` as guide pages,
  with their committed outputs (nothing is executed);
* :mod:`apidoc.build` writes the pages, :mod:`apidoc.inventory` checks a built
  reference.

``python -m apidoc write DIR`` writes the pages (``docs/api/conf.py`` does so on
every build); ``python -m apidoc check DIR/objects.inv`` exits 1 unless a built
reference's inventory holds every public function and class of ``fedfrac.ops`` /
``fedfrac.optim``, the run API and every algorithm page (both with ``docs/api``
on ``PYTHONPATH``, as the Makefile's ``docs`` target runs them).
"""
from __future__ import annotations

import sys

from apidoc.build import GENERATED, sources, write
from apidoc.config_page import config_keys, config_notes
from apidoc.inventory import expected_objects, inventory
from apidoc.modules import CONTRACT_API, FULL_PACKAGES, RUN_API, public_objects
from apidoc.rest import escape, plain_docstring_to_rst, process_docstring

__all__ = ["GENERATED", "sources", "write", "config_keys", "config_notes",
           "expected_objects", "inventory", "CONTRACT_API", "FULL_PACKAGES", "RUN_API",
           "public_objects", "escape", "plain_docstring_to_rst", "process_docstring",
           "main"]


def main(argv=None) -> int:
  argv = sys.argv[1:] if argv is None else list(argv)
  if len(argv) != 2 or argv[0] not in ("write", "check"):
    print("usage: python -m apidoc write DIR | check OBJECTS_INV (with docs/api on "
          "PYTHONPATH)", file=sys.stderr)
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
