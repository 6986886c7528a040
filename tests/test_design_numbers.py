"""Every number docs/design.md §3.3–3.4 and the reproduction pages (REPRODUCTION.md,
the guide's reproducing page and its per-paper pages) quote, with the file it comes
from.

A number in those texts (code spans and blocks aside: commands and flags) is one
of these:

- inside a generated span: rendered by ``fedfrac-reproduce docs`` from the results
  files its block names (:data:`fedfrac_lab.reproduce.doc_registry.BLOCKS`); the
  test renders each span of the sections again and compares, and checks that its
  files exist;
- a measured number typed in the prose (:data:`QUOTED`): the file named beside it
  holds it (a results JSON, to the quoted precision; or the test that computes it);
  a measurement no file holds sits in a paragraph that says it cannot be remade
  here (:data:`NOT_KEPT`);
- a setting (a hyper-parameter, a constant of a paper or of the authors' code) or a
  section number (:data:`SETTINGS`), which no run produces.

On the reproduction pages only settings may stand outside a generated span: their
GPU estimates and every input they use are rendered from the measurement files.

Any other decimal number in those texts fails the test: a new measurement has to
come with its file.
"""
from __future__ import annotations

import json
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DESIGN = "docs/design.md"
START, END = "### 3.3 FIRMA", "### 3.5 Baselines"
SPAN = re.compile(r"<!-- BEGIN generated: fedfrac-reproduce docs --block=([\w.-]+) -->"
                  r"(.*?)<!-- END generated -->", re.S)
RST_SPAN = re.compile(r"^\.\. BEGIN generated: fedfrac-reproduce docs --block=([\w.-]+)$"
                      r"(.*?)^\.\. END generated$", re.S | re.M)
PAGES = ("REPRODUCTION.md", "docs/api/guide/reproducing.md",
         *(f"docs/api/guide/reproductions/{p}.rst"
           for p in ("firma", "fofedavg", "fo_ri_fedavg", "kuramoto")))
DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?:e-?\d+)?(?![\w])|(?<![\w.])\d+e-?\d+(?![\w])")

H200_FIBFL_PP = "results/campaign/firma_fashion_mnist/739cf63864969930.json"
REPLAY = "results/firma_fibfl_pp_replay_cpu.json"
# number as typed -> (file that holds it, what it is)
QUOTED = {
    "0.713": ("results/firma_fashion_mnist_cpu/fibfl_iid.json",
              "FibFL IID seed 0, the authors' inputs, final accuracy"),
    "0.722": ("results/firma_fashion_mnist_cpu/fibfl_iid_unit_inputs.json",
              "FibFL IID seed 0, [0, 1] inputs, final accuracy"),
    "3.197": ("tests/ops/test_ring.py", "one sequential pass moves the mean of (1, 2, 4, 5)"),
    # The FibFL++ collapse bullet ("FibFL++ runs that stay at chance").
    "0.8796": (H200_FIBFL_PP, "FibFL++ IID, the H200 window's seed that escaped, final"),
    "0.1028": (H200_FIBFL_PP, "the same window, a seed at chance, final"),
    "0.1024": (H200_FIBFL_PP, "the same window, the other seed at chance, final"),
    "0.49": (H200_FIBFL_PP, "the same window, the escaping seed at round 3 (0.487)"),
    "0.36": ("results/firma_fashion_mnist.json",
             "FibFL++ IID, [0, 1] inputs, H100, seed 0 at round 3"),
    "0.72": ("results/firma_fashion_mnist.json", "the same, seed 1 at round 3"),
    "0.86": ("results/firma_fashion_mnist.json", "the same, seed 0 at round 5"),
    "0.87": ("results/firma_fashion_mnist.json", "the same, seed 1 at round 5"),
    "0.103": (REPLAY, "the CPU replay, seed 0 at round 6"),
    "0.492": (REPLAY, "the CPU replay, seed 1 at round 3"),
    "0.546": (REPLAY, "the CPU replay, seed 2 at round 3"),
    "0.867": (REPLAY, "the CPU replay, seed 1 at round 6"),
    "0.870": (REPLAY, "the CPU replay, seed 2 at round 6"),
    "0.487": (REPLAY, "the H200 window's seed 2 at round 3, as the replay file keeps it"),
    "0.8788": ("fedfrac_lab/reproduce/published/firma.json",
               "the published FibFL++ IID cell (Table 7)"),
}
# Measurements kept in no file, and the words beside them that say so.
NOT_KEPT = {
    "0.9067": "cannot be remade here", "0.9133": "cannot be remade here",
    "0.9200": "cannot be remade here", "6.0e-4": "cannot be remade here",
    "1.06": "cannot be remade here",
    # The FibFL++ collapse bullet: the authors' code and fedfrac at R = 2, and the
    # first look at the dead layer, printed and not kept (0.103 is also the
    # replay's, in QUOTED).
    "0.100": "not kept in any file", "0.098": "not kept in any file",
    "0.104": "not kept in any file", "0.099": "not kept in any file",
    "0.103": "not kept in any file", "0.54": "not kept in any file",
    "0.53": "not kept in any file", "0.77": "not kept in any file",
    "0.840": "not kept in any file", "0.850": "not kept in any file",
    "0.43": "not kept in any file",
}
# Hyper-parameters and constants (the papers', the authors' code's, fedfrac's
# defaults) and section numbers of the papers.
SETTINGS = {"0.5", "0.9", "0.01", "0.3", "0.1", "0.2", "1e3", "1e-5", "0.99", "0.35",
            "0.4", "0.05", "0.8", "0.005", "1.0", "0.1307", "0.3081",
            "3.3", "3.4", "4.2", "4.5", "5.1", "5.3", "6.1", "6.3",
            # the tables' at-chance threshold (fedfrac_lab.reproduce.firma_files_table:
            # CHANCE + CHANCE_MARGIN)
            "0.12"}
