"""Client speeds, deadlines and straggler policies (fedfrac.ops.system)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac.ops import system

NEEDED = jnp.asarray([4, 10, 6, 8, 0], jnp.int32)
SPEEDS = jnp.asarray([1.0, 0.5, 2.0, 1.0, 1.0], jnp.float32)


def test_speeds_fixed_per_seed_and_lognormal():
  a = system.sample_speeds(jax.random.PRNGKey(0), 4000, "lognormal", 0.5)
  b = system.sample_speeds(jax.random.PRNGKey(0), 4000, "lognormal", 0.5)
  c = system.sample_speeds(jax.random.PRNGKey(1), 4000, "lognormal", 0.5)
  np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert not np.array_equal(np.asarray(a), np.asarray(c))
  logs = np.log(np.asarray(a))
  assert np.all(np.asarray(a) > 0)
  assert abs(logs.mean()) < 0.05 and abs(logs.std() - 0.5) < 0.03
  np.testing.assert_array_equal(
      np.asarray(system.sample_speeds(None, 3, "groups", group_speeds=[1.0, 0.25],
                                      groups=[1, 0, 1])), [0.25, 1.0, 0.25])
  np.testing.assert_array_equal(np.asarray(system.sample_speeds(None, 3, "equal")), 1.0)


def test_steps_needed():
  np.testing.assert_array_equal(np.asarray(system.steps_needed([13, 32, 33, 0], 16, 2)),
                                [2, 4, 6, 0])


@pytest.mark.parametrize("policy", system.POLICIES)
def test_equal_speeds_and_generous_deadline_change_nothing(policy):
  s = system.round_schedule(NEEDED, jnp.ones(5), 1e6, policy)
  np.testing.assert_array_equal(np.asarray(s.steps), np.asarray(NEEDED))
  assert bool(jnp.all(s.participate)) and int(s.dropped) == 0 and int(s.stragglers) == 0
  assert int(s.steps_run) == int(NEEDED.sum())
  assert float(s.wall_time) == 10.0


def test_deadline_nobody_meets_drops_everyone():
  needed = jnp.asarray([4, 10, 6, 8], jnp.int32)
  s = system.round_schedule(needed, jnp.ones(4), 0.5, "drop")
  assert not bool(jnp.any(s.participate))
  assert int(s.dropped) == 4 and int(s.steps_run) == 0 and float(s.wall_time) == 0.5
  p = system.round_schedule(needed, jnp.ones(4), 0.5, "partial")   # ⌊0.5⌋ = 0 steps
  assert int(p.dropped) == 4 and int(p.steps_run) == 0


def test_drop_and_partial_under_a_deadline():
  d = system.round_schedule(NEEDED, SPEEDS, 5.0, "drop")
  # times τ/s = 4, 20, 3, 8, 0 -> clients 1 and 3 miss the deadline
  np.testing.assert_array_equal(np.asarray(d.participate), [True, False, True, False, True])
  np.testing.assert_array_equal(np.asarray(d.steps), [4, 0, 6, 0, 0])
  assert int(d.dropped) == 2 and float(d.wall_time) == 5.0
  p = system.round_schedule(NEEDED, SPEEDS, 5.0, "partial")
  np.testing.assert_array_equal(np.asarray(p.steps), [4, 2, 6, 5, 0])
  assert int(p.dropped) == 0 and int(p.stragglers) == 2 and int(p.steps_run) == 17
  assert float(p.wall_time) == 5.0
  n = system.round_schedule(NEEDED, SPEEDS, 5.0, "none")
  assert float(n.wall_time) == 20.0 and int(n.steps_run) == 28


@pytest.mark.parametrize("policy", system.POLICIES)
def test_elastic_clients_run_every_step_at_their_cost(policy):
  # τ/s = 4, 20, 3, 8, 0 at full cost; the elastic clients chose costs that fit
  # τ·c ≤ ⌊T·s⌋ = 5, 2, 10, 5, 5 (T = 5); client 3 could afford nothing (c = 0).
  cost = jnp.asarray([1.0, 0.2, 1.0, 0.0, 0.5], jnp.float32)
  e = system.round_schedule(NEEDED, SPEEDS, 5.0, policy, step_cost=cost)
  np.testing.assert_array_equal(np.asarray(e.steps), [4, 10, 6, 0, 0])
  np.testing.assert_array_equal(np.asarray(e.participate), [True, True, True, False, True])
  assert int(e.dropped) == 1 and int(e.steps_run) == 20
  np.testing.assert_allclose(float(e.cost_steps), 4 + 2 + 6, rtol=1e-6)
  assert int(e.stragglers) == 2                       # clients 1 (2 of 10) and 3 (none)
  # the round lasts the longest client time τ·c/s = 4, 4, 3 (T under drop:
  # somebody was dropped)
  assert float(e.wall_time) == (5.0 if policy == "drop" else 4.0)
  plain = system.round_schedule(NEEDED, SPEEDS, 5.0, policy)
  assert float(plain.cost_steps) == float(plain.steps_run)


def test_cohort_mask_counts_only_the_sampled_clients():
  cohort = jnp.asarray([True, True, False, False, True])
  d = system.round_schedule(NEEDED, SPEEDS, 5.0, "drop", cohort)
  np.testing.assert_array_equal(np.asarray(d.participate), [True, False, False, False, True])
  assert int(d.dropped) == 1 and int(d.steps_run) == 4


@pytest.mark.parametrize("policy", system.POLICIES)
def test_independent_of_client_order(policy):
  perm = np.random.default_rng(0).permutation(5)
  a = system.round_schedule(NEEDED, SPEEDS, 5.0, policy)
  b = system.round_schedule(NEEDED[perm], SPEEDS[perm], 5.0, policy)
  np.testing.assert_array_equal(np.asarray(a.steps)[perm], np.asarray(b.steps))
  np.testing.assert_array_equal(np.asarray(a.participate)[perm], np.asarray(b.participate))
  for f in ("wall_time", "dropped", "stragglers", "steps_run"):
    assert float(getattr(a, f)) == float(getattr(b, f))


def test_jit_and_vmap_over_deadlines():
  f = jax.jit(jax.vmap(lambda t: system.round_schedule(NEEDED, SPEEDS, t, "partial")))
  out = f(jnp.asarray([1.0, 5.0, 100.0]))
  for i, t in enumerate([1.0, 5.0, 100.0]):
    one = system.round_schedule(NEEDED, SPEEDS, t, "partial")
    np.testing.assert_array_equal(np.asarray(out.steps[i]), np.asarray(one.steps))
    assert float(out.wall_time[i]) == float(one.wall_time)


@pytest.mark.parametrize("section,match", [
    ({"policy": "wait"}, r"config.system.policy='wait': allowed values are none, drop, "
                         r"partial"),
    ({"policy": "drop", "deadline": 0}, r"config.system.deadline=0: must be a number > 0"),
    ({"policy": "drop", "deadline": -2.0}, r"config.system.deadline=-2.0"),
    ({"speed": "groups", "group_speeds": [1.0, -0.5]},
     r"config.system.group_speeds=\[1.0, -0.5\]: must be a non-empty list of speeds > 0"),
    ({"speed": "lognormal", "sigma": -1}, r"config.system.sigma=-1: must be"),
    ({"speed": "fast"}, r"config.system.speed='fast': allowed values are equal"),
    ({"policy": "partial"}, r"config.system.deadline=None: must be set"),
    ({"deadlin": 3}, r"config.system.deadlin: unknown key"),
])
def test_validation_errors(section, match):
  with pytest.raises(ValueError, match=match):
    system.validate_system(section)


def test_validation_accepts_good_sections():
  system.validate_system({})
  system.validate_system({"speed": "lognormal", "sigma": 0.5, "deadline": 30.0,
                          "policy": "partial"})
  system.validate_system({"speed": "groups", "group_speeds": [1.0, 0.2], "policy": "none"})


def test_unknown_policy_in_schedule():
  with pytest.raises(ValueError, match=r"system.policy='late'"):
    system.round_schedule(NEEDED, SPEEDS, 1.0, "late")
