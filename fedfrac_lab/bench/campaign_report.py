"""The matmul peak and the section of ``benchmarks/results.md`` that
``fedfrac-bench --vs-torch --workloads=firma_fmnist,cnn_mnist_real,kuramoto_cnn``
writes (:mod:`fedfrac_lab.bench.campaign`); the section is kept between its markers
when other runs rewrite the file, and its figures go under the ``campaign`` key
of the results JSON.
"""
from __future__ import annotations

import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac_lab.bench.campaign import cpu_seconds

START = "<!-- campaign-vs-torch:start -->"
END = "<!-- campaign-vs-torch:end -->"
STEP_SHAPE = (64, 784, 256)   # the FIRMA step's first product: [B, 784] @ [784, 256]


def _best(fn, repeats):
  """(best wall seconds of ``repeats`` calls, CPU seconds of all of them)."""
  best, c0 = float("inf"), cpu_seconds()
  for _ in range(repeats):
    t0 = time.perf_counter()
    fn()
    best = min(best, time.perf_counter() - t0)
  return best, cpu_seconds() - c0


def torch_matmul(m, k, n, calls=1, repeats=5):
  """GFLOP/s of ``calls`` float32 [m, k] @ [k, n] products with PyTorch on 1 thread
  (``torch.set_num_threads(1)``), best of ``repeats``."""
  import torch
  threads = torch.get_num_threads()
  torch.set_num_threads(1)
  g = torch.Generator().manual_seed(0)
  xs = [torch.rand((m, k), generator=g) for _ in range(calls)]
  w = torch.rand((k, n), generator=g)

  def run():
    for x in xs:
      torch.mm(x, w)
  try:
    run()
    best, _ = _best(run, repeats)
  finally:
    torch.set_num_threads(threads)
  return 2.0 * m * k * n * calls / best / 1e9


def jax_matmul(m, k, n, calls=1, repeats=5):
  """``(GFLOP/s wall, GFLOP per CPU-second)`` of ``calls`` float32 [m, k] @ [k, n]
  products under ``jax.jit`` with JAX's default threads (one ``lax.map`` over the
  ``calls`` left operands, so each product runs at its own shape)."""
  rng = np.random.default_rng(0)
  xs = jnp.asarray(rng.random((calls, m, k), np.float32))
  w = jnp.asarray(rng.random((k, n), np.float32))
  f = jax.jit(lambda xs, w: jax.lax.map(lambda x: x @ w, xs))
  f(xs, w).block_until_ready()
  best, cpu = _best(lambda: f(xs, w).block_until_ready(), repeats)
  flop = 2.0 * m * k * n * calls
  return flop / best / 1e9, flop * repeats / max(cpu, 1e-9) / 1e9


def matmul_peaks(n=2048, step_calls=200, repeats=5, with_torch=True) -> dict:
  """The core's matmul peak, measured: float32 ``n x n`` by ``n x n`` and the step's
  shape (:data:`STEP_SHAPE`, ``step_calls`` products per timed call), PyTorch on
  1 thread and JAX with its default threads (wall GFLOP/s and GFLOP per
  CPU-second). ``peak_per_core``: the larger of PyTorch's 1-thread figure and JAX's
  GFLOP per CPU-second at ``n x n`` (a multi-threaded wall figure is not per core).
  """
  m, k, s = STEP_SHAPE
  out = {"n": n, "step_shape": list(STEP_SHAPE), "step_calls": step_calls}
  out["jax_square_gflops"], out["jax_square_gflop_per_cpu_s"] = jax_matmul(
      n, n, n, 1, repeats)
  out["jax_step_gflops"], out["jax_step_gflop_per_cpu_s"] = jax_matmul(
      m, k, s, step_calls, repeats)
  candidates = [out["jax_square_gflop_per_cpu_s"]]
  if with_torch:
    out["torch1_square_gflops"] = torch_matmul(n, n, n, 1, repeats)
    out["torch1_step_gflops"] = torch_matmul(m, k, s, step_calls, repeats)
    candidates.append(out["torch1_square_gflops"])
  out["peak_per_core"] = max(candidates)
  return out


def _g(x):
  return "–" if x is None else f"{x:.1f}"


def pinned_text(machine) -> str:
  """``", the process pinned to 1 of them (taskset)"`` when it ran on fewer cores
  than the machine has."""
  used = machine.get("cores_used")
  if used is None or used == machine.get("cores"):
    return ""
  return f", the process pinned to {used} of them (taskset)"


