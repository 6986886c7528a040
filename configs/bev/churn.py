"""BEV client churn on the SYNTHETIC fleet: availability is a two-state Markov chain
per vehicle (p_leave: available -> away, p_join: away -> available); S_t is drawn
from the available vehicles (fewer than ceil(C K) participate when few are).

  python -m fedfrac.main --config=configs/bev/churn.py:0.1 --workdir=runs/bev_churn01

Arguments (the paper's regimes, §IV-N): a number p for symmetric churn
p_leave = p_join = p ∈ {0, 0.05, 0.1, 0.2} (0 = no churn; stationary
availability 1/2 for p > 0); ``loss=<p>`` for net loss, p_join = 0.02 and
p_leave = p ∈ {0.05, 0.1, 0.2}; ``gain=<p>`` for net gain, p_leave = 0.02 and
p_join = p ∈ {0.05, 0.1, 0.2} (Tables XXIX–XXXI). Extra settings of ours:
``asym_rates`` p_leave = 0.2, p_join = 0.05; ``asym_class`` per-class rates,
passenger cars (0.2, 0.2), trucks and buses (0.02, 0.5). All vehicles start
available; S_t has max(⌈C·|A_t|⌉, 1) of the |A_t| available vehicles
(``churn.cohort_rule = "available"``). FO-RI-FedAvg runs with the light roughness
probe (configs/bev/base.py).
"""
from __future__ import annotations

import ml_collections
from configs.bev import base

SYMMETRIC = (0.0, 0.05, 0.1, 0.2)
PAPER_ASYMMETRIC = ("loss=0.05", "loss=0.1", "loss=0.2",
                    "gain=0.05", "gain=0.1", "gain=0.2")
FIXED_RATE = 0.02        # p_join under net loss, p_leave under net gain
ASYMMETRIC = PAPER_ASYMMETRIC + ("asym_rates", "asym_class")
METHODS = ("fedavg", "fo_ri_fedavg")


def get_config(arg="0.1"):
  c = base.get_config()
  if arg.startswith(("loss=", "gain=")):
    kind, _, value = arg.partition("=")
    p = float(value)
    if kind == "loss":
      c.churn.p_leave, c.churn.p_join = p, FIXED_RATE
    else:
      c.churn.p_leave, c.churn.p_join = FIXED_RATE, p
  elif arg == "asym_rates":
    c.churn.p_leave, c.churn.p_join = 0.2, 0.05
  elif arg == "asym_class":
    c.churn.p_leave, c.churn.p_join = 0.2, 0.2
    c.churn.per_class.truck = (0.02, 0.5)
    c.churn.per_class.bus = (0.02, 0.5)
  else:
    p = float(arg)
    c.churn.p_leave = p
    c.churn.p_join = p if p > 0 else 1.0
  c.name = f"BEV churn {arg}, SYNTHETIC fleet"
  c.methods = ml_collections.ConfigDict()
  for label, (name, options) in base.secondary_methods(METHODS).items():
    if name in base.available([name]):
      c.methods[label] = base.method(name, **options)
  return c
