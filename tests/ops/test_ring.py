"""Tests for fedfrac.ops.ring (FIRMA ring mixing, 2-opt order, schedules)."""
from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from fedfrac.ops import ring

# Independent Fibonacci constants: 1/φ = (√5 − 1)/2, 1/φ² = (3 − √5)/2.
ALPHA = (math.sqrt(5.0) - 1.0) / 2.0
BETA = (3.0 - math.sqrt(5.0)) / 2.0
TAU = 0.35


# ----------------------------------------------------------------------------
# NumPy references written from the FIRMA update rules
# ----------------------------------------------------------------------------


def ref_coefficients(n, gamma, order, gates=None, tau=TAU, alpha=ALPHA,
                     beta=BETA):
  """Per-client (self, L, a_self, R, a_R) from the FibFL / FibFL+ formulas."""
  gam = np.broadcast_to(np.asarray(gamma, float), (n,))
  rows = {}
  for p in range(n):
    i, left, right = order[p], order[(p - 1) % n], order[(p + 1) % n]
    if gates is None:
      a_l, a_r, keep = alpha, beta, False
    else:
      g_l = gates[left] if gates[left] >= tau else 0.0
      g_r = gates[right] if gates[right] >= tau else 0.0
      keep = g_l + g_r < 1e-12
      if not keep:
        w_l = g_l / (g_l + g_r)
        a_l, a_r = alpha / 2 + w_l / 2, beta / 2 + (1 - w_l) / 2
    if keep:
      rows[i] = (left, right, 1.0, 0.0, 0.0)
    else:
      rows[i] = (left, right, gam[i], (1 - gam[i]) * a_l, (1 - gam[i]) * a_r)
  return rows


def ref_pass_sync(theta, rows):
  old = theta.copy()
  new = theta.copy()
  for i, (left, right, cs, cl, cr) in rows.items():
    new[i] = cs * old[i] + cl * old[left] + cr * old[right]
  return new


def ref_pass_inplace(theta, rows, order):
  theta = theta.copy()
  for c in order:  # FIRMA Alg. 3: overwrite along the ring order
    left, right, cs, cl, cr = rows[c]
    theta[c] = cs * theta[c] + cl * theta[left] + cr * theta[right]
  return theta


def ref_matrix_single(n, rows):
  m = np.zeros((n, n))
  for i, (left, right, cs, cl, cr) in rows.items():
    m[i, i] += cs
    m[i, left] += cl
    m[i, right] += cr
  return m


def eq11_eigs(n, gamma, alpha=ALPHA, beta=BETA):
  k = np.arange(n)
  w = np.exp(2j * np.pi * k / n)
  return gamma + (1 - gamma) * (alpha / w + beta * w)


def assert_same_multiset(a, b, atol=1e-5):
  dist = np.abs(np.asarray(a)[:, None] - np.asarray(b)[None, :])
  r, c = linear_sum_assignment(dist)
  assert dist[r, c].max() < atol, (np.sort_complex(a), np.sort_complex(b))


# One compiled builder shared by the bulk tests (n, passes, sweep static).
_build = jax.jit(ring.fibonacci_mixing_matrix,
                 static_argnames=("n", "passes", "sweep"))


def random_configs():
  """Random instances; every (passes, sweep, gated) combination appears."""
  rng = np.random.default_rng(0)
  combos = list(itertools.product((1, 2, 3), ("synchronous", "sequential"),
                                  (False, True)))
  out = []
  for k, n in enumerate((2, 3, 5, 8)):
    for passes, sweep, gated in combos[3 * k:3 * k + 3]:
      order = rng.permutation(n)
      gamma = rng.uniform(0, 1, n) if (k + passes) % 2 else float(rng.uniform())
      gates = rng.uniform(0, 1, n) if gated else None
      out.append((n, gamma, order, gates, passes, sweep))
  return out


# ----------------------------------------------------------------------------
# mixing matrices
# ----------------------------------------------------------------------------


def test_all_matrices_row_stochastic_and_nonnegative():
  for n, gamma, order, gates, passes, sweep in random_configs():
    m = np.asarray(_build(n=n, gamma=gamma, order=order, gates=gates,
                          passes=passes, sweep=sweep))
    assert m.shape == (n, n) and m.dtype == np.float32
    assert m.min() >= 0.0
    np.testing.assert_allclose(m.sum(axis=1), 1.0, atol=1e-5)
  for n in (2, 3, 6):
    u = np.asarray(ring.mixing_matrix_ring_uniform(n, 0.3, order=np.arange(n)[::-1]))
    assert u.min() >= 0.0
    np.testing.assert_allclose(u.sum(axis=1), 1.0, atol=1e-6)


