"""Labelled variants of FIRMA's ``reference_code`` mode on the real data: the
authors' code with one named change, run as their own section of Tables 7–10
(``fedfrac-reproduce firma_files --init=shared``), so a hypothesis about the gap
between the authors' public code and the published cells is tested beside the
unchanged runs, never in their place.

* ``shared``: every client of the ring methods (RDFL, FedRep's heads, FibFL,
  FibFL+, FibFL++) starts from one shared initial model instead of the authors'
  independent draw per client (docs/design.md §3.3, "FibFL / FibFL+ below Tables
  7–8"); FedAvg has one global model either way.

A result file's ``args`` name its variant (``init``); :func:`cell_inputs` is the
grouping key of its cells (the input scaling, and the variant when there is one),
so the tables and the campaign's coverage keep the variant's cells apart.
"""
from __future__ import annotations

INITS = ("shared",)
# The methods whose initial models the variant changes (their ``init`` option).
RING_METHODS = ("rdfl", "fedrep", "fibfl", "fibfl_plus", "fibfl_pp")
TITLES = {"shared": "one shared initial model (a labelled variant of the authors' code)"}


def cell_inputs(mode, args) -> str:
  """The grouping key of a result's cells: ``args["inputs"]`` in
  ``reference_code`` (``"unit"`` in ``paper``, which always uses [0, 1]), with
  ``+init`` for a variant (``args["init"]``)."""
  if mode != "reference_code":
    return "unit"
  inputs = args.get("inputs", "unit")
  init = args.get("init")
  return f"{inputs}+{init}" if init else inputs


def title(inputs, base_titles) -> str:
  """A section's title: the input scaling's (``base_titles``), and the variant's."""
  base, _, init = inputs.partition("+")
  return base_titles[base] + (f", {TITLES[init]}" if init else "")


def apply(config, init) -> None:
  """Set ``init`` on every ring method of a FIRMA config (the variant)."""
  if init is None:
    return
  if init not in INITS:
    raise ValueError(f"init={init!r}: allowed values are None, {', '.join(INITS)}")
  for name in RING_METHODS:
    if name in config.methods:
      config.methods[name].init = init
