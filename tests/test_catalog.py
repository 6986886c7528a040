"""fedfrac.catalog: every registered algorithm belongs to exactly one family, the
stand-ins are registered methods, and the README's family table and the guide's
method catalogue name the same family for each method."""
from __future__ import annotations

import os
import re

from fedfrac import algorithms, catalog

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_registered_algorithm_is_in_exactly_one_family():
  listed = [n for f in catalog.FAMILIES for n in f.names]
  assert sorted(listed) == sorted(algorithms.names()), (
      "a registered algorithm without a family, or a family naming an unknown one")
  assert len(listed) == len(set(listed))
  assert catalog.family("fibfl_pp").title == "FIRMA ring methods"
  assert catalog.family("no_such_method") is catalog.OTHER
  assert set(catalog.STAND_INS) <= set(algorithms.names())
  assert sorted(catalog.PAPERS) == sorted(algorithms.names())
  assert catalog.REFERENCE in algorithms.names()


def _section(path, heading):
  with open(os.path.join(ROOT, path), encoding="utf-8") as f:
    text = f.read()
  text = text[text.index(f"\n{heading}"):]
  return text[:text.index("\n## ", 1)] if "\n## " in text[1:] else text


def test_readme_family_table_lists_every_method_under_its_family():
  text = _section("README.md", "## Methods")
  rows = re.findall(r"^\| ([^|`]+?) \| (`[a-z_]+`(?:, `[a-z_]+`)*) \|", text, re.M)
  seen = set()
  for family, names in rows:
    for name in re.findall(r"`([a-z_]+)`", names):
      assert family.strip() == catalog.family(name).key, name
      seen.add(name)
  assert seen == set(algorithms.names())


def test_guide_method_catalogue_names_each_methods_family():
  """docs/api/guide/methods.md: a row per method (or group), each name linked to
  its page of the API reference, with its family."""
  text = _section("docs/api/guide/methods.md", "## The methods")
  rows = re.findall(r"^\| ((?:\{doc\}`[a-z_]+ <[^>]+>`(?:, )?)+) \| ([^|]+) \|", text, re.M)
  seen = set()
  for names, family in rows:
    for name, target in re.findall(r"\{doc\}`([a-z_]+) <([^>]+)>`", names):
      assert target == f"../generated/algorithms/{name}", name
      assert family.strip() == catalog.family(name).key, name
      seen.add(name)
  assert seen == set(algorithms.names())


def test_list_prints_every_config_key_from_its_one_declaration():
  from fedfrac import config_base
  text = catalog.catalog_text()
  fields = list(config_base.schema().fields())
  assert len(fields) > 100
  for key, field in fields:
    if "." in key and any(key.startswith(f"{s}.") for s in ("methods",)):
      continue
    assert f"  {key} = {field.default!r}" in text, key
  # What a key's checks allow is the phrase its refusal says.
  assert "  data.partition = 'dirichlet'  (allowed values are iid, dirichlet" in text
  assert "  participation = 1.0  (must be in (0, 1])" in text
  assert "  clock.server = 'none'  (allowed values are 'none', 'sync', 'fedbuff'" in text
