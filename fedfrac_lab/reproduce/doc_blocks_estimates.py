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

from fedfrac_lab.reproduce import common, item_files
from fedfrac_lab.reproduce.doc_blocks import FMNIST_JSONS, R
from fedfrac_lab.reproduce.doc_registry import block

CPU_JSON = "benchmarks/results.json"
GPU_JSON = "benchmarks/results_h200.json"
FOFEDAVG = "configs/fofedavg/mnist_cnn.py"
KURAMOTO = "configs/kuramoto/mnist.py"
TRAIN = 60_000            # MNIST's and Fashion-MNIST's training images


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


def priced_short(w: Workload, cpu_workload, gpu_workload=None):
  """"≈ 1.3 h on one CPU core, ≈ 2 min on the H200": :func:`priced`'s two figures
  alone, for a table cell (its inputs stand in the full text under the table)."""
  text = f"≈ {_hours(w.steps * cpu_rates()[cpu_workload][0])} on one CPU core"
  if gpu_workload is None:
    return text + ", no GPU figure"
  return text + f", ≈ {_hours(w.steps / gpu_rates()[gpu_workload][0])} on the H200"


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
          f"at nice 19, from its start to its end in its core's log, or its records' "
          f"seconds where a run of it stopped with its session (`{fofedavg_mnist.MD}` "
          f"says which): {each}"), left


def _measured_then_estimate(spec, scenario, what, tail=""):
  text, left = measured(scenario)
  if not left:
    return text
  estimate = priced(workload(spec, runs=left, what=what), "cnn_mnist_real", "cnn10",
                    _cohort(spec)) + tail
  if not text:
    return "estimate: " + estimate
  return f"{text}; estimate for the {left} {what} not run yet: {estimate}"


def _measured_then_estimate_short(spec, scenario, what):
  from fedfrac_lab.reproduce import fofedavg_mnist
  done = len(fofedavg_mnist.finished_times(scenario))
  _, left = measured(scenario)
  one = {"methods": "method", "α values": "α value"}.get(what, what)
  parts = [f"{done} {one if done == 1 else what} measured on the CPU"] if done else []
  if left:
    w = workload(spec, runs=left, what=what)
    parts.append(f"{'the ' + str(left) + ' left: ' if done else ''}"
                 f"{priced_short(w, 'cnn_mnist_real', 'cnn10')}")
  return "; ".join(parts) + f" ({TIMES})"


TIMES = "[inputs below](#fofedavg-tables-iiv)"


@block("fofedavg_t2_time_row", R, CPU_JSON, GPU_JSON, FOFEDAVG,
       "results/fofedavg_mnist_iid.json", inline=True)
def fofedavg_t2_time_row():
  return _measured_then_estimate_short(f"{FOFEDAVG}:iid", "iid", "methods")


@block("fofedavg_t4_time_row", R, CPU_JSON, GPU_JSON, FOFEDAVG,
       "results/fofedavg_mnist_alpha.json", inline=True)
def fofedavg_t4_time_row():
  return _measured_then_estimate_short(f"{FOFEDAVG}:alpha", "alpha", "α values")


@block("fofedavg_t2_time", R, CPU_JSON, GPU_JSON, FOFEDAVG, "results/fofedavg_mnist_iid.json")
def fofedavg_t2_time():
  return _measured_then_estimate(f"{FOFEDAVG}:iid", "iid", "methods",
                                 "; FedAvg's step: MOON, SCAFFOLD and DP-SGD do more per "
                                 "step")


@block("fofedavg_t4_time", R, CPU_JSON, GPU_JSON, FOFEDAVG,
       "results/fofedavg_mnist_alpha.json")
def fofedavg_t4_time():
  return _measured_then_estimate(f"{FOFEDAVG}:alpha", "alpha", "α values")


class TargetRuns(NamedTuple):
  """The runs of Tables V–VI at ``clients`` clients of one method (``label``), as
  the estimate prices them: ``rounds`` a run (each seed), ``cap`` the config's rounds
  (a run stops at 60 % or there: the bound), and how ``rounds`` was found."""
  clients: int
  label: str
  rounds: int
  cap: int
  how: str


def measured_rounds_to_target():
  """{method label: the mean over its seeds of the rounds to 60 % measured at K = 10
  (``results/fofedavg_mnist_severe_10.json``); None where a seed did not reach it}."""
  from fedfrac_lab.reproduce import fofedavg_mnist
  out = {}
  for label, cell in fofedavg_mnist.load("severe_10").get("cells", {}).items():
    values = fofedavg_mnist.seed_values(cell, "rounds_to_target")
    out[label] = None if None in values else sum(values) / len(values)
  return out


