"""Sphinx configuration of fedfrac's documentation (``make docs``): the user guide
and the API reference.

The guide (``guide/``) is Markdown, read by myst-parser; it includes
``docs/design.md``, ``docs/scaling.md`` and ``docs/equations.md`` as they are, and
the notebooks under ``notebooks/`` become pages with their committed outputs
(``apidoc.notebooks``: read, never executed). For the reference, autodoc renders
the docstrings and napoleon reads their Google-style sections (``Args:``,
``Returns:``); the pages that list what to render are generated from the package on
every build (``apidoc``, the package beside this file) into ``generated/``.

Sphinx rather than MkDocs + mkdocstrings: the docstrings are Google style, which
napoleon reads, as the JAX, Flax and optax references do; autodoc and napoleon
ship with Sphinx (one pinned package and its dependencies, no theme or Markdown
toolchain); and docutils reports every malformed docstring, so ``-W`` turns the
build into a check of the docstrings. myst-parser (pinned in constraints.txt, a
pure-Python wheel) is the one addition the guide needs; the notebooks are converted
here rather than by nbsphinx (which needs pandoc, not a Python package) or myst-nb
(which brings a Jupyter kernel stack to a build that executes nothing).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)

import apidoc  # noqa: E402

from apidoc import notebooks  # noqa: E402

apidoc.write(os.path.join(HERE, apidoc.GENERATED))
notebooks.write(os.path.join(os.path.dirname(os.path.dirname(HERE)), "notebooks"),
                os.path.join(HERE, apidoc.GENERATED, "notebooks"))

project = "fedfrac"
author = "fedfrac authors"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
# Anchors for every heading down to ###, so that a guide page's links to a section
# (scaling.md#sweeps-across-hosts) resolve; $...$ maths in the notebooks.
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath"]
napoleon_google_docstring = True
napoleon_numpy_docstring = False
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
exclude_patterns = ["_build", "apidoc"]
# The per-paper pages (guide/reproductions/<paper>.rst) come with their figures;
# a checkout without them builds with the index listing them unresolved.
PAPER_PAGES = ("fofedavg", "fo_ri_fedavg", "firma", "kuramoto")
suppress_warnings = [] if all(
    os.path.exists(os.path.join(HERE, "guide", "reproductions", f"{p}.rst"))
    for p in PAPER_PAGES) else ["toc.not_readable"]
html_theme = "alabaster"
html_theme_options = {"page_width": "1100px", "sidebar_width": "230px"}
napoleon_use_ivar = True   # NamedTuple fields: no second description of each field


def setup(app):
  # Before napoleon (priority 500): the docstrings are plain text with formulas.
  app.connect("autodoc-process-docstring", apidoc.process_docstring, priority=400)
