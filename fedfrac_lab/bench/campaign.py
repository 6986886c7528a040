"""The CPU campaign's own workloads in ``fedfrac-bench --vs-torch``, measured per
CPU-second against PyTorch in the same process:

  firma_fmnist    FIRMA FibFL on Fashion-MNIST-sized data: the 784-input FIRMA MLP,
                  N = 10 clients x 6,000, B = 64, persistent Adam lr 0.01, E_h = 1
                  head epoch + E_e extractor epochs per round (E_e = 20 in the paper;
                  ``--epochs`` sets it), then the Fibonacci ring mixing
  cnn_mnist_real  FOFedAvg's MNIST CNN run (configs/fofedavg/mnist_cnn.py):
                  CNNMnist on 28x28x1, 10 clients x 6,000, C = 0.2, SGD lr 0.01,
                  B = 50, E = 20 (``--epochs`` sets it)
  kuramoto_cnn    Kuramoto-FedAvg's CNN (configs/kuramoto/mnist.py: ``cnn4``, SAME
                  padding) on 28x28x1, a cohort of 2 clients x 6,000, SGD momentum
                  0.9 lr 0.01, B = 64, E = 2 (``--epochs`` sets it); FedAvg rounds
                  (Kuramoto-FedAvg's clients train exactly so)

Inputs are synthetic (uniform random pixels; labels 0-9): the figures are timings,
not accuracies. fedfrac runs each workload through its own engine with the
campaign's config (``fedfrac_lab.reproduce.firma_program.config_module`` for FIRMA, the
config files for the CNNs) with only the data, the number of clients and the local
epochs replaced. PyTorch (``benchmarks/torch_reference.py``): the sequential loop of
the papers' code on 1 thread (``torch.set_num_threads(1)``) and, for FIRMA, the
batched ``torch.func`` form (``functional_call`` + ``vmap`` over the clients), also
on 1 thread.

Every timed call is wrapped in :func:`cpu_seconds` (user + system CPU seconds of
the whole process) and ``time.perf_counter()``; the sides alternate (fedfrac, then each
PyTorch form) so all see the same machine load. FLOPs are counted from the layer
shapes (:func:`chain_flops`): matrix products and convolutions only, forward and
the backward products each phase needs; LayerNorm, activations, pooling, the loss
and the optimizer are left out.
"""
from __future__ import annotations

import dataclasses
import os
import resource
import statistics
import time

import jax
import numpy as np

from fedfrac import runner
from fedfrac_lab.bench import torch_side
from fedfrac_lab.bench.workloads import load_config_module, only_method, synthetic_images


@dataclasses.dataclass(frozen=True)
class CampaignWorkload:
  """One campaign workload: ``clients`` of ``per_client`` samples, ``epochs`` the
  real protocol's local epochs (FIRMA: E_e), ``batch_size``, ``participation``;
  ``description`` is formatted with the sizes run."""
  name: str
  description: str
  clients: int
  per_client: int
  epochs: int
  batch_size: int
  participation: float = 1.0


WORKLOADS = {
    "firma_fmnist": CampaignWorkload(
        "firma_fmnist", "FIRMA FibFL, 784-input MLP, N={clients} x {per_client:,}, B=64, "
        "Adam",
        10, 6000, 20, 64),
    "cnn_mnist_real": CampaignWorkload(
        "cnn_mnist_real", "FOFedAvg CNNMnist 28x28, {clients} clients x {per_client:,}, "
        "C=0.2, B=50, SGD",
        10, 6000, 20, 50, 0.2),
    "kuramoto_cnn": CampaignWorkload(
        "kuramoto_cnn", "Kuramoto CNN4 28x28, {clients} clients x {per_client:,}, B=64, "
        "SGD momentum", 2, 6000, 2, 64),
}

# Multiply-adds per sample of each layer, input to output.
FIRMA_MACS = (784 * 256, 256 * 256, 256 * 128, 128 * 10)        # extractor | head
CNN_MNIST_MACS = (24 * 24 * 25 * 1 * 10, 8 * 8 * 25 * 10 * 20, 320 * 50, 50 * 10)
CNN4_MACS = (28 * 28 * 25 * 1 * 32, 14 * 14 * 25 * 32 * 64, 3136 * 512, 512 * 10)


def chain_flops(macs, trained) -> float:
  """FLOPs per sample of one training step of a chain of layers.

  ``macs[l]``: multiply-adds per sample of layer ``l`` (input to output);
  ``trained[l]``: whether layer ``l`` is trained. Forward 2·Σ macs; backward
  2·macs[l] for the weight gradient of each trained layer and 2·macs[l] for the
  input gradient of each layer with a trained layer below it (the first trained
  layer's input gradient is not needed).
  """
  first = min(i for i, t in enumerate(trained) if t)
  forward = 2 * sum(macs)
  weights = 2 * sum(m for m, t in zip(macs, trained) if t)
  inputs = 2 * sum(macs[first + 1:])
  return float(forward + weights + inputs)


