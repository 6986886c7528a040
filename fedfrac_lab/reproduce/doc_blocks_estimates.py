"""Generated compute figures of REPRODUCTION.md's "est. time" cells for the runs
not made yet on the papers' data: FOFedAvg Tables II–V on MNIST and
Kuramoto-FedAvg Table 1 on MNIST / Fashion-MNIST. See :mod:`fedfrac_lab.reproduce.docs`.

Each block counts the workload of the command its row gives from the config file
that command runs: clients a round ⌈C·K⌉, local steps E·⌈n_k / B⌉ with n_k the
training set over K clients (its mean where a Dirichlet split makes sizes vary),
rounds, methods (or the grid's runs) and seeds. It prices that workload only at
rates measured on the same model: one core's CPU seconds per client-step of the
same protocol (``benchmarks/results.json``, the campaign workloads of
``fedfrac-bench --vs-torch``), and on a GPU the client-steps per second measured
there for that model (``benchmarks/results_h200.json``), named with the cohort it
was measured at. A model no GPU window has measured gets no GPU figure. FLOPs per
step come from the layer shapes (:func:`fedfrac_lab.bench.campaign.chain_flops`).
"""
from __future__ import annotations

import functools
import math
import os
from typing import NamedTuple

from fedfrac_lab.reproduce import common
from fedfrac_lab.reproduce.doc_blocks import R
from fedfrac_lab.reproduce.doc_registry import block

CPU_JSON = "benchmarks/results.json"
GPU_JSON = "benchmarks/results_h200.json"
FOFEDAVG = "configs/fofedavg/mnist_cnn.py"
KURAMOTO = "configs/kuramoto/mnist.py"
TRAIN = 60_000            # MNIST's and Fashion-MNIST's training images
TABLE_V_ROUNDS = 250      # the Table V command's --set=rounds=250, for every K


class Workload(NamedTuple):
  """Client-steps of a command: per round (each client count), rounds, runs,
  seeds, and how they were counted."""
  steps: int
  how: str


def _config(spec):
  """The config of ``spec`` (a path under the checkout, with its ``:arg``)."""
  from fedfrac import config_files
  return config_files.load_config_file(os.path.join(common.CHECKOUT_DIR, spec))


def _module(path):
  from fedfrac import config_files
  return config_files.load_module(os.path.join(common.CHECKOUT_DIR, path), path)


def round_steps(c, clients=None):
  """(client-steps a round, its text) of config ``c`` at ``clients`` clients."""
  k = clients or c.data.num_clients
  cohort = max(math.ceil(c.participation * k), 1)
  n_k = TRAIN / k
  batches = math.ceil(n_k / c.client.batch_size)
  mean = "" if c.data.partition in ("iid", "shards") else " on average"
  steps = cohort * c.client.local_epochs * batches
  return steps, (f"{steps:,} a round at K = {k} ({cohort} clients × "
                 f"{c.client.local_epochs} local epochs × {batches} batches of "
                 f"{c.client.batch_size}, {n_k:,.0f} images a client{mean})")


def workload(spec, runs=None, what="methods", clients=None, rounds=None) -> Workload:
  """The client-steps of running config ``spec`` (``runs`` runs a seed, default
  its methods), over ``clients`` (client counts, default the config's)."""
  c = _config(spec)
  runs = runs or len(c.methods)
  rounds = rounds or c.rounds
  seeds = len(c.seeds)
  per = [round_steps(c, k) for k in (clients or (None,))]
  total = sum(s for s, _ in per) * rounds * runs * seeds
  each = " plus ".join(t for _, t in per)
  return Workload(total, f"client-steps: {each}; × {rounds} rounds × {runs} {what} × "
                         f"{seeds} seeds of `{spec}` = {total:,}")


@functools.lru_cache(maxsize=None)
def cpu_rates():
  """{campaign workload: (CPU s per client-step of fedfrac's 1-seed run, its
  description, GFLOP per step)} from benchmarks/results.json."""
  raw = common.load_results_json(CPU_JSON)
  out = {}
  for r in raw["campaign"]["results"]:
    side = next(s for s in r["sides"] if s["side"].startswith("fedfrac, 1 seed"))
    out[r["workload"]] = (side["cpu_s_per_step"], r["description"],
                          r["round_gflop"] / side["client_steps"])
  return out


