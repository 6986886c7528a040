"""Sphinx configuration of the API reference (``make docs``).

autodoc renders the docstrings, napoleon reads their Google-style sections
(``Args:``, ``Returns:``); the pages that list what to render are generated from
the package on every build (``apidoc``, the package beside this file) into
``generated/``.

Sphinx rather than MkDocs + mkdocstrings: the docstrings are Google style, which
napoleon reads, as the JAX, Flax and optax references do; autodoc and napoleon
ship with Sphinx (one pinned package and its dependencies, no theme or Markdown
toolchain); and docutils reports every malformed docstring, so ``-W`` turns the
build into a check of the docstrings.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)

import apidoc  # noqa: E402

apidoc.write(os.path.join(HERE, apidoc.GENERATED))

project = "fedfrac"
author = "fedfrac authors"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
napoleon_google_docstring = True
napoleon_numpy_docstring = False
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_theme_options = {"page_width": "1100px", "sidebar_width": "230px"}
napoleon_use_ivar = True   # NamedTuple fields: no second description of each field


def setup(app):
  # Before napoleon (priority 500): the docstrings are plain text with formulas.
  app.connect("autodoc-process-docstring", apidoc.process_docstring, priority=400)
