"""The paper-equation index ``docs/equations.md``, generated from docstrings.

Every docstring in ``fedfrac`` that cites ``Eq. N``, ``Eqs. N–M`` or ``Alg. N``
names the paper it cites before the number — e.g. ``(BEV paper Eqs. 13–18)``,
``(FIRMA Alg. 3)``, ``(McMahan et al. 2017, Alg. 1)``. A citation is attributed
to the nearest paper named before it in the same docstring, else to the first
paper its module's docstring names. :func:`citations` collects them, one row per
(paper, equation, importable object); :func:`render` writes the markdown table.

Regenerate with ``python -m fedfrac_lab.equations > docs/equations.md``; a test fails
when the committed file is stale or names an object that no longer exists.
"""
from __future__ import annotations

import ast
import os
import re
import sys
from typing import NamedTuple

# (key, full reference, regular expression of the names docstrings use for it);
# the order is the order of the sections in docs/equations.md.
PAPERS = (
    ("FOFedAvg", "Partohaghighi, Marcia, Chen — Fractional-Order Federated Learning "
     "(FOSGD / FOFedAvg)", r"FOFedAvg paper|FOFedAvg|FOSGD"),
    ("BEV", "Partohaghighi, Marcia, West, Chen — Fractional Order Federated Learning "
     "for BEV energy consumption modelling (FO-RI-FedAvg)", r"BEV paper|BEV"),
    ("FIRMA", "Hedjam — FIRMA: FIbonacci Ring Model Aggregation (FibFL, FibFL+, "
     "FibFL++)", r"FIRMA|Hedjam"),
    ("Kuramoto-FedAvg", "Muhebwa, Selialia, Anwar, Osman — Kuramoto-FedAvg "
     "(arXiv:2505.19605)", r"Kuramoto-FedAvg"),
    ("FedAvg", "McMahan et al. 2017 — Communication-Efficient Learning of Deep "
     "Networks from Decentralized Data", r"McMahan et al\.? 2017"),
    ("DP-FedAvg", "McMahan, Ramage, Talwar, Zhang 2018 — Learning Differentially "
     "Private Recurrent Language Models", r"McMahan et al\.? 2018|McMahan, Ramage"),
    ("FedProx", "Li et al. 2020 — Federated Optimization in Heterogeneous Networks",
     r"Li et al\.? 2020"),
    ("SCAFFOLD", "Karimireddy et al. 2020 — SCAFFOLD: Stochastic Controlled "
     "Averaging for Federated Learning", r"Karimireddy et al\.? 2020"),
    ("FedOpt", "Reddi et al. 2021 — Adaptive Federated Optimization",
     r"Reddi et al\.? 2021"),
    ("FedDyn", "Acar et al. 2021 — Federated Learning Based on Dynamic "
     "Regularization", r"Acar et al\.? 2021"),
)
_PAPER_RE = re.compile("|".join(f"(?P<p{i}>\\b(?:{rx}))" for i, (_, _, rx)
                                in enumerate(PAPERS)))
_CITE_RE = re.compile(r"\b(?P<kind>Eqs?|Alg)\.\s*\(?(?P<first>\d+)\)?"
                      r"(?:\s*[–-]\s*\(?(?P<last>\d+)\)?)?")


class Citation(NamedTuple):
  paper: str      # a key of PAPERS
  equation: str   # "Eq. 8", "Eqs. 13–18", "Alg. 3"
  target: str     # importable dotted name: module, module.function, module.Class


def _papers_in(text):
  """``[(offset, paper key)]`` for every paper named in ``text``."""
  found = []
  for m in _PAPER_RE.finditer(text):
    index = int(next(k for k, v in m.groupdict().items() if v is not None)[1:])
    found.append((m.start(), PAPERS[index][0]))
  return found


def _equation_label(m):
  kind, first, last = m.group("kind"), m.group("first"), m.group("last")
  if kind == "Alg":
    return f"Alg. {first}" + (f"–{last}" if last else "")
  if last:
    return f"Eqs. {first}–{last}"
  return f"Eq. {first}"


def _cite(text, fallback, target, out, unattributed):
  papers = _papers_in(text)
  for m in _CITE_RE.finditer(text):
    before = [key for offset, key in papers if offset < m.start()]
    paper = before[-1] if before else fallback
    if paper is None:
      unattributed.append(f"{target}: {_equation_label(m)}")
    else:
      out.add(Citation(paper, _equation_label(m), target))


def _docstrings(node):
  """Docstrings of ``node`` and of every function or class nested in it."""
  for sub in ast.walk(node):
    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
      doc = ast.get_docstring(sub)
      if doc:
        yield doc


def package_root():
  """The library's folder: the equations page indexes fedfrac, not the lab."""
  import fedfrac
  return os.path.dirname(os.path.abspath(fedfrac.__file__))


def citations(root=None):
  """All paper citations in the docstrings of the package at ``root``.

  Returns ``(rows, unattributed)``: sorted :class:`Citation` rows and the
  ``"target: Eq. N"`` citations whose paper could not be told.
  """
  root = root or package_root()
  out, unattributed = set(), []
  for folder, _, files in os.walk(root):
    for name in sorted(files):
      if not name.endswith(".py"):
        continue
      path = os.path.join(folder, name)
      rel = os.path.relpath(path, os.path.dirname(root))[:-3].split(os.sep)
      module = ".".join(rel[:-1] if rel[-1] == "__init__" else rel)
      with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
      module_doc = ast.get_docstring(tree) or ""
      module_papers = _papers_in(module_doc)
      fallback = module_papers[0][1] if module_papers else None
      _cite(module_doc, fallback, module, out, unattributed)
      for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
          for doc in _docstrings(node):
            _cite(doc, fallback, f"{module}.{node.name}", out, unattributed)
  order = {key: i for i, (key, _, _) in enumerate(PAPERS)}

  def sort_key(c):
    kind, number = c.equation.split(" ")[0], re.match(r"\d+", c.equation.split(" ")[1])
    return (order[c.paper], kind.startswith("Alg"), int(number.group(0)), c.target,
            c.equation)  # "Eq. 8" and "Eqs. 8–9" of one target: a fixed order

  return sorted(out, key=sort_key), sorted(unattributed)


def render(rows) -> str:
  """``docs/equations.md``: one table per paper, equation -> implementing object."""
  lines = ["# Paper equations in the code", "",
           "Generated from the package's docstrings by `python -m fedfrac_lab.equations "
           "> docs/equations.md` (do not edit by hand; `tests/test_equations.py` "
           "fails when this file is stale). Each row is an equation or algorithm a "
           "docstring cites and the function, class or module that implements it; "
           "`docs/design.md` explains how the papers' ambiguities are resolved.", ""]
  for key, reference, _ in PAPERS:
    mine = [r for r in rows if r.paper == key]
    if not mine:
      continue
    lines += [f"## {key}", "", reference, "", "| equation | implemented in |",
              "|---|---|"]
    for equation in dict.fromkeys(r.equation for r in mine):
      targets = ", ".join(f"`{r.target}`" for r in mine if r.equation == equation)
      lines.append(f"| {equation} | {targets} |")
    lines.append("")
  return "\n".join(lines)


def main():
  rows, unattributed = citations()
  if unattributed:
    sys.exit("citations without a paper named: " + "; ".join(unattributed))
  sys.stdout.write(render(rows))


if __name__ == "__main__":
  main()
