"""Performance figures for fedfrac: the single source of speed and memory numbers.

  fedfrac-bench                      # every workload -> benchmarks/results.md
  fedfrac-bench --vs-torch           # + sequential PyTorch, same process
  fedfrac-bench --workloads=cnn10,firma --repeats=5
  fedfrac-bench --only-table         # workload table only (no extra studies)

Workloads (``--workloads``, comma-separated):

  cnn10        (1) CNNMnist FedAvg, 10 clients x 600 samples, B=50, E=1
  cnn100       (2) the same, 100 clients, C=0.1
  cnn1000      (2) the same, 1,000 clients, C=0.1
  firma_mlp    the FIRMA-sized MLP: FedAvg with Adam, 5 clients x 84 steps, B=64
  firma        (3) FIRMA digits FibFL++ (N=5, R=10; configs/firma/digits.py); the
               FIRMA-sized MLP until ``fibfl_pp`` is registered
  fori         (4) FO-RI-FedAvg with the roughness probe on (configs/bev/base.py);
               the FIRMA-sized MLP until ``fo_ri_fedavg`` is registered
  dirichlet    (5) Dirichlet alpha=0.1, very unequal client sizes (2NN MLP)

Each workload builds a Simulation exactly as ``ff.run`` does, compiles one round
ahead of time (compile seconds reported separately) and times whole compiled
rounds: the median of ``--repeats`` rounds after one warm-up round. With
``--vs-torch`` the PyTorch reference rounds (``benchmarks/torch_reference.py``:
sequential and batched, on CUDA when PyTorch sees a GPU;
:mod:`fedfrac.bench.torch_side`) are interleaved with the JAX rounds of
workloads (1), (2) at 1,000 clients and the FIRMA-sized MLP (A, B, A, B, ...),
so all see the same machine load.

Extra studies (skipped with ``--only-table``): masked work on (5) before and
after step bucketing, 5 seeds vmapped vs 1 seed on (3), and 1,000 CNNMnist
clients with persistent per-client state (bytes per client).

XLA flags must be set before JAX initialises: pass them in the environment,
e.g. ``XLA_FLAGS=--xla_force_host_platform_device_count=2 fedfrac-bench``;
the flags in effect are recorded in the results file.

The workloads, the studies and the report share their timing helpers, which is
why this module is about 770 lines.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import platform
import resource
import statistics
import sys
import time
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

import fedfrac as ff
from fedfrac import algorithms
from fedfrac import data as data_lib
from fedfrac import sim as sim_lib
from fedfrac import runner
from fedfrac.algorithms import contract, local_training, tasks, trees
from fedfrac.bench.torch_side import TorchRound
from fedfrac.reproduce import common

base_config = ff.base_config


# ------------------------------------------------------------------------- data


def synthetic_images(num_clients, per_client, pool=None, shape=(28, 28, 1), classes=10,
                     seed=0, parts=None):
  """MNIST-shaped uint8 images with learnable labels (a label-dependent stripe).

  Client k owns ``per_client`` consecutive rows of a pool of ``pool`` images
  (default ``num_clients * per_client``; a smaller pool is shared round-robin,
  as 1,000 clients x 600 would be 10x MNIST), or the given ``parts``.
  """
  rng = np.random.default_rng(seed)
  n = pool or num_clients * per_client
  y = rng.integers(0, classes, n).astype(np.int32)
  x = rng.integers(0, 128, (n,) + shape, dtype=np.uint8)
  x[np.arange(n), y % shape[0], :, 0] = 255
  ds = data_lib.Dataset("synthetic_images", x, y, x[:1000], y[:1000], classes,
                        input_scale=1 / 255)
  if parts is None:
    parts = [(np.arange(per_client) + k * per_client) % n for k in range(num_clients)]
  test_parts = data_lib.split_iid(len(ds.y_test), num_clients, seed)
  return data_lib.federate(ds, parts, test_parts)


def digits_clients(num_clients, per_client, seed=0):
  """sklearn digits, ``num_clients`` disjoint IID clients of ``per_client`` rows."""
  ds = data_lib.sklearn_digits()
  perm = np.random.default_rng(seed).permutation(len(ds.y_train))
  parts = [np.sort(perm[k * per_client:(k + 1) * per_client]) for k in range(num_clients)]
  test_parts = data_lib.split_iid(len(ds.y_test), num_clients, seed)
  return data_lib.federate(ds, parts, test_parts)


# -------------------------------------------------------------------- workloads


@dataclasses.dataclass
class Workload:
  name: str
  description: str
  make: Callable            # () -> (config, FederatedData, method label)
  # (torch_reference workload, clients[, TorchRound keywords: cohort, pool, ...])
  torch: Optional[tuple] = None
  note: str = ""


def cnn_config(participation=1.0):
  c = base_config()
  c.rounds = 100
  c.participation = participation
  c.model.name = "cnn_mnist"
  c.client.update(dict(optimizer="momentum", lr=0.01, momentum=0.5, batch_size=50,
                       local_epochs=1))
  c.methods = type(c.methods)({"fedavg": type(c.methods)(dict(name="fedavg"))})
  return c


def cnn_workload(num_clients, participation, pool=None):
  def make():
    return (cnn_config(participation), synthetic_images(num_clients, 600, pool=pool),
            "fedavg")
  return make


def firma_mlp_fedavg_config():
  """The FIRMA MLP with FedAvg + Adam (lr 0.01, B=64): 5 clients x 256 digits,
  21 local epochs = 84 steps per client and round (FIRMA's E_h + E_e = 1 + 20)."""
  c = base_config()
  c.rounds = 10
  c.model.name = "firma_mlp"
  c.client.update(dict(optimizer="adam", lr=0.01, batch_size=64, local_epochs=21))
  c.methods = type(c.methods)({"fedavg": type(c.methods)(dict(name="fedavg"))})
  return c


def load_config_module(relpath):
  """The config module ``configs/<relpath>`` (configs are loaded by path)."""
  return common.config_module(relpath)


def only_method(c, label, entry):
  c.methods = type(c.methods)({label: entry})
  c.only = ""
  return c


def firma_mlp_workload():
  return lambda: (firma_mlp_fedavg_config(), digits_clients(5, 256), "fedavg")


SUBSTITUTE = ("the FIRMA MLP with FedAvg + Adam (5 clients x 84 steps, B=64), the "
              "FIRMA-sized workload")


def firma_workload():
  """(3) FIRMA digits FibFL++ (N=5, R=10), paper settings (configs/firma/digits.py)."""
  if "fibfl_pp" in algorithms.REGISTRY:
    def make():
      mod = load_config_module("firma/digits.py")
      c = mod.firma_config("paper", "dir0.5", num_clients=5, rounds=10)
      c = only_method(c, "fibfl_pp", c.methods["fibfl_pp"])
      return c, data_lib.build(c.data, 0), "fibfl_pp"
    return make, ""
  return firma_mlp_workload(), (f"`fibfl_pp` is not registered in this build: "
                                f"substituted by {SUBSTITUTE}")


def fori_workload():
  """(4) FO-RI-FedAvg with the paper's roughness probe on every round, on the
  synthetic BEV fleet of configs/bev/base.py (10 vehicles, C=0.5)."""
  if "fo_ri_fedavg" in algorithms.REGISTRY:
    def make():
      mod = load_config_module("bev/base.py")
      c = mod.get_config()
      c = only_method(c, "fo_ri_fedavg", mod.method("fo_ri_fedavg", probe="on",
                                                    probe_every=1))
      return c, data_lib.build(c.data, 0), "fo_ri_fedavg"
    return make, ""
  return firma_mlp_workload(), (f"`fo_ri_fedavg` is not registered in this build: "
                                f"substituted by {SUBSTITUTE}")


def dirichlet_data(num_clients=100, pool=30000, alpha=0.1, seed=0):
  """Synthetic images split Dirichlet(alpha) over labels: very unequal sizes."""
  base_fed = synthetic_images(1, pool, seed=seed)
  parts = data_lib.partition(base_fed.y_train, num_clients, "dirichlet", seed,
                             alpha=alpha, min_size=1)
  return synthetic_images(num_clients, 0, pool=pool, seed=seed, parts=parts)


def dirichlet_workload():
  def make():
    c = base_config()
    c.rounds = 100
    c.participation = 0.2
    c.model.name = "mlp"
    c.model.hidden = (200, 200)
    c.client.update(dict(optimizer="sgd", lr=0.05, batch_size=50, local_epochs=1))
    c.methods = type(c.methods)({"fedavg": type(c.methods)(dict(name="fedavg"))})
    return c, dirichlet_data(), "fedavg"
  return make


def workloads():
  firma_make, firma_note = firma_workload()
  fori_make, fori_note = fori_workload()
  return {
      "cnn10": Workload("cnn10", "(1) CNNMnist FedAvg, 10 clients x 600, B=50, E=1",
                        cnn_workload(10, 1.0), torch=("cnn_mnist", 10)),
      "cnn100": Workload("cnn100", "(2) CNNMnist FedAvg, 100 clients x 600, C=0.1",
                         cnn_workload(100, 0.1)),
      "cnn1000": Workload("cnn1000", "(2) CNNMnist FedAvg, 1,000 clients x 600, C=0.1",
                          cnn_workload(1000, 0.1, pool=60000),
                          torch=("cnn_mnist", 1000, {"cohort": 100, "pool": 60000})),
      "firma_mlp": Workload("firma_mlp", "FIRMA-sized MLP: FedAvg+Adam, 5 clients x 84 "
                            "steps, B=64 (digits)", firma_mlp_workload(),
                            torch=("firma_mlp", 5)),
      "firma": Workload("firma", "(3) FIRMA digits FibFL++, N=5, E_h=1, E_e=20"
                        if not firma_note else "(3) substitute: FIRMA-sized MLP",
                        firma_make, note=firma_note),
      "fori": Workload("fori", "(4) FO-RI-FedAvg, roughness probe every round, BEV fleet "
                       "(10 vehicles, C=0.5)" if not fori_note
                       else "(4) substitute: FIRMA-sized MLP", fori_make, note=fori_note),
      "dirichlet": Workload("dirichlet", "(5) 2NN FedAvg, Dirichlet a=0.1, 100 clients, "
                            "C=0.2", dirichlet_workload()),
  }


# ---------------------------------------------------------------- measurements


def matmul_peak_gflops(n=2048, repeats=10):
  """Best-of-``repeats`` f32 ``n x n`` matmul throughput on the default device."""
  a = jnp.ones((n, n), jnp.float32)
  f = jax.jit(lambda a: a @ a)
  f(a).block_until_ready()
  best = math.inf
  for _ in range(repeats):
    t0 = time.perf_counter()
    f(a).block_until_ready()
    best = min(best, time.perf_counter() - t0)
  return 2 * n ** 3 / best / 1e9


def _flops(compiled):
  cost = compiled.cost_analysis()
  if isinstance(cost, (list, tuple)):
    cost = cost[0] if cost else {}
  return float((cost or {}).get("flops", float("nan")))


def step_flops(sim) -> float:
  """XLA cost-analysis FLOPs of one local SGD/Adam step of one client (forward,
  backward and optimizer update on a batch of B)."""
  loss_fn = tasks.supervised_loss(sim.model, sim.task)
  training = sim.training
  params = jax.eval_shape(sim.model.init, jax.random.PRNGKey(0))
  opt_state = jax.eval_shape(training.optimizer.init, params)
  b = training.batch_size
  x = jax.ShapeDtypeStruct((b,) + tuple(sim.data.x_train.shape[1:]), sim.data.x_train.dtype)
  y = jax.ShapeDtypeStruct((b,) + tuple(sim.data.y_train.shape[1:]), sim.data.y_train.dtype)
  mask = jax.ShapeDtypeStruct((b,), jnp.bool_)
  key = jax.ShapeDtypeStruct((2,), jnp.uint32)

  def step(p, o, x, y, m, k):
    (_, _), g = jax.value_and_grad(loss_fn, has_aux=True)(p, x, y, m, k)
    u, o = training.optimizer.update(g, o, p)
    return jax.tree.map(lambda a, b: a + 0.01 * b, p, u), o
  return _flops(jax.jit(step).lower(params, opt_state, x, y, mask, key).compile())


def memory_of(compiled) -> dict:
  """Bytes of a compiled program's arguments, outputs and temporaries."""
  try:
    m = compiled.memory_analysis()
    return {"args": int(m.argument_size_in_bytes), "out": int(m.output_size_in_bytes),
            "temp": int(m.temp_size_in_bytes)}
  except Exception:   # noqa: BLE001 - not every backend reports it
    return {}


def rss_mb() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def device_peak_mb():
  stats = jax.devices()[0].memory_stats() or {}
  peak = stats.get("peak_bytes_in_use")
  return None if peak is None else peak / 2 ** 20


def torch_rounds_for(w: Workload, device=None):
  """The PyTorch rounds interleaved with workload ``w``: sequential (all CPU
  threads), batched (``torch.func.vmap``) and, on a CPU, sequential on 1 thread."""
  name, clients, *extra = w.torch
  kw = dict(extra[0]) if extra else {}
  rounds = [TorchRound(name, clients, device=device, **kw),
            TorchRound(name, clients, style="batched", device=device, **kw)]
  if rounds[0].device == "cpu":
    rounds.append(TorchRound(name, clients, threads=1, device=device, **kw))
  return rounds


def build(w: Workload, engine_overrides=None):
  config, fed, label = w.make()
  for k, v in (engine_overrides or {}).items():
    config.engine[k] = v
  sim = runner.build_simulation(config, label, fed)
  return sim


def time_rounds(sim, state, repeats, torch_rounds=()):
  """Seconds of each compiled round (and of each interleaved torch round)."""
  compile_s = sim.compile(1, state)
  state, m = sim.run_chunk(state, 1)    # warm-up
  jax.block_until_ready(state)
  times, torch_times, metrics = [], [[] for _ in torch_rounds], []
  for _ in range(repeats):
    t0 = time.perf_counter()
    state, m = sim.run_chunk(state, 1)
    jax.block_until_ready(state)
    times.append(time.perf_counter() - t0)
    metrics.append(jax.device_get(m))
    for tr, tt in zip(torch_rounds, torch_times):
      tt.append(tr())
  return state, compile_s, times, torch_times, metrics


def bench_workload(w: Workload, repeats: int, vs_torch=False, engine_overrides=None,
                   peak=None):
  sim = build(w, engine_overrides)
  state = sim.init(0)
  torch_rounds = []
  if vs_torch and w.torch:
    torch_rounds = torch_rounds_for(w)
  state, compile_s, times, torch_times, ms = time_rounds(sim, state, repeats, torch_rounds)
  round_s = statistics.median(times)
  steps = statistics.median(float(np.sum(m["client_steps"])) for m in ms)
  executed = statistics.median(float(np.sum(m["executed_steps"])) for m in ms)
  flops = step_flops(sim)
  b = sim.training.batch_size
  r = {
      "workload": w.name, "description": w.description, "note": w.note,
      "clients": sim.num_clients, "cohort": sim.cohort,
      "parallelism": sim.parallelism, "step_buckets": sim.step_buckets,
      "dynamic_steps": sim.training.dynamic_steps, "unroll": sim.training.unroll,
      "shards": sim.num_shards,
      "compile_s": compile_s, "round_s": round_s, "round_times": times,
      "rounds_per_s": 1.0 / round_s, "client_steps": steps,
      "client_steps_per_s": steps / round_s, "samples_per_s": steps * b / round_s,
      "masked_step_fraction": 1.0 - steps / max(executed, 1.0),
      "step_gflop": flops / 1e9,
      "gflops": flops * steps / round_s / 1e9,
      "peak_gflops": peak,
      "memory": memory_of(sim._compiled[1]),
      "state_bytes": sim_lib.tree_bytes(state),
      "client_state_bytes": sim_lib.tree_bytes(state.clients) / sim.num_clients,
      "rss_mb": rss_mb(), "device_peak_mb": device_peak_mb(),
  }
  if torch_rounds:
    r["torch_round_s"] = statistics.median(torch_times[0])
    r["torch_round_times"] = torch_times[0]
    r["torch_threads"] = torch_rounds[0].threads
    r["torch_version"] = torch_rounds[0].version
    r["torch_steps"] = torch_rounds[0].steps
    r["speedup_vs_torch"] = r["torch_round_s"] / round_s
    r["torch_device"] = torch_rounds[0].device
    r["torch_batched_round_s"] = statistics.median(torch_times[1])
    r["torch_batched_round_times"] = torch_times[1]
    r["speedup_vs_torch_batched"] = r["torch_batched_round_s"] / round_s
    if len(torch_rounds) > 2:
      r["torch1_round_s"] = statistics.median(torch_times[2])
      r["torch1_round_times"] = torch_times[2]
      r["speedup_vs_torch1"] = r["torch1_round_s"] / round_s
  return r


# ---------------------------------------------------------------- extra studies


def masked_work_study(repeats):
  """Workload (5) before (static scan / one vmapped group) and after bucketing."""
  w = workloads()["dirichlet"]
  rows = []
  for label, overrides in [
      ("static scan over max_steps (vmap)", dict(dynamic_steps=False, step_buckets=1)),
      ("dynamic loop, one vmapped group", dict(dynamic_steps=True, step_buckets=1)),
      ("dynamic loop, auto step buckets", dict(dynamic_steps=True, step_buckets=0)),
      ("dynamic loop, map (one client at a time)",
       dict(dynamic_steps=True, client_parallelism="map")),
  ]:
    r = bench_workload(w, repeats, engine_overrides={"client_parallelism": "vmap",
                                                     **overrides})
    r["variant"] = label
    rows.append(r)
    print(json.dumps({k: r[k] for k in ("variant", "round_s", "masked_step_fraction",
                                         "step_buckets")}), flush=True)
  return rows


def seeds_study(repeats, num_seeds=5):
  """Workload (3): one seed vs ``num_seeds`` seeds vmapped as one program (each
  seed with its own partition when the config draws one per seed, as
  ``ff.run_many`` does)."""
  w = workloads()["firma"]
  config, fed, label = w.make()
  seeds = list(range(num_seeds))
  if config.data.seed < 0:
    feds = [data_lib.build(config.data, s) for s in seeds]
  else:
    feds = [fed] * num_seeds
  sizes = np.concatenate([f.client_size for f in feds])
  sim = runner.build_simulation(config, label, feds[0], all_client_sizes=sizes)
  single = sim.init(0)
  _, c1, t1, _, m1 = time_rounds(sim, single, repeats)
  steps_one = statistics.median(float(np.sum(m["client_steps"])) for m in m1)
  batch = sim_lib.BatchedSimulation(sim, feds)
  states = batch.init(seeds)
  cn = batch.compile(1, states)
  states, _ = batch.run_chunk(states, 1)
  jax.block_until_ready(states)
  tn, steps_many = [], []
  for _ in range(repeats):
    t0 = time.perf_counter()
    states, mn = batch.run_chunk(states, 1)
    jax.block_until_ready(states)
    tn.append(time.perf_counter() - t0)
    steps_many.append(float(np.sum(jax.device_get(mn)["client_steps"])))
  one, many = statistics.median(t1), statistics.median(tn)
  return {"workload": w.description, "note": w.note, "seeds": num_seeds,
          "one_seed_round_s": one, "many_seeds_round_s": many, "ratio": many / one,
          "one_seed_steps_per_s": steps_one / one,
          "many_seeds_steps_per_s": statistics.median(steps_many) / many,
          "one_seed_times": t1, "many_seeds_times": tn,
          "compile_one_s": c1, "compile_many_s": cn}


def diagnostics_study(repeats, rounds_per_chunk=10):
  """Workload (4)'s setting: share of an FO-RI-FedAvg round spent in roughness
  probes (paper probe M 10, m 100, B_probe 128; R_probe 1 vs 5) and in the
  per-round drift/roughness diagnostics, from interleaved chunks of rounds."""
  mod = load_config_module("bev/base.py")
  variants = [
      ("fo_fedavg", "FO-FedAvg (no probe), diagnostics off",
       mod.method("fo_fedavg", diagnostics=False)),
      ("probe5_off", "FO-RI-FedAvg, R_probe 5, diagnostics off",
       mod.method("fo_ri_fedavg", probe_every=5, diagnostics=False)),
      ("probe5_on", "FO-RI-FedAvg, R_probe 5, diagnostics on",
       mod.method("fo_ri_fedavg", probe_every=5, diagnostics=True)),
      ("probe1_on", "FO-RI-FedAvg, R_probe 1, diagnostics on",
       mod.method("fo_ri_fedavg", probe_every=1, diagnostics=True)),
  ]
  sims, states = {}, {}
  fed = None
  for key, _, entry in variants:
    c = only_method(mod.get_config(), key, entry)
    fed = fed or data_lib.build(c.data, 0)
    sims[key] = runner.build_simulation(c, key, fed)
    states[key] = sims[key].init(0)
    sims[key].compile(rounds_per_chunk, states[key])
    states[key], _ = sims[key].run_chunk(states[key], rounds_per_chunk)   # warm-up
    jax.block_until_ready(states[key])
  times = {key: [] for key in sims}
  for _ in range(repeats):
    for key, sim in sims.items():
      t0 = time.perf_counter()
      states[key], _ = sim.run_chunk(states[key], rounds_per_chunk)
      jax.block_until_ready(states[key])
      times[key].append((time.perf_counter() - t0) / rounds_per_chunk)
  med = {k: statistics.median(v) for k, v in times.items()}
  diag = max(med["probe5_on"] - med["probe5_off"], 0.0)
  return {"rows": [(label, med[key], times[key]) for key, label, _ in variants],
          "rounds_per_chunk": rounds_per_chunk,
          # Probe share: the round minus FO-FedAvg's (same client step, no probe, no
          # λ term) and minus the diagnostics' cost, over the round.
          "probe_share_r5": max(med["probe5_off"] - med["fo_fedavg"], 0) / med["probe5_off"],
          "probe_share_r1": max(med["probe1_on"] - med["fo_fedavg"] - diag, 0)
                            / med["probe1_on"],
          "diagnostics_share": diag / med["probe5_on"],
          "diagnostics_on_vs_off": med["probe5_on"] / med["probe5_off"] - 1,
          "probe1_vs_probe5": med["probe1_on"] / med["probe5_on"]}


def persistent_state_algorithm(ctx):
  """FedAvg whose clients keep a persistent SGD-momentum buffer across rounds
  (per-client state the size of the model, like SCAFFOLD's c_k)."""
  import optax
  training = ctx.training
  loss_fn = tasks.supervised_loss(ctx.model, ctx.task)
  tx = optax.trace(decay=0.9)

  def init(key, params0, num_clients, data_info):
    del key, data_info
    return {"params": params0}, trees.stack_for_clients(tx.init(params0), num_clients)

  def client_update(payload, client_state, view, key, round_index):
    lr = training.lr_schedule(round_index)
    params, client_state, metrics = local_training.local_train(
        payload, client_state, view, key, -lr, loss_fn, training, optimizer=tx)
    return trees.tree_sub(params, payload), client_state, metrics

  def aggregate(server_state, client_states, messages, weights, mask, key):
    from fedfrac.ops import aggregate as agg
    mean = agg.weighted_mean(messages, weights, mask)
    return {"params": trees.tree_add(server_state["params"], mean)}, client_states

  return contract.FedAlgorithm("fedavg_persistent_momentum", init, lambda s: s["params"],
                               client_update, aggregate, lambda s, c: s["params"])


def memory_study(repeats, num_clients=1000):
  """1,000 CNNMnist clients with per-client persistent state, C=0.1."""
  config = cnn_config(0.1)
  fed = synthetic_images(num_clients, 600, pool=60000)
  if "scaffold" in algorithms.REGISTRY:
    config.methods = type(config.methods)(
        {"scaffold": type(config.methods)(dict(name="scaffold"))})
    sim = runner.build_simulation(config, "scaffold", fed)
    name = "scaffold"
  else:
    proto = runner.build_simulation(config, "fedavg", fed)
    ctx = contract.BuildContext(proto.model, proto.task, proto.training, fed.info(),
                            config.rounds, None)
    sim = sim_lib.Simulation(persistent_state_algorithm(ctx), fed, proto.model,
                                proto.task, proto.training, proto.config)
    name = "fedavg with persistent per-client momentum (stand-in for SCAFFOLD)"
  state = sim.init(0)
  params_bytes = sim_lib.tree_bytes(state.server)
  state, compile_s, times, _, _ = time_rounds(sim, state, repeats)
  return {"algorithm": name, "clients": num_clients, "cohort": sim.cohort,
          "params_bytes": params_bytes,
          "client_state_bytes_total": sim_lib.tree_bytes(state.clients),
          "bytes_per_client": sim_lib.tree_bytes(state.clients) / num_clients,
          "data_bytes": int(fed.x_train.nbytes + fed.y_train.nbytes
                            + fed.client_index.nbytes),
          "state_bytes_total": sim_lib.tree_bytes(state),
          "memory": memory_of(sim._compiled[1]), "rss_mb": rss_mb(),
          "device_peak_mb": device_peak_mb(), "compile_s": compile_s,
          "round_s": statistics.median(times)}


# ---------------------------------------------------------------------- output


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
  info = {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
          "jax": jax.__version__, "backend": jax.default_backend(), "devices": devices,
          "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
          "date": datetime.datetime.now().isoformat(timespec="minutes")}
  try:
    import torch
    info["torch"] = torch.__version__
  except ImportError:
    pass
  return info


def _mb(b):
  return f"{b / 2 ** 20:.1f}"


def _ratio(x):
  return f"{x:.2f}x faster" if x >= 1 else f"{1 / x:.2f}x slower"


def args_repeats(d):
  return len(d["rows"][0][2])


def torch_section(torch_rows) -> list:
  """Markdown lines: fedfrac against the PyTorch rounds interleaved with it."""
  L = ["## Against PyTorch (same process, rounds interleaved)", "",
       "PyTorch: `benchmarks/torch_reference.py` on the device it sees. Sequential: a "
       "plain FedAvg loop (one client after another, fresh model copy per client, same "
       "model, batch size, epochs and optimizer), `torch.set_num_threads` = cores; on a "
       "CPU also on 1 thread, as a check against thread oversubscription on a loaded "
       "machine. Batched: the round's clients at once (`torch.func.vmap` of `grad` of "
       "`functional_call`, the optimizer on parameter stacks). Each timed fedfrac round "
       "is followed by one PyTorch round of each kind.", "",
       "| workload | PyTorch device | fedfrac round s | sequential PyTorch round s "
       "(threads) | fedfrac vs sequential | batched PyTorch round s | fedfrac vs batched "
       "| PyTorch 1 thread round s | vs 1 thread |", "|---|---|---|---|---|---|---|---|---|"]
  for r in torch_rows:
    one = (f"{r['torch1_round_s']:.3f} | {_ratio(r['speedup_vs_torch1'])}"
           if "torch1_round_s" in r else "– | –")
    batched = (f"{r['torch_batched_round_s']:.3f} | "
               f"**{_ratio(r['speedup_vs_torch_batched'])}**"
               if "torch_batched_round_s" in r else "– | –")
    L.append(f"| {r['description']} | {r.get('torch_device', 'cpu')} | "
             f"{r['round_s']:.3f} | {r['torch_round_s']:.3f} ({r['torch_threads']}) | "
             f"**{_ratio(r['speedup_vs_torch'])}** | {batched} | {one} |")
  L += ["", "All timed rounds (s):", ""]
  for r in torch_rows:
    extra = "".join(f"; PyTorch {label} " + ", ".join(f"{t:.3f}" for t in r[key])
                    for key, label in (("torch_batched_round_times", "batched"),
                                       ("torch1_round_times", "1 thread")) if key in r)
    L.append(f"- {r['workload']}: fedfrac "
             f"{', '.join(f'{t:.3f}' for t in r['round_times'])}; PyTorch sequential "
             f"{', '.join(f'{t:.3f}' for t in r['torch_round_times'])}{extra}")
  return L


def write_markdown(path, command, machine, loads, results, masked=None, seeds=None,
                   memory=None, diagnostics=None):
  L = ["# fedfrac benchmarks", "",
       "Produced by `fedfrac-bench` in one run; do not edit by hand.", "",
       f"Command: `{command}`", "",
       "Machine: " + ", ".join(f"{k}={v}" for k, v in machine.items() if v != ""), "",
       f"Load average (1/5/15 min) at start: {loads[0]}; at end: {loads[1]} "
       f"(the machine has {os.cpu_count()} cores; other jobs may share it).", "",
       f"Measured matmul peak (f32 2048x2048, best of 10): **{results[0]['peak_gflops']:.0f}"
       " GFLOP/s**." if results else "", "",
       "## Workloads", "",
       "Times are medians over the timed rounds after a warm-up round; compile time is "
       "separate. GFLOP/s = XLA cost-analysis FLOPs of one local step x active steps / "
       "round time. Masked = fraction of executed local steps that were masked (padding "
       "of unequal clients). Memory = compiled round program: arguments + outputs + "
       "temporaries.", "",
       "| workload | parallelism | compile s | round s | rounds/s | client-steps/s | "
       "samples/s | GFLOP/s (% peak) | masked | memory MB | state bytes/client |",
       "|---|---|---|---|---|---|---|---|---|---|---|"]
  for r in results:
    mem = r["memory"]
    mem_s = _mb(mem["args"] + mem["out"] + mem["temp"]) if mem else "n/a"
    par = r["parallelism"] + (f", {r['step_buckets']} buckets"
                              if r["parallelism"] == "vmap" and r["step_buckets"] > 1 else "")
    if r["shards"] > 1:
      par += f", {r['shards']} shards"
    L.append(
        f"| {r['description']} | {par} | {r['compile_s']:.1f} | {r['round_s']:.3f} | "
        f"{r['rounds_per_s']:.2f} | {r['client_steps_per_s']:.0f} | "
        f"{r['samples_per_s']:.0f} | {r['gflops']:.1f} "
        f"({100 * r['gflops'] / r['peak_gflops']:.0f}%) | "
        f"{r['masked_step_fraction']:.1%} | {mem_s} | {r['client_state_bytes']:.0f} |")
  if any(r["workload"] == "fori" for r in results):
    L += ["", "GFLOP/s of (4) counts the local training steps only, not the roughness "
          "probe's M·(m+1) loss evaluations per probed client, which take most of its "
          "round; it is not a measure of the machine's use there."]
  notes = [r["note"] for r in results if r.get("note")]
  for n in dict.fromkeys(notes):
    L += ["", f"Note: {n}."]
  torch_rows = [r for r in results if "torch_round_s" in r]
  if torch_rows:
    L += [""] + torch_section(torch_rows)
  if masked:
    L += ["", "## Masked work with very unequal client sizes (workload 5)", "",
          "| variant | step buckets | round s | masked steps |", "|---|---|---|---|"]
    for r in masked:
      L.append(f"| {r['variant']} | {r['step_buckets']} | {r['round_s']:.3f} | "
               f"{r['masked_step_fraction']:.1%} |")
  if diagnostics:
    d = diagnostics
    L += ["", "## Roughness probe and diagnostics share (workload 4's setting)", "",
          "FO-RI-FedAvg on the synthetic BEV fleet (10 vehicles, C = 0.5, paper probe "
          f"M 10, m 100, B_probe 128); median s/round over {args_repeats(d)} "
          f"interleaved chunks of {d['rounds_per_chunk']} rounds.", "",
          "| variant | ms/round | all chunks (ms/round) |", "|---|---|---|"]
    for label, med, ts in d["rows"]:
      L.append(f"| {label} | {med * 1e3:.1f} | " + ", ".join(f"{t * 1e3:.1f}" for t in ts)
               + " |")
    L += ["", f"Share of the round in roughness probes: **{d['probe_share_r1']:.0%} at "
          f"R_probe = 1, {d['probe_share_r5']:.0%} at R_probe = 5** (amortised: a client "
          f"probes on every R_probe-th participation); R_probe 1 rounds take "
          f"{d['probe1_vs_probe5']:.1f}x the R_probe 5 ones. Share in the per-round "
          f"drift/roughness diagnostics: **{d['diagnostics_share']:.1%}** (round time with "
          f"them on vs off: {d['diagnostics_on_vs_off']:+.1%}; a negative value is "
          f"timing noise)."]
  if seeds:
    L += ["", "## Seeds vmapped as one program (workload 3)", "",
          f"{seeds['workload']}: one seed {seeds['one_seed_round_s']:.3f} s/round, "
          f"{seeds['seeds']} seeds vmapped {seeds['many_seeds_round_s']:.3f} s/round "
          f"= **{seeds['ratio']:.2f}x** the time of one seed (compile "
          f"{seeds['compile_one_s']:.1f} s vs {seeds['compile_many_s']:.1f} s)."
          + (f" Note: {seeds['note']}." if seeds.get("note") else ""),
          "",
          f"Client steps per second: one seed {seeds['one_seed_steps_per_s']:.0f}, "
          f"{seeds['seeds']} seeds vmapped {seeds['many_seeds_steps_per_s']:.0f}. "
          "Vmapping seeds pays when one run leaves the device idle (small models, few "
          "clients, accelerators); here one FIBFL++ run already keeps both CPU cores "
          "busy with its matrix products, so 5 seeds are close to 5x the work at the "
          "same or lower throughput."]
  if memory:
    m = memory
    mem = m["memory"]
    L += ["", "## Memory: 1,000 CNNMnist clients with per-client persistent state", "",
          f"Algorithm: {m['algorithm']}; {m['clients']} clients, {m['cohort']} per round.",
          "",
          f"- model parameters: {m['params_bytes']} bytes",
          f"- persistent client state: {m['client_state_bytes_total'] / 2 ** 20:.1f} MB = "
          f"**{m['bytes_per_client']:.0f} bytes per client**",
          f"- data on device (uint8 images, labels, index table): {_mb(m['data_bytes'])} MB",
          f"- compiled round: arguments {_mb(mem.get('args', 0))} MB, outputs "
          f"{_mb(mem.get('out', 0))} MB, temporaries {_mb(mem.get('temp', 0))} MB",
          f"- process peak RSS so far: {m['rss_mb']:.0f} MB",
          f"- round time {m['round_s']:.2f} s (compile {m['compile_s']:.1f} s)"]
  L += ["", "Sharding over devices and multi-host runs: see `docs/scaling.md`.", ""]
  os.makedirs(os.path.dirname(path), exist_ok=True)
  text = "\n".join(L)
  from fedfrac.bench import accelerator
  from fedfrac.bench import sweep as sweep_bench
  if os.path.exists(path):   # keep the sections ``fedfrac-bench sweep`` and
    with open(path) as f:    # ``fedfrac-campaign collect`` write
      old = f.read()
    for start, end in ((sweep_bench.START, sweep_bench.END),
                       (accelerator.START, accelerator.END)):
      if start in old and end in old:
        text += "\n" + old[old.index(start):old.index(end) + len(end)] + "\n"
  with open(path, "w") as f:
    f.write(text)


def main(argv=None):
  all_workloads = workloads()
  parser = argparse.ArgumentParser(prog="fedfrac-bench", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--workloads", default=",".join(all_workloads))
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--vs-torch", action="store_true",
                      help="interleave PyTorch rounds (sequential and batched, on the "
                      "GPU when PyTorch sees one) for cnn10, cnn1000 and firma_mlp")
  parser.add_argument("--only-table", action="store_true",
                      help="skip the masked-work, seeds and memory studies")
  parser.add_argument("--parallelism", default=None, help="vmap | map (default: auto)")
  parser.add_argument("--shard-clients", action="store_true")
  parser.add_argument("--out", default=os.path.join("benchmarks", "results.md"))
  parser.add_argument("--json", default=None, help="also write all figures as JSON")
  argv = sys.argv[1:] if argv is None else list(argv)
  args = parser.parse_args(argv)
  names = [n for n in args.workloads.split(",") if n]
  for n in names:
    if n not in all_workloads:
      parser.error(f"--workloads: unknown {n!r}; known: {', '.join(all_workloads)}")
  overrides = {}
  if args.parallelism:
    overrides["client_parallelism"] = args.parallelism
  if args.shard_clients:
    overrides["shard_clients"] = True
  load_start = os.getloadavg()
  machine = machine_description()
  peak = matmul_peak_gflops()
  print(json.dumps({"machine": machine, "load": load_start, "peak_gflops": peak}),
        flush=True)
  results = []
  for n in names:
    r = bench_workload(all_workloads[n], args.repeats, args.vs_torch, overrides, peak)
    print(json.dumps(r), flush=True)
    results.append(r)
  masked = seeds = memory = diagnostics = None
  if not args.only_table:
    diagnostics = diagnostics_study(args.repeats)
    print(json.dumps({k: v for k, v in diagnostics.items() if k != "rows"}), flush=True)
    masked = masked_work_study(args.repeats)
    seeds = seeds_study(args.repeats)
    print(json.dumps(seeds), flush=True)
    memory = memory_study(max(2, args.repeats // 2))
    print(json.dumps(memory), flush=True)
  load_end = os.getloadavg()
  loads = tuple(", ".join(f"{x:.2f}" for x in l) for l in (load_start, load_end))
  command = ("fedfrac-bench " + " ".join(argv)).strip()
  if machine["XLA_FLAGS"]:
    command = f"XLA_FLAGS={machine['XLA_FLAGS']} {command}"
  write_markdown(args.out, command, machine, loads, results, masked, seeds, memory,
                 diagnostics)
  if args.json:
    with open(args.json, "w") as f:
      json.dump({"machine": machine, "loads": loads, "results": results, "masked": masked,
                 "diagnostics": diagnostics,
                 "seeds": seeds, "memory": memory}, f, indent=1, default=str)
  print(f"wrote {args.out}")


if __name__ == "__main__":
  main()
