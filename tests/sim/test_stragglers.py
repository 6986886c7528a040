"""Heterogeneous client speed and round deadlines in the engine (config.system).

``partial`` with equal speeds and a deadline nobody hits is today's engine; ``drop``
with a deadline nobody meets aggregates nothing and says so; outcomes do not
depend on the cohort order; bad settings are one error line naming the key.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac import algorithms, runner
from fedfrac.algorithms import contract
from fedfrac.ops import system as system_lib
from fedfrac.sim.state import SPEED_TAG
from tests import helpers
from tests.test_main import QUICKSTART, _cli, _error_line

SIZES = (13, 40, 75, 22, 31, 58)


def _sim(name, system=None, **engine):
  fed = helpers.unequal_digits(SIZES)
  return helpers.simulation(fed, lambda ctx: algorithms.make(name, ctx),
                            client_cfg={"batch_size": 8, "lr": 0.05}, system=system,
                            **engine)


def _run(sim, rounds=3, seed=0):
  state, metrics = sim.run_chunk(sim.init(seed), rounds)
  return state, jax.tree.map(np.asarray, metrics)


@pytest.mark.parametrize("name", ["fedavg", "fednova"])
def test_partial_with_equal_speeds_and_generous_deadline_is_todays_engine(name):
  base_state, base = _run(_sim(name))
  system = system_lib.SystemConfig(speed="equal", deadline=1e6, policy="partial")
  state, metrics = _run(_sim(name, system))
  for a, b in zip(jax.tree.leaves(base_state.server), jax.tree.leaves(state.server)):
    np.testing.assert_array_equal(a, b)
  for k, v in base.items():
    np.testing.assert_array_equal(metrics[k], v, err_msg=k)
  needed = np.asarray(_sim(name).num_steps)
  np.testing.assert_array_equal(metrics["system/steps_run"], needed.sum())
  np.testing.assert_array_equal(metrics["system/dropped"], 0)
  np.testing.assert_array_equal(metrics["system/stragglers"], 0)
  np.testing.assert_allclose(metrics["system/wall_time"], needed.max())


def test_runner_rows_equal_todays_and_carry_system_columns():
  base = runner.run(helpers.tiny_config(rounds=2, eval_every=1)).round_rows
  cfg = helpers.tiny_config(rounds=2, eval_every=1)
  cfg.system.policy, cfg.system.deadline = "partial", 1e6
  rows = runner.run(cfg).round_rows
  assert len(rows) == len(base)
  for b, r in zip(base, rows):
    for k, v in b.items():
      if k not in ("time", "wall_time", "seconds") and isinstance(v, float) \
          and "time" not in k:
        assert r[k] == v or (np.isnan(v) and np.isnan(r[k])), k
    assert r["system/dropped"] == 0 and r["system/aggregated"] == 1
    assert r["system/steps_run"] > 0


@pytest.mark.parametrize("name", ["fedavg", "scaffold"])
def test_drop_with_a_deadline_nobody_meets_aggregates_nothing(name):
  # Every client needs >= 1 step at speed 1 (1 time unit) > deadline 0.5.
  system = system_lib.SystemConfig(speed="equal", deadline=0.5, policy="drop")
  sim = _sim(name, system)
  init = sim.init(0)
  state, metrics = sim.run_chunk(init, 2)
  for a, b in zip(jax.tree.leaves((init.server, init.clients)),
                  jax.tree.leaves((state.server, state.clients))):
    np.testing.assert_array_equal(a, b)
  np.testing.assert_array_equal(metrics["system/aggregated"], 0)
  np.testing.assert_array_equal(metrics["system/dropped"], len(SIZES))
  np.testing.assert_array_equal(metrics["system/steps_run"], 0)
  np.testing.assert_array_equal(metrics["cohort"], 0)
  np.testing.assert_allclose(metrics["system/wall_time"], 0.5)
  assert all(np.isfinite(float(v)) for v in sim.evaluate(state).values()
             if np.ndim(v) == 0)


def _speeds(sim, system, seed=0):
  key = jax.random.fold_in(jax.random.PRNGKey(seed), SPEED_TAG)
  return np.asarray(system_lib.client_speeds(system, key, sim.num_clients))


@pytest.mark.parametrize("policy", ["drop", "partial"])
def test_outcomes_do_not_depend_on_cohort_order(policy):
  system = system_lib.SystemConfig(speed="lognormal", sigma=1.0, deadline=8.0,
                                   policy=policy)
  sorted_sim = _sim("fednova", system)
  state_a, a = _run(sorted_sim, rounds=2)
  state_b, b = _run(_sim("fednova", system, cohort_permutation_seed=3), rounds=2)
  assert not np.array_equal(a["clients/ids"], b["clients/ids"])
  for t in range(2):
    ia, ib = np.argsort(a["clients/ids"][t]), np.argsort(b["clients/ids"][t])
    for k in ("clients/mask", "clients/steps", "clients/loss"):
      np.testing.assert_allclose(a[k][t][ia], b[k][t][ib], rtol=1e-6, err_msg=k)
  for k in ("system/wall_time", "system/dropped", "system/stragglers", "system/steps_run"):
    np.testing.assert_array_equal(a[k], b[k], err_msg=k)
  for x, y in zip(jax.tree.leaves(state_a.server), jax.tree.leaves(state_b.server)):
    np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
  # The per-client outcome is the one the speeds and the deadline prescribe.
  speeds, needed = _speeds(sorted_sim, system), np.asarray(sorted_sim.num_steps)
  if policy == "drop":
    expected = np.where(needed / speeds <= 8.0, needed, 0)
  else:
    expected = np.minimum(needed, np.floor(8.0 * speeds).astype(int))
  ids = a["clients/ids"][0]
  np.testing.assert_array_equal(a["clients/steps"][0] * a["clients/mask"][0],
                                expected[ids])
  np.testing.assert_array_equal(a["clients/mask"][0], expected[ids] > 0)
  assert 0 < (expected > 0).sum() and (expected < needed).any()


def test_client_view_carries_the_step_budget():
  system = system_lib.SystemConfig(speed="groups", group_speeds=(0.5, 2.0),
                                   deadline=6.0, policy="partial")

  def recording(ctx):
    fedavg = algorithms.make("fedavg", ctx)

    def client_update(payload, state, view, key, t):
      msg, state, metrics = fedavg.client_update(payload, state, view, key, t)
      return msg, state, {**metrics, "budget": contract.step_budget(view)}
    return fedavg._replace(client_update=client_update)

  fed = helpers.unequal_digits(SIZES)
  sim = helpers.simulation(fed, recording, client_cfg={"batch_size": 8}, system=system)
  _, m = _run(sim, rounds=1)
  ids = m["clients/ids"][0]
  budget = np.where(np.arange(len(SIZES)) % 2 == 0, 3, 12)   # ⌊6·s_k⌋
  np.testing.assert_array_equal(m["clients/budget"][0], budget[ids])
  np.testing.assert_array_equal(
      m["clients/steps"][0], np.minimum(np.asarray(sim.num_steps), budget)[ids])
  view = contract.ClientView(jnp.zeros(1), jnp.zeros(1), jnp.zeros(1, jnp.int32),
                             jnp.asarray(1), jnp.asarray(7), jnp.asarray(0))
  assert int(contract.step_budget(view)) == 7   # no deadline: its own steps


@pytest.mark.parametrize("override, start", [
    ("--config.system.sigma=-1.0", "error: config.system.sigma=-1.0:"),
    ("--config.system.deadline=0", "error: config.system.deadline=0"),
    ("--config.system.policy=late", "error: config.system.policy='late':"),
    ("--config.system.group_speeds=(1.0,-2.0)", "error: config.system.group_speeds="),
])
def test_bad_system_values_are_one_error_line(override, start):
  args = [QUICKSTART, override]
  if "group_speeds" in override:
    args.append("--config.system.speed=groups")
  line = _error_line(_cli(*args))
  assert line.startswith(start), line
