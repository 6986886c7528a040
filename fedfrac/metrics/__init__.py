"""Metrics, one module per kind; every name is also importable from here.

* :mod:`~fedfrac.metrics.classification`: accuracy.
* :mod:`~fedfrac.metrics.regression`: RMSE, MAE, MAPE (micro and per-client macro).
* :mod:`~fedfrac.metrics.fairness`: Gini coefficient across clients.
* :mod:`~fedfrac.metrics.drift`: client drift and roughness–drift diagnostics.
* :mod:`~fedfrac.metrics.statistics`: rounds to target, plateau σ, seed statistics.

Functions ending in ``_jnp`` run under jit; the rest are host-side NumPy.
"""
from fedfrac.metrics import classification, drift, fairness, regression, statistics
from fedfrac.metrics.classification import accuracy
from fedfrac.metrics.drift import (average_ranks, drift_stats, drift_stats_jnp, pearson,
                                   pearson_jnp, roughness_drift_diagnostics_jnp,
                                   spearman, spearman_jnp, tertile_groups, tertile_means,
                                   tertile_means_jnp)
from fedfrac.metrics.fairness import gini, gini_jnp
from fedfrac.metrics.regression import regression_metrics
from fedfrac.metrics.statistics import (format_mean_std, plateau_std, rounds_to_target,
                                        seed_stats)
