"""FIRMA runs of several scenarios, seeds and methods in shared compiled programs.

A *group* is every run of one compiled program: runs with the same number of
clients N of one method, or of methods whose programs coincide
(:data:`SHARED_PROGRAMS`: FibFL and FibFL+ differ only in the mixing matrix, so
FibFL+'s program runs both, each run with its own traced ``gate``). Index tables
are padded to common widths (:func:`fedfrac_lab.reproduce.firma_program.common_shapes`),
so the scenarios of one N are runs of the same program. A group runs as one or
more *batches* of equal size, vmapped (one after another inside the program when
the clients are mapped, the CPU form), one compilation for all of them:

* ``batch_runs`` given: batches of that many runs (the last one filled up by
  repeating its last run), sorted by their largest client, as
  :func:`run_method` always did;
* otherwise :func:`plan_batches`: as many runs per batch as the device's memory
  allows (:func:`run_bytes`, the sweep runner's bytes model), split further only
  when a measured step-time curve (``step_time``) says that smaller batches of
  runs with similar step counts cost less than one batch in which every run
  waits for the largest client of all.

The numbers are those of the runs one at a time, to float rounding
(``tests/reproduce/test_firma_groups.py``).
"""
from __future__ import annotations

import dataclasses
import math
import time

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac import runner
from fedfrac.sim.communication import tree_bytes
from fedfrac_lab.reproduce.firma_program import (cpu_seconds, make_program, stack_arrays,
                                             stack_states, summarize_runs)

# method -> (the method whose simulation runs it, its traced options): methods
# with the same first entry share one compiled program.
SHARED_PROGRAMS = {"fibfl": ("fibfl_plus", {"gate": 0.0}),
                   "fibfl_plus": ("fibfl_plus", {"gate": 1.0})}
# Share of the device memory the runs of one batch may fill (the rest: XLA's
# temporaries beyond the bytes model, the evaluation, fragmentation).
MEMORY_FRACTION = 0.5


@dataclasses.dataclass(frozen=True)
class Run:
  """One (method, scenario, seed) run; ``index`` is the seed's position."""
  method: str
  scenario: str
  index: int
  seed: int
  fed: object

  @property
  def largest_client(self) -> int:
    return int(self.fed.client_size.max())


def program_of(method: str, share: bool) -> tuple:
  """``(method whose simulation is built, traced options or None)``."""
  if share and method in SHARED_PROGRAMS:
    built, options = SHARED_PROGRAMS[method]
    return built, dict(options)
  return method, None


def run_bytes(sim, fed, state) -> int:
  """Device bytes one run adds to a batch, the sweep runner's model
  (``fedfrac.sweep.run_bytes``) for FIRMA: its own index tables (the images are
  shared by every run of the batch), 4 copies of its state (input, output and the
  round's temporaries) and, per client, 4 copies of the model's parameters (its
  local step's gradients, updates and activations)."""
  index = sum(np.asarray(getattr(fed, k)).nbytes for k in
              ("client_index", "client_size", "client_test_index", "client_test_size"))
  model = jax.eval_shape(sim.model.init, jax.random.PRNGKey(0))
  return int(index + 4 * tree_bytes(state) + 4 * sim.num_clients * tree_bytes(model))


def device_memory_bytes() -> int:
  """The first device's memory limit (``memory_stats``), else the host's memory."""
  from fedfrac.runner.local_devices import worker_memory_bytes
  return worker_memory_bytes(1)