def target_runs():
  """[:class:`TargetRuns`] of every method and K of Tables V–VI not measured yet
  (the K = 10 cells of ``results/fofedavg_mnist_severe_10.json`` are measured). A
  run is priced at the rounds it would stop at: our K = 10 mean rounds to 60 %
  (a method not measured there: the mean of those measured) times the paper's own
  ratio for that method (Table V, its K column over its 10 column), rounded up to
  the config's evaluation period and capped at the config's rounds; a method whose
  K = 10 seed did not reach 60 % runs to the cap. Without any K = 10 measurement,
  every run is priced at the cap."""
  from fedfrac_lab.reproduce import fofedavg_mnist
  from fedfrac_lab.reproduce.published_ours import fofedavg_method_rows
  paper = common.published("fofedavg")["Table V"]
  rows = {label: row for row, label in fofedavg_method_rows().items()}
  measured = measured_rounds_to_target()
  reached = [r for r in measured.values() if r is not None]
  fallback = sum(reached) / len(reached) if reached else None
  out = []
  for k in _module(FOFEDAVG).SEVERE_CLIENTS:
    c = _config(f"{FOFEDAVG}:severe,{k}")
    for label in fofedavg_mnist.labels("severe_10"):
      if k == 10 and label in measured:
        continue
      if label in measured and measured[label] is None:
        out.append(TargetRuns(k, label, c.rounds, c.rounds, "did not reach 60 % at K = 10"))
        continue
      base = measured.get(label, fallback)
      if base is None:
        out.append(TargetRuns(k, label, c.rounds, c.rounds, "no K = 10 measurement"))
        continue
      ratio = paper[rows[label]][f"{k} Clients"] / paper[rows[label]]["10 Clients"]
      rounds = min(c.rounds, math.ceil(base * ratio / c.eval_every) * c.eval_every)
      out.append(TargetRuns(k, label, rounds, c.rounds, "assumed"))
  return out


def _target_prices(runs):
  """(client-steps priced, client-steps at the caps, seeds) of ``runs``."""
  seeds = len(_config(f"{FOFEDAVG}:severe").seeds)
  steps = {k: round_steps(_config(f"{FOFEDAVG}:severe,{k}"))[0]
           for k in {r.clients for r in runs}}
  priced_steps = sum(r.rounds * steps[r.clients] for r in runs) * seeds
  capped = sum(r.cap * steps[r.clients] for r in runs) * seeds
  return priced_steps, capped, seeds


def _cpu_gpu(steps):
  """(one CPU core's time, the H200's) of ``steps`` client-steps at the measured
  rates (``cnn_mnist_real`` on the CPU, ``cnn1000`` on the GPU)."""
  return (_hours(steps * cpu_rates()["cnn_mnist_real"][0]),
          _hours(steps / gpu_rates()["cnn1000"][0]))


@block("fofedavg_t5_time_row", R, CPU_JSON, GPU_JSON, FOFEDAVG,
       "results/fofedavg_mnist_severe_10.json", inline=True)
def fofedavg_t5_time_row():
  from fedfrac_lab.reproduce import fofedavg_mnist
  done = len(fofedavg_mnist.finished_times("severe_10"))
  runs = target_runs()
  steps, capped, _ = _target_prices(runs)
  cpu, gpu = _cpu_gpu(steps)
  cpu_cap, gpu_cap = _cpu_gpu(capped)
  return (f"K = 10: {done} measured (CPU); the rest, stopped at 60 % (rounds assumed): "
          f"≈ {cpu} on one core, ≈ {gpu} on the H200; at most ≈ {cpu_cap}, ≈ {gpu_cap} "
          f"({TIMES})")


@block("fofedavg_t5_time", R, CPU_JSON, GPU_JSON, FOFEDAVG,
       "results/fofedavg_mnist_severe_10.json")
