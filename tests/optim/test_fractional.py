from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from fedfrac.optim.fractional import (FractionalState, fractional, fractional_factor,
                                      fractional_set_gate, fractional_set_reference)


def _params():
  return {"w": jnp.array([[0.5, -1.0], [2.0, 0.25]], jnp.float32),
          "b": jnp.array([0.1, -0.3], jnp.float32)}


def _loss(p, x):
  return jnp.sum(jnp.tanh(x @ p["w"] + p["b"]) ** 2)


X = jnp.array([[1.0, -2.0], [0.5, 3.0], [-1.5, 0.7]], jnp.float32)


def _run(tx, params, steps=5, set_ref=None):
  state = tx.init(params)
  if set_ref is not None:
    state = set_ref(state)
  for _ in range(steps):
    g = jax.grad(_loss)(params, X)
    u, state = tx.update(g, state, params)
    params = optax.apply_updates(params, u)
  return params, state


@pytest.mark.parametrize("granularity", ["scalar", "elementwise"])
@pytest.mark.parametrize("memory", ["step", "round"])
def test_alpha_one_is_sgd_exactly(granularity, memory):
  lr = 0.1
  ref, _ = _run(optax.sgd(lr), _params())
  kwargs = dict(p_min=0.2, p_max=5.0) if granularity == "elementwise" else {}
  tx = optax.chain(
      fractional(1.0, 1e-5, granularity=granularity, memory=memory, **kwargs),
      optax.sgd(lr))
  set_ref = None
  if memory == "round":  # a valid, distinct reference must still give factor 1
    set_ref = lambda s: fractional_set_reference(
        s, jax.tree.map(lambda x: x + 3.0, _params()), True)
  got, _ = _run(tx, _params(), set_ref=set_ref)
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_factor_at_alpha_one_is_exactly_one():
  x = jnp.array([0.0, 1e-3, 1.0, 7.5], jnp.float32)
  np.testing.assert_array_equal(np.asarray(fractional_factor(x, 1.0, 1e-5)),
                                np.ones(4, np.float32))


def test_elementwise_matches_hand_computation():
  alpha, delta = 0.8, 1e-3
  w_prev = np.array([1.0, -2.0, 0.5])
  w_cur = np.array([1.1, -2.0, 0.0])
  g = np.array([0.3, -1.0, 2.0])
  gam = math.gamma(2.0 - alpha)
  expected_p = [(abs(c - p) + delta) ** (1.0 - alpha) / gam
                for c, p in zip(w_cur, w_prev)]
  tx = fractional(alpha, delta, granularity="elementwise")
  state = tx.init(jnp.asarray(w_prev, jnp.float32))
  u0, state = tx.update(jnp.asarray(g, jnp.float32), state,
                        jnp.asarray(w_prev, jnp.float32))
  np.testing.assert_array_equal(np.asarray(u0), g.astype(np.float32))  # p_0 = 1
  u1, _ = tx.update(jnp.asarray(g, jnp.float32), state,
                    jnp.asarray(w_cur, jnp.float32))
  np.testing.assert_allclose(np.asarray(u1), g * np.array(expected_p), rtol=2e-6)


def test_elementwise_clip_bounds():
  alpha, delta, lo, hi = 0.5, 1e-6, 0.4, 1.2
  w_prev = jnp.zeros(4)
  w_cur = jnp.array([0.0, 1e-4, 0.3, 50.0])
  tx = fractional(alpha, delta, granularity="elementwise", p_min=lo, p_max=hi)
  state = fractional_set_reference(tx.init(w_prev), w_prev, True)
  p, _ = tx.update(jnp.ones(4), state, w_cur)
  raw = [(abs(float(c)) + delta) ** 0.5 / math.gamma(1.5) for c in w_cur]
  assert raw[0] < lo and raw[-1] > hi  # the example does exercise both bounds
  np.testing.assert_allclose(np.asarray(p), np.clip(raw, lo, hi), rtol=2e-6)
  assert jnp.min(p) >= np.float32(lo) and jnp.max(p) <= np.float32(hi)


