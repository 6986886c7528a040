"""FO-RI-FedAvg ablations on the SYNTHETIC BEV fleet (main-table setup, C = 0.5,
light roughness probe: see configs/bev/base.py).

  python -m fedfrac.main --config=configs/bev/ablations.py:alpha=0.5 --workdir=runs/bev_a05

The argument is ``<study>=<value>`` with the studies below (default: the paper's
FO-RI-FedAvg). Values:

* ``alpha`` — fractional order α (α = 1 is RI-FedAvg);
* ``lam`` — proximal strength λ (λ = 0 is FO-FedAvg; the pull is λ·r(I_k) with
  r(I) = I/(I + 1), so λ must be large when the roughness index I_k is small);
* ``probe_every`` — R_probe, rounds of participation between roughness probes;
* ``safeguard`` — preconditioner clip [p_min, p_max]: ``paper`` [0.2, 5],
  ``tight`` [0.5, 2], ``none`` (no clip);
* ``beta_kappa`` — spectral gate β_κ (0 = off).
"""
from __future__ import annotations

import ml_collections

from fedfrac.config import sibling_config

base = sibling_config(__file__, "base.py")

SAFEGUARDS = {"paper": (0.2, 5.0), "tight": (0.5, 2.0), "none": (0.0, 0.0)}
# study -> (values, whether the values are continuous and can share one compiled
# program as a vmapped grid)
STUDIES = {
    "alpha": ((0.5, 0.6, 0.8, 0.97, 1.0), True),
    "lam": ((0.0, 0.1, 1.0, 10.0, 50.0), True),
    "probe_every": ((1, 5, 10), False),
    "safeguard": (tuple(SAFEGUARDS), False),
    "beta_kappa": ((0.0, 0.1, 1.0), True),
}


def options(study, value):
  """FO-RI-FedAvg options for one ablation value."""
  if study == "safeguard":
    p_min, p_max = SAFEGUARDS[value]
    return {"p_min": p_min, "p_max": p_max}
  if study == "probe_every":
    return {"probe_every": int(value)}
  return {study: float(value)}


def get_config(arg="alpha=0.8"):
  study, _, value = arg.partition("=")
  if study not in STUDIES:
    raise ValueError(f"ablation {study!r}: allowed studies are {', '.join(STUDIES)}")
  c = base.get_config()
  c.name = f"BEV ablation {arg}, SYNTHETIC fleet"
  name, opts = base.secondary_methods(["fo_ri_fedavg"])["fo_ri_fedavg"]
  c.methods = ml_collections.ConfigDict()
  c.methods["fo_ri_fedavg"] = base.method(name, **{**opts, **options(study, value)})
  return c
