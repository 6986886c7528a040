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

Two styles of the same round (``--style``):

* ``sequential`` (above): what the papers' code does.
* ``batched``: the strongest form a PyTorch user would write for many small
  clients: every client of the cohort trains at once, ``torch.func.vmap`` of
  ``torch.func.grad`` of a ``functional_call`` of the model over per-client
  parameter stacks, the optimizer (SGD with momentum, Adam) written on the
  stacks, one Python loop over local steps; ``compile=True`` wraps the vmapped
  gradient in ``torch.compile``. Clients must have equal sizes (the workloads
  here do); dropout draws different masks per client (``randomness="different"``).

Both run on ``device`` (``cuda`` when a GPU is there) and may sample a cohort of
``cohort`` clients per round (FedAvg with C < 1).

The CPU campaign's own workloads (``fedfrac-bench --vs-torch
--workloads=firma_fmnist,cnn_mnist_real,kuramoto_cnn``, ``fedfrac_lab/bench/campaign.py``):

* FIRMA FibFL rounds (:class:`FibFLSequential`, the authors' style: per-client
  models with persistent Adam states for head and extractor, E_h head epochs
  then E_e extractor epochs, ring mixing; :class:`FibFLBatched`, the same with
  ``torch.func`` over the clients) on the FIRMA MLP of any input size.
* FedAvg rounds (:func:`fedavg_round`) of FOFedAvg's CNNMnist (plain SGD, B=50)
  and Kuramoto-FedAvg's :class:`CNN4` (SGD momentum 0.9, B=64) on 28x28 inputs
  (:func:`campaign_cnn_workload`).

Usage (also called in-process by ``fedfrac-bench --vs-torch``)::

  python benchmarks/torch_reference.py --workload=cnn_mnist --clients=10 --rounds=3
  python benchmarks/torch_reference.py --workload=cnn_mnist --clients=1000 \
      --cohort=100 --style=batched --device=cuda
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
    perm = torch.randperm(n, generator=generator).to(x.device)
    for start in range(0, n, batch_size):
      idx = perm[start:start + batch_size]
      opt.zero_grad()
      loss = F.cross_entropy(model(x[idx]), y[idx])
      loss.backward()
      opt.step()
      steps += 1
  return model.state_dict(), steps


def cohort_of(num_clients, cohort, generator):
  """Client ids of one round: all of them, or ``cohort`` drawn without replacement."""
  if not cohort or cohort >= num_clients:
    return list(range(num_clients))
  return sorted(torch.randperm(num_clients, generator=generator)[:cohort].tolist())


def fedavg_round(global_model, clients, make_opt, batch_size, epochs, generator,
                 cohort=None):
  """One FedAvg round over every client (or a ``cohort`` of them) in turn;
  returns local steps run."""
  states, weights, steps = [], [], 0
  for k in cohort_of(len(clients), cohort, generator):
    x, y = clients[k]
    state, s = client_update(global_model, x, y, make_opt, batch_size, epochs, generator)
    states.append(state)
    weights.append(float(x.shape[0]))
    steps += s
  w = torch.tensor(weights) / sum(weights)
  avg = {k: sum(wi * s[k].float() for wi, s in zip(w, states)) for k in states[0]}
  global_model.load_state_dict(avg)
  return steps


# workload -> (optimizer, lr, batch size, local epochs, default samples per client)
OPTIMIZERS = {"cnn_mnist": ("sgd", 0.01, 50, 1, 600), "firma_mlp": ("adam", 0.01, 64, 21, 256)}


