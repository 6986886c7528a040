"""The families of fedfrac's methods, by where they come from (baselines, the
fractional family, the FIRMA ring methods, Kuramoto, privacy and secure
aggregation, personalised methods), the methods built without their paper's full
text (:data:`STAND_INS`) and the reference every comparison is drawn against.
The quickstart figures draw one panel per family and the summary tables name
each method's family (:func:`family`); ``--list`` shows them
(:mod:`fedfrac.catalog`).
"""
from __future__ import annotations

from typing import NamedTuple


class Family(NamedTuple):
  """A group of methods: ``key`` (short, for tables), ``title`` (for figures) and
  the registered algorithm names in it."""
  key: str
  title: str
  names: tuple


FAMILIES = (
    Family("baseline", "Baselines",
           ("fedavg", "fedavgm", "fedprox", "scaffold", "fednova", "fedadam", "fedyogi",
            "fedadagrad", "moon", "feddyn", "fdse", "fedel")),
    Family("fractional", "Fractional", ("fofedavg", "fo_ri_fedavg", "fo_fedavg",
                                        "ri_fedavg")),
    Family("FIRMA ring", "FIRMA ring methods", ("rdfl", "fibfl", "fibfl_plus",
                                                "fibfl_pp")),
    Family("Kuramoto", "Kuramoto", ("kuramoto_fedavg",)),
    Family("privacy", "Privacy and secure aggregation", ("dp_fedavg", "dp_sgd",
                                                         "sparse_secagg")),
    Family("personalised", "Personalised", ("fedrep", "fedbm")),
)
# An algorithm no family lists (e.g. one registered by a user's own module).
OTHER = Family("other", "Other", ())

# Methods built without their paper's full text: what they were built from.
STAND_INS = {
    "fdse": "paper text not available: our reading of its consistency regulariser",
    "fedbm": "paper text not found: built from its title and FOFedAvg's description",
    "fedel": "built from the paper's abstract and overview",
    "sparse_secagg": "built from the abstract and FOFedAvg's related work",
}


# The reference every comparison is drawn against (dashed in every family panel).
REFERENCE = "fedavg"


def family(name: str) -> Family:
  """The :class:`Family` of algorithm ``name`` (:data:`OTHER` when none lists it)."""
  return next((f for f in FAMILIES if name in f.names), OTHER)