def plan_batches(largest, limit, step_time=None):
  """Batches (lists of positions into ``largest``) of equal size for one group.

  ``largest[i]``: run i's largest client (its step count per epoch is
  proportional); ``limit``: most runs one batch may hold (memory). Runs are
  sorted by ``largest`` and cut into k contiguous batches of ``ceil(n / k)``
  runs (one shape, one compilation; the last batch filled up by repeating its
  last run). k is the smallest count within ``limit`` unless ``step_time``
  (``lanes -> seconds of one local step`` with ``lanes`` = runs × clients, from
  a measurement on this device) says more batches of more similar runs cost
  less: cost(k) = Σ_batches (largest client of the batch) × step_time(batch
  size), the local steps of a batch being those of its largest client."""
  n = len(largest)
  order = sorted(range(n), key=lambda i: largest[i])
  k_min = max(1, math.ceil(n / max(1, limit)))
  best, best_cost = k_min, None
  for k in range(k_min, n + 1 if step_time is not None else k_min + 1):
    size = math.ceil(n / k)
    cost = 0.0
    if step_time is not None:
      for b in range(k):
        part = order[b * size:(b + 1) * size]
        if part:
          cost += max(largest[i] for i in part) * step_time(size)
    if best_cost is None or cost < best_cost - 1e-12:
      best, best_cost = k, cost
  size = math.ceil(n / best)
  batches = [order[b * size:(b + 1) * size] for b in range(best)]
  return [b + [b[-1]] * (size - len(b)) for b in batches if b]


def fixed_batches(runs, scenarios, batch_runs):
  """Batches of ``batch_runs`` runs sorted by (largest client, scenario, seed),
  the last filled up by repeating its last run (:func:`run_method`'s form)."""
  order = sorted(range(len(runs)), key=lambda i: (runs[i].largest_client,
                                                  scenarios.index(runs[i].scenario),
                                                  runs[i].index))
  batches = [order[s:s + batch_runs] for s in range(0, len(order), batch_runs)]
  return [b + [b[-1]] * (batch_runs - len(b)) for b in batches]


def _groups(feds, methods, scenarios, seeds, share, skip):
  groups = {}
  for method in methods:
    built, _ = program_of(method, share)
    for scen in scenarios:
      if (scen, method) in skip:
        continue
      for i, (seed, fed) in enumerate(zip(seeds, feds[scen][1])):
        groups.setdefault((built, fed.num_clients), []).append(
            Run(method, scen, i, seed, fed))
  return groups


