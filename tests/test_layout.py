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


def _design_text():
  return (ROOT.parent / "docs" / "design.md").read_text()


def _resolves(dotted):
  """Whether ``fedfrac.a.b.name`` is an importable module, or an attribute of the
  longest importable module prefix."""
  import importlib
  parts = dotted.rstrip(".").split(".")
  for cut in range(len(parts), 0, -1):
    try:
      obj = importlib.import_module(".".join(parts[:cut]))
    except ImportError:
      continue
    for name in parts[cut:]:
      if not hasattr(obj, name):
        return False
      obj = getattr(obj, name)
    return True
  return False


def test_design_doc_names_only_modules_and_names_that_exist():
  import re
  text = _design_text()
  dotted = sorted(set(re.findall(r"fedfrac(?:\.[A-Za-z_]\w*)+", text)))
  assert dotted and not [d for d in dotted if not _resolves(d)]
  # The layout block of §2: every file it names exists where it says, and every
  # sub-package is there.
  block = text.split("## 2. Architecture", 1)[1].split("```", 2)[1]
  package, missing, listed = "", [], set()
  for line in block.splitlines():
    head = re.match(r"  (\w+)/", line)
    if head:
      package = head.group(1)
      listed.add(package)
    elif re.match(r"  \S", line):
      package = ""
    if not line.startswith("fedfrac/"):
      for name in re.findall(r"\b(\w+\.py)\b", line):
        path = ROOT / package / name if package else ROOT / name
        if not path.exists():
          missing.append(str(path.relative_to(ROOT)))
  assert not missing, missing
  packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
  assert packages <= listed, sorted(packages - listed)
