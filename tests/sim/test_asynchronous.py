"""Buffered asynchronous aggregation on the simulated clock: FedBuff against
synchronous FedAvg (bit for bit), the compiled server against a plain
event-driven reference loop, resume, and bad input."""
from __future__ import annotations

import heapq
import math

import jax
import jax.numpy as jnp
import numpy as np
import ml_collections
import pytest

import fedfrac as ff
from fedfrac import algorithms
from fedfrac._validation import ConfigError
from fedfrac.algorithms import asynchronous as async_rules
from fedfrac.algorithms import contract
from fedfrac.sim import churn
from fedfrac.sim import clock as clock_lib
from fedfrac.sim.state import CLIENT, SAMPLE
from tests import helpers

SIZES = (13, 40, 75, 22, 30, 50)
CLIENT_CFG = {"lr": 0.1, "batch_size": 16, "local_epochs": 1}


def _sim(method="fedavg", clock=None, participation=0.5, **options):
  fed = helpers.unequal_digits(sizes=SIZES)
  return helpers.simulation(fed, lambda ctx: algorithms.make(method, ctx, **options),
                            CLIENT_CFG, participation=participation, clock=clock)


def _clock(server, options, method="fedavg", **clock):
  return clock_lib.ClockConfig(server=server, options=algorithms.async_server(
      server, options, method), **clock)


def _leaves(tree):
  return [np.asarray(x) for x in jax.tree.leaves(tree)]


def test_fedbuff_with_equal_speeds_equals_synchronous_fedavg_bit_for_bit():
  # Every client equally fast, concurrency = buffer = cohort (3 of 6 clients),
  # constant staleness weight and FedAvg's sample weighting: each server step
  # takes the clients of the synchronous round of the same index.
  sync = _sim()
  want, want_m = sync.run_chunk(sync.init(0), 3)
  buff = _sim(clock=_clock("fedbuff", {"buffer_size": 3, "concurrency": 3,
                                       "staleness": "constant", "max_staleness": 0}))
  got, got_m = buff.run_chunk(buff.init(0), 3)
  np.testing.assert_array_equal(got_m["clients/ids"], want_m["clients/ids"])
  assert len(set(SIZES)) > 1   # unequal local step counts: unequal arrival times
  for g, w in zip(_leaves(got.server), _leaves(want.server)):
    np.testing.assert_array_equal(g, w)
  np.testing.assert_array_equal(got_m["train_loss"], want_m["train_loss"])
  np.testing.assert_array_equal(got_m["clients/staleness"], 0.0)


def test_a_synchronous_clock_times_rounds_without_changing_them():
  plain = _sim()
  want, _ = plain.run_chunk(plain.init(0), 2)
  timed = _sim(clock=clock_lib.ClockConfig(server="sync", speed="lognormal",
                                           speed_spread=0.5, bandwidth_mean=1e4))
  got, metrics = timed.run_chunk(timed.init(0), 2)
  for g, w in zip(_leaves(got.server), _leaves(want.server)):
    np.testing.assert_array_equal(g, w)
  # The round lasts as long as its slowest participant's download, steps, upload.
  payload, message = timed.communication_bytes(got)
  rates = clock_lib.client_rates(timed.config.clock, got.key, len(SIZES))
  for t in range(2):
    ids = np.asarray(metrics["clients/ids"][t])
    each = clock_lib.durations(rates, jnp.asarray(ids), jnp.asarray(timed.num_steps[ids]),
                               payload, message)
    np.testing.assert_allclose(metrics["clock/step_time"][t], np.max(each), rtol=1e-6)
  np.testing.assert_allclose(metrics["clock/time"], np.cumsum(metrics["clock/step_time"]),
                             rtol=1e-6)


