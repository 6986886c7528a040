"""Performance figures for fedfrac: the single source of speed numbers.

  python scripts/bench.py                      # all workloads, writes benchmarks/results.md
  python scripts/bench.py --workloads=cnn_mnist_fedavg --repeats=5

Each workload builds a Simulation exactly as ``ff.run`` does, compiles it ahead of
time (compile seconds reported separately) and times whole compiled rounds
(median of ``--repeats`` chunks after one warm-up chunk).
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import jax
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fedfrac import data as data_lib  # noqa: E402
from fedfrac import experiment  # noqa: E402
from fedfrac.config import base_config  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass
class Workload:
  name: str
  description: str
  make: callable          # () -> (config, FederatedData)
  rounds_per_chunk: int = 1


def synthetic_images(num_clients, per_client, shape=(28, 28, 1), classes=10, seed=0,
                     sizes=None):
  """Random images with learnable labels, split into equal (or given) client sizes."""
  rng = np.random.default_rng(seed)
  sizes = np.full(num_clients, per_client) if sizes is None else np.asarray(sizes)
  n = int(sizes.sum())
  y = rng.integers(0, classes, n).astype(np.int32)
  x = rng.random((n,) + shape, dtype=np.float32) * 0.5
  x[np.arange(n), y % shape[0], :, 0] += 1.0   # a label-dependent stripe
  ds = data_lib.Dataset("synthetic_images", x, y, x[:1000], y[:1000], classes)
  bounds = np.concatenate([[0], np.cumsum(sizes)])
  parts = [np.arange(bounds[k], bounds[k + 1]) for k in range(num_clients)]
  test_parts = data_lib.split_iid(len(ds.y_test), num_clients, seed)
  return data_lib.federate(ds, parts, test_parts)


def cnn_mnist_fedavg(num_clients=10, participation=1.0):
  def make():
    c = base_config()
    c.rounds = 100
    c.participation = participation
    c.model.name = "cnn_mnist"
    c.client.update(dict(optimizer="sgd", lr=0.01, batch_size=50, local_epochs=1))
    c.methods.fedavg = dict(name="fedavg")
    return c, synthetic_images(num_clients, 600)
  return make


WORKLOADS = {
    "cnn_mnist_fedavg": Workload(
        "cnn_mnist_fedavg", "CNNMnist FedAvg, 10 clients x 600 synthetic 28x28, B=50, E=1",
        cnn_mnist_fedavg()),
}


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
  return {
      "cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
      "jax": jax.__version__, "backend": jax.default_backend(), "devices": devices,
      "date": datetime.date.today().isoformat(),
  }


def bench_workload(w: Workload, repeats: int, parallelism=None):
  config, fed = w.make()
  if parallelism:
    config.engine.client_parallelism = parallelism
  sim = experiment.build_simulation(config, "fedavg" if "fedavg" in config.methods
                                    else list(config.methods.keys())[0], fed)
  state = sim.init(0)
  compile_s = sim.compile(w.rounds_per_chunk, state)
  state, m = sim.run_chunk(state, w.rounds_per_chunk)   # warm-up
  jax.block_until_ready(state)
  times = []
  steps = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    state, m = sim.run_chunk(state, w.rounds_per_chunk)
    jax.block_until_ready(state)
    times.append(time.perf_counter() - t0)
    steps.append(float(np.sum(m["client_steps"])))
  per_round = statistics.median(times) / w.rounds_per_chunk
  client_steps = statistics.median(steps) / w.rounds_per_chunk
  scanned = sim.cohort * sim.training.max_steps
  return {
      "workload": w.name, "description": w.description,
      "parallelism": sim.parallelism, "unroll": sim.training.unroll,
      "compile_s": compile_s, "round_s": per_round, "rounds_per_s": 1.0 / per_round,
      "client_steps_per_s": client_steps / per_round,
      "samples_per_s": client_steps * sim.training.batch_size / per_round,
      "masked_step_fraction": 1.0 - client_steps / scanned,
      "repeats": repeats,
  }


def write_markdown(results, machine, command, path):
  lines = ["# fedfrac benchmarks", "",
           f"Command: `{command}`", "",
           "Machine: " + ", ".join(f"{k}={v}" for k, v in machine.items()), "",
           "| workload | parallelism | unroll | compile s | round s | rounds/s | "
           "client-steps/s | samples/s | masked steps |",
           "|---|---|---|---|---|---|---|---|---|"]
  for r in results:
    lines.append(
        f"| {r['description']} | {r['parallelism']} | {r['unroll']} | "
        f"{r['compile_s']:.2f} | {r['round_s']:.3f} | {r['rounds_per_s']:.2f} | "
        f"{r['client_steps_per_s']:.0f} | {r['samples_per_s']:.0f} | "
        f"{r['masked_step_fraction']:.1%} |")
  lines.append("")
  with open(path, "w") as f:
    f.write("\n".join(lines))


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--workloads", default=",".join(WORKLOADS))
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--parallelism", default=None, help="vmap | map (default: engine auto)")
  parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results.md"))
  args = parser.parse_args()
  names = [n for n in args.workloads.split(",") if n]
  for n in names:
    if n not in WORKLOADS:
      parser.error(f"--workloads: unknown {n!r}; known: {', '.join(WORKLOADS)}")
  machine = machine_description()
  results = []
  for n in names:
    r = bench_workload(WORKLOADS[n], args.repeats, args.parallelism)
    print(json.dumps(r))
    results.append(r)
  os.makedirs(os.path.dirname(args.out), exist_ok=True)
  command = "python scripts/bench.py " + " ".join(sys.argv[1:])
  write_markdown(results, machine, command.strip(), args.out)
  print(f"wrote {args.out}")


if __name__ == "__main__":
  main()