def fofedavg_t5_time():
  from fedfrac_lab.reproduce import fofedavg_mnist
  from fedfrac_lab.reproduce.published_ours import fofedavg_method_rows
  text, _ = measured("severe_10")
  runs = target_runs()
  measured_r = measured_rounds_to_target()
  steps, capped, seeds = _target_prices(runs)
  cpu, gpu = _cpu_gpu(steps)
  cpu_cap, gpu_cap = _cpu_gpu(capped)
  per_step, description, gflop = cpu_rates()["cnn_mnist_real"]
  rate, gdesc, _ = gpu_rates()["cnn1000"]
  names = {label: row for row, label in fofedavg_method_rows().items()}
  caps = _module(FOFEDAVG).SEVERE_ROUNDS
  reached = [r for r in measured_r.values() if r is not None]
  k10 = ", ".join(f"{names.get(label, label)} "
                  + ("not reached" if r is None else f"{r:.1f}")
                  for label, r in measured_r.items())
  by_k = {}
  for r in runs:
    by_k.setdefault(r.clients, []).append(r)
  counts = "; ".join(
      f"K = {k}: {round_steps(_config(f'{FOFEDAVG}:severe,{k}'))[1]}, × "
      + " + ".join(f"{names.get(r.label, r.label)} {r.rounds}" for r in rs)
      + f" rounds (cap {rs[0].cap})" for k, rs in sorted(by_k.items()))
  cohorts = sorted({_cohort(f"{FOFEDAVG}:severe,{k}") for k in by_k})
  head = (f"K = 10 {text}" if text else "K = 10: no cell measured yet")
  if not runs:
    return head
  return (
      f"{head}. Rounds to 60 % measured at K = 10 (mean over the seeds, "
      f"`{fofedavg_mnist.SEVERE_JSON}`): {k10 or 'none yet'}. Estimate for the runs not "
      f"made, each stopped at 60 % (`--config.stop_at_target=True`): rounds to 60 % at "
      f"K = 100 and 1,000 are not measured; assumed: a method's K = 10 mean times the "
      f"paper's own ratio for it (Table V's K column over its 10 column), rounded up to "
      f"the config's evaluation period and capped at the config's rounds (there a run "
      f"stops whether or not it reached 60 %)"
      + (f"; a method not measured at K = 10 takes the mean of those measured "
         f"({sum(reached) / len(reached):.1f})"
         if reached and any(r.clients == 10 for r in runs) else "")
      + f". Client-steps: {counts}; × {seeds} seeds of `{FOFEDAVG}:severe,K` = "
      f"{steps:,}, {gflop:.3g} GFLOP each; one CPU core at its measured "
      f"{1000 * per_step:.1f} ms a client-step ({description}, `{CPU_JSON}`): ≈ {cpu}; "
      f"on the H200 at the rate measured for {gdesc} ({rate:,.0f} client-steps/s, "
      f"`{GPU_JSON}`; cohorts of {', '.join(map(str, cohorts))} not measured): ≈ {gpu}. "
      f"Bound: every one of these runs to its config's rounds ("
      f"{' / '.join(str(caps[k]) for k in sorted(by_k))} at K = "
      f"{' / '.join(f'{k:,}' for k in sorted(by_k))}) is {capped:,} client-steps: "
      f"≈ {cpu_cap} on one CPU core, ≈ {gpu_cap} on the H200; FedAvg's step: MOON, "
      f"SCAFFOLD and DP-SGD do more per step")


def _kuramoto_workload():
  from fedfrac_lab.reproduce import kuramoto_tables
  runs = (len(kuramoto_tables.BASELINE_LABELS)
          + len(kuramoto_tables.WEIGHTINGS) * len(kuramoto_tables.KAPPAS))
  return workload(f"{KURAMOTO}:K=10,s=3", runs=runs,
                  what=f"runs (FedAvg, SCAFFOLD and the {len(kuramoto_tables.WEIGHTINGS)} "
                       f"weightings at the {len(kuramoto_tables.KAPPAS)} κ0 of Table 1)")


@block("kuramoto_t1_time_row", R, CPU_JSON, KURAMOTO, inline=True)
def kuramoto_t1_time_row():
  return f"per data set {priced_short(_kuramoto_workload(), 'kuramoto_cnn')}"


@block("kuramoto_t1_time", R, CPU_JSON, GPU_JSON, KURAMOTO)
def kuramoto_t1_time():
  w = _kuramoto_workload()
  ratio = cpu_rates()["kuramoto_cnn"][2] / cpu_rates()["cnn_mnist_real"][2]
  return (f"estimate per data set: {priced(w, 'kuramoto_cnn')}; a CNN4 step is "
          f"{ratio:.0f}× the FLOPs of a CNNMnist step, so CNNMnist's GPU rate does not "
          f"carry over")


# ------------------------------------------------------------------ FIRMA

FIRMA_CONFIG = "configs/firma/digits.py"     # firma_methods: every data set's methods
FIRMA_CLIENTS = 10                           # N of configs/firma/<data set>.py
FIRMA_BATCH = 64
FIRMA_TRAIN = {"t56": 50_000, "t78": 60_000, "t910": 60_000}   # training images
FIRMA_NAMES = {"t56": "Tables 5–6 (CIFAR-10)", "t78": "Tables 7–8 (Fashion-MNIST)",
               "t910": "Tables 9–10 (MNIST-60k)"}
