"""The extra studies of ``fedfrac-bench`` (skipped with ``--only-table``): masked
work before and after step bucketing, seeds vmapped vs one seed, diagnostics
chunks, and 1,000 clients with persistent per-client state.
"""
from __future__ import annotations

import json
import statistics
import time

import jax
import numpy as np

from fedfrac import algorithms
from fedfrac import data as data_lib
from fedfrac import sim as sim_lib
from fedfrac import runner
from fedfrac.algorithms import contract, local_training, tasks, trees
from fedfrac_lab.bench.timing import bench_workload, device_peak_mb, memory_of, rss_mb, time_rounds
from fedfrac_lab.bench.workloads import (cnn_config, load_config_module, only_method,
                                     synthetic_images, workloads)


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
