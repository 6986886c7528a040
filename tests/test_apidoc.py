"""The API reference's generated pages (docs/api/apidoc, built by ``make docs``):
every public function and class of fedfrac.ops and fedfrac.optim is rendered,
every registered algorithm has a page with its family, paper, equations and
hyper-parameters with defaults, every config key is listed, the package's
plain-text docstrings become valid reST, and a built inventory that lacks an
object fails the check."""
from __future__ import annotations

import ast
import pathlib
import re
import sys
import zlib

import pytest

from fedfrac import algorithms, catalog, config

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "api"))
import apidoc as _apidoc  # noqa: E402  (docs/api/apidoc: used only by make docs)


@pytest.fixture(scope="module")
def pages():
  return _apidoc.sources()


def _defined(package):
  """``{module.name}`` of every public top-level def / class in the package's
  files, read from the source (not from what apidoc imports)."""
  out = set()
  folder = ROOT.joinpath(*package.split("."))
  for path in sorted(folder.glob("*.py")):
    if path.name == "__init__.py":
      continue
    for node in ast.parse(path.read_text()).body:
      if (isinstance(node, (ast.FunctionDef, ast.ClassDef))
          and not node.name.startswith("_")):
        out.add(f"{package}.{path.stem}.{node.name}")
  return out


@pytest.mark.parametrize("package, page", [("fedfrac.ops", "ops.rst"),
                                           ("fedfrac.optim", "optim.rst")])
def test_every_public_function_and_class_is_rendered(pages, package, page):
  rendered = set(re.findall(r"^\.\. auto(?:function|class):: (\S+)$", pages[page], re.M))
  expected = _defined(package)
  assert len(expected) > 10
  assert expected <= rendered, sorted(expected - rendered)


def test_every_algorithm_page_shows_family_paper_equations_and_hyper_parameters(pages):
  index = pages["algorithms/index.rst"]
  for name in algorithms.names():
    page = pages[f"algorithms/{name}.rst"]
    assert f":doc:`{name}`" in index
    assert catalog.family(name).title in page
    assert _apidoc.escape(catalog.PAPERS[name]) in page
    for key, hp in algorithms.entry(name).schema.items():
      assert f"   * - ``{key}``\n     - ``{hp.default!r}``" in page, (name, key)
  fo_ri = pages["algorithms/fo_ri_fedavg.rst"]
  assert "   * - BEV\n     - Eq. 22\n" in fo_ri
  assert "``lam``" in fo_ri and "``0.1``" in fo_ri
  # A module serving several names is indexed once.
  assert pages["algorithms/ri_fedavg.rst"].count(":no-index:") == 1
  assert pages["algorithms/fdse.rst"].count("Stand-in:") == 1


def test_config_page_lists_every_key_with_its_default_and_note(pages):
  page = pages["config.rst"]
  for key, default in _apidoc.config_keys():
    assert f"   * - ``{key}``\n     - ``{default!r}``" in page, key
  assert len(_apidoc.config_keys()) > 100
  notes, intros = _apidoc.config_notes()
  assert notes["participation"].startswith("C: |S_t| = max(ceil(C K), 1)")
  # A comment continued on the next line belongs to its key.
  assert notes["workers"].endswith("(same results, faster compiles)")
  assert notes["data.bev.window"] == "L_win samples per window"
  assert intros["server"].startswith("How the server combines the cohort's updates")
  assert intros["methods"].startswith("label -> {name: <algorithm>")
  for source in ("sklearn_digits", "dirichlet", "cnn_mnist", "algorithms/fibfl_pp"):
    assert source in page
  assert config.base_config().rounds == 30   # the defaults come from base_config


def test_plain_docstrings_become_valid_rest():
  doc = ["Samples |S_t| clients; |x| is a norm, a*b a product, *emphasis* kept:",
         "  w ← w − η g        # an indented formula",
         "with p_k = n_k / n.",
         "",
         "* an item that goes on",
         "  over two lines;",
         "* and a second.",
         "Args:",
         "  x: ``[K]`` weights, |x| summed.",
         "    More about x.",
         "Example::",
         "",
         "  a | b",
         "Done."]
  out = _apidoc.plain_docstring_to_rst(doc)
  assert out[0] == r"Samples \|S_t\| clients; \|x\| is a norm, a\*b a product, *emphasis* kept:"
  assert out[1:4] == ["", "  w ← w − η g        # an indented formula", ""]
  assert out[4] == "with p_k = n_k / n."
  i = out.index("* an item that goes on")
  assert out[i + 1:i + 3] == ["  over two lines;", "* and a second."]
  j = out.index("Args:")
  assert out[j - 1] == "" and out[j + 1:j + 3] == [r"  x: ``[K]`` weights, \|x\| summed.",
                                                  "    More about x."]
  k = out.index("Example::")
  assert out[k + 1:k + 4] == ["", "", "  a | b"] and out[-2:] == ["", "Done."]
  # Flags become a literal block (kept verbatim); a section after a paragraph
  # gets its blank line.
  flags = _apidoc.plain_docstring_to_rst(
      ["Flags:", "  --seeds 0,1,2     seeds (default: the config's),", "                    *all*.",
       "More text.", "Raises:", "  ValueError: bad |x|."])
  assert flags == ["Flags::", "", "  --seeds 0,1,2     seeds (default: the config's),",
                   "                    *all*.", "", "More text.", "", "Raises:",
                   r"  ValueError: bad \|x\|."]