FIRMA_SCENARIOS, FIRMA_MODES, FIRMA_ROUNDS = 7, 2, 30
# The seeds of the command REPRODUCTION.md gives: CIFAR-10's fedfrac-sweep runs the
# config's 5, the Fashion-MNIST and MNIST-60k commands say --seeds=3.
FIRMA_SEEDS = {"t56": 5, "t78": 3, "t910": 3}


def firma_method_epochs():
  """{method: passes over its data a client makes a round} of FIRMA's six methods
  (``firma_methods`` of configs/firma/digits.py): ``client.local_epochs`` where a
  method sets it, else its head plus extractor epochs (FedRep, FibFL*)."""
  methods = _module(FIRMA_CONFIG).firma_methods("paper")
  out = {}
  for name, m in methods.items():
    epochs = m.get("client", {}).get("local_epochs")
    out[name] = int(epochs if epochs is not None else m.head_epochs + m.extractor_epochs)
  return out


def firma_cell_steps(train, method, rounds, seeds, clients=FIRMA_CLIENTS,
                     batch=FIRMA_BATCH):
  """Client-steps of one FIRMA cell (one method, scenario and mode): ``clients`` ×
  ⌈(train / clients) / batch⌉ batches × the method's epochs, a round, × ``rounds``
  × ``seeds`` (the nominal count: a non-IID split moves a few batches between
  clients)."""
  return clients * math.ceil(train / clients / batch) * firma_method_epochs()[method] * \
      rounds * seeds


class WindowRate(NamedTuple):
  """FIRMA Fashion-MNIST cells measured in GPU campaign windows: how many, on what
  device, their wall seconds (compile included) and client-steps, in sum."""
  cells: int
  device: str
  seconds: float
  steps: int

  @property
  def rate(self):
    """Client-steps a second over the measured cells."""
    return self.steps / self.seconds


def firma_window_files():
  """The campaign item files of FIRMA's Fashion-MNIST table (its GPU windows)."""
  return tuple(f for f in FMNIST_JSONS if f.startswith(item_files.CAMPAIGN + os.sep))


@functools.lru_cache(maxsize=None)
def firma_window_rate() -> WindowRate:
  """The client-steps/s of the Fashion-MNIST cells a GPU window measured: Σ client-steps
  (:func:`firma_cell_steps` of each run the item records: its method, its rounds)
  ÷ Σ the item's wall seconds, read from its ``campaign`` record."""
  cells, devices, seconds, steps = 0, set(), 0.0, 0
  for path in firma_window_files():
    item = common.load_results_json(path)
    cells += 1
    devices.add(item["campaign"]["device"])
    seconds += item["campaign"]["seconds"]
    for scenario in item["scenarios"].values():
      for by_cell in scenario["results"].values():
        for key, cell in by_cell.items():
          method = key.split("/")[1]
          steps += sum(firma_cell_steps(FIRMA_TRAIN["t78"], method, len(r["curve"]), 1)
                       for r in cell["runs"])
  return WindowRate(cells, " and ".join(sorted(devices)), seconds, steps)


def firma_command_steps(key):
  """(client-steps a round of the six methods together, client-steps of the whole
  command) of FIRMA's real-data command ``key``: every scenario, method and mode."""
  train = FIRMA_TRAIN[key]
  per_round = sum(firma_cell_steps(train, m, 1, 1) for m in firma_method_epochs())
  return per_round, per_round * FIRMA_ROUNDS * FIRMA_SCENARIOS * FIRMA_MODES * FIRMA_SEEDS[key]


def firma_gpu_seconds(key):
  """Seconds of FIRMA's command ``key`` on the GPU the windows measured: its client-
  steps ÷ the windows' client-steps/s; None for a data set whose model (input size)
  no window has measured (CIFAR-10's 3,072 inputs)."""
  if key == "t56":
    return None
  return firma_command_steps(key)[1] / firma_window_rate().rate