@pytest.mark.parametrize("sweep", ["synchronous", "sequential"])
def test_matches_explicit_loops_on_random_vectors(sweep):
  rng = np.random.default_rng(1)
  for n, gamma, order, gates, passes, sw in random_configs():
    if sw != sweep:
      continue
    rows = ref_coefficients(n, gamma, list(order), gates)
    theta0 = rng.normal(size=(n, 4))
    theta = theta0.copy()
    for _ in range(passes):
      theta = (ref_pass_sync(theta, rows) if sweep == "synchronous"
               else ref_pass_inplace(theta, rows, list(order)))
    m = np.asarray(_build(n=n, gamma=gamma, order=order, gates=gates,
                          passes=passes, sweep=sweep), np.float64)
    np.testing.assert_allclose(m @ theta0, theta, atol=2e-5)


def test_sequential_is_product_of_elementary_maps_and_differs_from_sync():
  n, gamma = 6, 0.4
  order = np.array([3, 1, 5, 0, 2, 4])
  rows = ref_coefficients(n, gamma, order)
  w = ref_matrix_single(n, rows)
  pass_map = np.eye(n)
  for c in order:
    e = np.eye(n)
    e[c] = w[c]
    pass_map = e @ pass_map
  seq = np.asarray(_build(n, gamma, order=order,
                                                sweep="sequential", passes=2))
  np.testing.assert_allclose(seq, pass_map @ pass_map, atol=1e-6)
  syn = np.asarray(_build(n, gamma, order=order, passes=2))
  np.testing.assert_allclose(syn, w @ w, atol=1e-6)
  assert np.abs(seq - syn).max() > 1e-2
  # Wrap-around: position 0 reads σ(n−1) before its update, so its row is W's.
  np.testing.assert_allclose(
      np.asarray(_build(n, gamma, order=order,
                                              sweep="sequential"))[order[0]],
      w[order[0]], atol=1e-7)


def test_synchronous_identity_order_is_lemma_5_1_circulant():
  n, gamma = 7, 0.3
  m = np.asarray(_build(n, gamma), np.float64)
  expected = np.zeros((n, n))
  for p in range(n):
    expected[p, p] = gamma
    expected[p, (p - 1) % n] = (1 - gamma) * ALPHA
    expected[p, (p + 1) % n] = (1 - gamma) * BETA
  np.testing.assert_allclose(m, expected, atol=1e-7)


@pytest.mark.parametrize("n,gamma", [(5, 0.5), (8, 0.2), (11, 0.0)])
def test_eigenvalues_match_eq_11(n, gamma):
  m = np.asarray(_build(n, gamma), np.float64)
  lam = eq11_eigs(n, gamma)
  assert_same_multiset(np.linalg.eigvals(m), lam)
  # Pin the convention: v_k[p] = exp(2πikp/n) is the eigenvector of λ_k.
  p = np.arange(n)
  for k in range(n):
    v = np.exp(2j * np.pi * k * p / n)
    np.testing.assert_allclose(m @ v, lam[k] * v, atol=1e-6)


def test_ring_order_relabels_the_circulant():
  n, gamma = 6, 0.45
  order = np.array([4, 0, 5, 2, 1, 3])
  m_id = np.asarray(_build(n, gamma))
  m = np.asarray(_build(n, gamma, order=order))
  np.testing.assert_allclose(m[np.ix_(order, order)], m_id, atol=1e-7)


def test_per_client_gamma():
  n = 5
  gamma = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
  m = np.asarray(_build(n, gamma), np.float64)
  np.testing.assert_allclose(np.diag(m), gamma, atol=1e-7)
  np.testing.assert_allclose(m[4], np.eye(n)[4], atol=1e-7)  # γ = 1: no mixing
  for i in range(n):
    np.testing.assert_allclose(m[i, (i - 1) % n], (1 - gamma[i]) * ALPHA, atol=1e-7)


