"""Package layout rules: no private JAX modules, small modules in the engine,
runner and metrics packages, and the public names at the top level."""
from __future__ import annotations

import ast
import pathlib

import fedfrac as ff

ROOT = pathlib.Path(__file__).resolve().parents[1] / "fedfrac"
MAX_LINES = 400


def _modules(*parts):
  base = ROOT.joinpath(*parts)
  return sorted(base.rglob("*.py")) if base.is_dir() else [base]


def _imports(path):
  tree = ast.parse(path.read_text())
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      yield from (a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module:
      yield node.module


def test_no_private_jax_imports():
  bad = [(str(p), m) for p in _modules() for m in _imports(p) if m.startswith("jax._src")]
  assert not bad, bad


def test_engine_runner_metrics_modules_are_small():
  paths = (_modules("sim") + _modules("runner") + _modules("metrics")
           + _modules("config.py"))
  long = {str(p): n for p in paths if (n := len(p.read_text().splitlines())) > MAX_LINES}
  assert not long, long


def test_public_names():
  assert callable(ff.run) and callable(ff.run_many)
  assert ff.Results is ff.runner.Results
  assert ff.engine.Simulation is ff.sim.Simulation is ff.Simulation
  assert ff.engine.EngineConfig is ff.EngineConfig


def test_tests_mirror_the_package():
  """Each test folder is named after a fedfrac sub-package, so the tests of
  ``fedfrac/<pkg>/<module>.py`` are found under ``tests/<pkg>/``."""
  tests = pathlib.Path(__file__).resolve().parent
  folders = [p for p in tests.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))]
  assert folders
  for folder in folders:
    assert (ROOT / folder.name / "__init__.py").exists(), folder.name
    assert all(f.name.startswith("test_") or f.name == "__init__.py"
               for f in folder.glob("*.py")), folder.name
