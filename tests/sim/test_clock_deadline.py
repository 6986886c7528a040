"""Synchronous FedAvg with a deadline on the simulated clock (``clock.deadline``):
no-op at inf and above every arrival (bit for bit), a plain Python round loop
as the reference when clients are dropped, the empty round, and bad input."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fedfrac as ff
from fedfrac import algorithms
from fedfrac._validation import ConfigError
from fedfrac.algorithms import contract
from fedfrac.ops import system as system_lib
from fedfrac.sim import churn
from fedfrac.sim import clock as clock_lib
from fedfrac.sim.state import CLIENT, SAMPLE
from tests import helpers

SIZES = (13, 40, 75, 22, 30, 50)
CLIENT_CFG = {"lr": 0.1, "batch_size": 16, "local_epochs": 1}
SPEEDS = dict(speed="lognormal", speed_spread=0.8, bandwidth_mean=2e4)


def _sim(clock=None, participation=0.5, **engine):
  fed = helpers.unequal_digits(sizes=SIZES)
  return helpers.simulation(fed, lambda ctx: algorithms.make("fedavg", ctx), CLIENT_CFG,
                            participation=participation, clock=clock, **engine)


def _leaves(tree):
  return [np.asarray(x) for x in jax.tree.leaves(tree)]


def _durations(sim, seed=0):
  """Host ``[K]`` eq. (1) durations of every client's full local work."""
  state = sim.init(seed)
  rates = clock_lib.client_rates(sim.config.clock, state.key, sim.num_clients)
  payload, message = sim.communication_bytes(state)
  return np.asarray(clock_lib.durations(rates, jnp.arange(sim.num_clients),
                                        jnp.asarray(sim.num_steps), payload, message))


def test_deadline_inf_or_above_every_arrival_equals_the_run_without_one_bit_for_bit():
  plain = _sim(clock_lib.ClockConfig(server="sync", **SPEEDS))
  want, want_m = plain.run_chunk(plain.init(0), 3)
  late = float(np.max(_durations(plain))) * 1.01
  for deadline in (float("inf"), late):
    timed = _sim(clock_lib.ClockConfig(server="sync", deadline=deadline, **SPEEDS))
    got, got_m = timed.run_chunk(timed.init(0), 3)
    for g, w in zip(_leaves(got.server), _leaves(want.server)):
      np.testing.assert_array_equal(g, w)
    for name in ("train_loss", "clock/time", "clock/step_time", "clients/ids"):
      np.testing.assert_array_equal(got_m[name], want_m[name])
    if deadline == late:       # the masked path ran, and dropped nobody
      np.testing.assert_array_equal(got_m["clock/dropped"], 0.0)


def reference_deadline_rounds(sim, deadline, rounds, seed=0):
  """Synchronous FedAvg with a deadline as a plain loop: for each round, the
  engine's documented sampling key and arrival time, a Python ``if`` per client
  against T, one un-vmapped ``client_update`` per client that made it, the
  sample-weighted mean of their deltas added in float64; the round lasts
  min(T, slowest sampled arrival)."""
  algorithm, arrays = sim.algorithm, sim.arrays
  state = sim.init(seed)
  root = state.key
  took_all = _durations(sim, seed)
  sizes = np.asarray(arrays["client_size"], np.float64)
  treedef = jax.tree.structure(state.server["params"])
  params = [np.asarray(x, np.float64) for x in jax.tree.leaves(state.server["params"])]
  now, times, dropped = 0.0, [], []
  for t in range(rounds):
    key_t = jax.random.fold_in(root, t)
    ids, _ = churn.sample_cohort(jax.random.fold_in(key_t, SAMPLE),
                                 jnp.ones((sim.num_clients,), bool), sim.cohort)
    ids = [int(k) for k in ids]
    arrived = [k for k in ids if took_all[k] <= deadline]
    dropped.append(len(ids) - len(arrived))
    payload = jax.tree.unflatten(treedef, [jnp.asarray(p, jnp.float32) for p in params])
    update = [np.zeros_like(p) for p in params]
    total = sum(sizes[k] for k in arrived)
    for k in arrived:
      view = contract.ClientView(arrays["x"], arrays["y"], arrays["client_index"][k],
                                 arrays["client_size"][k], arrays["num_steps"][k],
                                 jnp.asarray(k))
      key = jax.random.fold_in(jax.random.fold_in(key_t, CLIENT), k)
      client_state = jax.tree.map(lambda x, k=k: x[k], state.clients)
      delta, _, _ = algorithm.client_update(payload, client_state, view, key,
                                            jnp.asarray(t, jnp.int32))
      for i, d in enumerate(jax.tree.leaves(delta)):
        update[i] += sizes[k] / total * np.asarray(d, np.float64)
    params = [p + u for p, u in zip(params, update)]
    now += min(deadline, max(took_all[k] for k in ids))
    times.append(now)
  return params, np.array(times), np.array(dropped)