def test_gate_multiplies_before_the_clip_and_spares_the_first_step():
  # BEV Alg. 1 l.22-26: p ← clip(p · gate, p_min, p_max); p_0 = 1 ungated.
  alpha, delta, lo, hi, gate = 0.5, 1e-6, 0.4, 1.2, 0.5
  w_prev = jnp.zeros(4)
  w_cur = jnp.array([0.0, 0.3, 0.9, 50.0])
  tx = fractional(alpha, delta, granularity="elementwise", p_min=lo, p_max=hi,
                  gated=True)
  first, _ = tx.update(jnp.ones(4), fractional_set_gate(tx.init(w_prev), gate), w_cur)
  np.testing.assert_array_equal(np.asarray(first), np.ones(4))
  state = fractional_set_gate(fractional_set_reference(tx.init(w_prev), w_prev, True),
                              gate)
  p, new_state = tx.update(jnp.ones(4), state, w_cur)
  raw = np.array([(abs(float(c)) + delta) ** 0.5 / math.gamma(1.5) for c in w_cur])
  want = np.clip(raw * gate, lo, hi)
  assert not np.allclose(want, np.clip(raw, lo, hi) * gate)  # the order matters here
  np.testing.assert_allclose(np.asarray(p), want, rtol=2e-6)
  assert float(new_state.gate) == gate                       # kept for the next step
  with pytest.raises(ValueError, match="gated=True"):
    fractional(alpha, delta, granularity="scalar", gated=True)


