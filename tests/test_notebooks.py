"""Every notebook runs top to bottom in a Jupyter kernel (offline), without
warnings, and is committed with its outputs and cell ids.

Needs the ``notebooks`` extra (nbclient, ipykernel, ipywidgets); without it the
code cells run as a script instead, so they are still checked.
"""
from __future__ import annotations

import glob
import importlib.util
import json
import os
import warnings

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))
HAVE_KERNEL = all(importlib.util.find_spec(m) is not None
                  for m in ("nbclient", "nbformat", "ipykernel", "ipywidgets"))


def _code_cells(nb):
  return [c for c in nb["cells"] if c["cell_type"] == "code"]


def execute(path, timeout=600):
  """The notebook at ``path`` executed in a fresh python3 kernel (nbformat node),
  run from the notebooks directory with the checkout importable."""
  import nbclient
  import nbformat
  nb = nbformat.read(path, as_version=4)
  env_path = os.environ.get("PYTHONPATH", "")
  os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env_path) if p)
  try:
    client = nbclient.NotebookClient(
        nb, timeout=timeout, kernel_name="python3",
        resources={"metadata": {"path": os.path.dirname(path)}})
    client.execute()
  finally:
    os.environ["PYTHONPATH"] = env_path
  return nb


def warning_outputs(nb):
  """Text of every stderr stream in ``nb`` that mentions a warning."""
  return [o["text"] for c in _code_cells(nb) for o in c.get("outputs", [])
          if o.get("output_type") == "stream" and o.get("name") == "stderr"
          and "warning" in o["text"].lower()]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_is_committed_with_ids_and_outputs(path):
  import nbformat
  with warnings.catch_warnings():
    warnings.simplefilter("error")          # e.g. MissingIDFieldWarning
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
  assert all(c.get("id") for c in nb.cells)
  code = _code_cells(nb)
  assert all(c.get("execution_count") for c in code), "commit the executed notebook"
  assert any(c.get("outputs") for c in code)
  assert not warning_outputs(nb), warning_outputs(nb)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs_without_warnings(path):
  if not HAVE_KERNEL:
    import matplotlib
    matplotlib.use("Agg")
    with open(path) as f:
      nb = json.load(f)
    from fedfrac import algorithms, models
    registered = dict(algorithms.REGISTRY), dict(models.USER_MODELS)
    namespace = {"__name__": "__main__"}
    try:
      for cell in _code_cells(nb):
        exec(compile("".join(cell["source"]), path, "exec"), namespace)
    finally:   # what a notebook registers stays in its own kernel, not in later tests
      algorithms.REGISTRY.clear()
      algorithms.REGISTRY.update(registered[0])
      models.USER_MODELS.clear()
      models.USER_MODELS.update(registered[1])
    return
  nb = execute(path)
  assert not warning_outputs(nb), warning_outputs(nb)
  errors = [o for c in _code_cells(nb) for o in c.get("outputs", [])
            if o.get("output_type") == "error"]
  assert not errors
  if os.path.basename(path) == "quickstart.ipynb":
    data = [o.get("data", {}) for c in _code_cells(nb) for o in c.get("outputs", [])]
    # ff.run shows a notebook progress bar; results.plot() displays inline.
    assert any("application/vnd.jupyter.widget-view+json" in d for d in data)
    assert any("image/png" in d for d in data)


if __name__ == "__main__":   # re-execute and save every notebook with its outputs
  import nbformat
  for p in NOTEBOOKS:
    nbformat.write(execute(p), p)
    print("executed", p)