def section(command, machine, loads, peaks, results) -> list:
  """Markdown lines of the campaign section, markers included."""
  n = peaks["n"]
  m, k, s = peaks["step_shape"]
  L = [START, "## The campaign's workloads against PyTorch, per CPU-second", "",
       f"Command: `{command}`", "",
       f"Device: {machine.get('cpu', '?')}, {machine.get('cores', '?')} cores"
       f"{pinned_text(machine)}; jax "
       f"{machine.get('jax', '?')}, torch {machine.get('torch', 'not installed')}, "
       f"{machine.get('date', '')}. Load average (1/5/15 min) at start {loads[0]}, "
       f"at end {loads[1]}.", "",
       "Inputs are synthetic (uniform random 28x28 pixels, labels 0-9): timings only. "
       "fedfrac runs the campaign's configs through its engine "
       "(`fedfrac_lab/bench/campaign.py`); PyTorch is `benchmarks/torch_reference.py` in "
       "the same process, the sides alternating round by round. **Per CPU-second**: "
       "CPU ms per client-step, GFLOP per CPU-second, % of the core's peak and the "
       "ratio column divide by the user + system CPU seconds the whole process spent "
       "in the timed round, so they compare work per core whatever the thread count; "
       "round s and GFLOP/s are wall-clock. A client-step is one optimizer step of one "
       "client (for FIRMA, the Adam steps of both phases). The ratio, on each fedfrac "
       "row, is sequential PyTorch's CPU seconds per client-step over that row's (> 1: "
       "fedfrac needs less CPU per step). "
       "FLOPs are counted from the layer shapes: matrix products and convolutions, "
       "forward and the backward products each phase needs (FIRMA's head phase: "
       "the forward pass and the head's weight gradient; its train-accuracy pass "
       "included); LayerNorm, activations, pooling, loss and optimizer left out.", "",
       "Matmul peak, float32, measured by the benchmark (GFLOP/s):", "",
       "| product | PyTorch, 1 thread | JAX wall (default threads) | JAX per CPU-second |",
       "|---|---|---|---|",
       f"| {n}x{n} @ {n}x{n} | {_g(peaks.get('torch1_square_gflops'))} | "
       f"{_g(peaks['jax_square_gflops'])} | {_g(peaks['jax_square_gflop_per_cpu_s'])} |",
       f"| {m}x{k} @ {k}x{s} (the FIRMA step's first layer; {peaks['step_calls']} per "
       f"call) | {_g(peaks.get('torch1_step_gflops'))} | {_g(peaks['jax_step_gflops'])} | "
       f"{_g(peaks['jax_step_gflop_per_cpu_s'])} |", "",
       f"Peak per core (the larger of PyTorch's 1-thread and JAX's per-CPU-second "
       f"{n}x{n} figures): **{peaks['peak_per_core']:.1f} GFLOP/s**.", "",
       "| workload | epochs run (protocol) | side | threads | round s | CPU s / round | "
       "client-steps | CPU ms / client-step | GFLOP/s (wall) | GFLOP / CPU-s | % of "
       "core peak | sequential PyTorch / this, CPU per step |",
       "|---|---|---|---|---|---|---|---|---|---|---|---|"]
  for r in results:
    epochs = (f"E_h=1, E_e={r['epochs']} ({r['real_epochs']})"
              if r["workload"] == "firma_fmnist" else f"E={r['epochs']} ({r['real_epochs']})")
    for side in r["sides"]:
      if side["side"].startswith("fedfrac"):
        ratio = side.get("torch_sequential_over_this")
        ratio = "–" if ratio is None else f"**{ratio:.2f}**"
      else:
        ratio = "–"
      L.append(f"| {r['description']} (cohort {r['cohort']}) | {epochs} | {side['side']} | "
               f"{side['threads']} | {side['round_s']:.3f} | {side['cpu_s']:.3f} | "
               f"{side['client_steps']:.0f} | {1e3 * side['cpu_s_per_step']:.3f} | "
               f"{side['gflops']:.1f} | {side['gflop_per_cpu_s']:.1f} | "
               f"{100 * side['peak_share']:.0f}% | {ratio} |")
  L += ["", "All timed rounds (wall s / CPU s):", ""]
  for r in results:
    parts = ["; ".join([f"{side['side']} " + ", ".join(
        f"{w:.3f}/{c:.3f}" for w, c in zip(side["round_times"], side["cpu_times"]))
        for side in r["sides"]])]
    L.append(f"- {r['workload']} ({r['round_gflop']:.1f} GFLOP per round, fedfrac "
             f"{r['parallelism']}, compile {r['compile_s']:.1f} s): {parts[0]}")
  return L + [END]


def update_section(path, lines):
  """Write the section into ``path``: in place of its old copy, else appended."""
  text = "\n".join(lines)
  old = ""
  if os.path.exists(path):
    with open(path) as f:
      old = f.read()
  if START in old and END in old:
    new = old[:old.index(START)] + text + old[old.index(END) + len(END):]
  else:
    new = (old.rstrip("\n") + "\n\n" if old else "") + text + "\n"
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  with open(path, "w") as f:
    f.write(new)


def update_json(path, figures):
  """Set the ``campaign`` key of the results JSON at ``path`` (other keys kept)."""
  data = {}
  if os.path.exists(path):
    with open(path) as f:
      data = json.load(f)
  data["campaign"] = figures
  with open(path, "w") as f:
    json.dump(data, f, indent=1, default=str)


def kept(path, figures):
  """``figures``, or when this run has none (None) the ``campaign`` key of the
  results JSON at ``path`` (a run of the other workloads keeps it)."""
  if figures is None and os.path.exists(path):
    with open(path) as f:
      return json.load(f).get("campaign")
  return figures
