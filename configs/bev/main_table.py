"""BEV main table on the SYNTHETIC fleet: every method, 10 vehicles, 5 seeds.

  python -m fedfrac.main --config=configs/bev/main_table.py --workdir=runs/bev_main

Methods not registered in this installation are left out (the reproduction
script says which). See configs/bev/base.py for the shared setup and for running
it on VED.
"""
from __future__ import annotations

import ml_collections
from configs.bev import base


def get_config():
  c = base.get_config()
  c.name = "BEV main table, SYNTHETIC fleet"
  names = base.available([a for a, _ in base.MAIN_METHODS.values()])
  c.methods = ml_collections.ConfigDict()
  for label, (name, options) in base.MAIN_METHODS.items():
    if name in names:
      c.methods[label] = base.method(name, **options)
  return c
