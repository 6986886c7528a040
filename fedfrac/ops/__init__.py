"""The pure, vmappable math of the papers: no engine, no I/O."""
from fedfrac.ops.aggregate import normalize_weights, weighted_mean
from fedfrac.ops.ring import (
    FIB_ALPHA, FIB_BETA, PHI, apply_mixing, fibonacci_mixing_matrix, mixing_matrix_ring_uniform,
    spectral_gap)
from fedfrac.ops.fibfl_schedule import (
    fibfl_pp_gamma, fibfl_pp_passes, fibfl_pp_warmup, per_pass_retention)
from fedfrac.ops.ring_order import ring_cost, two_opt_ring
from fedfrac.ops.roughness import roughness_index, roughness_profile
from fedfrac.ops.spectral import spectral_flatness
from fedfrac.ops.aggregate import (coordinate_median, krum, krum_scores,
                                   pairwise_sq_distances, trimmed_mean)
from fedfrac.ops.attacks import (byzantine_mask, gaussian_attack, label_flip, scaled_update,
                                 sign_flip)
from fedfrac.ops.dp import (PrivacyAccountant, clip_update, dp_aggregate, dp_epsilon,
                            epsilon_curve, gaussian_noise_like)
from fedfrac.ops.kuramoto import flatten_stacked, kuramoto_update, kuramoto_weights