def test_two_clients_left_equals_right():
  gamma = 0.3
  expected = np.array([[gamma, 1 - gamma], [1 - gamma, gamma]])
  for gates in (None, np.array([0.5, 0.9])):
    for sweep in ("synchronous", "sequential"):
      m = _build(2, gamma, gates=gates, sweep=sweep)
      if sweep == "synchronous":
        np.testing.assert_allclose(m, expected, atol=1e-7)
      else:  # client 1 reads client 0 after its update
        np.testing.assert_allclose(m, [[gamma, 1 - gamma],
                                       [(1 - gamma) * gamma,
                                        gamma + (1 - gamma) ** 2]], atol=1e-7)


def test_rdfl_uniform():
  n, gamma = 6, 0.5
  m = np.asarray(ring.mixing_matrix_ring_uniform(n, gamma), np.float64)
  for i in range(n):
    row = np.zeros(n)
    row[i] = gamma
    row[(i - 1) % n] += (1 - gamma) / 2
    row[(i + 1) % n] += (1 - gamma) / 2
    np.testing.assert_allclose(m[i], row, atol=1e-7)
  np.testing.assert_allclose(m, m.T, atol=1e-7)  # doubly stochastic
  np.testing.assert_allclose(ring.mixing_matrix_ring_uniform(n, 1.0), np.eye(n))


# ----------------------------------------------------------------------------
# FibFL+ gate
# ----------------------------------------------------------------------------


def test_gate_equal_accuracies():
  n, gamma = 5, 0.2
  m = np.asarray(_build(n, gamma, gates=np.full(n, 0.8)),
                 np.float64)
  for i in range(n):
    np.testing.assert_allclose(m[i, (i - 1) % n], (1 - gamma) * (ALPHA / 2 + 0.25),
                               atol=1e-7)
    np.testing.assert_allclose(m[i, (i + 1) % n], (1 - gamma) * (BETA / 2 + 0.25),
                               atol=1e-7)


def test_gate_both_neighbours_below_tau_keeps_extractor():
  gates = np.array([0.9, 0.1, 0.9, 0.2, 0.3])  # clients 1, 3, 4 below τ
  for sweep in ("synchronous", "sequential"):
    for passes in (1, 3):
      m = np.asarray(_build(5, 0.3, gates=gates,
                                                  passes=passes, sweep=sweep))
      # Client 0 (neighbours 4, 1) and client 2 (neighbours 1, 3) are isolated.
      np.testing.assert_array_equal(m[0], np.eye(5)[0])
      np.testing.assert_array_equal(m[2], np.eye(5)[2])
  assert ring.spectral_gap(_build(5, 0.3, gates=gates)) == 0.0


def test_gate_one_neighbour_below_tau_and_threshold_inclusive():
  gamma = 0.4
  # Client 2 on the identity ring: left 1 (below τ), right 3 (exactly τ, passes).
  gates = np.array([0.5, 0.34, 0.6, TAU, 0.7])
  m = np.asarray(_build(5, gamma, gates=gates), np.float64)
  np.testing.assert_allclose(m[2, 1], (1 - gamma) * ALPHA / 2, atol=1e-7)
  np.testing.assert_allclose(m[2, 3], (1 - gamma) * (BETA / 2 + 0.5), atol=1e-7)
  np.testing.assert_allclose(m[2, 2], gamma, atol=1e-7)


def test_gate_unequal_accuracies_posterior():
  gamma, a_l, a_r = 0.25, 0.9, 0.45
  gates = np.array([0.5, a_l, 0.5, a_r])  # client 2: left 1, right 3
  m = np.asarray(_build(4, gamma, gates=gates), np.float64)
  w_l = a_l / (a_l + a_r)
  np.testing.assert_allclose(m[2, 1], (1 - gamma) * (ALPHA / 2 + w_l / 2), atol=1e-7)
  np.testing.assert_allclose(m[2, 3], (1 - gamma) * (BETA / 2 + (1 - w_l) / 2),
                             atol=1e-7)


# ----------------------------------------------------------------------------
# jit / traced arguments
# ----------------------------------------------------------------------------


