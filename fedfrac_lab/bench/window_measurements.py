"""Stage-a measurements that size and explain a GPU window's work (each a
function of its sizes, so the same code runs on a CPU with tiny ones):

* :func:`peaks`: the device's matrix-product peaks measured in the window: float32
  at ``highest`` precision (the figure every utilisation share divides by), TF32
  and bfloat16 beside it;
* :func:`step_scaling`: seconds of one FIRMA local step (the 784-input MLP,
  Adam, B = 64) against the lanes run at once (runs × clients), with its FLOPs
  from layer shapes and its share of the float32 peak: where the step stops
  costing its latency; the batch planner of FIRMA columns reads this curve
  (:func:`fedfrac_lab.reproduce.firma_groups.plan_batches`);
* :func:`masked_steps`: FibFL on the real Fashion-MNIST at Dir 0.1 (unequal
  clients) and LS K=1, one round, in the forms a window can run them: each cell
  alone in one step bucket (every client runs the largest one's steps, masked),
  each alone with the clients sorted into step buckets, and both cells in one
  batch (the column form);
* :func:`papers_vs_torch`: fedfrac against sequential and batched PyTorch on the
  same device at the papers' sizes: Kuramoto-FedAvg's CNN4 (10 clients × 6,000,
  E = 2, B = 64), FOFedAvg's CNNMnist (its MNIST config) and CNNMnist with 1,000
  clients, with FLOPs from layer shapes and the share of the float32 peak.

The profile of a FIRMA and a CNN program is :mod:`fedfrac_lab.bench.profile_summary`.
"""
from __future__ import annotations

import math
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac import runner
from fedfrac_lab.bench import campaign, flops, torch_side, workloads


def device_name() -> str:
  d = jax.devices()[0]
  return "cpu" if d.platform == "cpu" else d.device_kind


def _best_time(fn, repeats):
  fn()
  best = math.inf
  for _ in range(repeats):
    t0 = time.perf_counter()
    fn()
    best = min(best, time.perf_counter() - t0)
  return best


PEAK_FORMS = (("float32_highest", jnp.float32, jax.lax.Precision.HIGHEST),
              ("tensorfloat32", jnp.float32, "tensorfloat32"),
              ("bfloat16", jnp.bfloat16, jax.lax.Precision.DEFAULT))


def peaks(n=8192, repeats=10):
  """Best-of-``repeats`` throughput of an ``n × n`` matrix product in each form
  of :data:`PEAK_FORMS`, TFLOP/s."""
  rows = []
  for name, dtype, precision in PEAK_FORMS:
    a = jax.random.normal(jax.random.PRNGKey(0), (n, n), jnp.float32).astype(dtype)
    b = jax.random.normal(jax.random.PRNGKey(1), (n, n), jnp.float32).astype(dtype)
    f = jax.jit(lambda a, b, p=precision: jnp.dot(a, b, precision=p,
                                                  preferred_element_type=jnp.float32))
    s = _best_time(lambda: f(a, b).block_until_ready(), repeats)
    rows.append({"name": name, "seconds": s, "tflops": 2 * n ** 3 / s / 1e12})
  return {"device": device_name(), "n": n, "repeats": repeats, "rows": rows}


def _firma_sim(clients, per_client, epochs, parallelism="vmap"):
  w = campaign.WORKLOADS["firma_fmnist"]
  data = workloads.synthetic_images(clients, per_client, shape=(28, 28, 1))
  config, label = campaign.fedfrac_config(w, clients, epochs, parallelism)
  return runner.build_simulation(config, label, data), data, config


def step_scaling(runs=(1, 6, 24, 72), clients=10, per_client=640, epochs=1, repeats=3):
  """Seconds of one FIRMA local step against the lanes run together."""
  sim, data, config = _firma_sim(clients, per_client, epochs)
  b = int(config.client.batch_size)
  # Products of one client's round (E_h = 1 head epoch, E_e extractor epochs, the
  # gate's forward pass) from layer shapes, and its local steps.
  client_flops = campaign.round_flops("firma_fmnist", 1, per_client, epochs)
  client_steps = (1 + epochs) * math.ceil(per_client / b)
  rows = []
  for r in runs:
    t0 = time.perf_counter()
    one_round = campaign.seeds_round(sim, data, r)
    compile_s = time.perf_counter() - t0
    times, steps = [], 0.0
    for _ in range(repeats):
      t1 = time.perf_counter()
      steps = one_round()
      times.append(time.perf_counter() - t1)
    lanes = r * clients
    round_s = statistics.median(times)
    step_s = round_s / (steps / lanes)
    tflops = client_flops * lanes / round_s / 1e12
    rows.append({"runs": r, "lanes": lanes, "round_s": round_s, "step_s": step_s,
                 "tflops": tflops, "compile_s": compile_s, "round_times": times})
  return {"device": device_name(), "clients": clients, "per_client": per_client,
          "epochs": epochs, "batch": b,
          "step_gflop_per_lane": client_flops / client_steps / 1e9, "rows": rows}


