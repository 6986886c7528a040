"""A group of FIRMA runs in one compiled program (scenarios × seeds vmapped, and
FibFL with FibFL+ through a traced gate) gives the numbers of the runs one at a
time; the batch planner's choices.

One round: the local-step loops of a batch are split by the smallest step
count of all its runs (``fedfrac.ops.lockstep``), so another batch is another
program that agrees to float rounding; a second round of 2 Adam epochs on one
class per client (LS K=1) grows such a difference into whole test samples
(seen: 1 of 8 runs 0.770 against 0.780 after round 2, every other number equal).
"""
from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest

from fedfrac_lab.reproduce import firma, firma_groups

SCENARIOS = ["dir0.5", "ls1"]
SEEDS = (0, 1)


def _module():
  module = firma.config_module(None)       # digits, N = 5, offline
  make = module.firma_config

  def firma_config(mode, scenario):
    c = make(mode, scenario, rounds=1)
    c.engine.client_parallelism = "vmap"   # the accelerator form
    for m in ("fibfl", "fibfl_plus"):
      c.methods[m].extractor_epochs = 2
    return c
  module.firma_config = firma_config
  return module


@pytest.fixture(scope="module")
def feds():
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    return firma.common_shapes({"reference_code": firma.build_feds(
        _module(), "reference_code", SCENARIOS, SEEDS)})["reference_code"]


def test_one_program_for_fibfl_and_fibfl_plus_over_scenarios_and_seeds(feds):
  jax.clear_caches()
  quiet = lambda msg: None
  grouped, timing = firma.run_group(feds, "reference_code", ["fibfl", "fibfl_plus"],
                                    SCENARIOS, SEEDS, quiet, memory_bytes=1 << 34)
  # One program, one batch: 2 methods x 2 scenarios x 2 seeds, N = 5 everywhere.
  assert [(p["methods"], p["runs"], p["batches"]) for p in timing["programs"]] == [
      (["fibfl", "fibfl_plus"], 8, 1)]
  assert timing["compiles"] == 1
  for method in ("fibfl", "fibfl_plus"):
    alone, _ = firma.run_method(feds, "reference_code", method, SCENARIOS, SEEDS, quiet,
                                batch_runs=1)
    for scen in SCENARIOS:
      for a, b in zip(grouped[(scen, method)]["runs"], alone[(scen, method)]["runs"]):
        np.testing.assert_allclose(a["curve"], b["curve"], atol=2e-6)
        np.testing.assert_allclose(a["gini"], b["gini"], atol=2e-6)
        np.testing.assert_allclose(a["spectral_gap"], b["spectral_gap"], atol=1e-5)
  # The gate matters: FibFL and FibFL+ differ (else the test could not fail).
  diff = [abs(a["curve"][-1] - b["curve"][-1]) for scen in SCENARIOS
          for a, b in zip(grouped[(scen, "fibfl")]["runs"],
                          grouped[(scen, "fibfl_plus")]["runs"])]
  assert max(diff) > 1e-4
  assert all(r["curve"][-1] > 0.2 for cell in grouped.values() for r in cell["runs"])
  # Each record says itself whether its run ended at chance (none here).
  assert all(r["at_chance"] is False for cell in grouped.values() for r in cell["runs"])


def test_cells_in_skip_are_not_run_and_progress_is_reported(feds):
  seen = []
  results, timing = firma.run_group(feds, "reference_code", ["fedavg"], SCENARIOS, SEEDS,
                                    lambda msg: None, memory_bytes=1 << 34,
                                    skip={("ls1", "fedavg")},
                                    on_cells=lambda r, p: seen.append((r, p)))
  assert set(results) == {("dir0.5", "fedavg")}
  assert timing["programs"][0]["runs"] == 2
  assert seen and set(seen[-1][0]) == set(results)
  assert seen[-1][1][0]["runs"] == 2 and seen[-1][1][0]["name"].endswith(":N=5:1x2")


def test_batches_fill_memory_then_split_only_where_a_step_curve_says_so():
  largest = [10, 90, 12, 95, 11, 93]
  # Enough memory, no curve (latency-bound): one batch of everything.
  assert firma_groups.plan_batches(largest, limit=100) == [[0, 4, 2, 1, 5, 3]]
  # Memory for 4 runs: two equal batches of similar runs.
  assert firma_groups.plan_batches(largest, limit=4) == [[0, 4, 2], [1, 5, 3]]
  # Memory for 5: still two batches of 3 (one shape), not 5 + 1.
  assert firma_groups.plan_batches(largest, limit=5) == [[0, 4, 2], [1, 5, 3]]
  # Odd counts: the last batch is filled up by repeating its last run.
  assert firma_groups.plan_batches([5, 1, 3], limit=2) == [[1, 2], [0, 0]]
  # A step time with a latency floor of 3 lanes and linear above it: the small
  # runs stop waiting for the large ones (2 batches: (12 + 95) x 3 = 321 against
  # 95 x 6 = 570 for one, 196 x 3 for three).
  assert firma_groups.plan_batches(largest, 100,
                                   step_time=lambda lanes: max(3, lanes)) == [
      [0, 4, 2], [1, 5, 3]]
  # A flat step time (latency-bound): one batch is cheapest.
  assert firma_groups.plan_batches(largest, 100, step_time=lambda lanes: 1.0) == [
      [0, 4, 2, 1, 5, 3]]


def test_memory_model_counts_state_and_per_client_temporaries(feds):
  from fedfrac import runner
  cfg, fs = feds["dir0.5"]
  sim = runner.build_simulation(cfg, "fibfl", fs[0])
  state = sim.init(0, fs[0])
  b = firma_groups.run_bytes(sim, fs[0], state)
  assert b > 4 * firma_groups.tree_bytes(state)
  limit = int(firma_groups.MEMORY_FRACTION * (10 * b) // b)
  assert limit == 5
