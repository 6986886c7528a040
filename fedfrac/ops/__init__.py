"""The pure, vmappable math of the papers: no engine, no I/O."""
from fedfrac.ops.aggregate import normalize_weights, weighted_mean
from fedfrac.ops.ring import (FIB_ALPHA, FIB_BETA, PHI, apply_mixing, fibfl_pp_gamma,
                              fibfl_pp_passes, fibfl_pp_warmup, fibonacci_mixing_matrix,
                              mixing_matrix_ring_uniform, per_pass_retention, ring_cost,
                              spectral_gap, two_opt_ring)
from fedfrac.ops.roughness import roughness_index, roughness_profile
from fedfrac.ops.spectral import spectral_flatness