def test_jit_with_traced_gamma_gates_tau_and_order():
  n = 6
  order = np.array([2, 5, 0, 3, 1, 4])
  gates = np.array([0.2, 0.9, 0.5, 0.36, 0.1, 0.7], np.float32)

  @jax.jit
  def build(gamma, gates, tau, order):
    return ring.fibonacci_mixing_matrix(n, gamma, order=order, gates=gates,
                                        tau=tau, passes=2, sweep="sequential")

  got = build(jnp.float32(0.3), jnp.asarray(gates), jnp.float32(TAU),
              jnp.asarray(order))
  want = ring.fibonacci_mixing_matrix(n, 0.3, order=order, gates=gates, passes=2,
                                      sweep="sequential")
  np.testing.assert_allclose(got, want, atol=1e-7)
  # vmap over a grid of retentions.
  grid = jax.vmap(lambda g: ring.fibonacci_mixing_matrix(n, g, passes=3))(
      jnp.array([0.1, 0.5, 0.9]))
  np.testing.assert_allclose(grid[1], ring.fibonacci_mixing_matrix(n, 0.5, passes=3),
                             atol=1e-7)


# ----------------------------------------------------------------------------
# apply_mixing
# ----------------------------------------------------------------------------


def test_apply_mixing_equals_per_client_loop():
  n = 5
  rng = np.random.default_rng(2)
  tree = {"dense": {"kernel": rng.normal(size=(n, 3, 2)).astype(np.float32),
                    "bias": rng.normal(size=(n, 2)).astype(np.float32)},
          "scale": rng.normal(size=(n,)).astype(np.float32)}
  m = _build(n, 0.35, order=np.array([1, 3, 0, 4, 2]), passes=2,
                                   sweep="sequential")
  out = jax.jit(ring.apply_mixing)(m, tree)
  m64 = np.asarray(m, np.float64)
  for path, leaf in [(("dense", "kernel"), tree["dense"]["kernel"]),
                     (("dense", "bias"), tree["dense"]["bias"]),
                     (("scale",), tree["scale"])]:
    got = out
    for key in path:
      got = got[key]
    want = np.stack([sum(m64[i, j] * leaf[j].astype(np.float64) for j in range(n))
                     for i in range(n)])
    assert got.dtype == leaf.dtype and got.shape == leaf.shape
    np.testing.assert_allclose(got, want, atol=1e-5)
  bf = ring.apply_mixing(m, jnp.ones((n, 3), jnp.bfloat16))
  assert bf.dtype == jnp.bfloat16
  np.testing.assert_allclose(np.asarray(bf, np.float32), 1.0, atol=1e-2)
  with pytest.raises(ValueError, match="leading axis"):
    ring.apply_mixing(m, {"w": jnp.ones((n + 1, 2))})
  with pytest.raises(ValueError, match="floating"):
    ring.apply_mixing(m, {"count": jnp.ones((n,), jnp.int32)})


# ----------------------------------------------------------------------------
# 2-opt ring order
# ----------------------------------------------------------------------------


def ref_cost(q, order, cost):
  total = 0.0
  for p in range(len(order)):
    a, b = q[order[p]], q[order[(p + 1) % len(order)]]
    s = float(a @ b)
    if cost == "cosine":
      s /= np.linalg.norm(a) * np.linalg.norm(b)
    total += s
  return total


@pytest.mark.parametrize("cost", ["cosine", "dot"])
def test_two_opt_permutation_no_increase_local_optimum(cost):
  rng = np.random.default_rng(3)
  for n in (4, 7, 10):
    q = rng.dirichlet(0.3 * np.ones(5), size=n)
    order, before, after = ring.two_opt_ring(q, cost=cost)
    assert isinstance(order, np.ndarray) and order.dtype.kind == "i"
    assert sorted(order.tolist()) == list(range(n))
    np.testing.assert_allclose(before, ref_cost(q, list(range(n)), cost), rtol=1e-10)
    np.testing.assert_allclose(after, ref_cost(q, list(order), cost), rtol=1e-10)
    np.testing.assert_allclose(after, ring.ring_cost(q, order, cost=cost),
                               rtol=1e-12)
    assert after <= before + 1e-12
    # No segment reversal improves the returned ring.
    s = list(order)
    for i, j in itertools.combinations(range(n), 2):
      cand = s[:i] + s[i:j + 1][::-1] + s[j + 1:]
      assert ref_cost(q, cand, cost) >= after - 1e-9


