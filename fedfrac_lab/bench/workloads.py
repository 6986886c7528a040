"""The workloads of ``fedfrac-bench`` (:mod:`fedfrac_lab.bench.rounds`): their data
(synthetic images, digits, Dirichlet splits) and configs, each a :class:`Workload`.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, Optional

import numpy as np

from fedfrac import algorithms
from fedfrac import data as data_lib
from fedfrac.config_base import base_config
from fedfrac_lab.reproduce import common


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


# The vs-PyTorch workloads of the accelerator measurements (fedfrac_lab.bench.accelerator).
WORKLOADS = ("cnn10", "cnn1000", "firma_mlp")
# Default sizes of the workloads (workloads.workloads' figures).
SIZES = {"cnn10": dict(clients=10, per_client=600),
         "cnn1000": dict(clients=1000, per_client=600, pool=60000),
         "firma_mlp": dict(clients=5, per_client=256, epochs=21)}


def sized_workload(name, clients=None, per_client=None, pool=None, epochs=None):
  """Workload ``name`` of ``fedfrac_lab.bench.workloads`` at other sizes (same model,
  optimizer and participation), with its PyTorch counterpart."""
  size = {**SIZES[name], **{k: v for k, v in dict(clients=clients, per_client=per_client,
                                                  pool=pool, epochs=epochs).items()
                            if v is not None}}
  k, n = size["clients"], size["per_client"]
  if name == "firma_mlp":
    e = size["epochs"]

    def make():
      c = firma_mlp_fedavg_config()
      c.client.local_epochs = e
      return c, digits_clients(k, n), "fedavg"
    return Workload(name, f"FIRMA-sized MLP: FedAvg+Adam, {k} clients x {n}, "
                           f"E={e}, B=64 (digits)", make,
                           torch=("firma_mlp", k, {"per_client": n, "epochs": e}))
  participation = 1.0 if name == "cnn10" else 0.1
  pool_n = size.get("pool") or k * n
  cohort = max(1, math.ceil(participation * k))

  def make():
    return (cnn_config(participation),
            synthetic_images(k, n, pool=pool_n), "fedavg")
  torch_kw = {"per_client": n, "pool": pool_n}
  if cohort < k:
    torch_kw["cohort"] = cohort
  return Workload(name, f"CNNMnist FedAvg, {k} clients x {n}, cohort {cohort}",
                         make, torch=("cnn_mnist", k, torch_kw))
