"""Metrics with known answers."""
from __future__ import annotations

import numpy as np
import pytest

from fedfrac import metrics


def test_gini_known_values():
  assert metrics.gini([1, 1, 1, 1]) == 0.0
  assert metrics.gini([0, 0, 0, 1]) == pytest.approx(0.75)   # (n-1)/n for one holder
  assert metrics.gini([0, 0, 0, 0]) == 0.0
  x = np.random.default_rng(0).random(7)
  assert float(metrics.gini_jnp(x)) == pytest.approx(metrics.gini(x), rel=1e-5)
  mask = np.array([1, 1, 0, 1, 1, 0, 1], bool)
  assert float(metrics.gini_jnp(x, mask)) == pytest.approx(metrics.gini(x[mask]), rel=1e-5)
  with pytest.raises(ValueError):
    metrics.gini([-1, 1])


def test_rounds_to_target_and_plateau():
  assert metrics.rounds_to_target([1, 2, 3, 4], [0.1, 0.5, 0.85, 0.9], 0.8) == 3
  assert metrics.rounds_to_target([1, 2], [0.1, 0.5], 0.8) is None
  assert metrics.rounds_to_target([1, 2, 3], [5.0, 2.0, 1.0], 2.0, higher_is_better=False) == 2
  assert metrics.plateau_std([0, 0, 1, 1]) == 0.0


def test_seed_stats_t_interval():
  s = metrics.seed_stats([1.0, 2.0, 3.0])
  assert s["mean"] == 2.0 and s["std"] == pytest.approx(1.0)
  assert s["ci95"] == pytest.approx(4.302653 / np.sqrt(3), rel=1e-5)
  assert metrics.seed_stats([])["n"] == 0
  assert metrics.format_mean_std([0.5, 0.7], digits=2) == "0.60 ± 0.14"