# The reproduction pages' settings (κ0, α, C, the margins, the Gini floor) and
# section numbers; 0.005 is also the FO-RI-FedAvg round time on the H100, beside
# the other measured inputs of the estimates (benchmarks/results_h100.md).
PAGE_SETTINGS = {"0.005", "0.1", "0.2", "0.3", "0.5", "0.6", "0.8", "0.97", "1.0", "1.5",
                 "0.01", "3.1", "3.2", "3.3", "3.4", "5.1", "5.3", "6.1", "6.5"}


def _unquoted(text):
  """``text`` with fenced code and inline code blanked (commands, flags, paths)."""
  text = re.sub(r"```.*?```", " ", text, flags=re.S)
  text = re.sub(r"^\.\. code-block::.*?(?=^\S)", " ", text, flags=re.S | re.M)
  return re.sub(r"``[^`]*``|`[^`\n]*`", " ", text)


def _sections():
  with open(os.path.join(ROOT, DESIGN), encoding="utf-8") as f:
    text = f.read()
  return text[text.index(START):text.index(END)]


def _prose():
  return SPAN.sub(lambda m: " " * len(m.group(0)), _sections())


def _page_prose(path):
  with open(os.path.join(ROOT, path), encoding="utf-8") as f:
    text = f.read()
  return _unquoted(RST_SPAN.sub(" ", SPAN.sub(" ", text)))


def _floats(obj):
  if isinstance(obj, dict):
    for v in obj.values():
      yield from _floats(v)
  elif isinstance(obj, list):
    for v in obj:
      yield from _floats(v)
  elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
    yield float(obj)


def _holds(path, number):
  with open(os.path.join(ROOT, path), encoding="utf-8") as f:
    text = f.read()
  if path.endswith(".py"):       # a test computing it to more places
    return any(x.startswith(number) for x in re.findall(r"\d+\.\d+", text))
  if not path.endswith(".json"):
    return number in re.findall(r"\d+\.\d+", text)
  places = len(number.split(".")[1])
  return any(f"{x:.{places}f}" == number for x in _floats(json.loads(text)))


def test_every_decimal_in_the_prose_is_listed():
  found = set(DECIMAL.findall(_prose()))
  unlisted = found - set(QUOTED) - set(NOT_KEPT) - SETTINGS
  assert not unlisted, (f"{DESIGN} §3.3–3.4: numbers with no file: {sorted(unlisted)}; "
                        f"render them from a results file or list them here with it")
  # the lists name nothing the sections no longer quote
  assert not (set(QUOTED) | set(NOT_KEPT)) - found


@pytest.mark.parametrize("number", sorted(QUOTED))
def test_each_quoted_number_is_in_its_file(number):
  path, _ = QUOTED[number]
  assert _holds(path, number), f"{number} not in {path}"
  assert os.path.basename(path).split(".")[0] in _sections() or path.startswith("tests/")


@pytest.mark.parametrize("number", sorted(NOT_KEPT))
def test_a_number_no_file_holds_says_so_beside_it(number):
  for paragraph in _prose().split("\n\n"):
    if number in paragraph:
      assert NOT_KEPT[number] in " ".join(paragraph.split()), number


def test_every_span_of_the_sections_is_rendered_from_existing_files():
  from fedfrac_lab.reproduce import docs
  blocks, _ = docs.registry()
  spans = SPAN.findall(_sections())
  assert len(spans) >= 8
  for name, committed in spans:
    b = blocks[name]
    assert b.doc == DESIGN and b.sources, name
    for path in b.sources:
      assert os.path.exists(os.path.join(ROOT, path)), (name, path)
    assert docs.rendered(b) == committed, f"{name}: run fedfrac-reproduce docs"


def test_the_start_table_is_its_files_numbers():
  """The per-round table of the shared start: each row is its command's record."""
  with open(os.path.join(ROOT, "results/firma_fibfl_start_rounds.json"),
            encoding="utf-8") as f:
    rows = json.load(f)["rows"]
  table = dict(SPAN.findall(_sections()))["design_start_rounds"]
  for name in ("no_mixing", "shared", "per_client"):
    row = rows[name]
    assert row["command"].startswith("fedfrac-reproduce firma_authors fedfrac")
    line = next(x for x in table.splitlines() if f"`{row['command']}`" in x)
    assert [f"{v:.3f}" for v in row["record"]["curve"][:3]] == re.findall(
        r"\| (\d\.\d{3}) ", line)


def test_every_decimal_of_the_reproduction_pages_is_listed():
  found = set()
  for path in PAGES:
    found |= set(DECIMAL.findall(_page_prose(path)))
  unlisted = found - PAGE_SETTINGS
  assert not unlisted, (f"reproduction pages: numbers outside a generated span with no "
                        f"file: {sorted(unlisted)}")