def reference_async(sim, server, steps, seed=0):
  """The asynchronous server as a plain event loop: a heap of arrival times, one
  client update at a time (un-vmapped ``client_update`` calls), the server step
  written out in NumPy. Uses the engine's documented key derivation, sampling
  rule and arrival time (:mod:`fedfrac.sim.clock`), none of its scan / vmap /
  ring machinery."""
  algorithm, arrays = sim.algorithm, sim.arrays
  state = sim.init(seed)
  root, n = state.key, sim.num_clients
  rates = clock_lib.client_rates(sim.config.clock, root, n)
  speeds, bandwidths = (np.asarray(r, np.float64) for r in rates)
  payload_bytes, message_bytes = sim.communication_bytes(state)
  steps_of = np.asarray(arrays["num_steps"])
  sizes = np.asarray(arrays["client_size"], np.float64)
  trace = sim.config.clock.trace
  windows = None if trace is None else trace.windows

  def start(k, now):
    """Now, or the start of client k's next availability window."""
    if windows is None:
      return now
    return min((max(now, a) for a, b in windows[k] if b > now), default=math.inf)

  def arrival(k, now):
    return float(np.float32(start(k, now)) + np.float32(
        payload_bytes / bandwidths[k] + steps_of[k] / speeds[k]
        + message_bytes / bandwidths[k]))

  def sample(step, busy, count, now):
    key = jax.random.fold_in(jax.random.fold_in(root, step), SAMPLE)
    can = np.array([start(k, now) < math.inf for k in range(n)])
    ids, _ = churn.sample_cohort(key, jnp.asarray(~busy & can), count)
    return [int(i) for i in ids]

  params = [np.asarray(x, np.float64) for x in jax.tree.leaves(state.server["params"])]
  treedef = jax.tree.structure(state.server["params"])
  models = {0: params}          # version -> global model
  heap = []                     # (arrival time, client, base version, dispatch step)
  busy = np.zeros(n, bool)
  for k in sample(0, busy, server.concurrency, 0.0):
    heapq.heappush(heap, (arrival(k, 0.0), k, 0, 0))
    busy[k] = True
  version, staleness, times = 0, [], []
  kind = server.name
  for s in range(steps):
    arrived = [heapq.heappop(heap) for _ in range(server.buffer_size)]
    now = max(a[0] for a in arrived)
    times.append(now)
    update = [np.zeros_like(p) for p in params]
    weights = np.array([sizes[a[1]] if server.weighting == "samples" else 1.0
                        for a in arrived])
    weights = weights / weights.sum()
    for (_, k, base, d), p_k in zip(arrived, weights):
      busy[k] = False
      payload = jax.tree.unflatten(treedef, [jnp.asarray(x, jnp.float32)
                                             for x in models[base]])
      view = contract.ClientView(arrays["x"], arrays["y"], arrays["client_index"][k],
                                 arrays["client_size"][k], arrays["num_steps"][k],
                                 jnp.asarray(k))
      key = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(root, d), CLIENT),
                               k)
      client_state = jax.tree.map(lambda x, k=k: x[k], state.clients)
      delta, _, _ = algorithm.client_update(payload, client_state, view, key,
                                            jnp.asarray(d, jnp.int32))
      tau = version - base
      staleness.append(tau)
      s_tau = float(async_rules.staleness_weight(OPTIONS[kind]["staleness"],
                                                 np.array([tau]),
                                                 OPTIONS[kind]["staleness_a"])[0])
      for i, dl in enumerate(jax.tree.leaves(delta)):
        dl = np.asarray(dl, np.float64)
        if kind == "fedbuff":        # w += Σ p_k s(τ_k) Δ_k
          update[i] += p_k * s_tau * dl
        else:                        # w ← (1 − αs) w + αs (w_base + Δ)
          mix = OPTIONS[kind]["alpha"] * s_tau
          update[i] += mix * (models[base][i] + dl - params[i])
    params = [p + u for p, u in zip(params, update)]
    version += 1
    models[version] = params
    for k in sample(s + 1, busy, server.buffer_size, now):
      heapq.heappush(heap, (arrival(k, now), k, version, s + 1))
      busy[k] = True
  return params, staleness, times


