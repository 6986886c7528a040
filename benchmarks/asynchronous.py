"""Simulated clients per second: FedBuff against synchronous FedAvg on the same
cohort and model, alternated in one process (same-run ratio), and the memory of
the model versions FedBuff keeps.

  PYTHONPATH=. python benchmarks/asynchronous.py [--clients 20] [--cohort 10]
      [--steps 20] [--repeats 3]

Both runs: digits, an MLP (hidden 64), ``--clients`` clients, E = 1 local epoch,
batch 32. FedAvg samples ``--cohort`` clients a round; FedBuff keeps M =
``--cohort`` clients in flight and applies K = ``--cohort`` / 2 updates a server
step (log-normal speeds, spread 0.5), so both train the same number of clients
per scan step only when K = the cohort: the figure is clients trained per
second of wall time, counted from each step's cohort.
"""
from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from fedfrac import algorithms, data as data_lib, models, runner
from fedfrac import sim as sim_lib
from fedfrac.algorithms import contract, tasks
from fedfrac.config_base import base_config
from fedfrac.sim import clock as clock_lib


def build(fed, clock, participation):
  c = base_config()
  c.model.hidden = (64,)
  c.client.batch_size = 32
  task = tasks.classification_task()
  model = models.build(c.model, fed.input_shape, fed.num_classes, fed.input_scale)
  training = runner.make_training(c.client, fed.client_size, 100, 0)
  ctx = contract.BuildContext(model, task, training, fed.info(), 100, c.client)
  algorithm = algorithms.make("fedavg", ctx)
  cfg = sim_lib.EngineConfig(participation=participation, clock=clock)
  return sim_lib.Simulation(algorithm, fed, model, task, training, cfg)


def timed(sim, steps):
  state = sim.init(0)
  sim.compile(steps, state)
  t0 = time.perf_counter()
  state, metrics = sim.run_chunk(state, steps)
  jax.block_until_ready(state)
  return time.perf_counter() - t0, float(np.sum(metrics["cohort"]))


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--clients", type=int, default=20)
  p.add_argument("--cohort", type=int, default=10)
  p.add_argument("--buffer", type=int, default=0, help="K (0: cohort / 2)")
  p.add_argument("--steps", type=int, default=20)
  p.add_argument("--repeats", type=int, default=3)
  a = p.parse_args()
  ds = data_lib.sklearn_digits()
  parts = data_lib.split_iid(len(ds.y_train), a.clients, 0)
  tests = data_lib.split_iid(len(ds.y_test), a.clients, 0)
  fed = data_lib.federate(ds, parts, tests)
  k = a.buffer or max(a.cohort // 2, 1)
  server = algorithms.async_server("fedbuff", {"buffer_size": k, "concurrency": a.cohort,
                                               "max_staleness": 40}, "fedavg")
  clock = clock_lib.ClockConfig(speed="lognormal", speed_spread=0.5, server="fedbuff",
                                options=server)
  sync = build(fed, None, a.cohort / a.clients)
  buff = build(fed, clock, a.cohort / a.clients)
  rates = {"fedavg": [], "fedbuff": []}
  for _ in range(a.repeats):          # alternate, same process
    for name, sim in (("fedavg", sync), ("fedbuff", buff)):
      seconds, clients = timed(sim, a.steps)
      rates[name].append(clients / seconds)
  payload, _ = buff.communication_bytes(buff.init(0))
  best = {n: float(np.median(v)) for n, v in rates.items()}
  print(f"clients {a.clients}, cohort / concurrency M {a.cohort}, buffer K {k}, "
        f"{a.steps} steps, {a.repeats} alternations, {jax.devices()[0].platform}")
  for n, v in rates.items():
    print(f"  {n:8s} simulated clients/s: median {best[n]:.0f} "
          f"(all: {', '.join(f'{x:.0f}' for x in v)})")
  ratios = [b / f for b, f in zip(rates["fedbuff"], rates["fedavg"])]
  print(f"  fedbuff / fedavg, per alternation: median {np.median(ratios):.2f} "
        f"(all: {', '.join(f'{r:.2f}' for r in ratios)})")
  print(f"  kept model versions: {server.max_staleness + 1} x {payload} B = "
        f"{server.ring_bytes(payload) / 2**20:.2f} MiB")


if __name__ == "__main__":
  main()