@functools.lru_cache(maxsize=None)
def gpu_rates():
  """{workload: (client-steps/s, description, cohort)} measured on the GPU of
  benchmarks/results_h200.json (its vs-PyTorch rows)."""
  raw = common.load_results_json(GPU_JSON)
  rows = raw["accelerator"]["vs_torch"]["result"]["rows"]
  return {r["workload"]: (r["client_steps_per_s"], r["description"], r["cohort"])
          for r in rows}


def _hours(seconds):
  return f"{seconds / 3600:,.1f} h" if seconds >= 3600 else f"{seconds / 60:,.0f} min"


def priced(w: Workload, cpu_workload, gpu_workload=None, cohort=None):
  """"N client-steps (how); one CPU core: …; GPU: …" for workload ``w``."""
  per_step, description, gflop = cpu_rates()[cpu_workload]
  text = (f"{w.how}, {gflop:.3g} GFLOP each; one CPU core at "
          f"its measured {1000 * per_step:.1f} ms a client-step ({description}, "
          f"`{CPU_JSON}`): ≈ {_hours(w.steps * per_step)}")
  if gpu_workload is None:
    return (text + "; GPU: no rate of this model measured on a GPU yet, so no GPU "
            "figure")
  rate, gdesc, gcohort = gpu_rates()[gpu_workload]
  narrower = (f"; this run's cohort of {cohort} was not measured" if cohort and
              cohort != gcohort else "")
  return (text + f"; on the H200 at the rate measured for {gdesc} ({rate:,.0f} "
          f"client-steps/s, `{GPU_JSON}`{narrower}): ≈ {_hours(w.steps / rate)}")


def _cohort(spec, clients=None):
  c = _config(spec)
  return max(math.ceil(c.participation * (clients or c.data.num_clients)), 1)


def measured(scenario):
  """("measured on the CPU (…): FedAvg 18 min 20 s, …", cells still to run) of
  FOFedAvg's MNIST ``scenario`` (text "" while none has finished)."""
  from fedfrac_lab.reproduce import fofedavg_mnist
  done = fofedavg_mnist.finished_times(scenario)
  left = len(fofedavg_mnist.pending_names(scenario))
  if not done:
    return "", left
  seeds = len(next(iter(fofedavg_mnist.load(scenario)["cells"].values()))["seeds"])
  each = ", ".join(f"{name} {fofedavg_mnist.cpu_time(s)}" for name, s in done)
  return (f"measured on the {fofedavg_mnist.DEVICE}, a cell of {seeds} seeds on one core "
          f"at nice 19, from its start to its end (`{fofedavg_mnist.MD}`): {each}"), left


def _measured_then_estimate(spec, scenario, what, tail=""):
  text, left = measured(scenario)
  if not left:
    return text
  estimate = priced(workload(spec, runs=left, what=what), "cnn_mnist_real", "cnn10",
                    _cohort(spec)) + tail
  if not text:
    return "estimate: " + estimate
  return f"{text}; estimate for the {left} {what} not run yet: {estimate}"


@block("fofedavg_t2_time", R, CPU_JSON, GPU_JSON, FOFEDAVG, "results/fofedavg_mnist_iid.json",
       inline=True)
def fofedavg_t2_time():
  return _measured_then_estimate(f"{FOFEDAVG}:iid", "iid", "methods",
                                 "; FedAvg's step: MOON, SCAFFOLD and DP-SGD do more per "
                                 "step")


@block("fofedavg_t4_time", R, CPU_JSON, GPU_JSON, FOFEDAVG,
       "results/fofedavg_mnist_alpha.json", inline=True)
def fofedavg_t4_time():
  return _measured_then_estimate(f"{FOFEDAVG}:alpha", "alpha", "α values")


@block("fofedavg_t5_time", R, CPU_JSON, GPU_JSON, FOFEDAVG, inline=True)
def fofedavg_t5_time():
  clients = _module(FOFEDAVG).SEVERE_CLIENTS
  spec = f"{FOFEDAVG}:severe"
  w = workload(spec, clients=clients, rounds=TABLE_V_ROUNDS)
  return ("estimate: " + priced(w, "cnn_mnist_real", "cnn1000", _cohort(spec, max(clients)))
          + "; FedAvg's step: MOON, SCAFFOLD and DP-SGD do more per step")