def masked_steps(data_dir, scenarios=("dir0.1", "ls1"), seeds=3, rounds_=1,
                 extractor_epochs=20, buckets=4, dataset="fashion_mnist"):
  """FibFL at ``scenarios`` on the real data, one round, in three forms (the
  forms' programs compile through a temporary compilation cache, so a program
  two cells share compiles once)."""
  with _temporary_compile_cache():
    return _masked_steps(data_dir, scenarios, seeds, rounds_, extractor_epochs, buckets,
                         dataset)


class _temporary_compile_cache:
  """JAX's persistent compilation cache in a temporary folder while inside,
  the settings before it afterwards (stage a times compilation elsewhere)."""

  def __enter__(self):
    import tempfile
    from jax.experimental.compilation_cache import compilation_cache
    self.before = {k: getattr(jax.config, k) for k in (
        "jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
        "jax_persistent_cache_min_entry_size_bytes")}
    self.dir = tempfile.TemporaryDirectory(prefix="fedfrac_masked_steps_")
    compilation_cache.reset_cache()
    jax.config.update("jax_compilation_cache_dir", self.dir.name)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return self

  def __exit__(self, *exc):
    from jax.experimental.compilation_cache import compilation_cache
    for k, v in self.before.items():
      jax.config.update(k, v)
    compilation_cache.reset_cache()
    self.dir.cleanup()


def _masked_steps(data_dir, scenarios, seeds, rounds_, extractor_epochs, buckets, dataset):
  import argparse
  import warnings
  from fedfrac_lab.reproduce import firma_files, firma_groups, firma_program
  out = {"device": device_name(), "scenarios": list(scenarios), "seeds": seeds,
         "rounds": rounds_, "extractor_epochs": extractor_epochs, "forms": []}
  quiet = lambda msg: None
  for form, step_buckets, together in (("one bucket, each alone", 1, False),
                                       (f"{buckets} step buckets, each alone", buckets,
                                        False),
                                       ("one bucket, both in one batch", 1, True)):
    args = argparse.Namespace(dataset=dataset, dir=data_dir, rounds=rounds_,
                              inputs="authors", parallelism="vmap",
                              step_buckets=step_buckets)
    module = firma_files.files_config_module(args)
    make = module.firma_config

    def config(mode, scen, make=make):
      c = make(mode, scen)
      c.methods.fibfl.extractor_epochs = extractor_epochs
      return c
    module.firma_config = config
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      feds = firma_program.common_shapes({"reference_code": firma_program.build_feds(
          module, "reference_code", list(scenarios), tuple(range(seeds)))})["reference_code"]
    groups = [list(scenarios)] if together else [[s] for s in scenarios]
    for scen in groups:
      t0 = time.perf_counter()
      res, timing = firma_groups.run_group(feds, "reference_code", ["fibfl"], scen,
                                           tuple(range(seeds)), quiet,
                                           batch_runs=seeds * len(scen), share=False)
      wall = time.perf_counter() - t0
      steps = [float(np.sum(feds[s][1][i].client_size)) for s in scen for i in range(seeds)]
      out["forms"].append({
          "form": form, "scenarios": scen, "run_s": timing["programs"][0]["run_s"],
          "compile_s": timing["compile_s"], "wall_s": wall,
          "largest_client": [int(max(f.client_size)) for s in scen for f in feds[s][1]],
          "samples": steps,
          "accuracy": {s: [r["accuracy"] for r in res[(s, "fibfl")]["runs"]]
                       for s in scen}})
  return out


PAPER_WORKLOADS = ("kuramoto_cnn4", "fofedavg_cnn", "cnn1000")