def run_group(feds, mode, methods, scenarios, seeds, log, batch_runs=None,
              memory_bytes=None, step_time=None, share=True, skip=(), on_cells=None,
              compile_only=False, before_compile=None, after_compile=None):
  """Every (scenario, seed) run of ``methods`` in ``mode`` but the (scenario,
  method) cells in ``skip``, in as few compiled programs as the methods allow.

  ``feds``: {scenario: (config, [fed per seed])} padded to common shapes.
  ``batch_runs``: fixed batch size (else :func:`plan_batches` from
  ``memory_bytes``, default the device's, and ``step_time``). ``on_cells(results,
  programs)`` is called after each program with every cell finished so far and
  the programs run so far (as ``timing["programs"]``).
  ``compile_only``: compile each program (into the persistent cache, when one
  is on) and run nothing; ``before_compile(name)`` and ``after_compile(name)``
  are called around each compilation with the program's name (its mode,
  methods, N and batch shape), e.g. to wait for another process compiling it
  (:mod:`fedfrac_lab.campaign.precompile`). Returns ``(results, timing)``:
  ``results[(scenario, method)] = {"runs": [per seed], "num_clients"}``;
  ``timing`` has wall/CPU/compile seconds and ``programs``: per compiled
  program its methods, N, scenarios, runs, batches and seconds."""
  t_wall, t_cpu = time.perf_counter(), cpu_seconds()
  results, programs = {}, []
  compile_s = compile_cpu = 0.0
  for (built, n), runs in _groups(feds, methods, scenarios, seeds, share, skip).items():
    first = runs[0]
    cfg0 = feds[first.scenario][0]
    options = [program_of(r.method, share)[1] for r in runs]
    traced = options[0] is not None
    sim = runner.build_simulation(cfg0, built, first.fed, traced_options=traced)
    rounds = cfg0.rounds
    runs_form = "map" if cfg0.engine.client_parallelism == "map" else "vmap"
    if batch_runs:
      batches = fixed_batches(runs, scenarios, batch_runs)
    else:
      state0 = sim.init(first.seed, first.fed)
      limit = max(1, int(MEMORY_FRACTION * (memory_bytes or device_memory_bytes())
                         // max(1, run_bytes(sim, first.fed, state0))))
      batches = plan_batches([r.largest_client for r in runs], limit,
                             None if step_time is None else
                             (lambda size: step_time(size * n)))
    program, compiled = make_program(sim, rounds, runs_form, options=traced), None
    per_run, run_s, t_prog = {}, 0.0, time.perf_counter()
    for batch in batches:
      chosen = [runs[i] for i in batch]
      fs = [r.fed for r in chosen]
      args = [stack_arrays(fs, sim.training),
              stack_states(sim, [r.seed for r in chosen], fs)]
      if traced:
        args.append({k: jnp.asarray([options[i][k] for i in batch], jnp.float32)
                     for k in options[0]})
      if compiled is None:
        name = (f"{mode}:{'+'.join(dict.fromkeys(r.method for r in runs))}:N={n}:"
                f"{len(batches)}x{len(batch)}")
        if before_compile is not None:
          before_compile(name)
        t0, c0 = time.perf_counter(), cpu_seconds()
        compiled = program.lower(*args).compile()
        dt = time.perf_counter() - t0
        if after_compile is not None:
          after_compile(name)
        compile_s, compile_cpu = compile_s + dt, compile_cpu + cpu_seconds() - c0
        programs.append({"name": name, "compile_s": dt})
        log(f"  [{mode}] {'+'.join(dict.fromkeys(r.method for r in runs))} N={n}: "
            f"compiled in {dt:.1f}s")
        if compile_only:
          break
      t0 = time.perf_counter()
      out_states, (round_metrics, evaluation) = compiled(*args)
      jax.block_until_ready(evaluation)
      run_s += time.perf_counter() - t0
      round_metrics = jax.tree.map(np.asarray, jax.device_get(round_metrics))
      evaluation = jax.tree.map(np.asarray, jax.device_get(
          {k: v for k, v in evaluation.items() if not k.startswith("clients/")}))
      for r, summary in zip(chosen, summarize_runs(sim, built, out_states, round_metrics,
                                                   evaluation, rounds, n)):
        per_run[(r.method, r.scenario, r.index)] = summary
    if compile_only:
      continue
    cells = list(dict.fromkeys((r.scenario, r.method) for r in runs))
    for scen, method in cells:
      cell = [per_run[(method, scen, i)] for i in range(len(seeds))]
      results[(scen, method)] = {"runs": cell, "num_clients": n}
      acc = [r["accuracy"] for r in cell]
      log(f"  [{mode}] {method:10s} {scen:6s} acc {np.mean(acc):.4f} ± "
          f"{np.std(acc, ddof=1) if len(acc) > 1 else 0.0:.4f}")
    size = len(batches[0])
    programs[-1].update({
        "methods": list(dict.fromkeys(r.method for r in runs)), "num_clients": n,
        "scenarios": list(dict.fromkeys(c[0] for c in cells)), "runs": len(runs),
        "batches": len(batches), "batch_runs": size,
        "padding_runs": len(batches) * size - len(runs), "run_s": run_s,
        "wall_s": time.perf_counter() - t_prog})
    log(f"  [{mode}] {'+'.join(programs[-1]['methods'])} N={n}: {len(runs)} runs in "
        f"{len(batches)} batch{'es' if len(batches) > 1 else ''} of {size}, {run_s:.1f}s")
    if on_cells is not None:
      on_cells(dict(results), [dict(p) for p in programs])
  timing = {"wall_s": time.perf_counter() - t_wall, "cpu_s": cpu_seconds() - t_cpu,
            "compile_s": compile_s, "compile_cpu_s": compile_cpu,
            "compiles": len(programs), "programs": programs}
  return results, timing


def run_method(feds, mode, method, scenarios, seeds, log, batch_runs=5):
  """Every (scenario, seed) run of ``method``: :func:`run_group` of one method in
  batches of ``batch_runs`` (vmapped; one after another when the clients are
  mapped, the CPU form). Returns ``(results, timing)``."""
  return run_group(feds, mode, [method], scenarios, seeds, log, batch_runs=batch_runs,
                   share=False)