OPTIONS = {
    "fedbuff": {"buffer_size": 2, "concurrency": 4, "staleness": "polynomial",
                "staleness_a": 0.5, "max_staleness": 30, "weighting": "samples"},
    "fedasync": {"concurrency": 3, "alpha": 0.6, "staleness": "polynomial",
                 "staleness_a": 0.5, "max_staleness": 30},
}


@pytest.mark.parametrize("server", ["fedbuff", "fedasync"])
def test_compiled_server_equals_event_driven_reference_with_stale_updates(server):
  clock = _clock(server, OPTIONS[server], speed="lognormal", speed_spread=0.8,
                 bandwidth_mean=2e4)
  sim = _sim(clock=clock, participation=1.0)
  steps = 6
  want, staleness, _ = reference_async(sim, clock.options, steps)
  assert max(staleness) > 0, "the case must apply stale updates"
  got, metrics = sim.run_chunk(sim.init(0), steps)
  np.testing.assert_array_equal(np.sort(np.asarray(metrics["clients/staleness"]).ravel()),
                                np.sort(staleness))
  for g, w in zip(_leaves(got.server["params"]), want):
    np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)
  bins = clock.options.max_staleness + 1
  hist = [float(np.sum(metrics[f"async/staleness_count_{i}"])) for i in range(bins + 1)]
  assert hist == [staleness.count(i) for i in range(bins)] + [0.0]


def _async_config(**overrides):
  c = helpers.tiny_config(rounds=6, eval_every=2)
  c.clock.server = "fedbuff"
  c.clock.speed = "lognormal"
  c.clock.speed_spread = 0.5
  c.clock.options = {"buffer_size": 2, "concurrency": 4, "max_staleness": 20}
  for key, value in overrides.items():
    target = c
    *parts, last = key.split(".")
    for p in parts:
      target = target[p]
    target[last] = value
  return c


def test_resume_from_a_checkpoint_mid_run_is_bit_identical(tmp_path):
  c = _async_config()
  full = ff.run(c, workdir=str(tmp_path / "full"))
  ff.run(c, workdir=str(tmp_path / "part"), stop_after_round=2)
  resumed = ff.run(c, workdir=str(tmp_path / "part"))
  strip = lambda rows: [{k: v for k, v in r.items() if k not in ("wall_s",)}
                        for r in rows]
  assert strip(resumed.round_rows) == strip(full.round_rows)
  assert strip(resumed.rows) == strip(full.rows)
  assert any(r["async/staleness_max"] > 0 for r in full.round_rows)
  entry = full.summary()["methods"]["fedavg"]["seeds"]["0"]
  counts = entry["staleness_counts"]
  assert sum(counts) == 2 * 6 and counts[0] < 12      # K = 2 per step, 6 steps
  assert entry["time_to_target"] is None or entry["time_to_target"] > 0


def _trace(tmp_path, rows, header="client,speed,bandwidth"):
  path = tmp_path / "trace.csv"
  path.write_text("\n".join([header] + rows) + "\n")
  return str(path)


def test_a_trace_sets_speeds_and_bandwidths(tmp_path):
  path = _trace(tmp_path, [f"{k},{1 + k},{1e3 * (k + 1)}" for k in range(3)])
  trace = clock_lib.read_trace(path, 3)
  assert trace.speeds == (1.0, 2.0, 3.0) and trace.bandwidths == (1e3, 2e3, 3e3)
  assert trace.windows is None
  path = _trace(tmp_path, ["0,1,inf,0-inf", "1,2,inf,5-8;20-inf", "2,1,inf, 0-3 ;12-40"],
                header="client,speed,bandwidth,windows")
  assert clock_lib.read_trace(path, 3).windows == (
      ((0.0, math.inf),), ((5.0, 8.0), (20.0, math.inf)), ((0.0, 3.0), (12.0, 40.0)))