def _paper_workload(name, clients=None, per_client=None, epochs=None):
  """(fedfrac config, data, label, torch forms, description, per-step FLOPs note)."""
  if name == "cnn1000":
    return workloads.sized_workload("cnn1000", clients=clients, per_client=per_client)
  key = "kuramoto_cnn" if name == "kuramoto_cnn4" else "cnn_mnist_real"
  w = campaign.WORKLOADS[key]
  k = clients or (10 if name == "kuramoto_cnn4" else w.clients)
  n = per_client or w.per_client
  e = epochs or w.epochs
  config, label = campaign.fedfrac_config(w, k, e)
  config.participation = 1.0 if name == "kuramoto_cnn4" else w.participation
  config.engine.client_parallelism = "auto"

  def make():
    return config, workloads.synthetic_images(k, n), label
  desc = (f"Kuramoto CNN4 FedAvg, {k} clients x {n:,}, E={e}, B={w.batch_size}, SGD momentum"
          if name == "kuramoto_cnn4" else
          f"FOFedAvg CNNMnist FedAvg, {k} clients x {n:,}, C={w.participation}, E={e}, "
          f"B={w.batch_size}, SGD")
  return workloads.Workload(name, desc, make, torch=(key, k, {"per_client": n, "epochs": e}))


def _torch_forms(w, device):
  """The sequential and batched PyTorch rounds of a paper workload."""
  if w.name == "cnn1000":
    from fedfrac_lab.bench import timing
    return timing.torch_rounds_for(w, device)[:2]
  import torch
  tr = torch_side.reference_module()
  key, k, kw = w.torch
  torch.manual_seed(0)
  model, data, make_opt, b = tr.campaign_cnn_workload(key, k, kw["per_client"], 0, device)
  cohort = None if w.name == "kuramoto_cnn4" else max(1, math.ceil(
      campaign.WORKLOADS[key].participation * k))
  gen = torch.Generator().manual_seed(1)
  opt = ("sgd",) + tuple(tr.CAMPAIGN_CNNS[key][1][1:])
  batched = tr.BatchedFedAvg(model, data, opt, b, kw["epochs"], cohort)

  def timed(fn):
    def call():
      tr.synchronize(device)
      t0 = time.perf_counter()
      fn()
      tr.synchronize(device)
      return time.perf_counter() - t0
    fn()
    return call
  return [timed(lambda: tr.fedavg_round(model, data, make_opt, b, kw["epochs"], gen,
                                        cohort)),
          timed(lambda: batched(gen))]


def papers_vs_torch(workloads_=PAPER_WORKLOADS, repeats=3, sizes=None, peak_n=8192):
  """fedfrac vs sequential and batched PyTorch per paper workload, rounds
  interleaved; FLOPs from layer shapes (:func:`fedfrac_lab.bench.flops.step_flops`)
  and their share of the float32 peak measured here (``peak_n``: its size)."""
  from fedfrac_lab.bench import timing
  sizes = sizes or {}
  peak = peaks(peak_n, repeats=3)["rows"][0]["tflops"]
  have_torch = torch_side.torch_available()
  device = torch_side.torch_device() if have_torch else None
  rows = []
  for name in workloads_:
    w = _paper_workload(name, **sizes.get(name, {}))
    sim = timing.build(w)
    state = sim.init(0)
    forms = _torch_forms(w, device) if have_torch else []
    state, compile_s, times, torch_times, ms = timing.time_rounds(sim, state, repeats, forms)
    steps = statistics.median(float(np.sum(m["client_steps"])) for m in ms)
    round_s = statistics.median(times)
    step_flops = flops.step_flops(sim)
    row = {"workload": name, "description": w.description, "round_s": round_s,
           "round_times": times, "compile_s": compile_s, "client_steps": steps,
           "parallelism": sim.parallelism, "step_gflop": step_flops / 1e9,
           "tflops": step_flops * steps / round_s / 1e12}
    row["peak_share"] = row["tflops"] / peak
    for label, tt in zip(("torch_sequential", "torch_batched"), torch_times):
      row[f"{label}_round_s"] = statistics.median(tt)
      row[f"{label}_times"] = tt
      row[f"vs_{label}"] = statistics.median(tt) / round_s
    rows.append(row)
  return {"device": device_name(), "torch_device": device, "peak_tflops": peak,
          "rows": rows}


# ------------------------------------------------------------------ markdown


def peaks_md(r):
  return ([f"{r['n']}x{r['n']} matrix products, best of {r['repeats']}:", "",
           "| form | TFLOP/s |", "|---|---|"]
          + [f"| {x['name']} | {x['tflops']:.1f} |" for x in r["rows"]])


