"""How ``fedfrac-bench`` measures a workload: one compiled round built as ``ff.run``
builds it, timed whole (median of repeats after a warm-up), its FLOPs, memory and
the machine it ran on; the PyTorch reference rounds interleaved with it.
"""
from __future__ import annotations

import datetime
import math
import os
import platform
import resource
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac import sim as sim_lib
from fedfrac import runner
from fedfrac_lab.bench.torch_side import TorchRound
from fedfrac_lab.bench.workloads import Workload


def matmul_peak_gflops(n=2048, repeats=10):
  """Best-of-``repeats`` f32 ``n x n`` matmul throughput on the default device."""
  a = jnp.ones((n, n), jnp.float32)
  f = jax.jit(lambda a: a @ a)
  f(a).block_until_ready()
  best = math.inf
  for _ in range(repeats):
    t0 = time.perf_counter()
    f(a).block_until_ready()
    best = min(best, time.perf_counter() - t0)
  return 2 * n ** 3 / best / 1e9


def step_flops(sim) -> float:
  """Product FLOPs of one local step of one client, counted from the layer
  shapes (:func:`fedfrac_lab.bench.flops.step_flops`; XLA's cost analysis, used
  before, leaves out convolutions that a GPU backend hands to cuDNN)."""
  from fedfrac_lab.bench import flops
  return flops.step_flops(sim)


def memory_of(compiled) -> dict:
  """Bytes of a compiled program's arguments, outputs and temporaries."""
  try:
    m = compiled.memory_analysis()
    return {"args": int(m.argument_size_in_bytes), "out": int(m.output_size_in_bytes),
            "temp": int(m.temp_size_in_bytes)}
  except Exception:   # noqa: BLE001 - not every backend reports it
    return {}


def rss_mb() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def device_peak_mb():
  stats = jax.devices()[0].memory_stats() or {}
  peak = stats.get("peak_bytes_in_use")
  return None if peak is None else peak / 2 ** 20


def torch_rounds_for(w: Workload, device=None):
  """The PyTorch rounds interleaved with workload ``w``: sequential (all CPU
  threads), batched (``torch.func.vmap``) and, on a CPU, sequential on 1 thread."""
  name, clients, *extra = w.torch
  kw = dict(extra[0]) if extra else {}
  rounds = [TorchRound(name, clients, device=device, **kw),
            TorchRound(name, clients, style="batched", device=device, **kw)]
  if rounds[0].device == "cpu":
    rounds.append(TorchRound(name, clients, threads=1, device=device, **kw))
  return rounds


def build(w: Workload, engine_overrides=None):
  config, fed, label = w.make()
  for k, v in (engine_overrides or {}).items():
    config.engine[k] = v
  sim = runner.build_simulation(config, label, fed)
  return sim


def time_rounds(sim, state, repeats, torch_rounds=()):
  """Seconds of each compiled round (and of each interleaved torch round)."""
  compile_s = sim.compile(1, state)
  state, m = sim.run_chunk(state, 1)    # warm-up
  jax.block_until_ready(state)
  times, torch_times, metrics = [], [[] for _ in torch_rounds], []
  for _ in range(repeats):
    t0 = time.perf_counter()
    state, m = sim.run_chunk(state, 1)
    jax.block_until_ready(state)
    times.append(time.perf_counter() - t0)
    metrics.append(jax.device_get(m))
    for tr, tt in zip(torch_rounds, torch_times):
      tt.append(tr())
  return state, compile_s, times, torch_times, metrics


def bench_workload(w: Workload, repeats: int, vs_torch=False, engine_overrides=None,
                   peak=None):
  sim = build(w, engine_overrides)
  state = sim.init(0)
  torch_rounds = []
  if vs_torch and w.torch:
    torch_rounds = torch_rounds_for(w)
  state, compile_s, times, torch_times, ms = time_rounds(sim, state, repeats, torch_rounds)
  round_s = statistics.median(times)
  steps = statistics.median(float(np.sum(m["client_steps"])) for m in ms)
  executed = statistics.median(float(np.sum(m["executed_steps"])) for m in ms)
  flops = step_flops(sim)
  b = sim.training.batch_size
  r = {
      "workload": w.name, "description": w.description, "note": w.note,
      "clients": sim.num_clients, "cohort": sim.cohort,
      "parallelism": sim.parallelism, "step_buckets": sim.step_buckets,
      "dynamic_steps": sim.training.dynamic_steps, "unroll": sim.training.unroll,
      "shards": sim.num_shards,
      "compile_s": compile_s, "round_s": round_s, "round_times": times,
      "rounds_per_s": 1.0 / round_s, "client_steps": steps,
      "client_steps_per_s": steps / round_s, "samples_per_s": steps * b / round_s,
      "masked_step_fraction": 1.0 - steps / max(executed, 1.0),
      "step_gflop": flops / 1e9,
      "gflops": flops * steps / round_s / 1e9,
      "peak_gflops": peak,
      "memory": memory_of(sim._compiled[1]),
      "state_bytes": sim_lib.tree_bytes(state),
      "client_state_bytes": sim_lib.tree_bytes(state.clients) / sim.num_clients,
      "rss_mb": rss_mb(), "device_peak_mb": device_peak_mb(),
  }
  if torch_rounds:
    r["torch_round_s"] = statistics.median(torch_times[0])
    r["torch_round_times"] = torch_times[0]
    r["torch_threads"] = torch_rounds[0].threads
    r["torch_version"] = torch_rounds[0].version
    r["torch_steps"] = torch_rounds[0].steps
    r["speedup_vs_torch"] = r["torch_round_s"] / round_s
    r["torch_device"] = torch_rounds[0].device
    r["torch_batched_round_s"] = statistics.median(torch_times[1])
    r["torch_batched_round_times"] = torch_times[1]
    r["speedup_vs_torch_batched"] = r["torch_batched_round_s"] / round_s
    if len(torch_rounds) > 2:
      r["torch1_round_s"] = statistics.median(torch_times[2])
      r["torch1_round_times"] = torch_times[2]
      r["speedup_vs_torch1"] = r["torch1_round_s"] / round_s
  return r


def machine_description():
  cpu = platform.processor() or platform.machine()
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          cpu = line.split(":", 1)[1].strip()
          break
  except OSError:
    pass
  devices = ", ".join(f"{d.platform}:{d.device_kind}" for d in jax.devices())
  info = {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
          "jax": jax.__version__, "backend": jax.default_backend(), "devices": devices,
          "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
          "date": datetime.datetime.now().isoformat(timespec="minutes")}
  try:
    import torch
    info["torch"] = torch.__version__
  except ImportError:
    pass
  return info
