"""``fedfrac-bench million``: a population of up to 1,000,000 clients with
per-client state (SCAFFOLD's control variates) on FedProx-style synthetic data.

Data (after FedProx's Synthetic(α, β), Li et al. 2020, §5.1, scaled down to
``dim`` features and ``classes`` classes): client k draws u_k ~ N(0, α),
B_k ~ N(0, β), a local model W_k, b_k ~ N(u_k, 1), a feature mean
v_k ~ N(B_k, 1), inputs x ~ N(v_k, diag(j^-1.2)) and labels
y = argmax(W_k x + b_k). Every array is drawn for all clients at once (no
Python loop over clients); each client owns ``per_client`` consecutive rows, so
its index row is ``k·n + [0..n)``.

Reported per population K: bytes per client (the [K]-leading arrays: client
state, index table, sizes, step counts and the client's data rows), bytes held
by each of the D devices (summed over the addressable shards of the data arrays
and the state: replicated engine, every device holds everything; with
``--shard-client-state`` (``engine.shard_client_state``) the per-client arrays
are split over the devices, about 1/D each), the compiled chunk's argument and
temporary bytes per device (XLA's memory analysis), seconds per round (median
of ``--repeats``), and the largest population whose per-client bytes fit in a
memory budget (computed, not measured).
"""
from __future__ import annotations

import argparse
import json
import time

import jax
import numpy as np

from fedfrac.data.federated_data import FederatedData


def synthetic_population(num_clients: int, per_client: int = 8, dim: int = 20,
                         classes: int = 5, alpha: float = 1.0, beta: float = 1.0,
                         test_size: int = 1000, seed: int = 0) -> FederatedData:
  """FedProx-style Synthetic(α, β) with ``num_clients`` natural clients, built
  with array operations over all clients. Shapes: x_train ``[K·n, dim]``,
  client_index ``[K, n]``."""
  rng = np.random.default_rng(seed)
  k, n = num_clients, per_client
  u = rng.normal(0.0, np.sqrt(alpha), (k, 1, 1)).astype(np.float32)
  b_mean = rng.normal(0.0, np.sqrt(beta), (k, 1)).astype(np.float32)
  w = (u + rng.standard_normal((k, classes, dim), np.float32))
  bias = (u[:, :, 0] + rng.standard_normal((k, classes), np.float32))
  v = b_mean + rng.standard_normal((k, dim), np.float32)
  scale = (np.arange(1, dim + 1, dtype=np.float32) ** -0.6)     # sqrt of j^-1.2
  x = v[:, None, :] + rng.standard_normal((k, n, dim), np.float32) * scale
  y = np.argmax(np.einsum("kcd,knd->knc", w, x) + bias[:, None, :], axis=-1)
  del w
  x = x.reshape(k * n, dim)
  y = y.reshape(k * n).astype(np.int32)
  index = (np.arange(k, dtype=np.int32)[:, None] * n
           + np.arange(n, dtype=np.int32)[None, :])
  test = rng.choice(k * n, size=min(test_size, k * n), replace=False)
  counts = np.zeros((k, classes), np.int32)
  np.add.at(counts, (np.repeat(np.arange(k), n), y), 1)
  return FederatedData(
      name=f"synthetic_{k}", task="classification", num_classes=classes,
      input_scale=1.0, x_train=x, y_train=y, client_index=index,
      client_size=np.full((k,), n, np.int32), x_test=x[test], y_test=y[test],
      client_test_index=np.zeros((k, 1), np.int32),
      client_test_size=np.zeros((k,), np.int32), class_counts=counts)


def build(fed: FederatedData, cohort: int, rounds: int = 10, local_steps: int = 5,
          shard=False, shard_state: bool = False):
  """A SCAFFOLD :class:`Simulation` of logistic regression on ``fed`` with
  ``cohort`` clients sampled per round."""
  from fedfrac import algorithms, models, runner
  from fedfrac.algorithms import contract, tasks
  from fedfrac.config_base import base_config
  from fedfrac.sim import EngineConfig, Simulation
  c = base_config()
  c.model.name = "mlp"
  c.model.hidden = ()
  c.client.batch_size = int(fed.client_size[0])
  c.client.local_steps = local_steps
  c.client.lr = 0.05
  model = models.build(c.model, fed.input_shape, fed.num_classes, fed.input_scale)
  task = tasks.classification_task()
  training = runner.make_training(c.client, fed.client_size, rounds, 0, False)
  ctx = contract.BuildContext(model, task, training, fed.info(), rounds, c.client)
  cfg = EngineConfig(participation=cohort / fed.num_clients,
                     client_parallelism="vmap", step_buckets=1, shard_clients=shard,
                     shard_client_state=shard_state)
  return Simulation(algorithms.make("scaffold", ctx), fed, model, task, training, cfg)