def make_workload(name, num_clients, per_client=None, seed=0, device="cpu", pool=None,
                  epochs=None):
  """(model, clients [(x, y)], optimizer factory, batch size, epochs).

  ``pool``: the clients share a pool of ``pool`` samples (client k owns rows
  ``k·per_client ...`` modulo ``pool``, as views), as 1,000 clients x 600 would be
  10x MNIST; ``pool`` must be a multiple of ``per_client``."""
  if name not in OPTIMIZERS:
    raise ValueError(f"workload={name!r}: allowed values are {', '.join(OPTIMIZERS)}")
  kind, lr, b, e, default_n = OPTIMIZERS[name]
  per_client = per_client or default_n
  g = torch.Generator().manual_seed(seed)
  n = pool or num_clients * per_client
  if n % per_client:
    raise ValueError(f"pool={pool}: must be a multiple of per_client={per_client}")
  shape = (1, 28, 28) if name == "cnn_mnist" else (64,)
  model = (CNNMnist() if name == "cnn_mnist" else FirmaMLP(64)).to(device)
  x = torch.rand((n,) + shape, generator=g).to(device)
  y = torch.randint(0, 10, (n,), generator=g).to(device)
  starts = [(k * per_client) % n for k in range(num_clients)]
  clients = [(x[s:s + per_client], y[s:s + per_client]) for s in starts]
  if kind == "sgd":
    opt = lambda p: torch.optim.SGD(p, lr=lr, momentum=0.5)
  else:
    opt = lambda p: torch.optim.Adam(p, lr=lr)
  return model, clients, opt, b, e if epochs is None else epochs


class BatchedFedAvg:
  """FedAvg rounds with the cohort's clients trained at once (``torch.func``).

  ``optimizer``: ``("sgd", lr, momentum)`` or ``("adam", lr)`` (Adam with
  PyTorch's defaults, betas (0.9, 0.999), eps 1e-8). Each round starts every
  client from the global parameters with fresh optimizer state, as the
  sequential loop does, and replaces the global parameters by the clients'
  mean (equal client sizes: the sample-weighted mean)."""

  def __init__(self, model, clients, optimizer, batch_size, epochs, cohort=None,
               compile=False):
    from torch.func import functional_call, grad, vmap
    self.model = model
    self.x = torch.stack([x for x, _ in clients])        # [K, n, ...]
    self.y = torch.stack([y for _, y in clients])
    self.optimizer, self.batch_size, self.epochs = optimizer, batch_size, epochs
    self.cohort = cohort

    def loss(params, xb, yb):
      return F.cross_entropy(functional_call(model, params, (xb,)), yb)
    self.grads = vmap(grad(loss), randomness="different")
    if compile:
      self.grads = torch.compile(self.grads)

  def _update(self, params, g, state, t):
    kind, lr = self.optimizer[0], self.optimizer[1]
    for k in params:
      if kind == "sgd":
        buf = g[k] if t == 1 else state[k].mul_(self.optimizer[2]).add_(g[k])
        state[k] = buf
        params[k] = params[k] - lr * buf
      else:
        m, v = state.setdefault(k, (torch.zeros_like(g[k]), torch.zeros_like(g[k])))
        m.mul_(0.9).add_(g[k], alpha=0.1)
        v.mul_(0.999).addcmul_(g[k], g[k], value=0.001)
        step = lr / (1 - 0.9 ** t)
        denom = (v / (1 - 0.999 ** t)).sqrt_().add_(1e-8)
        params[k] = params[k] - step * m / denom

  def __call__(self, generator):
    """One round; returns the local steps run (clients x steps)."""
    ids = cohort_of(self.x.shape[0], self.cohort, generator)
    xs, ys = self.x[ids], self.y[ids]
    s, n = xs.shape[0], xs.shape[1]
    self.model.train()
    params = {k: p.detach().unsqueeze(0).repeat((s,) + (1,) * p.dim())
              for k, p in self.model.named_parameters()}
    rows = torch.arange(s, device=xs.device)[:, None]
    state, t = {}, 0
    for _ in range(self.epochs):
      perms = torch.stack([torch.randperm(n, generator=generator) for _ in range(s)])
      perms = perms.to(xs.device)
      for start in range(0, n, self.batch_size):
        idx = perms[:, start:start + self.batch_size]
        t += 1
        g = self.grads(params, xs[rows, idx], ys[rows, idx])
        self._update(params, g, state, t)
    with torch.no_grad():
      for k, p in self.model.named_parameters():
        p.copy_(params[k].mean(0))
    return s * t


