"""QUICKSTART entries of FOFedAvg and the FO-RI-FedAvg family run fast and finite."""
from __future__ import annotations

import importlib.util
import os

import numpy as np

import fedfrac as ff
from fedfrac import algorithms


def test_quickstart_entries_of_the_fractional_family_run():
  new = ("fofedavg", "fo_ri_fedavg", "ri_fedavg", "fo_fedavg")
  for name in new:
    assert name in algorithms.QUICKSTART
    assert algorithms.QUICKSTART[name]["client"]["schedule"] == "inv_sqrt"
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  spec = importlib.util.spec_from_file_location(
      "quickstart", os.path.join(root, "configs", "quickstart.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  c = module.get_config()
  c.progress = False
  c.rounds = 1
  c.model.hidden = (16,)
  c.only = ",".join(new)
  c.workers = 1   # in this process (tests/runner/test_parallel.py covers workers)
  res = ff.run(c)
  assert sorted(res.methods()) == sorted(new)
  for rec in res.records:
    assert rec.status == "ok" and np.isfinite(rec.rows[-1]["accuracy"])
  ri = res.record("ri_fedavg", 0).rows[-1]
  assert ri["train_probed"] == 1.0 and ri["train_roughness"] >= 0