def test_two_opt_matches_literal_first_improvement_scan():
  """Same order as the textbook scan: pairs (i, j) in lexicographic order, each
  candidate ring's cost recomputed from scratch, improving moves applied at once."""
  rng = np.random.default_rng(4)
  for cost in ("cosine", "dot"):
    for n in (5, 8, 11):
      q = rng.dirichlet(0.5 * np.ones(4), size=n)
      s = list(range(n))
      c = ref_cost(q, s, cost)
      improved = True
      while improved:
        improved = False
        for i in range(n - 1):
          for j in range(i + 2, n):
            if (i, j) == (0, n - 1):
              continue
            cand = s[:i + 1] + s[i + 1:j + 1][::-1] + s[j + 1:]
            c2 = ref_cost(q, cand, cost)
            if c2 < c - 1e-9:
              s, c, improved = cand, c2, True
      order, _, after = ring.two_opt_ring(q, cost=cost)
      assert order.tolist() == s
      assert after == pytest.approx(c, rel=1e-10)


def test_two_opt_strictly_improves_constructed_case():
  # Three pairs of identical clients placed next to each other: the identity
  # ring pays cosine 1 on each within-pair edge; alternating types costs 0.
  q = np.repeat(np.eye(3), 2, axis=0)
  order, before, after = ring.two_opt_ring(q)
  assert before == pytest.approx(3.0)
  brute = min(ref_cost(q, [0] + list(p), "cosine")
              for p in itertools.permutations(range(1, 6)))
  assert after < before
  assert after == pytest.approx(brute) == pytest.approx(0.0)
  # Dot cost on unnormalised counts: same structure, scaled similarities.
  order_d, before_d, after_d = ring.two_opt_ring(5.0 * q, cost="dot")
  assert before_d == pytest.approx(75.0) and after_d == pytest.approx(0.0)


def test_two_opt_small_rings_and_validation():
  q = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
  order, before, after = ring.two_opt_ring(q)  # n = 3: every ring is equal
  np.testing.assert_array_equal(order, [0, 1, 2])
  assert before == after
  with pytest.raises(ValueError, match="cost"):
    ring.two_opt_ring(q, cost="euclid")
  with pytest.raises(ValueError, match="class_proportions"):
    ring.two_opt_ring(np.ones(4))
  with pytest.raises(ValueError, match="permutation"):
    ring.ring_cost(q, [0, 0, 1])


# ----------------------------------------------------------------------------
# spectral gap
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("n,gamma", [(5, 0.5), (10, 0.3)])
def test_spectral_gap_of_circulant_matches_eq_11(n, gamma):
  lam = eq11_eigs(n, gamma)
  expected = 1.0 - np.abs(lam[1:]).max()
  m = _build(n, gamma)
  assert ring.spectral_gap(m) == pytest.approx(expected, abs=1e-5)
  assert ring.spectral_gap(np.asarray(m)) == pytest.approx(expected, abs=1e-5)


def test_spectral_gap_known_cases():
  # RDFL with γ = 0 on an even ring is bipartite: eigenvalue −1, gap 0.
  assert ring.spectral_gap(ring.mixing_matrix_ring_uniform(6, 0.0)) == pytest.approx(
      0.0, abs=1e-6)
  assert ring.spectral_gap(np.full((4, 4), 0.25)) == pytest.approx(1.0)
  with pytest.raises(ValueError, match="square"):
    ring.spectral_gap(np.ones((2, 3)))


# ----------------------------------------------------------------------------
# FibFL++ schedules
# ----------------------------------------------------------------------------


def test_schedules():
  for n in range(2, 10):
    assert ring.fibfl_pp_passes(n) == math.ceil(n / 2)
  for r in (1, 5, 6, 10, 13, 60):
    assert ring.fibfl_pp_warmup(r) == math.floor(r / 6)
  assert ring.fibfl_pp_warmup(5, min_rounds=1) == 1
  warm, total, g0, g1 = 2, 13, 0.4, 0.05
  vals = np.array([float(ring.fibfl_pp_gamma(r, warm, total, g0, g1))
                   for r in range(total)])
  assert vals[warm] == pytest.approx(g0) and vals[-1] == pytest.approx(g1)
  mid = warm + (total - warm - 1) // 2  # t = T/2: cos(π/2) = 0
  assert vals[mid] == pytest.approx((g0 + g1) / 2)
  assert np.all(np.diff(vals) <= 1e-7)
  jitted = jax.jit(lambda r: ring.fibfl_pp_gamma(r, warm, total, g0, g1))
  np.testing.assert_allclose([float(jitted(r)) for r in range(total)], vals,
                             atol=1e-7)
  for k in (1, 3, 5):
    g_in = float(ring.per_pass_retention(0.2, k))
    assert g_in**k == pytest.approx(0.2, rel=1e-5)
    # The self path of K passes at γ_in retains γ_r (diag of W^K ≥ γ_in^K).
    m = np.asarray(_build(7, g_in, passes=k))
    assert np.all(np.diag(m) >= 0.2 - 1e-5)


