"""docs/equations.md is generated from the docstrings (fedfrac_lab.equations)."""
import importlib
import os
import re

from fedfrac_lab import equations as _equations

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "equations.md")


def _resolve(dotted):
  """The object named ``module.attr...``, importing the longest module prefix."""
  parts = dotted.split(".")
  for i in range(len(parts), 0, -1):
    try:
      obj = importlib.import_module(".".join(parts[:i]))
    except ImportError:
      continue
    for name in parts[i:]:
      obj = getattr(obj, name)
    return obj
  raise ImportError(dotted)


def test_committed_table_is_current():
  rows, unattributed = _equations.citations()
  assert not unattributed, f"cite the paper before the equation: {unattributed}"
  with open(DOC, encoding="utf-8") as f:
    committed = f.read()
  assert committed == _equations.render(rows), (
      "docs/equations.md is stale: python -m fedfrac_lab.equations > docs/equations.md")


def test_every_cited_object_exists():
  with open(DOC, encoding="utf-8") as f:
    names = re.findall(r"`(fedfrac(?:\.\w+)+)`", f.read())
  assert len(names) > 20
  for name in names:
    _resolve(name)  # raises when a function named in the table is gone


def test_the_papers_equations_are_covered():
  rows, _ = _equations.citations()
  cited = {(r.paper, r.equation) for r in rows}
  for needed in [("FOFedAvg", "Eq. 8"), ("BEV", "Eqs. 13–18"), ("BEV", "Eq. 19"),
                 ("FIRMA", "Eqs. 3–7"), ("FIRMA", "Eq. 8"),
                 ("Kuramoto-FedAvg", "Eqs. 2–3")]:
    assert needed in cited, needed


def test_attribution_and_unattributed_citations(tmp_path):
  pkg = tmp_path / "pkgx"
  pkg.mkdir()
  (pkg / "__init__.py").write_text("")
  (pkg / "a.py").write_text(
      '"""Helpers for the BEV paper."""\n'
      'def f():\n  """Window energy (Eqs. 25–27) and gate (FIRMA Eq. 9)."""\n'
      'def g():\n  """Tail."""\n  def h():\n    """Inner (Kuramoto-FedAvg paper Eq. 4)."""\n')
  (pkg / "b.py").write_text('def k():\n  """Something (Alg. 2)."""\n')
  rows, unattributed = _equations.citations(str(pkg))
  assert set(rows) == {
      _equations.Citation("FIRMA", "Eq. 9", "pkgx.a.f"),
      _equations.Citation("BEV", "Eqs. 25–27", "pkgx.a.f"),  # module's paper
      _equations.Citation("Kuramoto-FedAvg", "Eq. 4", "pkgx.a.g"),  # nested def
  }
  assert unattributed == ["pkgx.b.k: Alg. 2"]  # no paper named anywhere
  assert "pkgx.a.f" in _equations.render(rows)