@block("kuramoto_t1_time", R, CPU_JSON, GPU_JSON, KURAMOTO, inline=True)
def kuramoto_t1_time():
  from fedfrac_lab.reproduce import kuramoto_tables
  runs = (len(kuramoto_tables.BASELINE_LABELS)
          + len(kuramoto_tables.WEIGHTINGS) * len(kuramoto_tables.KAPPAS))
  w = workload(f"{KURAMOTO}:K=10,s=3", runs=runs,
               what=f"runs (FedAvg, SCAFFOLD and the {len(kuramoto_tables.WEIGHTINGS)} "
                    f"weightings at the {len(kuramoto_tables.KAPPAS)} κ0 of Table 1)")
  ratio = cpu_rates()["kuramoto_cnn"][2] / cpu_rates()["cnn_mnist_real"][2]
  return (f"estimate per data set: {priced(w, 'kuramoto_cnn')}; a CNN4 step is "
          f"{ratio:.0f}× the FLOPs of a CNNMnist step, so CNNMnist's GPU rate does not "
          f"carry over")


# ------------------------------------------------------------------ FIRMA, real data

class FirmaRun(NamedTuple):
  """The inputs of a FIRMA real-data command's GPU estimate: samples per client
  (the training set over N = 10), its seeds and the client-steps a second the
  estimate assumes (a stated rate, not a measurement of this model)."""
  samples: int
  seeds: int
  rate: int


# Table -> the command REPRODUCTION.md gives for it: CIFAR-10 (50,000 / 10),
# Fashion-MNIST and MNIST-60k (60,000 / 10), with that command's --seeds.
FIRMA_RUNS = {"t56": FirmaRun(5_000, 5, 20_000), "t78": FirmaRun(6_000, 3, 45_000),
              "t910": FirmaRun(6_000, 3, 45_000)}
FIRMA_SHAPE = dict(clients=10, batch=64, epochs=20, rounds=30, scenarios=7, methods=6,
                   modes=2)


def firma_gpu_estimate(run: FirmaRun, clients=10, batch=64, epochs=20, rounds=30,
                       scenarios=7, methods=6, modes=2):
  """(client-steps a round, seconds) of a FIRMA real-data command: every client
  takes E_e = ``epochs`` passes of ⌈samples / batch⌉ Adam steps a round, over
  ``rounds`` × ``scenarios`` × ``methods`` × ``modes`` × the run's seeds, at its
  stated rate."""
  per_round = clients * math.ceil(run.samples / batch) * epochs
  total = per_round * rounds * scenarios * methods * modes * run.seeds
  return per_round, total / run.rate


def firma_gpu_text(key):
  """"≈ 53 min (18,800 client-steps/round × 30 × 7 × 6 × 2 × 3 seeds at an
  assumed 45,000/s)": :func:`firma_gpu_estimate` with its inputs."""
  run = FIRMA_RUNS[key]
  s = FIRMA_SHAPE
  per_round, seconds = firma_gpu_estimate(run, **s)
  return (f"≈ {_hours(seconds)} ({per_round:,} client-steps/round = {s['clients']} × "
          f"⌈{run.samples:,}/{s['batch']}⌉ × E_e {s['epochs']}; × {s['rounds']} rounds × "
          f"{s['scenarios']} scenarios × {s['methods']} methods × {s['modes']} modes × "
          f"{run.seeds} seeds, at an assumed {run.rate:,}/s)")


FIRMA_NAMES = {"t56": "Tables 5–6 (CIFAR-10)", "t78": "Tables 7–8 (Fashion-MNIST)",
               "t910": "Tables 9–10 (MNIST-60k)"}


def _short(key):
  seconds = firma_gpu_estimate(FIRMA_RUNS[key], **FIRMA_SHAPE)[1]
  return f"≈ {_hours(seconds)} (estimate, inputs below)"


@block("firma_t56_gpu", R, inline=True)
def firma_t56_gpu():
  return _short("t56")


@block("firma_t78_gpu", R, inline=True)
def firma_t78_gpu():
  return _short("t78")


@block("firma_t910_gpu", R, inline=True)
def firma_t910_gpu():
  return _short("t910")


@block("firma_gpu_inputs", R)
def firma_gpu_inputs():
  return ("**GPU estimates of FIRMA's tables on real data** (one GPU, every scenario, "
          "method and mode of the command; the rate is assumed, not measured for this "
          "model):\n\n" + "\n".join(f"- {FIRMA_NAMES[k]}: {firma_gpu_text(k)}"
                                     for k in FIRMA_RUNS))
