"""The measurement studies of the FO-RI-FedAvg BEV suite, which time this process
rather than read run records: ``timing`` (per-round time and the share spent on
roughness probes and diagnostics) and ``latency`` (inference: batch-1 median and
p95, batch-32 throughput).
"""
from __future__ import annotations

import os
import platform
import sys
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from fedfrac import algorithms, models
from fedfrac import runner as runner_lib
from fedfrac_lab.reproduce.bev_tables import OURS, md_table
from fedfrac_lab.reproduce.bev_runs import SuiteRuns, load_config_module


class SpeedStudies(SuiteRuns):
  """``study_timing`` and ``study_latency`` of :class:`fedfrac_lab.reproduce.bev_suite.Suite`."""

  def study_timing(self):
    base = load_config_module("base")
    light_label = ("FO-RI-FedAvg, light probe (M 4, m 20, B_probe 64, loss-difference "
             "increments), R_probe 5, diagnostics off")
    diffs_label = ("FO-RI-FedAvg, paper probe with loss-difference increments "
             "(probe_increments='paper'), R_probe 5, diagnostics off")
    c = self.configure(load_config_module("main_table").get_config())
    fed = self.fed_data(c)
    variants = [("FedAvg", "fedavg", {})]
    have = OURS in algorithms.names()
    if have:
      off = {"diagnostics": False}
      variants += [
          ("FO-FedAvg (λ = 0: no probe), diagnostics off", "fo_fedavg", off),
          ("FO-RI-FedAvg, paper probe, R_probe 1, diagnostics off", OURS,
           {**off, "probe_every": 1}),
          ("FO-RI-FedAvg, paper probe, R_probe 5, diagnostics off", OURS, off),
          ("FO-RI-FedAvg, paper probe, R_probe 10, diagnostics off", OURS,
           {**off, "probe_every": 10}),
          ("FO-RI-FedAvg, paper probe, R_probe 5 (main-table setting)", OURS, {}),
          (diffs_label, OURS, {**off, "probe_increments": "paper"}),
          (light_label, OURS,
           {**off, **base.PROBE_LIGHT}),
      ]
    times = {}
    chunk, repeats = 10, int(self.args.timing_repeats)
    for desc, name, opts in variants:
      cc = ml_collections.ConfigDict(c.to_dict())
      cc.methods = ml_collections.ConfigDict()
      cc.methods["m"] = base.method(name, **{**dict(base.MAIN_METHODS[name][1]), **opts})
      sim = runner_lib.build_simulation(cc, "m", fed)
      state = sim.init(0)
      compile_s = sim.compile(chunk, state)
      state, _ = sim.run_chunk(state, chunk)       # warm-up
      jax.block_until_ready(state)
      samples = []
      for _ in range(repeats):
        t0 = time.perf_counter()
        state, _ = sim.run_chunk(state, chunk)
        jax.block_until_ready(state)
        samples.append((time.perf_counter() - t0) / chunk)
      times[desc] = (float(np.median(samples)), float(np.min(samples)), compile_s)
      print(f"  timing {desc}: {times[desc][0] * 1e3:.1f} ms/round", file=sys.stderr)
    rows = [[d, f"{t * 1e3:.1f}", f"{lo * 1e3:.1f}", f"{cs:.1f}"]
            for d, (t, lo, cs) in times.items()]
    text = md_table(["method (one seed, 10 vehicles, C = 0.5)", "median ms/round",
                     "min ms/round", "compile s"], rows)
    if have:
      fo = times["FO-FedAvg (λ = 0: no probe), diagnostics off"][0]
      full = times["FO-RI-FedAvg, paper probe, R_probe 5 (main-table setting)"][0]
      shares = []
      for r in (1, 5, 10):
        t = times[f"FO-RI-FedAvg, paper probe, R_probe {r}, diagnostics off"][0]
        shares.append(f"R_probe {r}: {100 * max(t - fo, 0) / t:.0f}%")
      light = times[light_label][0]
      diffs = times[diffs_label][0]
      nodiag = times["FO-RI-FedAvg, paper probe, R_probe 5, diagnostics off"][0]
      text += (
          "\n\nShare of an FO-RI-FedAvg round spent in roughness probes (paper probe: M "
          "10, m 100, B_probe 128, derivative increments), from the difference to "
          "FO-FedAvg (the same client step without the probe and the tiny λ term): "
          f"{', '.join(shares)}; the same probe with loss-difference increments at "
          f"R_probe 5: {100 * max(diffs - fo, 0) / diffs:.0f}%; light probe at R_probe "
          f"5: {100 * max(light - fo, 0) / light:.0f}%. Share spent on "
          f"the per-round drift/roughness diagnostics (main-table setting): "
          f"{100 * (full - nodiag) / full:.0f}%. A client probes on its 1st, "
          f"(R+1)-th, ... participation, so with C = 0.5 about one probe runs per "
          f"round at R_probe 5; times are medians over {repeats} chunks of {chunk} "
          f"rounds.")
    return "Per-round time and diagnostics share", (
        f"Compiled rounds timed with `Simulation.run_chunk` ({repeats} chunks of "
        f"{chunk} rounds after a warm-up chunk), single seed, on this machine "
        f"({platform.processor() or platform.machine()}, {os.cpu_count()} cores, shared "
        f"with other jobs: load average {os.getloadavg()[0]:.1f}, so absolute times "
        f"are inflated and noisy; ratios are the informative part).\n\n" + text)

  def study_latency(self):
    c = self.configure(load_config_module("base").get_config())
    shape = (c.data.bev.window, 6)
    rows = []
    for name in ("window_mlp", "window_gru", "window_lstm"):
      mc = ml_collections.ConfigDict(c.model.to_dict())
      mc.name = name
      model = models.build(mc, shape, 1)
      params = model.init(jax.random.PRNGKey(0))
      fn = jax.jit(lambda p, x: model.apply(p, x))
      x1 = jnp.asarray(np.random.default_rng(0).normal(size=(1,) + shape), jnp.float32)
      x32 = jnp.asarray(np.random.default_rng(1).normal(size=(32,) + shape), jnp.float32)
      fn(params, x1).block_until_ready()
      fn(params, x32).block_until_ready()
      lat = []
      for _ in range(int(self.args.latency_calls)):
        t0 = time.perf_counter()
        fn(params, x1).block_until_ready()
        lat.append(time.perf_counter() - t0)
      calls = max(int(self.args.latency_calls) // 4, 10)
      t0 = time.perf_counter()
      for _ in range(calls):
        fn(params, x32).block_until_ready()
      thr = 32 * calls / (time.perf_counter() - t0)
      n_params = sum(int(np.prod(p.shape)) for p in jax.tree.leaves(params))
      rows.append([name, f"{n_params:,}", f"{np.median(lat) * 1e3:.3f}",
                   f"{np.percentile(lat, 95) * 1e3:.3f}", f"{thr:,.0f}"])
    return "Inference latency", (
        f"One jitted forward pass on {jax.default_backend().upper()} "
        f"({os.cpu_count()} shared cores, load average {os.getloadavg()[0]:.1f}), "
        f"window {shape}; batch 1 over {self.args.latency_calls} calls, batch 32 "
        f"throughput over {max(int(self.args.latency_calls) // 4, 10)} calls. MLP "
        f"hidden {tuple(c.model.hidden)}, GRU/LSTM hidden {c.model.rnn_hidden}.\n\n" +
        md_table(["model", "parameters", "batch-1 median ms", "batch-1 p95 ms",
                  "batch-32 windows/s"], rows))
