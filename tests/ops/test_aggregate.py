"""Tests for fedfrac.ops.aggregate (weighted mean and robust aggregators)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from fedfrac.ops import aggregate

S = 8

_median = jax.jit(aggregate.coordinate_median)
_trimmed = jax.jit(aggregate.trimmed_mean, static_argnames=("beta",))
_krum = jax.jit(aggregate.krum, static_argnames=("num_byzantine", "multi"))
_wmean = jax.jit(aggregate.weighted_mean)


def _tree(x):
  """A two-leaf stacked pytree from an [S, 12] array."""
  x = jnp.asarray(x)
  return {"w": x[:, :8].reshape(x.shape[0], 2, 4), "b": x[:, 8:]}


def _untree(t):
  return np.concatenate([np.asarray(t["w"]).reshape(-1), np.asarray(t["b"])])


def _data(seed, s=S):
  return np.random.default_rng(seed).normal(size=(s, 12)).astype(np.float32)


# ------------------------------------------------------------ weighted mean


def test_weighted_mean_with_mask_matches_numpy():
  x = _data(0)
  w = np.random.default_rng(1).uniform(1, 10, S).astype(np.float32)
  mask = np.array([1, 0, 1, 1, 0, 1, 1, 1], np.float32)
  out = _untree(_wmean(_tree(x), w, mask))
  ref = np.average(x[mask > 0], axis=0, weights=w[mask > 0])
  np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------- median


@pytest.mark.parametrize("fn", ["median", "trimmed"])
def test_identical_updates_are_returned(fn):
  one = _data(2, 1)
  x = np.repeat(one, S, axis=0)
  mask = np.array([1, 1, 0, 1, 1, 1, 0, 1], bool)
  out = _median(_tree(x), mask) if fn == "median" else _trimmed(_tree(x), mask, beta=0.2)
  np.testing.assert_allclose(_untree(out), one[0], rtol=1e-6)


@pytest.mark.parametrize("m", [1, 2, 5, 6, 8])
def test_median_matches_numpy_odd_and_even(m):
  x = _data(3)
  mask = np.zeros(S, bool)
  mask[np.random.default_rng(m).choice(S, m, replace=False)] = True
  out = _untree(_median(_tree(x), mask))
  np.testing.assert_allclose(out, np.median(x[mask], axis=0), rtol=1e-6, atol=1e-7)


def test_median_without_mask():
  x = _data(4)
  np.testing.assert_allclose(_untree(_median(_tree(x), None)), np.median(x, axis=0), rtol=1e-6)


# ------------------------------------------------------------- trimmed mean


@pytest.mark.parametrize("beta", [0.0, 0.1, 0.2, 0.3, 0.49])
@pytest.mark.parametrize("m", [3, 6, 8])
def test_trimmed_mean_matches_numpy_reference(beta, m):
  x = _data(5)
  mask = np.zeros(S, bool)
  mask[np.random.default_rng(m).choice(S, m, replace=False)] = True
  out = _untree(_trimmed(_tree(x), mask, beta=beta))
  # NumPy reference: sort, drop floor(β·m) from each end, average the rest.
  xs = np.sort(x[mask].astype(np.float64), axis=0)
  k = int(np.floor(beta * m))
  ref = xs[k:m - k].mean(axis=0)
  np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(out, scipy.stats.trim_mean(x[mask], beta, axis=0),
                             rtol=1e-5, atol=1e-6)


def test_trimmed_mean_beta_zero_is_mean_and_traced_beta():
  x = _data(6)
  np.testing.assert_allclose(_untree(_trimmed(_tree(x), None, beta=0.0)), x.mean(0),
                             rtol=1e-5, atol=1e-6)
  traced = jax.jit(lambda t, b: aggregate.trimmed_mean(t, None, b))
  np.testing.assert_allclose(_untree(traced(_tree(x), 0.25)),
                             scipy.stats.trim_mean(x, 0.25, axis=0), rtol=1e-5, atol=1e-6)


def test_trimmed_mean_bad_beta():
  with pytest.raises(ValueError, match="beta"):
    aggregate.trimmed_mean(_tree(_data(0)), None, beta=0.5)


# ----------------------------------------------------------- masking, all


def test_masked_entries_never_influence_results():
  x = _data(7)
  mask = np.array([1, 1, 0, 1, 1, 0, 1, 1], bool)
  clean = x.copy()
  clean[~mask] = 0.0
  for poison in (np.nan, np.inf, -np.inf, 1e30, -1e30):
    bad = x.copy()
    bad[~mask] = poison
    for f in (lambda t: _median(t, mask), lambda t: _trimmed(t, mask, beta=0.2),
              lambda t: _krum(t, mask, num_byzantine=1, multi=2)[0]):
      np.testing.assert_array_equal(_untree(f(_tree(bad))), _untree(f(_tree(clean))))
  _, sel = _krum(_tree(x), mask, num_byzantine=1, multi=6)
  assert not np.any(np.asarray(sel)[~mask])


def test_empty_cohort_gives_zeros():
  x = _data(8)
  mask = np.zeros(S, bool)
  assert np.all(_untree(_median(_tree(x), mask)) == 0)
  assert np.all(_untree(_trimmed(_tree(x), mask, beta=0.1)) == 0)


# -------------------------------------------------------------------- krum


def _byzantine_cohort(seed, f=2):
  r = np.random.default_rng(seed)
  honest = 1.0 + 0.1 * r.normal(size=(S - f, 12))
  byz = 100.0 * r.normal(size=(f, 12)) + 50.0
  x = np.concatenate([byz, honest]).astype(np.float32)   # Byzantine rows first
  is_byz = np.zeros(S, bool)
  is_byz[:f] = True
  return x, is_byz


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_krum_picks_an_honest_client(seed):
  x, is_byz = _byzantine_cohort(seed, f=2)
  agg, sel = _krum(_tree(x), None, num_byzantine=2, multi=1)
  sel = np.asarray(sel)
  assert sel.sum() == 1 and not np.any(sel & is_byz)
  np.testing.assert_allclose(_untree(agg), x[sel][0], rtol=1e-6)


def test_multi_krum_averages_the_honest_clients():
  x, is_byz = _byzantine_cohort(3, f=2)
  agg, sel = _krum(_tree(x), None, num_byzantine=2, multi=S - 2)
  np.testing.assert_array_equal(np.asarray(sel), ~is_byz)
  np.testing.assert_allclose(_untree(agg), x[~is_byz].mean(0), rtol=1e-5, atol=1e-6)


def test_krum_scores_match_numpy():
  x = _data(9)
  mask = np.array([1, 1, 1, 0, 1, 1, 1, 1], bool)
  f = 1
  scores = np.asarray(jax.jit(aggregate.krum_scores, static_argnames=("num_byzantine",))(
      _tree(x), mask, num_byzantine=f))
  idx = np.flatnonzero(mask)
  m = len(idx)
  for i in idx:
    d = np.sort([np.sum((x[i].astype(np.float64) - x[j]) ** 2) for j in idx if j != i])
    np.testing.assert_allclose(scores[i], d[:m - f - 2].sum(), rtol=1e-4)
  assert np.isinf(scores[3])


def test_krum_validates_cohort_size():
  x = _data(10)
  with pytest.raises(ValueError, match="num_byzantine"):
    aggregate.krum(_tree(x), None, num_byzantine=3)        # needs m > 8
  with pytest.raises(ValueError, match="num_byzantine"):
    aggregate.krum(_tree(x), np.array([1, 1, 1, 1, 1, 0, 0, 0]), num_byzantine=2)
  with pytest.raises(ValueError, match="multi"):
    aggregate.krum(_tree(x), None, num_byzantine=1, multi=0)


@pytest.mark.parametrize("weights,mask,match", [
    (jnp.ones(3), None, r"weights: shape \(3,\), expected \(4,\) for S=4 rows"),
    (jnp.ones((4, 1)), None, r"weights: shape \(4, 1\), expected \(4,\)"),
    (jnp.ones(4), jnp.ones(5), r"mask: shape \(5,\), expected \(4,\)"),
])
def test_weighted_mean_checks_its_weights_and_mask_like_its_siblings(weights, mask, match):
  """The old weighted_mean gave [4, 1] weights a wrong-shaped mean ([1, ...])
  without a word, and [3] weights a dot_general TypeError instead of a line
  naming ``weights``."""
  stacked = {"w": jnp.ones((4, 2)), "b": jnp.ones((4,))}
  with pytest.raises(ValueError, match=match):
    aggregate.weighted_mean(stacked, weights, mask)
  with pytest.raises(ValueError, match=r"same leading client axis"):
    aggregate.weighted_mean({"w": jnp.ones((4, 2)), "b": jnp.ones((3,))}, jnp.ones(4))
  assert aggregate.weighted_mean({}, jnp.ones(4)) == {}   # no leaves: unchanged
