"""FO-RI-FedAvg ablations on the SYNTHETIC BEV fleet (main-table setup, C = 0.5,
light roughness probe: see configs/bev/base.py).

  python -m fedfrac.main --config=configs/bev/ablations.py:alpha=0.5 --workdir=runs/bev_a05

The argument is ``<study>=<value>`` with the studies below (default: the paper's
FO-RI-FedAvg). The grids are the paper's (§IV-G):

* ``alpha`` — fractional order α ∈ {1, 0.9, 0.8, 0.7, 0.6} (Fig. 9; α = 1 is
  RI-FedAvg);
* ``lam`` — proximal strength λ ∈ {0.02, 0.05, 0.1, 0.2} (Fig. 10; the pull is
  λ·r(I_k) with r(I) = I/(I + 1));
* ``probe_every`` — R_probe ∈ {1, 5, 10} (Table XIII);
* ``safeguard`` — δ crossed with the preconditioner clip (Fig. 11): ``paper``
  δ 1e-6 and p ∈ [0.2, 5], ``no_clip`` δ 1e-6 without clip, ``delta0`` δ → 0
  with clip, ``delta0_no_clip`` neither. δ must stay > 0 (the preconditioner
  is (|Δw| + δ)^(1−α)); δ → 0 is δ = 1e-12 here;
* ``beta_kappa`` — spectral gate β_κ ∈ {0, 0.25, 0.5, 1} (Table XIV).

The reproduction suite runs these on the scaled-down synthetic setup of
configs/bev/base.py (light probe, 40 rounds, C = 0.5), not on the paper's
protocol (configs/bev/paper.py).
"""
from __future__ import annotations

import ml_collections

from configs.bev import base

DELTA_TO_ZERO = 1e-12
# safeguard -> (δ, p_min, p_max); p_min = p_max = 0 is no clip.
SAFEGUARDS = {"paper": (1e-6, 0.2, 5.0), "no_clip": (1e-6, 0.0, 0.0),
              "delta0": (DELTA_TO_ZERO, 0.2, 5.0),
              "delta0_no_clip": (DELTA_TO_ZERO, 0.0, 0.0)}
# study -> (values, whether the values are continuous and can share one compiled
# program as a vmapped grid)
STUDIES = {
    "alpha": ((1.0, 0.9, 0.8, 0.7, 0.6), True),
    "lam": ((0.02, 0.05, 0.1, 0.2), True),
    "probe_every": ((1, 5, 10), False),
    "safeguard": (tuple(SAFEGUARDS), False),
    "beta_kappa": ((0.0, 0.25, 0.5, 1.0), True),
}


def options(study, value):
  """FO-RI-FedAvg options for one ablation value."""
  if study == "safeguard":
    delta, p_min, p_max = SAFEGUARDS[value]
    return {"delta": delta, "p_min": p_min, "p_max": p_max}
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
