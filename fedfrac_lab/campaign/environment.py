"""What the GPU machine's image holds and what the carried wheels add.

``benchmarks/gpu/image_packages.txt``: the Python distributions of the GPU
image (the device documentation's list, one name a line); ``benchmarks/gpu/
wheels.txt``: ``name==version`` of each wheel ``make gpu-wheels`` downloads
into ``.whl/`` for that image (CPython 3.12, manylinux x86-64, ``--no-deps``).
A module fedfrac imports on the campaign's path must come from one of the two
(``tests/campaign`` checks it).
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "benchmarks", "gpu")
IMAGE_LIST = os.path.join(HERE, "image_packages.txt")
WHEEL_LIST = os.path.join(HERE, "wheels.txt")
# Top-level module of each wheel fedfrac needs there (the others are their
# declared dependencies, carried so that the install is complete).
WHEEL_MODULES = {"ml-collections": "ml_collections", "dp-accounting": "dp_accounting"}


def normalise(name: str) -> str:
  """A distribution name as pip compares them (PEP 503)."""
  return re.sub(r"[-_.]+", "-", name).lower()


def _lines(path):
  with open(path) as f:
    return [ln.split("#", 1)[0].strip() for ln in f if ln.split("#", 1)[0].strip()]


def image_packages(path=IMAGE_LIST) -> set:
  return {normalise(n) for n in _lines(path)}


def wheel_pins(path=WHEEL_LIST) -> dict:
  """``{name: version}`` of the wheel list."""
  out = {}
  for line in _lines(path):
    name, _, version = line.partition("==")
    out[normalise(name)] = version.strip()
  return out


def missing_modules() -> list:
  """The wheels' top-level modules that cannot be imported here."""
  return [m for m in WHEEL_MODULES.values() if importlib.util.find_spec(m) is None]


def distributions_of(modules) -> dict:
  """``{top-level module: [distribution names]}`` of third-party ``modules``
  (those found in installed distributions)."""
  owners = importlib.metadata.packages_distributions()
  return {m: sorted({normalise(d) for d in owners.get(m, [])}) for m in modules
          if m in owners}