def step_scaling_md(r):
  lines = [f"FIRMA MLP local step (Adam, B = {r['batch']}, {r['clients']} clients x "
           f"{r['per_client']} synthetic rows per run, "
           f"{r['step_gflop_per_lane']:.3f} GFLOP per lane-step from layer shapes):", "",
           "| runs | lanes | s per local step | TFLOP/s | compile s |", "|---|---|---|---|---|"]
  return lines + [f"| {x['runs']} | {x['lanes']} | {x['step_s'] * 1e3:.3f} ms | "
                  f"{x['tflops']:.2f} | {x['compile_s']:.1f} |" for x in r["rows"]]


def masked_steps_md(r):
  lines = [f"FibFL, {r['seeds']} seeds, {r['rounds']} round, E_e = {r['extractor_epochs']}:",
           "", "| form | cells | run s | compile s | largest client |", "|---|---|---|---|---|"]
  return lines + [f"| {x['form']} | {', '.join(x['scenarios'])} | {x['run_s']:.2f} | "
                  f"{x['compile_s']:.1f} | {max(x['largest_client'])} |" for x in r["forms"]]


def papers_vs_torch_md(r):
  lines = [f"PyTorch device: {r['torch_device'] or 'not installed'}; float32 peak "
           f"(`highest`) measured beside it: {r['peak_tflops']:.2f} TFLOP/s.", "",
           "| workload | fedfrac round s | TFLOP/s | % of f32 peak | sequential PyTorch "
           "round s | fedfrac vs it | batched PyTorch round s | fedfrac vs it |",
           "|---|---|---|---|---|---|---|---|"]
  for x in r["rows"]:
    share = f"{100 * x['peak_share']:.0f}" if "peak_share" in x else ""
    seq = x.get("torch_sequential_round_s")
    bat = x.get("torch_batched_round_s")
    lines.append(f"| {x['description']} | {x['round_s']:.4f} | {x['tflops']:.2f} | {share} | "
                 + (f"{seq:.4f} | {x['vs_torch_sequential']:.2f}x | " if seq else "– | – | ")
                 + (f"{bat:.4f} | {x['vs_torch_batched']:.2f}x |" if bat else "– | – |"))
  return lines


def fibfl_pp_replay(data_dir, scenario="iid", seeds=3, rounds_=6, warmup_rounds=5,
                    dataset="fashion_mnist"):
  """FibFL++ `reference_code` (the authors' inputs) at ``scenario`` for the first
  ``rounds_`` rounds of a 30-round run (its warm-up of ``warmup_rounds`` pinned):
  the ``seeds`` runs vmapped in one program, as the window that saw 2 of 3 runs
  stay at chance ran them, and each run alone; per-round mean client accuracy
  and whether each run ended at chance (docs/design.md §3.3)."""
  import argparse
  import warnings
  from fedfrac_lab.reproduce import firma_files, firma_groups, firma_program
  args = argparse.Namespace(dataset=dataset, dir=data_dir, rounds=rounds_,
                            inputs="authors", parallelism="vmap", step_buckets=1)
  module = firma_files.files_config_module(args)
  make = module.firma_config

  def config(mode, scen):
    c = make(mode, scen)
    c.methods.fibfl_pp.warmup_rounds = int(warmup_rounds)
    return c
  module.firma_config = config
  run_seeds = tuple(range(seeds))
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    feds = firma_program.common_shapes({"reference_code": firma_program.build_feds(
        module, "reference_code", [scenario], run_seeds)})["reference_code"]
  out = {"device": device_name(), "scenario": scenario, "rounds": rounds_,
         "warmup_rounds": warmup_rounds, "forms": {}}
  quiet = lambda msg: None
  for form, batch in (("seeds vmapped", seeds), ("one at a time", 1)):
    res, _ = firma_groups.run_group(feds, "reference_code", ["fibfl_pp"], [scenario],
                                    run_seeds, quiet, batch_runs=batch, share=False)
    runs = res[(scenario, "fibfl_pp")]["runs"]
    out["forms"][form] = [{"seed": s, "curve": r["curve"],
                           "at_chance": bool(r.get("at_chance"))}
                          for s, r in zip(run_seeds, runs)]
  return out


def fibfl_pp_replay_md(r):
  lines = [f"FibFL++ `reference_code`, {r['scenario']}, the first {r['rounds']} rounds "
           f"of a 30-round run (warm-up W = {r['warmup_rounds']}): mean per-client "
           "accuracy per round.", "", "| form | seed | accuracy per round | at chance |",
           "|---|---|---|---|"]
  for form, runs in r["forms"].items():
    lines += [f"| {form} | {x['seed']} | {', '.join(f'{a:.3f}' for a in x['curve'])} | "
              f"{'yes' if x['at_chance'] else 'no'} |" for x in runs]
  return lines
