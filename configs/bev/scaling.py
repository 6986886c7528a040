"""BEV client scaling on the SYNTHETIC fleet: K in {10, 50, 100, 200} vehicles.

  python -m fedfrac.main --config=configs/bev/scaling.py:100 --workdir=runs/bev_k100

Every vehicle drives 2 h (less than the main table's 6 h) and runs are 20 rounds
(not 40), to keep 200 vehicles affordable on a CPU; so K = 10 here is not the
main-table fleet. C = 0.2. FO-RI-FedAvg runs with the light roughness probe
(configs/bev/base.py).
"""
from __future__ import annotations

import ml_collections
from configs.bev import base

VALUES = (10, 50, 100, 200)
METHODS = ("fedavg", "fo_ri_fedavg")


def get_config(arg="10"):
  c = base.get_config()
  c.data.num_clients = int(arg)
  c.data.bev.hours_per_vehicle = 2.0
  c.participation = 0.2
  c.rounds = 20
  c.target_rmse = 0.0
  c.name = f"BEV scaling K={c.data.num_clients}, SYNTHETIC fleet"
  c.methods = ml_collections.ConfigDict()
  for label, (name, options) in base.secondary_methods(METHODS).items():
    if name in base.available([name]):
      c.methods[label] = base.method(name, **options)
  return c