# Six clients (SIZES: 1, 3, 5, 2, 2, 4 local steps); clients 1, 2, 4 and 5 wait
# for windows, a few time units long, as arrivals are.
WINDOWED = ["0,1.0,inf,0-inf", "1,3.0,inf,5-8;20-inf", "2,0.5,inf,0-3;12-inf",
            "3,2.0,inf,0-inf", "4,1.5,inf,6-inf", "5,0.8,inf,0-1;2-inf"]


@pytest.mark.parametrize("server", ["fedbuff", "fedasync"])
def test_availability_windows_equal_the_event_driven_reference(tmp_path, server):
  header = "client,speed,bandwidth,windows"
  trace = clock_lib.read_trace(_trace(tmp_path, WINDOWED, header), len(SIZES))
  clock = _clock(server, OPTIONS[server], trace=trace)
  sim = _sim(clock=clock, participation=1.0)
  steps = 8
  want, staleness, times = reference_async(sim, clock.options, steps)
  got, metrics = sim.run_chunk(sim.init(0), steps)
  np.testing.assert_allclose(metrics["clock/time"], times, rtol=1e-6)
  np.testing.assert_array_equal(np.sort(np.asarray(metrics["clients/staleness"]).ravel()),
                                np.sort(staleness))
  for g, w in zip(_leaves(got.server["params"]), want):
    np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)
  # The windows matter: without them the same trace's clock runs otherwise.
  free = clock_lib.Trace(trace.speeds, trace.bandwidths)
  plain = _sim(clock=_clock(server, OPTIONS[server], trace=free), participation=1.0)
  _, plain_metrics = plain.run_chunk(plain.init(0), steps)
  assert not np.allclose(plain_metrics["clock/time"], metrics["clock/time"])


@pytest.mark.parametrize("cell,match", [
    ("50-10", "window '50-10' is reversed or empty: its end must be after its start"),
    ("0-100;50-200", r"window '50-200' overlaps or precedes the window before it "
     r"\(0-100\)"),
    ("", "the client is never available"),
    ("0-10;later", "window 'later': expected START-END"),
])
def test_bad_windows_are_one_line_naming_the_file_row_and_value(tmp_path, cell, match):
  path = _trace(tmp_path, ["0,1,inf,0-inf", f"1,1,inf,{cell}"],
                header="client,speed,bandwidth,windows")
  with pytest.raises(ValueError, match=match) as e:
    clock_lib.read_trace(path, 2)
  assert str(e.value).startswith(f"clock.trace={path!r}: line 3: windows={cell!r} of "
                                 "client 1: ") and "\n" not in str(e.value)


def test_windows_need_enough_clients_that_stay_available(tmp_path):
  rows = [f"{k},1,inf,0-inf" if k < 2 else f"{k},1,inf,0-50" for k in range(len(SIZES))]
  trace = clock_lib.read_trace(_trace(tmp_path, rows, "client,speed,bandwidth,windows"),
                               len(SIZES))
  with pytest.raises(ValueError, match=r"clock.trace: 2 clients have a last window that "
                     r"never ends .*concurrency=4 .*at least that many"):
    _sim(clock=_clock("fedbuff", OPTIONS["fedbuff"], trace=trace), participation=1.0)
  with pytest.raises(ValueError, match="its windows column is read by the asynchronous "
                     "servers"):
    _sim(clock=clock_lib.ClockConfig(server="sync", trace=trace))