def batched_runner(name, model, clients, batch_size, epochs, cohort=None, compile=False):
  """:class:`BatchedFedAvg` with workload ``name``'s optimizer."""
  kind, lr = OPTIMIZERS[name][:2]
  opt = ("sgd", lr, 0.5) if kind == "sgd" else ("adam", lr)
  return BatchedFedAvg(model, clients, opt, batch_size, epochs, cohort, compile)


# --------------------------------------------------------------- campaign workloads
# The workloads the CPU campaign runs (``fedfrac-bench --vs-torch
# --workloads=firma_fmnist,cnn_mnist_real,kuramoto_cnn``): FIRMA FibFL on
# 784 inputs, FOFedAvg's CNNMnist and Kuramoto-FedAvg's CNN4 on 28x28 images.


class CNN4(nn.Module):
  """McMahan et al. (2017) "CNN" as Kuramoto-FedAvg's configs use it (``cnn4``,
  SAME padding): conv5x5(32) -> ReLU -> maxpool2 -> conv5x5(64) -> ReLU ->
  maxpool2 -> FC(3136 -> 512) -> ReLU -> FC(512 -> C)."""

  def __init__(self, num_classes=10):
    super().__init__()
    self.conv1 = nn.Conv2d(1, 32, kernel_size=5, padding=2)
    self.conv2 = nn.Conv2d(32, 64, kernel_size=5, padding=2)
    self.fc1 = nn.Linear(7 * 7 * 64, 512)
    self.fc2 = nn.Linear(512, num_classes)

  def forward(self, x):
    x = F.max_pool2d(F.relu(self.conv1(x)), 2)
    x = F.max_pool2d(F.relu(self.conv2(x)), 2)
    return self.fc2(F.relu(self.fc1(x.flatten(1))))


# campaign CNN workload -> (model class, optimizer factory args, batch size)
CAMPAIGN_CNNS = {"cnn_mnist_real": (CNNMnist, ("sgd", 0.01, 0.0), 50),
                 "kuramoto_cnn": (CNN4, ("sgd", 0.01, 0.9), 64)}


def random_clients(num_clients, per_client, shape, seed=0, device="cpu"):
  """``num_clients`` disjoint clients of uniform random inputs and labels 0-9."""
  g = torch.Generator().manual_seed(seed)
  n = num_clients * per_client
  x = torch.rand((n,) + tuple(shape), generator=g).to(device)
  y = torch.randint(0, 10, (n,), generator=g).to(device)
  return [(x[k * per_client:(k + 1) * per_client], y[k * per_client:(k + 1) * per_client])
          for k in range(num_clients)]


def campaign_cnn_workload(name, num_clients, per_client, seed=0, device="cpu"):
  """(model, clients, optimizer factory, batch size) of a campaign CNN workload."""
  cls, (_, lr, momentum), b = CAMPAIGN_CNNS[name]
  model = cls().to(device)
  clients = random_clients(num_clients, per_client, (1, 28, 28), seed, device)
  return model, clients, lambda p: torch.optim.SGD(p, lr=lr, momentum=momentum), b


GOLDEN = (1 + 5 ** 0.5) / 2


def fibfl_mixing(num_clients, gamma=0.5):
  """FIRMA's FibFL ring matrix: row i = gamma e_i + (1-gamma)(alpha e_{i-1} +
  beta e_{i+1}), alpha = 1/phi, beta = 1/phi^2 (a [N, N] tensor)."""
  m = torch.zeros(num_clients, num_clients)
  for i in range(num_clients):
    m[i, i] += gamma
    m[i, (i - 1) % num_clients] += (1 - gamma) / GOLDEN
    m[i, (i + 1) % num_clients] += (1 - gamma) / GOLDEN ** 2
  return m


def train_accuracy(model, x, y, chunk=1024):
  """Accuracy of ``model`` on its client's whole train set (FibFL+'s gate input)."""
  with torch.no_grad():
    hits = sum(int((model(x[s:s + chunk]).argmax(-1) == y[s:s + chunk]).sum())
               for s in range(0, x.shape[0], chunk))
  return hits / x.shape[0]