def _inventory(path, entries):
  body = "".join(f"{name} {role} 1 page.html#$ -\n" for role, name in entries)
  path.write_bytes(b"# Sphinx inventory version 2\n# Project: fedfrac\n# Version: \n"
                   b"# The remainder of this file is compressed using zlib.\n"
                   + zlib.compress(body.encode()))


def test_inventory_check_fails_when_an_object_is_missing(tmp_path, capsys):
  expected = _apidoc.expected_objects()
  assert ("py:function", "fedfrac.ops.ring.fibonacci_mixing_matrix") in expected
  assert ("py:function", "fedfrac.runner.many.run_many") in expected
  assert ("std:doc", "generated/algorithms/fibfl_pp") in expected
  full = tmp_path / "objects.inv"
  _inventory(full, expected)
  assert _apidoc.inventory(str(full)) == expected
  assert _apidoc.main(["check", str(full)]) == 0
  short = tmp_path / "short.inv"
  _inventory(short, expected - {("py:function", "fedfrac.optim.fractional.fractional")})
  assert _apidoc.main(["check", str(short)]) == 1
  assert "lacks py:function fedfrac.optim.fractional.fractional" in capsys.readouterr().err


def test_every_run_api_name_is_defined_in_the_module_it_is_listed_under():
  # The reference documents each name under the module that defines it; a name
  # re-exported from elsewhere has no entry there and the built check fails.
  for module_name, names in _apidoc.RUN_API + _apidoc.CONTRACT_API:
    defined = dict(_apidoc.public_objects(module_name))
    assert set(names) <= set(defined), (module_name, sorted(set(names) - set(defined)))


def test_notebook_pages_keep_text_code_and_committed_outputs(tmp_path):
  """A notebook becomes a guide page without running it: its Markdown, its code
  as python blocks, its printed output and figures as committed; the progress
  widget and a cell's stderr are left out."""
  from apidoc import notebooks
  text, files = notebooks.page(str(ROOT / "notebooks" / "your_own_method_and_data.ipynb"))
  assert text.startswith("# Your own method and your own data\n\n*This page is "
                         "`notebooks/your_own_method_and_data.ipynb`")
  assert "```python\ndef fedavg_momentum(ctx, hp):" in text
  assert "```text\n| method | family | final accuracy |" in text
  assert files and all(data.startswith(b"\x89PNG") for data in files.values())
  assert all(f"]({name})" in text for name in files)
  quick, _ = notebooks.page(str(ROOT / "notebooks" / "quickstart.ipynb"))
  assert "HBox" not in quick and "it/s" not in quick
  # A made-up notebook: carriage returns, colour codes, backticks in the code.
  nb = {"cells": [
      {"cell_type": "code", "source": ["print('```')"], "outputs": [
          {"output_type": "stream", "name": "stdout", "text": ["a\r\x1b[31mb\x1b[0m\n"]},
          {"output_type": "stream", "name": "stderr", "text": ["warning\n"]},
          {"output_type": "execute_result", "data": {"text/plain": ["42"]}}]}],
      "metadata": {}}
  path = tmp_path / "made_up.ipynb"
  path.write_text(__import__("json").dumps(nb))
  text, files = notebooks.page(str(path))
  assert text.splitlines()[0] == "# made_up" and not files
  assert "````python\nprint('```')\n````" in text
  assert "```text\nb\n```" in text and "warning" not in text and "```text\n42\n```" in text
  written = notebooks.write(str(ROOT / "notebooks"), str(tmp_path / "pages"))
  assert [pathlib.Path(p).stem for p in written] == list(notebooks.NOTEBOOKS)


def test_the_reproductions_index_lists_exactly_the_four_paper_pages():
  """guide/reproductions/index.rst lists one page per paper, and the folder holds
  nothing but the index and those pages."""
  folder = ROOT / "docs" / "api" / "guide" / "reproductions"
  text = (folder / "index.rst").read_text()
  toctree = text.split(".. toctree::", 1)[1]
  entries = [line.strip() for line in toctree.splitlines()
             if line.strip() and not line.strip().startswith(":")]
  assert entries == ["fofedavg", "fo_ri_fedavg", "firma", "kuramoto"]
  allowed = {"index.rst"} | {f"{name}.rst" for name in entries}
  assert {p.name for p in folder.iterdir()} <= allowed
