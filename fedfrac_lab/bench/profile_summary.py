"""Where a local step's time goes on the device: one FIRMA program and one CNN
round traced with the JAX profiler inside a window, summarised into a small
table that travels back in the window's archive (the trace itself does not):
kernels per local step, device-to-host copies per local step (the while loop's
trip-count checks a round makes on the host), the share of kernel time in
matrix products and in copies, the top kernels; and the FIRMA step under XLA's
loop options (command buffers for the step loop, the engine's unroll), each in
a fresh process (``XLA_FLAGS`` is read once per process).

On a CPU (the dry run) the same code summarises XLA:CPU's thunks instead of
GPU kernels (leaves only: the executor's and while loops' own events contain
the thunks they run).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import jax
import numpy as np

MATMUL_WORDS = ("gemm", "cublas", "cutlass", "xmma", "matmul", "dot", "wgmma", "sm90_",
                "sm80_", "conv")
COPY_WORDS = ("copy", "memcpy", "memset", "transpose")
D2H_WORDS = ("memcpyd2h", "memcpydtoh", "dtoh", "d2h", "devicetohost")
# XLA GPU options tried on the FIRMA step (each in its own process).
VARIANTS = {"default": ("", 0),
            "no command buffers": ("--xla_gpu_enable_command_buffer=", 0),
            "loops in command buffers": ("--xla_gpu_enable_command_buffer=FUSION,CUBLAS,"
                                         "CUBLASLT,CUSTOM_CALL,CUDNN,WHILE,CONDITIONAL", 0),
            "unroll 4 local steps": ("", 4)}


def trace_events(log_dir) -> tuple:
  """``(device events, host events)``: ``[(name, microseconds)]`` of the xplane
  under ``log_dir``; device events are those of ``/device:*`` planes (their
  stream lines when there are some), host events the XLA threads of the CPU."""
  from jax.profiler import ProfileData
  paths = glob.glob(os.path.join(log_dir, "**", "*.xplane.pb"), recursive=True)
  device, host = [], []
  for path in paths:
    data = ProfileData.from_file(path)
    for plane in data.planes:
      lines = list(plane.lines)
      if plane.name.startswith("/device:"):
        streams = [ln for ln in lines if ln.name.lower().startswith("stream")] or lines
        device += [(e.name, e.duration_ns / 1e3) for ln in streams for e in ln.events]
      elif plane.name.startswith("/host:"):
        host += [(e.name, e.duration_ns / 1e3) for ln in lines if ln.name != "python"
                 for e in ln.events]
  # XLA:CPU's thunk executor and while thunks contain the thunks they run: only
  # the leaves count (a GPU's stream lines hold kernels and copies only).
  skip = lambda n: n.startswith(("end: ", "ThreadpoolListener", "ThunkExecutor", "while."))
  return ([e for e in device if not skip(e[0])], [e for e in host if not skip(e[0])])


def summarize(device, host, local_steps, top=8) -> dict:
  """Counts and shares of the kernels (the host's XLA thunks when there is no
  device plane) per local step."""
  kernels = device or host
  total = sum(d for _, d in kernels) or 1.0
  low = [(n.lower(), d) for n, d in kernels]
  matmul = sum(d for n, d in low if any(w in n for w in MATMUL_WORDS))
  copies = sum(d for n, d in low if any(w in n for w in COPY_WORDS))
  d2h = sum(1 for n, _ in [(x.lower().replace("_", ""), 0) for x, _ in device + host]
            if any(w in n for w in D2H_WORDS))
  by_name = {}
  for n, d in kernels:
    c, t = by_name.get(n, (0, 0.0))
    by_name[n] = (c + 1, t + d)
  ranked = sorted(by_name.items(), key=lambda kv: -kv[1][1])[:top]
  return {"source": "device kernels" if device else "host thunks (no device plane)",
          "local_steps": local_steps, "events": len(kernels),
          "events_per_step": len(kernels) / max(local_steps, 1),
          "d2h_per_step": d2h / max(local_steps, 1), "kernel_us": total,
          "matmul_share": matmul / total, "copy_share": copies / total,
          "top": [{"name": n, "count": c, "us": t} for n, (c, t) in ranked]}


def _firma_round(runs, clients, per_client, epochs, unroll=0):
  from fedfrac import runner
  from fedfrac_lab.bench import campaign, workloads
  w = campaign.WORKLOADS["firma_fmnist"]
  data = workloads.synthetic_images(clients, per_client)
  config, label = campaign.fedfrac_config(w, clients, epochs, "vmap")
  if unroll:
    config.engine.unroll = int(unroll)
  sim = runner.build_simulation(config, label, data)
  t0 = time.perf_counter()
  one_round = campaign.seeds_round(sim, data, runs)
  return one_round, time.perf_counter() - t0, runs * clients


def _cnn_round(clients, per_client):
  from fedfrac_lab.bench import timing, workloads
  sim = timing.build(workloads.sized_workload("cnn10", clients=clients,
                                              per_client=per_client))
  box = {"state": sim.init(0)}
  sim.compile(1, box["state"])

  def one_round():
    box["state"], m = sim.run_chunk(box["state"], 1)
    jax.block_until_ready(box["state"])
    return float(np.sum(jax.device_get(m)["client_steps"]))
  one_round()
  return one_round, sim.cohort


def _traced(one_round, lanes):
  with tempfile.TemporaryDirectory(prefix="fedfrac_trace_") as tmp:
    with jax.profiler.trace(tmp):
      steps = one_round()
    device, host = trace_events(tmp)
  return summarize(device, host, steps / lanes)


def variant_time(flags, unroll, runs, clients, per_client, epochs, repeats=3) -> dict:
  """The FIRMA round of :func:`profile` in a fresh process with ``XLA_FLAGS``
  ``flags`` added and ``engine.unroll`` ``unroll``: compile and round seconds."""
  env = dict(os.environ)
  env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + flags).strip()
  argv = [sys.executable, "-m", "fedfrac_lab.bench.profile_summary", "--runs", str(runs),
          "--clients", str(clients), "--per-client", str(per_client), "--epochs",
          str(epochs), "--unroll", str(unroll), "--repeats", str(repeats)]
  run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
  if run.returncode:
    text = (run.stderr or run.stdout).strip().splitlines()
    return {"error": text[-1] if text else f"exit status {run.returncode}"}
  return json.loads(run.stdout.strip().splitlines()[-1])


def profile(runs=3, clients=10, per_client=640, epochs=1, cnn_clients=10,
            cnn_per_client=600, variants=tuple(VARIANTS)) -> dict:
  """The traced FIRMA and CNN rounds (:func:`summarize`) and the FIRMA round's
  time under each of ``variants`` (:data:`VARIANTS`)."""
  from fedfrac_lab.bench import window_measurements
  out = {"device": window_measurements.device_name(), "firma": {}, "cnn": {},
         "variants": []}
  one_round, compile_s, lanes = _firma_round(runs, clients, per_client, epochs)
  out["firma"] = dict(_traced(one_round, lanes), runs=runs, clients=clients,
                      compile_s=compile_s)
  cnn_round, cohort = _cnn_round(cnn_clients, cnn_per_client)
  out["cnn"] = dict(_traced(cnn_round, cohort), clients=cnn_clients)
  for name in variants:
    flags, unroll = VARIANTS[name]
    out["variants"].append(dict(variant_time(flags, unroll, runs, clients, per_client,
                                             epochs), name=name, flags=flags,
                                unroll=unroll))
  return out


def markdown(r) -> list:
  lines = ["| program | source | local steps | events per step | device-to-host copies "
           "per step | matrix products | copies |", "|---|---|---|---|---|---|---|"]
  for key, title in (("firma", f"FIRMA FibFL, {r['firma'].get('runs')} runs x "
                      f"{r['firma'].get('clients')} clients"),
                     ("cnn", f"CNNMnist FedAvg, {r['cnn'].get('clients')} clients")):
    s = r[key]
    lines.append(f"| {title} | {s['source']} | {s['local_steps']:.0f} | "
                 f"{s['events_per_step']:.1f} | {s['d2h_per_step']:.2f} | "
                 f"{100 * s['matmul_share']:.0f} % | {100 * s['copy_share']:.0f} % |")
  for key in ("firma", "cnn"):
    lines += ["", f"Top {key} events by time:", "", "| event | count | µs |", "|---|---|---|"]
    lines += [f"| `{t['name'][:60]}` | {t['count']} | {t['us']:.0f} |" for t in r[key]["top"]]
  lines += ["", "FIRMA round under XLA's loop options (a fresh process each):", "",
            "| variant | round s | compile s |", "|---|---|---|"]
  for v in r["variants"]:
    if "error" in v:
      lines.append(f"| {v['name']} | failed: {v['error'][:80]} | |")
    else:
      lines.append(f"| {v['name']} | {v['round_s']:.4f} | {v['compile_s']:.1f} |")
  return lines


def main(argv=None):
  p = argparse.ArgumentParser(prog="python -m fedfrac_lab.bench.profile_summary",
                              description="time one FIRMA round (a variant of profile)")
  for name, default in (("--runs", 3), ("--clients", 10), ("--per-client", 640),
                        ("--epochs", 1), ("--unroll", 0), ("--repeats", 3)):
    p.add_argument(name, type=int, default=default)
  a = p.parse_args(argv)
  one_round, compile_s, _ = _firma_round(a.runs, a.clients, a.per_client, a.epochs,
                                         a.unroll)
  times = []
  for _ in range(a.repeats):
    t0 = time.perf_counter()
    one_round()
    times.append(time.perf_counter() - t0)
  print(json.dumps({"round_s": statistics.median(times), "compile_s": compile_s,
                    "times": times}))


if __name__ == "__main__":
  main()