def test_scalar_first_step_is_one_then_global_norm():
  alpha, delta = 0.7, 1e-5
  tx = fractional(alpha, delta)
  params = _params()
  state = tx.init(params)
  g = jax.grad(_loss)(params, X)
  u, state = tx.update(g, state, params)
  for a, b in zip(jax.tree.leaves(u), jax.tree.leaves(g)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert int(state.count) == 1 and bool(state.has_prev)
  new = {"w": params["w"] + 0.01, "b": params["b"] - jnp.array([0.02, 0.0])}
  u2, _ = tx.update(g, state, new)
  norm = math.sqrt(4 * 0.01 ** 2 + 0.02 ** 2)  # global L2 over the whole pytree
  s = (norm + delta) ** (1 - alpha) / math.gamma(2 - alpha)
  for a, b in zip(jax.tree.leaves(u2), jax.tree.leaves(g)):
    np.testing.assert_allclose(np.asarray(a), s * np.asarray(b), rtol=1e-5)


def test_round_memory_uses_supplied_reference():
  alpha, delta = 0.6, 1e-5
  tx = optax.chain(fractional(alpha, delta, memory="round"), optax.sgd(1.0))
  params = _params()
  g = jax.tree.map(jnp.ones_like, params)
  state = tx.init(params)
  u, state2 = tx.update(g, state, params)  # no valid reference: SGD
  for a in jax.tree.leaves(u):
    np.testing.assert_array_equal(np.asarray(a), -np.ones_like(a))
  ref = jax.tree.map(lambda x: x - 0.5, params)
  state = fractional_set_reference(state2, ref, True)
  assert isinstance(state[0], FractionalState)
  u1, state3 = tx.update(g, state, params)
  u2, _ = tx.update(g, state3, params)  # the reference is not overwritten
  norm = math.sqrt(6 * 0.25)
  s = (norm + delta) ** (1 - alpha) / math.gamma(2 - alpha)
  for a, b in zip(jax.tree.leaves(u1), jax.tree.leaves(u2)):
    np.testing.assert_allclose(np.asarray(a), -s, rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  # Marking the reference invalid returns to factor 1.
  state = fractional_set_reference(state3, ref, False)
  u3, _ = tx.update(g, state, params)
  for a in jax.tree.leaves(u3):
    np.testing.assert_array_equal(np.asarray(a), -np.ones_like(a))


def test_heuristic_alpha_flag_and_validation():
  with pytest.raises(ValueError, match="alpha"):
    fractional(1.5, 1e-5)
  tx = fractional(1.5, 1e-5, allow_heuristic_alpha=True)
  state = tx.init(jnp.zeros(2))
  state = fractional_set_reference(state, jnp.array([0.0, 0.0]), True)
  u, _ = tx.update(jnp.ones(2), state, jnp.array([0.3, 0.4]))
  s = (0.5 + 1e-5) ** -0.5 / math.gamma(0.5)
  np.testing.assert_allclose(np.asarray(u), [s, s], rtol=1e-5)
  for bad in (0.0, -0.1, 2.0, float("nan")):
    with pytest.raises(ValueError, match="alpha"):
      fractional(bad, 1e-5, allow_heuristic_alpha=True)
  with pytest.raises(ValueError, match="delta"):
    fractional(0.9, 0.0)
  with pytest.raises(ValueError, match="granularity"):
    fractional(0.9, 1e-5, granularity="vector")
  with pytest.raises(ValueError, match="memory"):
    fractional(0.9, 1e-5, memory="epoch")
  with pytest.raises(ValueError, match="p_min"):
    fractional(0.9, 1e-5, p_min=0.2)  # scalar granularity
  with pytest.raises(ValueError, match="p_min"):
    fractional(0.9, 1e-5, granularity="elementwise", p_min=2.0, p_max=1.0)
  with pytest.raises(ValueError, match="p_max"):
    fractional(0.9, 1e-5, granularity="elementwise", p_max=-1.0)
  with pytest.raises(ValueError, match="params"):
    tx.update(jnp.ones(2), tx.init(jnp.zeros(2)), None)
  with pytest.raises(ValueError, match="FractionalState"):
    fractional_set_reference(optax.sgd(0.1).init(jnp.zeros(2)), jnp.zeros(2))


@pytest.mark.parametrize("granularity", ["scalar", "elementwise"])
def test_jit_and_vmap_over_independent_parameter_sets(granularity):
  tx = optax.chain(fractional(0.8, 1e-4, granularity=granularity), optax.sgd(0.05))

  def train(params):
    state = tx.init(params)

    def step(carry, _):
      p, s = carry
      u, s = tx.update(jax.grad(_loss)(p, X), s, p)
      return (optax.apply_updates(p, u), s), None
    (p, _), _ = jax.lax.scan(step, (params, state), None, length=4)
    return p

  keys = jax.random.split(jax.random.PRNGKey(0), 3)
  stacked = jax.vmap(
      lambda k: jax.tree.map(lambda x: x + jax.random.normal(k, x.shape),
                             _params()))(keys)
  batched = jax.jit(jax.vmap(train))(stacked)
  for i in range(3):
    single = train(jax.tree.map(lambda x: x[i], stacked))
    for a, b in zip(jax.tree.leaves(batched), jax.tree.leaves(single)):
      np.testing.assert_allclose(np.asarray(a[i]), np.asarray(b), rtol=1e-5,
                                 atol=1e-6)


def test_vmap_over_states_with_per_member_reference():
  tx = fractional(0.5, 1e-6, memory="round")
  params = jnp.zeros((2, 3))
  refs = jnp.array([[0.0, 0.0, 0.0], [0.3, 0.0, 0.4]])
  valid = jnp.array([False, True])
  states = jax.vmap(tx.init)(params)
  states = jax.vmap(fractional_set_reference)(states, refs, valid)
  u, _ = jax.jit(jax.vmap(tx.update))(jnp.ones((2, 3)), states, params)
  s = (0.5 + 1e-6) ** 0.5 / math.gamma(1.5)
  np.testing.assert_allclose(np.asarray(u), [[1, 1, 1], [s, s, s]], rtol=1e-5)


def test_traced_alpha_under_jit_and_vmap():
  def factor_after_move(alpha):
    tx = fractional(alpha, 1e-5)
    state = tx.init(jnp.zeros(2))
    _, state = tx.update(jnp.ones(2), state, jnp.zeros(2))
    u, _ = tx.update(jnp.ones(2), state, jnp.array([0.6, 0.8]))
    return u[0]

  alphas = jnp.array([0.5, 0.9, 1.0])
  got = jax.jit(jax.vmap(factor_after_move))(alphas)
  want = [(1.0 + 1e-5) ** (1 - a) / math.gamma(2 - a) for a in (0.5, 0.9, 1.0)]
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)
  assert float(got[2]) == 1.0
  assert float(jax.jit(factor_after_move)(0.7)) == pytest.approx(
      (1.0 + 1e-5) ** 0.3 / math.gamma(1.3), rel=1e-5)


@pytest.mark.parametrize("granularity", ["scalar", "elementwise"])
def test_a_traced_alpha_or_delta_out_of_range_makes_every_update_nan(granularity):
  """α = 2.5 traced under vmap trained silently (9 % accuracy, factors of 4e6),
  α = −1 too; now, like a traced algorithm option out of range, every update
  is NaN (the first step's, whose factor is otherwise 1, included)."""
  def updates(alpha, delta, heuristic=False):
    tx = fractional(alpha, delta, granularity, allow_heuristic_alpha=heuristic)
    state = tx.init(jnp.zeros(2))
    first, state = tx.update(jnp.ones(2), state, jnp.zeros(2))
    second, _ = tx.update(jnp.ones(2), state, jnp.array([0.6, 0.8]))
    return jnp.stack([first, second])

  grid = jax.jit(jax.vmap(updates, in_axes=(0, 0)))
  got = np.asarray(grid(jnp.array([2.5, -1.0, 0.0, 1.5, jnp.nan, 0.5, 0.7]),
                        jnp.array([1e-5, 1e-5, 1e-5, 1e-5, 1e-5, -1e-5, 1e-5])))
  assert np.isnan(got[:6]).all()            # α outside (0, 1], or δ <= 0
  want = np.asarray(updates(0.7, 1e-5))     # in range: as with a concrete α
  np.testing.assert_allclose(got[6], want, rtol=1e-6)
  assert (got[6][0] == 1.0).all()
  heuristic = jax.jit(lambda a: updates(a, 1e-5, True))
  assert np.isfinite(np.asarray(heuristic(1.5))).all()
  assert np.isnan(np.asarray(heuristic(2.0))).all()


@pytest.mark.parametrize("alpha", [2.5, -1.0, 0.0, float("nan")])
def test_a_concrete_alpha_out_of_range_is_one_line(alpha):
  with pytest.raises(ValueError, match=r"^alpha=.*: must be in \(0, 1\]; values in "
                                       r"\(1, 2\) need allow_heuristic_alpha=True$"):
    fractional(alpha, 1e-5)


def test_mean_factor_averages_the_scalar_factor_over_steps_with_a_previous_iterate():
  import math
  from fedfrac.optim.fractional import fractional_mean_factor
  alpha, delta = 0.5, 1e-5
  tx = fractional(alpha, delta)
  w0 = {"w": jnp.zeros((3,))}
  state = tx.init(w0)
  assert float(fractional_mean_factor(state)) == 1.0     # no step yet: plain SGD
  w1 = {"w": jnp.array([3.0, 4.0, 0.0])}                  # ‖w1 − w0‖ = 5
  w2 = {"w": jnp.array([3.0, 4.0, 1.0])}                  # ‖w2 − w1‖ = 1
  g = {"w": jnp.ones((3,))}
  for w in (w0, w1, w2):
    _, state = tx.update(g, state, w)
  # Step 1 has no w_prev (not counted); steps 2 and 3 see norms 5 and 1.
  expected = [(x + delta) ** (1 - alpha) / math.gamma(2 - alpha) for x in (5.0, 1.0)]
  assert float(fractional_mean_factor(state)) == pytest.approx(sum(expected) / 2,
                                                               rel=1e-5)
  with pytest.raises(ValueError, match="no FractionalState"):
    fractional_mean_factor(())
