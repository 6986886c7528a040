"""BEV participation sweep on the SYNTHETIC fleet: C in {0.1, 0.2, 0.3, 0.5}.

  python -m fedfrac.main --config=configs/bev/participation.py:0.2 --workdir=runs/bev_c02

The argument after ``:`` is the client fraction C (default 0.5, the main table's).
FO-RI-FedAvg runs with the light roughness probe (configs/bev/base.py).
"""
from __future__ import annotations

import ml_collections
from configs.bev import base

VALUES = (0.1, 0.2, 0.3, 0.5)
METHODS = ("fedavg", "fo_ri_fedavg")


def get_config(arg="0.5"):
  c = base.get_config()
  c.participation = float(arg)
  c.name = f"BEV participation C={c.participation}, SYNTHETIC fleet"
  c.methods = ml_collections.ConfigDict()
  for label, (name, options) in base.secondary_methods(METHODS).items():
    if name in base.available([name]):
      c.methods[label] = base.method(name, **options)
  return c