def firma_gpu_text(key):
  """The estimate of :func:`firma_gpu_seconds` with every input it uses: the
  command's client-steps (:func:`firma_command_steps`) and the measured rate."""
  same = next((k for k in FIRMA_NAMES if k < key and FIRMA_TRAIN[k] == FIRMA_TRAIN[key]
               and FIRMA_SEEDS[k] == FIRMA_SEEDS[key]), None)
  if same is not None and firma_gpu_seconds(key) is not None:
    return (f"≈ {_hours(firma_gpu_seconds(key))}: as {FIRMA_NAMES[same].split(' (')[0]}, "
            f"the same client-steps at the same rate")
  per_round, steps = firma_command_steps(key)
  epochs = firma_method_epochs()
  batches = math.ceil(FIRMA_TRAIN[key] / FIRMA_CLIENTS / FIRMA_BATCH)
  count = (f"{steps:,} client-steps = {FIRMA_CLIENTS} clients × ⌈{FIRMA_TRAIN[key]:,}/"
           f"{FIRMA_CLIENTS}/{FIRMA_BATCH}⌉ = {batches} batches × "
           f"{sum(epochs.values())} epochs over the six methods ("
           + ", ".join(f"{m} {e}" for m, e in epochs.items())
           + f"; `{FIRMA_CONFIG}`) = {per_round:,} a round, × {FIRMA_ROUNDS} rounds × "
           f"{FIRMA_SCENARIOS} scenarios × {FIRMA_MODES} modes × {FIRMA_SEEDS[key]} seeds")
  seconds = firma_gpu_seconds(key)
  if seconds is None:
    return (f"{count}; no GPU figure: no window has measured the MLP on "
            f"{FIRMA_NAMES[key].split('(')[1][:-1]}'s inputs")
  w = firma_window_rate()
  return (f"≈ {_hours(seconds)}: {count}, ÷ {w.rate:,.0f} client-steps/s, the rate of "
          f"the {w.cells} Fashion-MNIST cells measured on the {w.device} in campaign "
          f"windows ({w.steps:,} client-steps counted the same way in {w.seconds:,.0f} s "
          f"wall, compile included; `{item_files.CAMPAIGN}/firma_fashion_mnist/`)")


def _short(key):
  seconds = firma_gpu_seconds(key)
  if seconds is None:
    return "no GPU rate measured for this model (inputs below)"
  return f"≈ {_hours(seconds)} (estimate, inputs below)"


@block("firma_t56_gpu", R, FIRMA_CONFIG, inline=True)
def firma_t56_gpu():
  return _short("t56")


@block("firma_t78_gpu", R, FIRMA_CONFIG, *firma_window_files(), inline=True)
def firma_t78_gpu():
  return _short("t78")


@block("firma_t910_gpu", R, FIRMA_CONFIG, *firma_window_files(), inline=True)
def firma_t910_gpu():
  return _short("t910")


@block("firma_gpu_inputs", R, FIRMA_CONFIG, GPU_JSON, "results/firma_digits.json",
       *firma_window_files())
def firma_gpu_inputs():
  return ("**GPU estimates of FIRMA's tables** (one GPU, every scenario, method and mode "
          "of the command; the real-data tables priced at the client-steps a second the "
          "GPU windows measured on Fashion-MNIST, the same MLP and client size as "
          "MNIST-60k):\n\n- Tables 2 and 11–13 (MNIST-1797): " + firma_digits_gpu()[1]
          + "\n" + "\n".join(f"- {FIRMA_NAMES[k]}: {firma_gpu_text(k)}"
                             for k in FIRMA_NAMES))


@functools.lru_cache(maxsize=None)
def firma_digits_gpu():
  """(seconds, text with its inputs) of FIRMA's digits command on the GPU: its
  cells (every mode, scenario and method of ``results/firma_digits.json``) × the
  config's rounds × the round time measured on the GPU for FibFL++ (the most epochs
  a round) with the run's seeds vmapped, plus the run's compiles × the compile time
  measured there (``fibfl_seeds`` of ``benchmarks/results_h200.json``)."""
  from fedfrac_lab.reproduce.doc_blocks import FIRMA_JSON
  digits = common.load_results_json(FIRMA_JSON)
  cells = sum(len(digits[mode]) for mode in ("paper", "reference_code"))
  compiles = sum(t["compiles"] for t in digits["timings"].values())
  rounds = _module(FIRMA_CONFIG).firma_config().rounds
  m = common.load_results_json(GPU_JSON)["accelerator"]["fibfl_seeds"]["result"]
  seconds = cells * rounds * m["many_seeds_round_s"] + compiles * m["compile_many_s"]
  return seconds, (
      f"≈ {_hours(seconds)}: {cells} cells × {rounds} rounds × "
      f"{m['many_seeds_round_s']:.3f} s, the round of {m['workload'].split(') ', 1)[-1]} with "
      f"{m['seeds']} seeds vmapped on the {m['device']}, + {compiles} compiles "
      f"(`{FIRMA_JSON}`) × its {m['compile_many_s']:.1f} s compile (`{GPU_JSON}`)")


@block("firma_digits_gpu", R, FIRMA_CONFIG, GPU_JSON, "results/firma_digits.json",
       inline=True)
def firma_digits_gpu_block():
  return f"≈ {_hours(firma_digits_gpu()[0])} (estimate, inputs below the table)"