def round_flops(name, cohort, per_client, epochs) -> float:
  """Matmul/conv FLOPs of one round of workload ``name``: every sample of every
  cohort client once per epoch (FIRMA: E_h = 1 head epoch, extractor frozen, then
  ``epochs`` extractor epochs, head frozen, then one forward pass over the client's
  train set for its train accuracy)."""
  samples = cohort * per_client
  if name == "firma_fmnist":
    head = chain_flops(FIRMA_MACS, (False, False, False, True))
    ext = chain_flops(FIRMA_MACS, (True, True, True, False))
    return samples * (head + epochs * ext + 2 * sum(FIRMA_MACS))
  macs = CNN_MNIST_MACS if name == "cnn_mnist_real" else CNN4_MACS
  return samples * epochs * chain_flops(macs, (True,) * len(macs))


def cpu_seconds() -> float:
  """User + system CPU seconds of this process, all threads (what ``os.times()``
  reports, read through ``getrusage`` for microseconds in place of clock ticks)."""
  r = resource.getrusage(resource.RUSAGE_SELF)
  return r.ru_utime + r.ru_stime


def timed(fn):
  """``(fn(), wall seconds, CPU seconds)`` of one call."""
  w0, c0 = time.perf_counter(), cpu_seconds()
  out = fn()
  return out, time.perf_counter() - w0, cpu_seconds() - c0


def fedfrac_config(w: CampaignWorkload, clients, epochs, parallelism="map"):
  """(config, method label) of the campaign run of ``w`` (FIRMA: its clients run
  with ``parallelism``, ``fedfrac-reproduce firma_files``' ``--parallelism``)."""
  if w.name == "firma_fmnist":
    from fedfrac_lab.reproduce import firma_program
    files = {"dataset": "fashion_mnist", "dir": "unused (synthetic data)", "rounds": 1,
             "inputs": "authors", "parallelism": parallelism}
    c = firma_program.config_module(files).firma_config("reference_code", "iid")
    c = only_method(c, "fibfl", c.methods["fibfl"])
    c.methods["fibfl"].extractor_epochs = int(epochs)
    label = "fibfl"
  else:
    path = "fofedavg/mnist_cnn.py" if w.name == "cnn_mnist_real" else "kuramoto/mnist.py"
    mod = load_config_module(path)
    c = mod.get_config("iid") if w.name == "cnn_mnist_real" else mod.get_config()
    c = only_method(c, "fedavg", c.methods["fedavg"])
    c.client.local_epochs = int(epochs)
    label = "fedavg"
  c.data.num_clients = int(clients)
  c.participation = w.participation
  return c, label


SEEDS = 5   # seeds in one program in the campaign form of firma_fmnist


def seeds_round(sim, data, seeds, runs="vmap"):
  """A round function of ``seeds`` runs of ``sim`` in one compiled program
  (:func:`fedfrac_lab.reproduce.firma_program.make_program`, evaluation included;
  ``runs``: vmapped or mapped); returns the client-steps of all runs. Compiled
  and warmed up here."""
  from fedfrac_lab.reproduce import firma_program
  feds = [data] * seeds
  arrays = firma_program.stack_arrays(feds, sim.training)
  box = {"states": firma_program.stack_states(sim, list(range(seeds)), feds)}
  program = firma_program.make_program(sim, 1, runs).lower(arrays,
                                                           box["states"]).compile()

  def one_round():
    box["states"], (m, _) = program(arrays, box["states"])
    jax.block_until_ready(box["states"])
    return float(np.sum(jax.device_get(m["client_steps"])))
  one_round()                                        # warm-up
  return one_round


def torch_rounds(w: CampaignWorkload, clients, per_client, epochs, cohort):
  """``[(label, threads, round function)]``: the PyTorch forms of workload ``w``,
  all on 1 thread (per CPU-second the efficient setting; on a shared 2-core CPU
  2 threads were measured up to 50x slower per round from oversubscription); each
  round function returns the local steps it ran. Built here, no round run."""
  import torch
  tr = torch_side.reference_module()
  if w.name == "firma_fmnist":
    data = tr.random_clients(clients, per_client, (784,))
    seq = tr.FibFLSequential(data, 784, w.batch_size, 1, epochs)
    batched = tr.FibFLBatched(data, 784, w.batch_size, 1, epochs)
    return [("sequential", 1, seq), ("batched (torch.func)", 1, batched)]
  torch.manual_seed(0)
  model, data, make_opt, b = tr.campaign_cnn_workload(w.name, clients, per_client)
  gen = torch.Generator().manual_seed(1)
  return [("sequential", 1,
           lambda: tr.fedavg_round(model, data, make_opt, b, epochs, gen, cohort))]


