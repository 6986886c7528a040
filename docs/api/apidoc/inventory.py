"""The check ``make docs`` runs on a built reference: its inventory
(``objects.inv``) holds every public function and class of ``fedfrac.ops`` /
``fedfrac.optim``, the run API, every algorithm page and the config page."""
from __future__ import annotations

import re
import zlib

from apidoc.build import GENERATED
from apidoc.modules import FULL_PACKAGES, RUN_API, package_modules, public_objects


def expected_objects() -> set:
  """``{(domain:role, name)}`` a built reference must hold."""
  from fedfrac import algorithms
  out = set()
  for package in FULL_PACKAGES:
    for module_name in package_modules(package):
      for name, kind in public_objects(module_name):
        out.add((f"py:{kind}", f"{module_name}.{name}"))
  for module_name, names in RUN_API:
    kinds = dict(public_objects(module_name))
    out |= {(f"py:{kinds[n]}", f"{module_name}.{n}") for n in names}
  out |= {("std:doc", f"{GENERATED}/algorithms/{n}") for n in algorithms.names()}
  out |= {("std:doc", f"{GENERATED}/config")}
  return out


def inventory(path: str) -> set:
  """``{(domain:role, name)}`` of a Sphinx ``objects.inv``."""
  with open(path, "rb") as f:
    for _ in range(4):
      f.readline()
    text = zlib.decompress(f.read()).decode("utf-8")
  out = set()
  for line in text.splitlines():
    m = re.match(r"(.+?)\s+(\S+:\S+)\s+-?\d+\s", line)
    if m:
      out.add((m.group(2), m.group(1)))
  return out