def test_compiled_deadline_equals_a_plain_python_round_loop():
  probe = _sim(clock_lib.ClockConfig(server="sync", **SPEEDS))
  took = np.sort(_durations(probe))
  deadline = float((took[2] + took[3]) / 2)       # half the clients make it
  sim = _sim(clock_lib.ClockConfig(server="sync", deadline=deadline, **SPEEDS))
  rounds = 5
  want, times, dropped = reference_deadline_rounds(sim, deadline, rounds)
  assert 0 < dropped.sum() < rounds * sim.cohort, "the case must drop some clients"
  got, metrics = sim.run_chunk(sim.init(0), rounds)
  np.testing.assert_array_equal(metrics["clock/dropped"], dropped)
  np.testing.assert_array_equal(metrics["cohort"], sim.cohort - dropped)
  np.testing.assert_allclose(metrics["clock/time"], times, rtol=1e-6)
  for g, w in zip(_leaves(got.server["params"]), want):
    np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)
  # Dropped clients train nothing: the executed steps are the arrived clients'.
  ids, mask = np.asarray(metrics["clients/ids"]), np.asarray(metrics["clients/mask"])
  np.testing.assert_array_equal(metrics["client_steps"],
                                [sim.num_steps[i[m]].sum() for i, m in zip(ids, mask)])


def test_a_round_everyone_misses_keeps_the_states_and_lasts_the_deadline():
  deadline = float(np.min(_durations(_sim(clock_lib.ClockConfig(server="sync",
                                                                **SPEEDS))))) / 2
  sim = _sim(clock_lib.ClockConfig(server="sync", deadline=deadline, **SPEEDS))
  start = sim.init(0)
  got, metrics = sim.run_chunk(start, 2)
  for g, w in zip(_leaves(got.server), _leaves(start.server)):
    np.testing.assert_array_equal(g, w)
  np.testing.assert_array_equal(metrics["clock/dropped"], sim.cohort)
  np.testing.assert_allclose(metrics["clock/time"], [deadline, 2 * deadline], rtol=1e-6)


def _config(**clock):
  c = helpers.tiny_config(rounds=2)
  c.clock.server = "sync"
  for key, value in clock.items():
    c.clock[key] = value
  return c


@pytest.mark.parametrize("clock,match", [
    ({"deadline": 0.0}, r"config.clock.deadline=0.0: must be a number > 0 \(inf: none\)"),
    ({"deadline": -3.0}, r"config.clock.deadline=-3.0: must be a number > 0"),
    ({"deadline": float("nan")}, r"config.clock.deadline=nan: is not finite; must be a number > 0"),
    ({"deadline": 5.0, "server": "fedbuff",
      "options": {"buffer_size": 2, "concurrency": 4, "max_staleness": 20}},
     r"config.clock.deadline=5.0: a deadline closes a synchronous round; only with "
     r"clock.server='sync' \(server is 'fedbuff'\)"),
])
def test_bad_deadline_is_one_line_before_compute(clock, match):
  with pytest.raises(ConfigError, match=match) as e:
    ff.config.validate(_config(**clock))
  assert "\n" not in str(e.value)


def test_two_deadlines_in_one_round_are_refused():
  system = system_lib.SystemConfig(speed="lognormal", sigma=0.5, deadline=10.0,
                                   policy="drop")
  with pytest.raises(ValueError, match=r"clock.deadline=10.0: a round has one deadline; "
                     r"leave system.deadline"):
    _sim(clock_lib.ClockConfig(server="sync", deadline=10.0), system=system)
