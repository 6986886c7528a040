"""Every notebook's code cells run top to bottom (offline, headless)."""
from __future__ import annotations

import glob
import json
import os

import matplotlib
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs(path):
  matplotlib.use("Agg")
  with open(path) as f:
    nb = json.load(f)
  assert nb["nbformat"] == 4
  namespace = {"__name__": "__main__"}
  for cell in nb["cells"]:
    if cell["cell_type"] == "code":
      exec(compile("".join(cell["source"]), path, "exec"), namespace)