def side_row(label, threads, walls, cpus, steps, flops, peak_per_core):
  """Figures of one side: medians of wall and CPU seconds per round, CPU-seconds
  per client-step, GFLOP/s (wall), GFLOP per CPU-second and its share of
  ``peak_per_core``."""
  wall, cpu = statistics.median(walls), statistics.median(cpus)
  per_cpu = flops / cpu / 1e9
  return {"side": label, "threads": threads, "round_s": wall, "cpu_s": cpu,
          "round_times": list(walls), "cpu_times": list(cpus), "client_steps": steps,
          "cpu_s_per_step": cpu / steps, "gflops": flops / wall / 1e9,
          "gflop_per_cpu_s": per_cpu,
          "peak_share": per_cpu / peak_per_core if peak_per_core else float("nan")}


def bench_campaign(name, repeats=3, vs_torch=True, epochs=None, clients=None,
                   per_client=None, peak_per_core=None, firma_forms=("seeds", "vmap")):
  """One campaign workload timed on fedfrac and (``vs_torch``) PyTorch, interleaved.

  ``epochs`` (default the real protocol's), ``clients`` and ``per_client`` (default
  the workload's) size it. Returns the row of ``benchmarks/results.md``'s campaign
  section: the workload, its sizes, and one entry of :func:`side_row` per side, with
  ``ratio_per_cpu_s`` = that side's CPU-seconds per client-step / fedfrac's.
  """
  w = WORKLOADS[name]
  epochs = w.epochs if epochs is None else int(epochs)
  clients = w.clients if clients is None else int(clients)
  per_client = w.per_client if per_client is None else int(per_client)
  data = synthetic_images(clients, per_client)
  config, label = fedfrac_config(w, clients, epochs)
  sim = runner.build_simulation(config, label, data)
  state = sim.init(0)
  compile_s = sim.compile(1, state)
  cohort = sim.cohort

  def fedfrac_round():
    nonlocal state
    state, m = sim.run_chunk(state, 1)
    jax.block_until_ready(state)
    return float(np.sum(jax.device_get(m)["client_steps"]))
  fedfrac_round()                                   # warm-up
  threads = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
             else os.cpu_count() or 1)      # the cores XLA:CPU may use
  sides = [(f"fedfrac, 1 seed, clients {sim.parallelism}", threads, fedfrac_round, 1)]
  if w.name == "firma_fmnist":   # firma_forms: which of these two to time
    # The campaign's CPU form: the seeds of a cell one after another in one
    # program (clients mapped), as fedfrac-reproduce firma_files runs them; the
    # seeds vmapped, its form before; and the clients vmapped, the one before that.
    if "seeds" in firma_forms:
      sides.append((f"fedfrac, {SEEDS} seeds mapped, clients map", threads,
                    seeds_round(sim, data, SEEDS, "map"), SEEDS))
      sides.append((f"fedfrac, {SEEDS} seeds vmapped, clients map", threads,
                    seeds_round(sim, data, SEEDS), SEEDS))
    if "vmap" in firma_forms:
      config_v, _ = fedfrac_config(w, clients, epochs, parallelism="vmap")
      sides.append(("fedfrac, 1 seed, clients vmap", threads,
                    seeds_round(runner.build_simulation(config_v, label, data), data,
                                1), 1))
  if vs_torch:
    import torch
    for side in torch_rounds(w, clients, per_client, epochs,
                             None if cohort >= clients else cohort):
      torch.set_num_threads(side[1])
      side[2]()                                     # warm-up
      sides.append(side + (1,))
  walls, cpus, steps = ([[] for _ in sides] for _ in range(3))
  for _ in range(repeats):
    for i, (label_i, threads, fn, _) in enumerate(sides):
      if not label_i.startswith("fedfrac"):
        torch.set_num_threads(threads)
      s, wall, cpu = timed(fn)
      walls[i].append(wall)
      cpus[i].append(cpu)
      steps[i].append(s)
  flops = round_flops(name, cohort, per_client, epochs)
  rows = [side_row(lbl, threads, walls[i], cpus[i], statistics.median(steps[i]),
                   flops * runs, peak_per_core)
          for i, (lbl, threads, _, runs) in enumerate(sides)]
  torch_seq = [r for r in rows if r["side"] == "sequential"]
  for r in rows:
    r["ratio_per_cpu_s"] = r["cpu_s_per_step"] / rows[0]["cpu_s_per_step"]
    if torch_seq and r["side"].startswith("fedfrac"):
      r["torch_sequential_over_this"] = torch_seq[0]["cpu_s_per_step"] / r["cpu_s_per_step"]
  return {"workload": name,
          "description": w.description.format(clients=clients, per_client=per_client),
          "clients": clients,
          "cohort": cohort, "per_client": per_client, "epochs": epochs,
          "real_epochs": w.epochs, "batch_size": w.batch_size,
          "round_gflop": flops / 1e9, "compile_s": compile_s,
          "parallelism": sim.parallelism, "repeats": repeats, "sides": rows}
