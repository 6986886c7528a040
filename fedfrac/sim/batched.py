"""Several independent runs of one :class:`Simulation` vmapped into one program."""
from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac.ops import lockstep
from fedfrac.sim import asynchronous
from fedfrac.sim.simulation import Simulation
from fedfrac.sim.state import STATE_AXES, SimState, data_arrays


def _pad_to(a, shape):
  """Pad ``a`` up to ``shape`` by repeating its last entries (index tables stay valid)."""
  pad = [(0, t - n) for n, t in zip(a.shape, shape)]
  if not any(p[1] for p in pad):
    return a
  return np.pad(a, pad, mode="edge")


class BatchedSimulation:
  """R independent runs of one :class:`Simulation`, vmapped into one program.

  Runs may differ in seed (initial model and sampling stream), in their data
  (per-seed partitions: index tables are padded to common shapes; arrays equal
  across runs are shared, not copied) and in hyper-parameters (a dict of
  scalars per run, passed to the simulation's ``algorithm_fn``). Results equal
  separate runs.

  All runs advance in lockstep, so the round counter ``SimState.round`` is one
  unbatched scalar shared by every run: a ``lax.cond`` on the round inside an
  algorithm (e.g. FibFL++'s warm-up) stays a branch instead of becoming a
  select that executes both sides for every run.
  """

  def __init__(self, sim: Simulation, run_data, run_hps=None):
    if not sim.placement.batchable:
      raise ValueError("engine.shard_client_state=True: batched runs (several seeds "
                       "or options vmapped into one program) keep their client state "
                       "replicated; allowed value here is False")
    self.sim = sim
    self.run_data = list(run_data)
    self.num_runs = len(run_data)
    per_run = [data_arrays(d, sim.training) for d in run_data]
    for d in run_data:
      if d.num_clients != sim.num_clients:
        raise ValueError(
            f"batched runs need equal client counts; got {d.num_clients} and "
            f"{sim.num_clients} (a partition dropped clients for some seed)")
    self.arrays, self.in_axes = {}, {}
    for key in per_run[0]:
      values = [a[key] for a in per_run]
      if all(v is values[0] or (v.shape == values[0].shape and np.array_equal(v, values[0]))
             for v in values[1:]):
        self.arrays[key], self.in_axes[key] = jnp.asarray(values[0]), None
      else:
        shape = tuple(np.max([v.shape for v in values], axis=0))
        if key in ("x", "y", "x_test", "y_test") and len({v.shape for v in values}) > 1:
          raise ValueError(f"batched runs need equal {key} shapes across runs")
        self.arrays[key] = jnp.asarray(np.stack([_pad_to(v, shape) for v in values]))
        self.in_axes[key] = 0
    hps = run_hps if run_hps is not None else [None] * self.num_runs
    if any(hps):
      keys = sorted(hps[0])
      self.hp = {k: jnp.asarray([h[k] for h in hps], jnp.float32) for k in keys}
      hp_axes = {k: 0 for k in keys}
    else:
      self.hp, hp_axes = None, None
    in_axes = self.in_axes

    def chunk(arrays, states, hp, num_rounds):
      return lockstep.vmap(lambda a, st, h: sim._run_chunk(a, st, h, num_rounds), "runs",
                           in_axes=(in_axes, STATE_AXES, hp_axes),
                           out_axes=(STATE_AXES, 0))(arrays, states, hp)
    self._chunk = jax.jit(chunk, static_argnums=(3,))
    # Evaluation: each run's evaluated parameters, then their metrics in a
    # program shared with every simulation of the same structure in this process.
    self._eval_params = jax.jit(jax.vmap(sim._eval_params, in_axes=(STATE_AXES, hp_axes)))
    self._compiled = {}
    self._eval_compiled = None

  def init(self, seeds) -> SimState:
    """Stacked initial states, one per run (``seeds`` has one entry per run)."""
    if len(seeds) != self.num_runs:
      raise ValueError(f"seeds: need one seed per run ({self.num_runs}), got {len(seeds)}")
    states = [self.sim.init(s, d) for s, d in zip(seeds, self.run_data)]
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *[st._replace(round=None)
                                                        for st in states])
    return stacked._replace(round=states[0].round)

  def compile(self, num_rounds, states) -> float:
    """Compile the chunk of ``num_rounds`` rounds ahead of time; seconds spent."""
    num_rounds = int(num_rounds)
    if num_rounds in self._compiled:
      return 0.0
    t0 = time.perf_counter()
    self._compiled[num_rounds] = self._chunk.lower(
        self.arrays, states, self.hp, num_rounds).compile()
    return time.perf_counter() - t0

  def run_chunk(self, states, num_rounds):
    """``num_rounds`` rounds of every run: metrics gain a leading ``[R]`` axis."""
    if int(num_rounds) not in self._compiled:
      self.compile(num_rounds, states)
    states, metrics = self._compiled[int(num_rounds)](self.arrays, states, self.hp)
    if self.sim.async_plan is not None:   # a staleness bound the clock exceeded
      asynchronous.check_overrun(metrics, self.sim.async_plan.server)
    return states, metrics

  def compile_eval(self, states) -> float:
    """Compile ``evaluate`` ahead of time (so run timings exclude it); seconds."""
    if self._eval_compiled is not None:
      return 0.0
    t0 = time.perf_counter()
    params = self._eval_params(states, self.hp)
    self._eval_compiled = self.sim.shared_eval_program(self.arrays, params, (self.in_axes, 0))
    return time.perf_counter() - t0

  def evaluate(self, states):
    """Test metrics of every run: each gains a leading ``[R]`` axis."""
    self.compile_eval(states)
    return self._eval_compiled(self.arrays, self._eval_params(states, self.hp))