# ----------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs,match", [
    (dict(n=1, gamma=0.5), "n must be"),
    (dict(n=4, gamma=1.5), "gamma"),
    (dict(n=4, gamma=np.ones(3) * 0.5), "gamma"),
    (dict(n=4, gamma=0.5, tau=-0.1), "tau"),
    (dict(n=4, gamma=0.5, order=[0, 1, 1, 2]), "permutation"),
    (dict(n=4, gamma=0.5, order=[0, 1, 2]), "permutation"),
    (dict(n=4, gamma=0.5, passes=0), "passes"),
    (dict(n=4, gamma=0.5, sweep="jacobi"), "sweep"),
    (dict(n=4, gamma=0.5, gates=np.array([0.5, 1.2, 0.3, 0.4])), "gates"),
    (dict(n=4, gamma=0.5, gates=np.ones(3)), "gates"),
    (dict(n=4, gamma=0.5, alpha=0.7, beta=0.7), "alpha and beta"),
])
def test_validation(kwargs, match):
  with pytest.raises(ValueError, match=match):
    ring.fibonacci_mixing_matrix(**kwargs)


def test_schedule_validation():
  with pytest.raises(ValueError, match="passes"):
    ring.per_pass_retention(0.5, 0)
  with pytest.raises(ValueError, match="warmup_rounds"):
    ring.fibfl_pp_gamma(0, 11, 10)
  with pytest.raises(ValueError, match="gamma_start"):
    ring.fibfl_pp_gamma(0, 1, 10, gamma_start=2.0)
  with pytest.raises(ValueError, match="n must be"):
    ring.fibfl_pp_passes(1)


# ----------------------------------------------------------------------------
# which modes keep the clients' mean (doubly stochastic), as the docs state
# ----------------------------------------------------------------------------

X4 = np.array([1.0, 2.0, 4.0, 5.0])
GAMMAS4 = np.array([0.2, 0.5, 0.8, 0.4])
GATES4 = np.array([0.9, 0.5, 0.8, 0.4])


@pytest.mark.parametrize("n,passes,order", [(2, 1, None), (4, 1, [2, 0, 3, 1]),
                                            (5, 3, None)])
def test_synchronous_with_one_gamma_is_doubly_stochastic_and_keeps_the_mean(
    n, passes, order):
  for m in (ring.fibonacci_mixing_matrix(n, 0.3, order=order, passes=passes),
            ring.mixing_matrix_ring_uniform(n, 0.3, order=order)):
    m = np.asarray(m, np.float64)
    np.testing.assert_allclose(m.sum(axis=0), 1.0, atol=1e-6)
    x = np.arange(1.0, n + 1) ** 2
    assert (m @ x).mean() == pytest.approx(x.mean(), rel=1e-6)


@pytest.mark.parametrize("mode,options,mean", [
    ("sequential", dict(gamma=0.5, sweep="sequential"), 3.1973624),
    ("per-client gamma", dict(gamma=GAMMAS4), 3.2244679),
    ("gated", dict(gamma=0.5, gates=GATES4), 2.9681373),
    ("rdfl per-client gamma", dict(gamma=GAMMAS4, uniform=True), None)])
def test_other_modes_are_not_doubly_stochastic_and_move_the_mean(mode, options, mean):
  options = dict(options)
  if options.pop("uniform", False):
    m = ring.mixing_matrix_ring_uniform(4, options["gamma"])
  else:
    m = ring.fibonacci_mixing_matrix(4, **options)
  m = np.asarray(m, np.float64)
  np.testing.assert_allclose(m.sum(axis=1), 1.0, atol=1e-6)       # row-stochastic
  assert np.max(np.abs(m.sum(axis=0) - 1.0)) > 0.01, mode          # not by columns
  assert abs((m @ X4).mean() - X4.mean()) > 0.01, mode
  if mean is not None:
    assert (m @ X4).mean() == pytest.approx(mean, rel=1e-6)