class FibFLSequential:
  """FIRMA FibFL rounds as the authors' code runs them: one client after another,
  each with its own model and persistent Adam states (one for the head, one for
  the extractor); E_h head epochs (extractor frozen), then E_e extractor epochs
  (head frozen), shuffled mini-batches per epoch; each client's train accuracy;
  then every extractor mixed with its ring neighbours from a snapshot."""

  def __init__(self, clients, dim, batch_size=64, head_epochs=1, extractor_epochs=20,
               lr=0.01, gamma=0.5, seed=0):
    torch.manual_seed(seed)
    self.clients, self.b = clients, batch_size
    self.e_h, self.e_e = head_epochs, extractor_epochs
    self.models = [FirmaMLP(dim).to(clients[0][0].device) for _ in clients]
    self.opt_head = [torch.optim.Adam(m.head.parameters(), lr=lr) for m in self.models]
    self.opt_ext = [torch.optim.Adam(m.extractor.parameters(), lr=lr) for m in self.models]
    self.mixing = fibfl_mixing(len(clients), gamma)
    self.gen = torch.Generator().manual_seed(seed + 1)

  def _phase(self, model, trained, frozen, opt, x, y, epochs):
    trained.requires_grad_(True)
    frozen.requires_grad_(False)
    n, steps = x.shape[0], 0
    for _ in range(epochs):
      perm = torch.randperm(n, generator=self.gen).to(x.device)
      for start in range(0, n, self.b):
        idx = perm[start:start + self.b]
        opt.zero_grad()
        F.cross_entropy(model(x[idx]), y[idx]).backward()
        opt.step()
        steps += 1
    return steps

  def __call__(self):
    """One round; returns the Adam steps run (both phases, all clients)."""
    steps = 0
    for model, oh, oe, (x, y) in zip(self.models, self.opt_head, self.opt_ext,
                                     self.clients):
      model.train()
      steps += self._phase(model, model.head, model.extractor, oh, x, y, self.e_h)
      steps += self._phase(model, model.extractor, model.head, oe, x, y, self.e_e)
      model.eval()
      train_accuracy(model, x, y)
    with torch.no_grad():
      snapshot = [[p.detach().clone() for p in m.extractor.parameters()]
                  for m in self.models]
      for i, model in enumerate(self.models):
        for j, p in enumerate(model.extractor.parameters()):
          p.copy_(sum(float(self.mixing[i, k]) * snapshot[k][j]
                      for k in range(len(self.models)) if self.mixing[i, k] != 0))
    return steps