@pytest.mark.parametrize("rows,match", [
    (["0,1,inf", "2,1,inf"], r"clients missing from the trace: 1 \(1 of 3\)"),
    (["0,1,inf", "1,0,inf", "2,1,inf"], "line 3: speed=0 of client 1: must be"),
    (["0,1,inf", "1,-2,inf", "2,1,inf"], "line 3: speed=-2 of client 1: must be"),
    (["0,1,inf", "1,1,-5", "2,1,inf"], "line 3: bandwidth=-5 of client 1: must be"),
    (["0,1,inf", "0,1,inf", "2,1,inf"], "client=0 appears twice"),
    (["0,1,inf", "1,1,inf", "7,1,inf"], "client=7 is not one of the run's clients"),
])
def test_bad_trace_is_one_line_naming_the_key(tmp_path, rows, match):
  path = _trace(tmp_path, rows)
  with pytest.raises(ValueError, match=match) as e:
    clock_lib.read_trace(path, 3)
  assert str(e.value).startswith(f"clock.trace={path!r}") and "\n" not in str(e.value)


def test_bad_trace_header_is_refused(tmp_path):
  path = _trace(tmp_path, ["0,1,inf"], header="client,speed")
  with pytest.raises(ValueError, match="it must be client,speed,bandwidth") as e:
    clock_lib.read_trace(path, 1)
  assert "(optionally ,windows)" in str(e.value)


@pytest.mark.parametrize("key,value,match", [
    ("clock.options", {"buffer_size": 5, "concurrency": 4},
     "config.clock.options.buffer_size=5: must be <= concurrency=4"),
    ("clock.options", {"buffer_size": 2, "concurrency": 8, "max_staleness": 2},
     r"config.clock.options.max_staleness=2: must be >= ceil\(concurrency / "
     r"buffer_size\) - 1 = 3"),
    ("clock.options", {"staleness": "linear"},
     "config.clock.options.staleness='linear': one of constant, polynomial, hinge"),
    ("clock.speed_mean", -1.0, "config.clock.speed_mean=-1.0: must be"),
    ("clock.speed", "uniform", "config.clock.speed='uniform': allowed values"),
    ("clock.server", "fedsync", "config.clock.server='fedsync': allowed values"),
    ("methods.fedavg.name", "scaffold",
     "config.clock.server='fedbuff': method name='scaffold' cannot run asynchronously"),
    # Options only an asynchronous server reads (a sweep axis over them would
    # change nothing): the shared ones no method reads, a method's own under sync.
    ("clock.server", "sync", "config.clock.options.buffer_size=2: no method reads it"),
    ("methods.fedavg.clock", {"server": "sync", "options": {"concurrency": 4}},
     "config.methods.fedavg.clock.options.concurrency=4: only an asynchronous server "
     r"\(fedbuff, fedasync\) reads clock.options, and method 'fedavg' runs with "
     "clock.server='sync'"),
])
def test_bad_clock_config_is_one_line_before_compute(key, value, match):
  c = _async_config(**{key: value})
  with pytest.raises(ConfigError, match=match) as e:
    ff.config.validate(c)
  assert "\n" not in str(e.value)


def test_a_staleness_bound_the_clock_exceeds_stops_the_run_in_one_line():
  # Bound 1 is the least 4 clients and K = 2 allow; a slow client exceeds it.
  sim = _sim(clock=_clock("fedbuff", {"buffer_size": 2, "concurrency": 4,
                                      "max_staleness": 1},
                          speed="lognormal", speed_spread=1.5), participation=1.0)
  with pytest.raises(ValueError, match=r"clock.options.max_staleness=1: the clock "
                     r"produced a client more than 1 server steps stale"):
    sim.run_chunk(sim.init(0), 8)


def test_concurrency_above_the_number_of_clients_is_refused():
  with pytest.raises(ValueError, match="clock.options.concurrency=9: must be <= the "
                     "number of clients 6"):
    _sim(clock=_clock("fedbuff", {"buffer_size": 2, "concurrency": 9}))


def test_the_registry_says_which_client_updates_run_asynchronously():
  able = {n for n in algorithms.names() if algorithms.entry(n).asynchronous}
  assert {"fedavg", "fedprox", "fofedavg"} <= able
  assert not able & {"scaffold", "feddyn", "rdfl", "fibfl", "fednova"}