def device_bytes(tree, device) -> int:
  """Bytes of ``tree``'s arrays held on ``device``."""
  total = 0
  for x in jax.tree.leaves(tree):
    if isinstance(x, jax.Array):
      total += sum(s.data.nbytes for s in x.addressable_shards if s.device == device)
  return total


def per_client_bytes(sim, state) -> dict:
  """Bytes that grow with K, per client: persistent client state, index table,
  sizes/steps, the client's data rows (exact, from shapes)."""
  k = sim.num_clients
  state_b = sum(x.nbytes for x in jax.tree.leaves(state.clients)) \
      + state.available.nbytes
  arr = sim.arrays
  table_b = sum(arr[name].nbytes for name in
                ("client_index", "client_size", "num_steps", "client_test_index",
                 "client_test_size"))
  data_b = arr["x"].nbytes + arr["y"].nbytes
  return {"state": state_b / k, "index": table_b / k, "data": data_b / k,
          "total": (state_b + table_b + data_b) / k}


def measure(num_clients: int, cohort: int, repeats: int, rounds_per_call: int,
            shard=False, shard_state: bool = False) -> dict:
  """One row: population, devices, bytes per client / per device, s/round.

  ``shard_state``: ``engine.shard_client_state`` (with ``shard=True``, so a
  one-device run still places its arrays as the sharded engine does)."""
  t0 = time.perf_counter()
  fed = synthetic_population(num_clients)
  built = time.perf_counter() - t0
  sim = build(fed, cohort, shard=True if shard_state else shard, shard_state=shard_state)
  state = sim.init(0)
  per_client = per_client_bytes(sim, state)
  held = [device_bytes((sim.arrays, state), d) for d in jax.devices()]
  state, m = sim.run_chunk(state, rounds_per_call)        # compile + warm up
  jax.block_until_ready(state)
  after = [device_bytes((sim.arrays, state), d) for d in jax.devices()]
  memory = sim._compiled[rounds_per_call].memory_analysis()
  times = []
  for _ in range(repeats):
    t = time.perf_counter()
    state, m = sim.run_chunk(state, rounds_per_call)
    jax.block_until_ready(state)
    times.append((time.perf_counter() - t) / rounds_per_call)
  return {"clients": num_clients, "cohort": cohort, "devices": sim.num_shards,
          "shard_client_state": sim.client_rows is not None,
          "bytes_per_client": per_client, "device0_bytes": held[0],
          "device_bytes": held, "device_bytes_after_rounds": after,
          "chunk_argument_bytes": getattr(memory, "argument_size_in_bytes", None),
          "chunk_temp_bytes": getattr(memory, "temp_size_in_bytes", None),
          "s_per_round": float(np.median(times)), "data_build_s": built,
          "train_loss": float(np.asarray(m["train_loss"])[-1])}


def largest_population(bytes_per_client: float, budget_bytes: float,
                       fixed_bytes: float = 0.0) -> int:
  """Clients whose per-client bytes fit in ``budget_bytes`` after
  ``fixed_bytes`` (computed from bytes per client, not measured)."""
  return int((budget_bytes - fixed_bytes) // bytes_per_client)


def main(argv=None):
  p = argparse.ArgumentParser(prog="fedfrac-bench million")
  p.add_argument("--clients", type=int, default=1_000_000)
  p.add_argument("--cohort", type=int, default=1000)
  p.add_argument("--repeats", type=int, default=3)
  p.add_argument("--rounds-per-call", type=int, default=5)
  p.add_argument("--budget-gb", type=float, default=20.0)
  p.add_argument("--shard-client-state", action="store_true",
                 help="engine.shard_client_state: per-client arrays split over the devices")
  args = p.parse_args(argv)
  row = measure(args.clients, args.cohort, args.repeats, args.rounds_per_call,
                shard="auto", shard_state=args.shard_client_state)
  row["largest_population_in_budget"] = largest_population(
      row["bytes_per_client"]["total"], args.budget_gb * 1e9)
  row["budget_gb"] = args.budget_gb
  print(json.dumps(row))
  return 0
