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
# ``--partition=per_seed``: each seed draws its own partition (``data.seed = -1``)
# where the authors' code pins one (seed 42) for every run, so a cell's n covers
# the partition draw too (:func:`fedfrac_lab.reproduce.verdicts.n_covers`).
PARTITIONS = ("per_seed",)
# The methods whose initial models the variant changes (their ``init`` option).
RING_METHODS = ("rdfl", "fedrep", "fibfl", "fibfl_plus", "fibfl_pp")
TITLES = {"shared": "one shared initial model (a labelled variant of the authors' code)",
          "per_seed": "each seed its own partition (`data.seed = -1`, a labelled variant "
                      "of the authors' code)"}


def cell_inputs(mode, args) -> str:
  """The grouping key of a result's cells: ``args["inputs"]`` in
  ``reference_code`` (``"unit"`` in ``paper``, which always uses [0, 1]), with
  ``+init`` for a variant (``args["init"]``) and ``+per_seed`` for a partition per
  seed (``args["partition"]``)."""
  if mode != "reference_code":
    return "unit"
  extras = [v for v in (args.get("init"), args.get("partition")) if v]
  return "+".join([args.get("inputs", "unit"), *extras])


def title(inputs, base_titles) -> str:
  """A section's title: the input scaling's (``base_titles``), and the variant's."""
  base, *extras = inputs.split("+")
  return base_titles[base] + "".join(f", {TITLES[e]}" for e in extras)


def apply(config, init, partition=None) -> None:
  """Set ``init`` on every ring method of a FIRMA config (the variant), and
  ``data.seed = -1`` for ``partition="per_seed"``."""
  if partition is not None:
    if partition not in PARTITIONS:
      raise ValueError(f"partition={partition!r}: allowed values are None, "
                       f"{', '.join(PARTITIONS)}")
    config.data.seed = -1
  if init is None:
    return
  if init not in INITS:
    raise ValueError(f"init={init!r}: allowed values are None, {', '.join(INITS)}")
  for name in RING_METHODS:
    if name in config.methods:
      config.methods[name].init = init


# ------------------------------------------------------------------ predictions
#
# A variant is a hypothesis about the gap between the authors' code and the
# published cells; its runs on cells it was not chosen from test it only if what
# it predicts for each cell is written down, and committed, before they run.

PREDICTION_RULE = ("confirmed when the variant's cell agrees with the published value "
                   "(the verdict rule) or its mean closes at least half the gap between "
                   "the authors' per-client draw and the published value (mean at or "
                   "beyond `threshold`); refuted otherwise")


def predictions(published, plain_means, cells):
  """What the shared-start hypothesis predicts for each cell ``(scenario,
  method)`` of ``cells``: ``published`` ``{(method, scenario): value}`` (the
  paper's), ``plain_means`` ``{(scenario, method): mean}`` of the authors'
  per-client draws (a cell without one predicts agreement only). ``threshold``
  is the midpoint between the plain mean and the published value: the mean the
  variant must reach (on the published side) to close half the gap."""
  out = []
  for scen, m in cells:
    pub = float(published[(m, scen)])
    plain = plain_means.get((scen, m))
    entry = {"scenario": scen, "method": m, "published": pub,
             "authors_draw_mean": None if plain is None else round(float(plain), 4),
             "threshold": None if plain is None else round((float(plain) + pub) / 2, 4)}
    entry["prediction"] = (
        "agrees with the published value" if plain is None else
        f"agrees with the published value, or mean "
        f"{'>=' if pub >= plain else '<='} {entry['threshold']:.4f} "
        f"(half the gap from {float(plain):.4f} to {pub:.4f} closed)")
    out.append(entry)
  return out


def outcome(prediction, mean, verdict) -> str:
  """``"confirmed"`` or ``"refuted"``: a variant cell's ``mean`` and ``verdict``
  (the project's rule against the published value) against its ``prediction``."""
  if verdict == "agrees":
    return "confirmed"
  threshold = prediction["threshold"]
  if threshold is None:
    return "refuted"
  up = prediction["published"] >= prediction["authors_draw_mean"]
  return "confirmed" if (mean >= threshold if up else mean <= threshold) else "refuted"
