"""``fedfrac-bench device_invariant``: the cost of ``engine.device_invariant`` as
a same-run ratio.

Both programs (the setting off and on) of one method on one workload are built
and compiled in one process, then timed alternately (``--pairs`` pairs of
``--rounds``-round chunks, the order swapped every pair), so that a machine whose
speed drifts (a shared CPU) slows both alike; reported: seconds per round of
each (median) and the median and quartiles of the per-pair ratios on / off.
The device count is JAX's: on a CPU start it with
``XLA_FLAGS=--xla_force_host_platform_device_count=N``. Default workload: the
quickstart's FedAvg on digits (10 clients, Dirichlet 0.5); ``--set=KEY=VALUE``
changes a config key (e.g. ``--set=data.partition=iid``).

  XLA_FLAGS=--xla_force_host_platform_device_count=2 fedfrac-bench device_invariant
"""
from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from fedfrac import config_files
from fedfrac.runner import factories
from fedfrac.runner.chunked import build_data
from fedfrac.sweep import grid


def same_run_ratio(config, label="fedavg", rounds=10, pairs=12) -> dict:
  """Seconds per round without / with ``engine.device_invariant`` on ``config``'s
  method ``label`` (seed 0), timed alternately; see the module docstring."""
  fed = build_data(config, 0)
  runs = {}
  for on in (False, True):
    config.engine.device_invariant = on
    sim = factories.build_simulation(config, label, fed)
    state = sim.init(0)
    sim.compile(rounds, state)
    runs[on] = (sim, state)
  times: dict = {False: [], True: []}
  for i in range(pairs):
    for on in ((False, True) if i % 2 == 0 else (True, False)):
      sim, state = runs[on]
      t0 = time.perf_counter()
      jax.block_until_ready(sim.run_chunk(state, rounds))
      times[on].append((time.perf_counter() - t0) / rounds)
  ratios = [b / a for a, b in zip(times[False], times[True])]
  return {"devices": jax.device_count(), "groups": runs[True][0].step_buckets,
          "off_s": float(np.median(times[False])), "on_s": float(np.median(times[True])),
          "ratio": float(np.median(ratios)),
          "quartiles": [float(q) for q in np.percentile(ratios, [25, 75])]}


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(prog="fedfrac-bench device_invariant",
                                   description=__doc__.split("\n\n")[0])
  parser.add_argument("--config", default="configs/quickstart.py")
  parser.add_argument("--method", default="fedavg")
  parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
  parser.add_argument("--rounds", type=int, default=10)
  parser.add_argument("--pairs", type=int, default=12)
  args = parser.parse_args(argv)
  config = config_files.load_config_file(args.config)
  for item in args.set:
    key, value = grid.parse_assignment(item, "--set")
    grid.set_key(config, key, value, "--set")
  r = same_run_ratio(config, args.method, args.rounds, args.pairs)
  print(f"{r['devices']} devices, {r['groups']} groups: {r['off_s']:.4f} s/round off, "
        f"{r['on_s']:.4f} on; ratio on/off {r['ratio']:.2f} "
        f"[{r['quartiles'][0]:.2f}, {r['quartiles'][1]:.2f}]")
  return 0