def test_staleness_functions():
  tau = np.arange(6)
  np.testing.assert_allclose(async_rules.staleness_weight("polynomial", tau, 0.5),
                             (1 + tau) ** -0.5, rtol=1e-6)
  np.testing.assert_allclose(async_rules.staleness_weight("hinge", tau, 2.0, 2),
                             [1, 1, 1, 1 / 3, 1 / 5, 1 / 7], rtol=1e-6)
  np.testing.assert_array_equal(async_rules.staleness_weight("constant", tau), 1.0)


def test_fofedavg_clients_keep_their_state_under_fedbuff():
  # memory="round": a client's last local model is kept in its state when its
  # update is applied, and only then.
  sim = _sim("fofedavg", clock=_clock("fedbuff", {"buffer_size": 2, "concurrency": 4,
                                                  "max_staleness": 20}, "fofedavg",
                                      speed="lognormal", speed_spread=0.5),
             participation=1.0, memory="round")
  state, metrics = sim.run_chunk(sim.init(0), 4)
  arrived = np.unique(np.asarray(metrics["clients/ids"]))
  assert 0 < len(arrived) < len(SIZES)
  np.testing.assert_array_equal(np.flatnonzero(state.clients["has_participated"]), arrived)
  assert np.all(np.isfinite(metrics["train_loss"]))


def test_worker_processes_give_an_asynchronous_run_the_same_bits():
  from tests.sim.test_determinism import fingerprints
  alone = ff.run(_async_config(seeds=(0, 1)), progress=False)
  in_workers = ff.run(_async_config(seeds=(0, 1), workers=2), progress=False)
  assert fingerprints(in_workers) == fingerprints(alone)
  assert any(r["async/staleness_max"] > 0 for r in alone.records[0].round_rows)


# On 2 XLA host devices: the asynchronous server stays on one device, so
# shard_clients=auto (with or without device_invariant) gives one device's
# bits, and shard_clients=True is refused in one line.
TWO_DEVICES = r"""
import json
import jax
import fedfrac as ff
from tests.sim.test_asynchronous import _async_config
from tests.sim.test_determinism import fingerprints
assert jax.device_count() == 2
out = {}
for name, engine in (("auto", {}), ("invariant", {"engine.device_invariant": True})):
  out[name] = fingerprints(ff.run(_async_config(seeds=(0, 1), **engine), progress=False))
try:
  ff.run(_async_config(**{"engine.shard_clients": True}), progress=False).raise_failed()
  out["sharded"] = "ran"
except ValueError as e:
  out["sharded"] = str(e)
print("RESULT " + json.dumps(out))
"""


def test_on_two_devices_an_asynchronous_run_stays_on_one_with_its_bits():
  from tests.sim.test_determinism import fingerprints
  got = helpers.run_on_two_cpu_devices(TWO_DEVICES)
  want = fingerprints(ff.run(_async_config(seeds=(0, 1)), progress=False))
  assert got["auto"] == want and got["invariant"] == want
  assert got["sharded"] == ("config.methods.fedavg: clock.server='fedbuff': runs on "
                            "one device (its server "
                            "step is not sharded over devices); set "
                            "engine.shard_clients=False or auto")


def test_a_method_that_cannot_run_asynchronously_is_refused_only_when_it_runs():
  # A config that holds SCAFFOLD beside FedAvg: with only=fedavg the clock
  # server is checked against FedAvg alone; run whole, SCAFFOLD is named.
  c = _async_config()
  c.methods["scaffold"] = ml_collections.ConfigDict({"name": "scaffold"})
  c.only = "fedavg"
  ff.config.validate(c)
  c.only = ""
  with pytest.raises(ConfigError, match="method name='scaffold' cannot run asynchronously"):
    ff.config.validate(c)
