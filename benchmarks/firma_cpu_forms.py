"""Time one round of FIRMA FibFL on the real Fashion-MNIST per client-step, in one
form of running its clients and seeds (docs/design.md §2.5).

  python benchmarks/firma_cpu_forms.py --seeds=5 --epochs=2 --parallelism=map \
      --runs=map --dir=/usr/share/datasets/fashion-mnist
  taskset -c 0 python benchmarks/firma_cpu_forms.py ...        # one core

``reference_code``, IID, N = 10, E_h = 1 and E_e = ``--epochs`` (the protocol's
20 takes 10x longer): builds the config ``fedfrac-reproduce firma_files`` runs,
compiles ``firma_program.make_program`` (evaluation included) and times its
second call; prints wall and CPU ms per client-step and the mean client accuracy.
"""
import argparse
import os
import time
import warnings

import jax
import numpy as np

from fedfrac import runner
from fedfrac_lab.reproduce import firma


def main():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--seeds", type=int, default=1)
  p.add_argument("--epochs", type=int, default=2)
  p.add_argument("--parallelism", default="map", choices=("map", "vmap"),
                 help="the clients of a run")
  p.add_argument("--runs", default="vmap", choices=("map", "vmap"),
                 help="the seeds (runs) of the program")
  p.add_argument("--dir", default="/usr/share/datasets/fashion-mnist")
  a = p.parse_args()
  files = {"dataset": "fashion_mnist", "dir": a.dir, "rounds": 1, "inputs": "authors",
           "parallelism": a.parallelism}
  module = firma.config_module(files)
  make = module.firma_config

  def firma_config(mode, scenario):
    c = make(mode, scenario)
    c.methods.fibfl.extractor_epochs = a.epochs
    return c
  module.firma_config = firma_config
  seeds = tuple(range(a.seeds))
  warnings.simplefilter("ignore")
  feds = firma.common_shapes({"reference_code": firma.build_feds(
      module, "reference_code", ["iid"], seeds)})["reference_code"]
  cfg, fs = feds["iid"]
  sim = runner.build_simulation(cfg, "fibfl", fs[0])
  arrays = firma.stack_arrays(fs, sim.training)
  states = firma.stack_states(sim, list(seeds), fs)
  t0 = time.perf_counter()
  program = firma.make_program(sim, 1, a.runs).lower(arrays, states).compile()
  compile_s = time.perf_counter() - t0
  jax.block_until_ready(program(arrays, states))
  c0, t0 = os.times(), time.perf_counter()
  out = program(arrays, states)
  jax.block_until_ready(out)
  wall, c1 = time.perf_counter() - t0, os.times()
  cpu = (c1.user - c0.user) + (c1.system - c0.system)
  steps = float(np.sum(np.asarray(out[1][0]["client_steps"])))
  acc = np.asarray(out[1][1]["client_accuracy_mean"]).ravel()
  print(f"seeds={a.seeds} ({a.runs}) E_e={a.epochs} clients {a.parallelism}: "
        f"compile {compile_s:.1f} s, "
        f"round {wall:.2f} s wall / {cpu:.2f} s CPU, {steps:.0f} client-steps: "
        f"{1e3 * wall / steps:.3f} ms wall, {1e3 * cpu / steps:.3f} ms CPU per step; "
        f"accuracy {np.round(acc, 4).tolist()}")


if __name__ == "__main__":
  main()
