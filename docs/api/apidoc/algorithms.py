"""One page per registered algorithm (family, paper, the equations its module's
docstrings cite, its hyper-parameters with defaults and allowed values, the
module's documentation) and the algorithms index with the contract."""
from __future__ import annotations

import functools

from apidoc.modules import CONTRACT_API, object_directives
from apidoc.rest import escape, table, title


def algorithm_module(name: str) -> str:
  from fedfrac import algorithms
  return algorithms.entry(name).build.__module__


@functools.lru_cache(maxsize=None)
def _citations() -> tuple:
  from fedfrac_lab import equations as _equations
  return tuple(_equations.citations()[0])


def equation_rows(module_name: str) -> list:
  """``[(paper, equation, target)]`` the docstrings of ``module_name`` cite."""
  return [(r.paper, r.equation, r.target) for r in _citations()
          if r.target == module_name or r.target.startswith(module_name + ".")]


def hparam_rows(name: str) -> list:
  """``[(option, default repr, allowed)]`` of algorithm ``name``'s schema."""
  from fedfrac import algorithms, catalog
  return [(key, repr(hp.default), catalog.allowed_text(hp))
          for key, hp in algorithms.entry(name).schema.items()]


def algorithm_page(name: str, documented: set) -> str:
  """The page of algorithm ``name``; ``documented`` holds the modules whose
  members an earlier page already rendered (they are then not indexed again)."""
  from fedfrac import algorithms, catalog
  entry = algorithms.entry(name)
  module_name = algorithm_module(name)
  caps = ", ".join(entry.capabilities()) or "none"
  lines = title(f"``{name}``") + [
      escape(entry.summary) + ".", "",
      f"- **Family:** {escape(catalog.family(name).title)}",
      f"- **Paper:** {escape(catalog.PAPERS.get(name, 'not recorded'))}",
      f"- **Capabilities:** {caps}",
      f"- **Module:** ``{module_name}``", ""]
  if name in catalog.STAND_INS:
    lines += [".. note::", f"   Stand-in: {escape(catalog.STAND_INS[name])}.", ""]
  lines += title("Equations", "-")
  eqs = equation_rows(module_name)
  if eqs:
    grouped: dict = {}
    for p, e, t in eqs:
      grouped.setdefault((p, e), []).append(f"``{t}``")
    lines += table(("paper", "equation", "implemented in"),
                    [(escape(p), escape(e), ", ".join(ts)) for (p, e), ts in grouped.items()])
  else:
    lines += ["Its module's docstrings cite no numbered paper equation; the module "
              "notes below say what it implements.", ""]
  lines += title("Hyper-parameters", "-")
  rows = hparam_rows(name)
  if rows:
    lines += [f"Options of ``config.methods.<label>`` with ``name={name!r}`` "
              "(defaults of this name's preset):", ""]
    lines += table(("option", "default", "allowed"),
                    [(f"``{k}``", f"``{d}``", escape(a)) for k, d, a in rows])
  else:
    lines += ["No options.", ""]
  lines += title("Module", "-") + [f".. automodule:: {module_name}", "   :members:"]
  if module_name in documented:
    lines.append("   :no-index:")
  documented.add(module_name)
  return "\n".join(lines + [""])


def algorithms_index() -> str:
  from fedfrac import catalog
  lines = title("Algorithms") + [
      "Every algorithm is a :class:`~fedfrac.algorithms.contract.FedAlgorithm` of pure "
      "functions, registered by name with an "
      ":class:`~fedfrac.algorithms.contract.AlgorithmEntry` (its ``build``, the "
      ":class:`~fedfrac.algorithms.schema.HParamSchema` of its options and its "
      "capabilities); ``fedfrac.algorithms.entry(name)`` is the registry's one way in. "
      "The families are :data:`fedfrac.catalog.FAMILIES`.", ""]
  lines += title("The contract and the registry", "-")
  for module_name, names in CONTRACT_API:
    lines += title(f"``{module_name}``", "~") + object_directives(module_name, names)
  lines += title("Registered algorithms", "-")
  for fam in catalog.FAMILIES:
    members = [n for n in fam.names]
    lines += title(fam.title, "~")
    lines += [f"- :doc:`{n}` -- {escape(_summary(n))}" for n in members] + [""]
  lines += [".. toctree::", "   :hidden:", ""]
  lines += [f"   {n}" for fam in catalog.FAMILIES for n in fam.names]
  return "\n".join(lines + [""])


def _summary(name: str) -> str:
  from fedfrac import algorithms
  return algorithms.entry(name).summary
