"""Tests for fedfrac.ops.kuramoto (Kuramoto-FedAvg weights and update)."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac.ops import aggregate
from fedfrac.ops import kuramoto

MODES = ("coupled", "paper", "reference_code")


# ----------------------------------------------------------------- reference


def np_kuramoto(deltas, base, kappa, weighting, phi=None, mask=None, eps=1e-8):
  """Plain NumPy (float64) implementation of docs/design.md §3.4, returns
  (weights, update, theta)."""
  d = np.asarray(deltas, np.float64)
  k = d.shape[0]
  part = np.ones(k, bool) if mask is None else np.asarray(mask, bool)
  p = np.where(part, np.asarray(base, np.float64), 0.0)
  p = p / p.sum()
  mean = p @ np.where(part[:, None], d, 0.0)
  theta = np.zeros(k)
  for i in np.flatnonzero(part):
    c = d[i] @ mean / (np.linalg.norm(d[i]) * np.linalg.norm(mean))
    theta[i] = np.arccos(np.clip(c, -1.0, 1.0))
  tbar = theta[part].mean()
  s = np.where(part, np.sin(tbar - theta), 0.0)
  if weighting == "paper":
    w = s / s.sum() if abs(s.sum()) >= eps else p
    upd = kappa * (w @ np.where(part[:, None], d, 0.0))
  elif weighting == "coupled":
    r = p * np.maximum(0.0, 1.0 + kappa * s)
    w = r / r.sum()
    upd = w @ np.where(part[:, None], d, 0.0)
  else:
    phi = np.asarray(phi, np.float64)
    idx = np.flatnonzero(part)
    m = len(idx)
    upd = mean.copy()
    corr = np.zeros_like(mean)
    for i in idx:          # the authors' double sum, written literally
      for j in idx:
        if j != i:
          corr += np.cos(phi[j] - phi[i]) * (d[j] - mean)
    upd = mean + kappa / (m - 1) * corr
    c = np.array([sum(np.cos(phi[j] - phi[i]) for i in idx if i != j) if part[j] else 0.0
                  for j in range(k)])
    w = p + kappa / (m - 1) * (c - p * c.sum())
  return w, upd, theta


def _rand(seed, k=6, d=24):
  r = np.random.default_rng(seed)
  deltas = r.normal(size=(k, d)).astype(np.float32)
  deltas += r.normal(size=(1, d)).astype(np.float32)   # a shared direction
  base = r.uniform(1.0, 5.0, size=k).astype(np.float32)
  phi = r.uniform(0.0, 3.0, size=k).astype(np.float32)
  return deltas, base, phi


_weights = jax.jit(kuramoto.kuramoto_weights, static_argnames=("weighting", "eps"))
_update = jax.jit(kuramoto.kuramoto_update, static_argnames=("weighting", "eps"))


@functools.partial(jax.jit, static_argnames=("weighting",))
def _jit_update(deltas, base, kappa, phi, mask, weighting):
  return kuramoto.kuramoto_update(deltas, base, kappa, weighting, phase_signal=phi, mask=mask)


# --------------------------------------------------------------------- tests


@pytest.mark.parametrize("weighting", MODES)
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_numpy_reference(weighting, seed):
  deltas, base, phi = _rand(seed)
  kappa = 0.3
  w_ref, u_ref, th_ref = np_kuramoto(deltas, base, kappa, weighting, phi)
  upd, info = _jit_update(deltas, base, kappa, phi, None, weighting)
  assert not bool(info["fallback"])
  np.testing.assert_allclose(info["phases"], th_ref, atol=1e-5)
  # Paper weights divide by a third-order small denominator (|ρ| up to ~10³ here):
  # compare relative to the largest weight.
  wscale = np.abs(w_ref).max()
  np.testing.assert_allclose(info["weights"], w_ref, rtol=0, atol=1e-4 * wscale)
  np.testing.assert_allclose(upd, u_ref, rtol=0,
                             atol=1e-4 * wscale * np.abs(deltas).max())


@pytest.mark.parametrize("weighting", ["coupled", "reference_code"])
def test_kappa_zero_is_fedavg_exactly(weighting):
  deltas, base, phi = _rand(3)
  tree = {"a": jnp.asarray(deltas[:, :10]).reshape(6, 2, 5), "b": jnp.asarray(deltas[:, 10:])}
  upd, info = _jit_update(tree, base, 0.0, phi, None, weighting)
  ref = aggregate.weighted_mean(tree, base)
  for a, b in zip(jax.tree.leaves(upd), jax.tree.leaves(ref)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  np.testing.assert_array_equal(info["weights"], aggregate.normalize_weights(base))


def test_paper_kappa_scales_combined_update():
  deltas, base, _ = _rand(4)
  w, _ = _weights(deltas, base, 0.1, "paper")
  upd, info = _update(deltas, base, 0.1, "paper")
  np.testing.assert_allclose(upd, 0.1 * (np.asarray(w) @ deltas), rtol=1e-4, atol=1e-5)
  assert float(info["update_scale"]) == pytest.approx(0.1)


@pytest.mark.parametrize("weighting", MODES)
def test_identical_updates(weighting):
  one = np.random.default_rng(5).normal(size=(1, 24)).astype(np.float32)
  deltas = np.repeat(one, 6, axis=0)
  base = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], np.float32)
  phi = np.linspace(0.1, 1.0, 6).astype(np.float32)
  upd, info = _jit_update(deltas, base, 0.3, phi, None, weighting)
  np.testing.assert_allclose(info["phases"], 0.0, atol=1e-5)
  assert np.all(np.asarray(info["phases"]) == np.asarray(info["phases"])[0])
  assert np.all(np.isfinite(info["weights"])) and np.all(np.isfinite(upd))
  assert float(info["order_parameter"]) == pytest.approx(1.0, abs=1e-6)
  if weighting == "paper":
    assert bool(info["fallback"])
    np.testing.assert_allclose(info["weights"], base / base.sum(), rtol=1e-6)
    np.testing.assert_allclose(upd, 0.3 * one[0], rtol=1e-5)
  else:
    np.testing.assert_allclose(upd, one[0], rtol=1e-5)


@pytest.mark.parametrize("weighting", MODES)
def test_zero_updates_give_no_nan(weighting):
  deltas = np.zeros((6, 24), np.float32)
  deltas[1] = 1.0     # one non-zero client; the others have no direction
  upd, info = _jit_update(deltas, np.ones(6, np.float32), 0.3,
                          np.zeros(6, np.float32), None, weighting)
  assert np.all(np.isfinite(info["weights"])) and np.all(np.isfinite(upd))
  np.testing.assert_allclose(info["phases"], 0.0, atol=1e-6)
  upd0, info0 = _jit_update(np.zeros((6, 24), np.float32), np.ones(6, np.float32), 0.3,
                            np.zeros(6, np.float32), None, weighting)
  assert np.all(np.isfinite(info0["weights"])) and np.all(np.asarray(upd0) == 0)


@pytest.mark.parametrize("weighting", ["coupled", "paper"])
@pytest.mark.parametrize("seed", [6, 7, 8])
def test_weights_sum_to_one(weighting, seed):
  deltas, base, _ = _rand(seed)
  w, info = _weights(deltas, base, 0.5, weighting)
  assert not bool(info["fallback"])
  # float32 summation of weights of size |ρ|: error ~ K·ε·max|ρ|.
  tol = max(1e-5, 8 * len(w) * float(np.finfo(np.float32).eps) * float(jnp.abs(w).max()))
  assert float(jnp.sum(w)) == pytest.approx(1.0, abs=tol)


def test_reference_code_effective_weights_sum_to_one():
  deltas, base, phi = _rand(8)
  w, _ = _weights(deltas, base, 0.3, "reference_code", phase_signal=phi)
  assert float(jnp.sum(w)) == pytest.approx(1.0, abs=1e-5)


def test_coupled_downweights_opposing_client():
  e1 = np.eye(24, dtype=np.float32)[0]
  r = np.random.default_rng(9)
  aligned = e1 + 0.05 * r.normal(size=(5, 24)).astype(np.float32)
  opposing = -0.5 * e1[None, :]
  deltas = np.concatenate([aligned, opposing])
  w, info = _weights(deltas, np.ones(6, np.float32), 0.5, "coupled")
  w = np.asarray(w)
  assert w[5] < w[:5].min()
  assert w[5] < 1 / 6 < w[:5].max()
  assert np.asarray(info["phases"])[5] > 2.5   # near π
  assert np.asarray(info["phases"])[:5].max() < 0.5


@pytest.mark.parametrize("seed", range(4))
def test_phases_in_range(seed):
  r = np.random.default_rng(seed)
  deltas = r.normal(size=(6, 24)).astype(np.float32)
  deltas[3] = -deltas.mean(0) * 10.0      # strongly opposing
  deltas[4] = deltas.mean(0)              # aligned
  _, info = _weights(deltas, r.uniform(1, 2, 6).astype(np.float32), 0.2)
  th = np.asarray(info["phases"])
  assert np.all(th >= 0.0) and np.all(th <= np.pi)
  assert 0.0 <= float(info["order_parameter"]) <= 1.0 + 1e-6


@pytest.mark.parametrize("weighting", ["coupled", "paper"])
def test_scale_invariance(weighting):
  deltas, base, _ = _rand(10)
  w, _ = _weights(deltas, base, 0.4, weighting)
  w4, _ = _weights(4.0 * deltas, base, 0.4, weighting)
  np.testing.assert_array_equal(w, w4)     # a power of two scales exactly
  w37, _ = _weights(3.7 * deltas, base, 0.4, weighting)
  tol = 1e-3 if weighting == "paper" else 1e-6
  np.testing.assert_allclose(w37, w, rtol=tol, atol=tol)


@pytest.mark.parametrize("weighting", MODES)
def test_mask_zero_weight_and_no_influence(weighting):
  deltas, base, phi = _rand(11)
  mask = np.array([1, 1, 0, 1, 0, 1], bool)
  poisoned = deltas.copy()
  poisoned[~mask] = np.nan
  upd, info = _jit_update(poisoned, base, 0.3, phi, mask, weighting)
  w = np.asarray(info["weights"])
  np.testing.assert_array_equal(w[~mask], 0.0)
  upd_sub, info_sub = _jit_update(deltas[mask], base[mask], 0.3, phi[mask], None, weighting)
  tol = 1e-3 if weighting == "paper" else 1e-5
  np.testing.assert_allclose(w[mask], info_sub["weights"], rtol=tol, atol=tol)
  np.testing.assert_allclose(upd, upd_sub, rtol=tol, atol=tol)
  np.testing.assert_allclose(info["phases"][mask], info_sub["phases"], atol=1e-5)
  assert float(info["num_participants"]) == 4
  _, _, th_ref = np_kuramoto(deltas, base, 0.3, weighting, phi, mask)
  np.testing.assert_allclose(info["phases"], th_ref, atol=1e-5)


def test_pytree_and_flatten_stacked():
  deltas, base, _ = _rand(12)
  tree = {"w": jnp.asarray(deltas[:, :12]).reshape(6, 3, 4),
          "b": jnp.asarray(deltas[:, 12:])}
  flat = jax.jit(kuramoto.flatten_stacked)(tree)
  assert flat.shape == (6, 24)
  leaves = jax.tree.leaves(tree)
  np.testing.assert_array_equal(
      flat, np.concatenate([np.asarray(l).reshape(6, -1) for l in leaves], axis=1))
  w_tree, _ = _weights(tree, base, 0.3)
  w_flat, _ = _weights(flat, base, 0.3)
  np.testing.assert_allclose(w_tree, w_flat, rtol=1e-6)
  upd, _ = _update(tree, base, 0.3)
  assert jax.tree.structure(upd) == jax.tree.structure(jax.tree.map(lambda x: x[0], tree))
  assert upd["w"].shape == (3, 4)


def test_kappa_traced_under_jit_and_vmap():
  deltas, base, _ = _rand(13)
  f = jax.jit(jax.vmap(lambda k: _weights(deltas, base, k)[0]))
  kappas = jnp.array([0.0, 0.1, 0.5])
  out = f(kappas)
  for i, k in enumerate([0.0, 0.1, 0.5]):
    np.testing.assert_allclose(out[i], np_kuramoto(deltas, base, k, "coupled")[0], atol=1e-5)


def test_bad_arguments():
  deltas, base, _ = _rand(14)
  with pytest.raises(ValueError, match="weighting"):
    kuramoto.kuramoto_weights(deltas, base, 0.1, "bogus")
  with pytest.raises(ValueError, match="phase_signal"):
    kuramoto.kuramoto_weights(deltas, base, 0.1, "reference_code")
  with pytest.raises(ValueError, match="base_weights"):
    kuramoto.kuramoto_weights(deltas, base[:3], 0.1)
  with pytest.raises(ValueError, match="mask"):
    kuramoto.kuramoto_weights(deltas, base, 0.1, mask=np.ones(2))
