"""The CPU form of FIRMA's runs (clients mapped, the seeds one after another in
one program) gives the numbers of the form it replaced (clients vmapped, one run
at a time)."""
from __future__ import annotations

import warnings

import jax
import numpy as np

from fedfrac_lab.reproduce import firma


def _module(parallelism):
  module = firma.config_module(None)       # digits, N = 5, offline
  make = module.firma_config

  def firma_config(mode, scenario):
    c = make(mode, scenario, rounds=2)
    c.engine.client_parallelism = parallelism
    c.methods.fibfl.extractor_epochs = 2
    return c
  module.firma_config = firma_config
  return module


def _runs(parallelism, batch_runs, seeds=(0, 1)):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    feds = firma.common_shapes({"reference_code": firma.build_feds(
        _module(parallelism), "reference_code", ["dir0.5"], seeds)})["reference_code"]
  results, timing = firma.run_method(feds, "reference_code", "fibfl", ["dir0.5"], seeds,
                                     lambda msg: None, batch_runs)
  return results[("dir0.5", "fibfl")]["runs"]


def test_mapped_clients_and_seeds_give_the_vmapped_clients_numbers():
  jax.clear_caches()
  new = _runs("map", batch_runs=2)      # both seeds in one program, mapped
  old = _runs("vmap", batch_runs=1)     # one seed at a time, clients vmapped
  for a, b in zip(new, old):
    np.testing.assert_allclose(a["curve"], b["curve"], atol=1e-6)   # equal here
    np.testing.assert_allclose(a["gini"], b["gini"], atol=1e-6)
  # Dirichlet 0.5: unequal clients, so the lockstep loop and the selecting
  # loop after it both run; the curves are two rounds of real training.
  assert all(len(r["curve"]) == 2 and r["curve"][-1] > 0.3 for r in new)


def test_a_runs_form_other_than_vmap_or_map_is_one_error_line():
  import pytest
  with pytest.raises(ValueError, match="runs='pmap': allowed values are vmap, map"):
    firma.make_program(None, 1, "pmap")
