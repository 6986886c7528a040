"""What a research package's users look for: the licence setup.cfg names, a
citation file that also lists the four papers, the typed marker, and the
version in one place."""
from __future__ import annotations

import configparser
import pathlib
import re

import fedfrac

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_the_version_lives_in_one_place():
  cfg = configparser.ConfigParser()
  cfg.read(ROOT / "setup.cfg")
  assert cfg["metadata"]["version"] == "attr: fedfrac._version.__version__"
  citation = (ROOT / "CITATION.cff").read_text()
  assert re.search(r"^version: (\S+)$", citation, re.M).group(1) == fedfrac.__version__
  changelog = (ROOT / "CHANGELOG.md").read_text()
  assert f"## {fedfrac.__version__}" in changelog


def test_the_licence_citation_and_typed_marker():
  cfg = configparser.ConfigParser()
  cfg.read(ROOT / "setup.cfg")
  assert cfg["metadata"]["license"] == "Apache-2.0"
  licence = (ROOT / "LICENSE").read_text()
  assert "Apache License" in licence and "Version 2.0, January 2004" in licence
  citation = (ROOT / "CITATION.cff").read_text()
  for title in ("Fractional Order Federated Learning",
                "Fractional Order Federated Learning for Battery Electric Vehicle",
                "FIRMA: FIbonacci Ring Model Aggregation",
                "Kuramoto-FedAvg: Using Synchronization Dynamics"):
    assert title in citation, title
  assert (ROOT / "fedfrac" / "py.typed").exists()
  assert "py.typed" in cfg["options.package_data"]["fedfrac"]
