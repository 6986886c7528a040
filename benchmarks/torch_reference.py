"""Plain sequential PyTorch FedAvg: the reference the benchmark compares against.

This is the standard way the papers' code trains: one client after another, a
fresh copy of the global model per client, ``E`` epochs of mini-batch training
over the client's shuffled data, then a sample-weighted average of the client
models. Two workloads mirror ``scripts/bench.py``:

* ``cnn_mnist``: CNNMnist (conv5x5(10) → maxpool → ReLU → conv5x5(20) → Dropout2d
  → maxpool → ReLU → FC(50) → ReLU → dropout → FC(10)), SGD momentum 0.5,
  lr 0.01, B=50, E=1.
* ``firma_mlp``: the FIRMA MLP (FC(d→256)–LN–ReLU–FC(256→256)–LN–ReLU–
  FC(256→128)–ReLU | FC(128→C)), Adam lr 0.01, B=64.

Usage (also called in-process by ``scripts/bench.py --vs-torch``)::

  python benchmarks/torch_reference.py --workload=cnn_mnist --clients=10 --rounds=3
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import time

import torch
from torch import nn
import torch.nn.functional as F


class CNNMnist(nn.Module):

  def __init__(self, num_classes=10):
    super().__init__()
    self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
    self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
    self.conv2_drop = nn.Dropout2d()
    self.fc1 = nn.Linear(320, 50)
    self.fc2 = nn.Linear(50, num_classes)

  def forward(self, x):
    x = F.relu(F.max_pool2d(self.conv1(x), 2))
    x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
    x = x.view(-1, x.shape[1] * x.shape[2] * x.shape[3])
    x = F.relu(self.fc1(x))
    x = F.dropout(x, training=self.training)
    return self.fc2(x)


class FirmaMLP(nn.Module):

  def __init__(self, dim, num_classes=10):
    super().__init__()
    self.extractor = nn.Sequential(
        nn.Linear(dim, 256), nn.LayerNorm(256), nn.ReLU(),
        nn.Linear(256, 256), nn.LayerNorm(256), nn.ReLU(),
        nn.Linear(256, 128), nn.ReLU())
    self.head = nn.Linear(128, num_classes)

  def forward(self, x):
    return self.head(self.extractor(x.flatten(1)))


def client_update(global_model, x, y, make_opt, batch_size, epochs, generator):
  """E epochs of mini-batch training of a copy of the global model."""
  model = copy.deepcopy(global_model)
  model.train()
  opt = make_opt(model.parameters())
  n = x.shape[0]
  steps = 0
  for _ in range(epochs):
    perm = torch.randperm(n, generator=generator)
    for start in range(0, n, batch_size):
      idx = perm[start:start + batch_size]
      opt.zero_grad()
      loss = F.cross_entropy(model(x[idx]), y[idx])
      loss.backward()
      opt.step()
      steps += 1
  return model.state_dict(), steps


def fedavg_round(global_model, clients, make_opt, batch_size, epochs, generator):
  """One FedAvg round over every client in turn; returns local steps run."""
  states, weights, steps = [], [], 0
  for x, y in clients:
    state, s = client_update(global_model, x, y, make_opt, batch_size, epochs, generator)
    states.append(state)
    weights.append(float(x.shape[0]))
    steps += s
  w = torch.tensor(weights) / sum(weights)
  avg = {k: sum(wi * s[k].float() for wi, s in zip(w, states)) for k in states[0]}
  global_model.load_state_dict(avg)
  return steps


def make_workload(name, num_clients, per_client=None, seed=0):
  """(model, clients [(x, y)], optimizer factory, batch size, epochs)."""
  g = torch.Generator().manual_seed(seed)
  if name == "cnn_mnist":
    per_client = per_client or 600
    model = CNNMnist()
    clients = [(torch.rand(per_client, 1, 28, 28, generator=g),
                torch.randint(0, 10, (per_client,), generator=g))
               for _ in range(num_clients)]
    opt = lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.5)
    return model, clients, opt, 50, 1
  if name == "firma_mlp":
    per_client = per_client or 256
    model = FirmaMLP(64)
    clients = [(torch.rand(per_client, 64, generator=g),
                torch.randint(0, 10, (per_client,), generator=g))
               for _ in range(num_clients)]
    opt = lambda p: torch.optim.Adam(p, lr=0.01)
    return model, clients, opt, 64, 21
  raise ValueError(f"workload={name!r}: allowed values are cnn_mnist, firma_mlp")


def bench(name, num_clients, rounds=3, per_client=None, threads=None, seed=0):
  """Median seconds per FedAvg round (after one warm-up round) and steps per round."""
  torch.set_num_threads(threads or os.cpu_count())
  torch.manual_seed(seed)
  model, clients, make_opt, b, e = make_workload(name, num_clients, per_client, seed)
  g = torch.Generator().manual_seed(seed + 1)
  fedavg_round(model, clients, make_opt, b, e, g)   # warm-up
  times, steps = [], 0
  for _ in range(rounds):
    t0 = time.perf_counter()
    steps = fedavg_round(model, clients, make_opt, b, e, g)
    times.append(time.perf_counter() - t0)
  return {"workload": name, "clients": num_clients, "round_s": statistics.median(times),
          "round_times": times, "client_steps": steps,
          "threads": torch.get_num_threads(), "torch": torch.__version__}


def main():
  p = argparse.ArgumentParser(description=__doc__)
  p.add_argument("--workload", default="cnn_mnist")
  p.add_argument("--clients", type=int, default=10)
  p.add_argument("--rounds", type=int, default=3)
  p.add_argument("--threads", type=int, default=0)
  a = p.parse_args()
  print(json.dumps(bench(a.workload, a.clients, a.rounds, threads=a.threads or None)))


if __name__ == "__main__":
  main()