class FibFLBatched:
  """The same FibFL rounds with every client at once: ``torch.func.vmap`` of
  ``grad`` of a ``functional_call`` over per-client parameter stacks, Adam written
  on the stacks with persistent per-client states (steps counted per phase, as
  ``torch.optim.Adam``), one Python loop over local steps; the ring mixing is one
  [N, N] matrix product of the stacked extractors. Equal client sizes. With the
  same ``seed`` it starts from :class:`FibFLSequential`'s models."""

  def __init__(self, clients, dim, batch_size=64, head_epochs=1, extractor_epochs=20,
               lr=0.01, gamma=0.5, seed=0):
    from torch.func import functional_call, grad, vmap
    torch.manual_seed(seed)
    self.x = torch.stack([x for x, _ in clients])
    self.y = torch.stack([y for _, y in clients])
    self.b, self.e_h, self.e_e, self.lr = batch_size, head_epochs, extractor_epochs, lr
    k = len(clients)
    models = [FirmaMLP(dim).to(self.x.device) for _ in range(k)]   # as FibFLSequential
    self.model = FirmaMLP(dim).to(self.x.device)
    self.params = {name: torch.stack([dict(m.named_parameters())[name].detach()
                                      for m in models])
                   for name, _ in self.model.named_parameters()}
    self.head_keys = [n for n in self.params if n.startswith("head.")]
    self.ext_keys = [n for n in self.params if n.startswith("extractor.")]
    self.state = {"head": ({}, [0]), "ext": ({}, [0])}
    self.mixing = fibfl_mixing(k, gamma).to(self.x.device)
    self.gen = torch.Generator().manual_seed(seed + 1)
    model = self.model

    def loss(trained, frozen, xb, yb):
      return F.cross_entropy(functional_call(model, {**trained, **frozen}, (xb,)), yb)
    self.grads = vmap(grad(loss))
    self.forward = vmap(lambda p, xb: functional_call(model, p, (xb,)))

  def _adam(self, keys, g, phase):
    moments, t = self.state[phase]
    t[0] += 1
    step = self.lr / (1 - 0.9 ** t[0])
    for name in keys:
      m, v = moments.setdefault(name, (torch.zeros_like(g[name]),
                                       torch.zeros_like(g[name])))
      m.mul_(0.9).add_(g[name], alpha=0.1)
      v.mul_(0.999).addcmul_(g[name], g[name], value=0.001)
      denom = (v / (1 - 0.999 ** t[0])).sqrt_().add_(1e-8)
      self.params[name] = self.params[name] - step * m / denom

  def _phase(self, keys, phase, epochs):
    k, n = self.x.shape[0], self.x.shape[1]
    rows = torch.arange(k, device=self.x.device)[:, None]
    steps = 0
    for _ in range(epochs):
      perms = torch.stack([torch.randperm(n, generator=self.gen) for _ in range(k)])
      perms = perms.to(self.x.device)
      for start in range(0, n, self.b):
        idx = perms[:, start:start + self.b]
        trained = {name: self.params[name] for name in keys}
        frozen = {name: p for name, p in self.params.items() if name not in trained}
        self._adam(keys, self.grads(trained, frozen, self.x[rows, idx],
                                    self.y[rows, idx]), phase)
        steps += k
    return steps

  def __call__(self):
    """One round; returns the Adam steps run (both phases, all clients)."""
    self.model.train()
    steps = self._phase(self.head_keys, "head", self.e_h)
    steps += self._phase(self.ext_keys, "ext", self.e_e)
    with torch.no_grad():
      for s in range(0, self.x.shape[1], 1024):
        self.forward(self.params, self.x[:, s:s + 1024]).argmax(-1)
      for name in self.ext_keys:
        p = self.params[name]
        self.params[name] = (self.mixing @ p.reshape(p.shape[0], -1)).reshape(p.shape)
    return steps


def synchronize(device):
  if str(device).startswith("cuda"):
    torch.cuda.synchronize()


def bench(name, num_clients, rounds=3, per_client=None, threads=None, seed=0,
          style="sequential", device="cpu", cohort=None, pool=None):
  """Median seconds per FedAvg round (after one warm-up round) and steps per round."""
  torch.set_num_threads(threads or os.cpu_count())
  torch.manual_seed(seed)
  model, clients, make_opt, b, e = make_workload(name, num_clients, per_client, seed,
                                                 device, pool)
  g = torch.Generator().manual_seed(seed + 1)
  if style == "sequential":
    one = lambda: fedavg_round(model, clients, make_opt, b, e, g, cohort)
  else:
    runner = batched_runner(name, model, clients, b, e, cohort, style == "compiled")
    one = lambda: runner(g)
  one()   # warm-up
  times, steps = [], 0
  for _ in range(rounds):
    synchronize(device)
    t0 = time.perf_counter()
    steps = one()
    synchronize(device)
    times.append(time.perf_counter() - t0)
  return {"workload": name, "clients": num_clients, "cohort": cohort, "style": style,
          "device": str(device), "round_s": statistics.median(times),
          "round_times": times, "client_steps": steps,
          "threads": torch.get_num_threads(), "torch": torch.__version__}


def main():
  p = argparse.ArgumentParser(description=__doc__)
  p.add_argument("--workload", default="cnn_mnist")
  p.add_argument("--clients", type=int, default=10)
  p.add_argument("--cohort", type=int, default=0)
  p.add_argument("--pool", type=int, default=0)
  p.add_argument("--rounds", type=int, default=3)
  p.add_argument("--threads", type=int, default=0)
  p.add_argument("--style", default="sequential", choices=("sequential", "batched",
                                                           "compiled"))
  p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
  a = p.parse_args()
  print(json.dumps(bench(a.workload, a.clients, a.rounds, threads=a.threads or None,
                         style=a.style, device=a.device, cohort=a.cohort or None,
                         pool=a.pool or None)))


if __name__ == "__main__":
  main()
