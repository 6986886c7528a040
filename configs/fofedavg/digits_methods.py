"""FOFedAvg against the baselines of the FOFedAvg paper's Tables II–VI on
scikit-learn digits (offline stand-in for MNIST).

The digits setting of configs/fofedavg/digits.py (10 clients, Dirichlet 0.3,
MLP (128, 64), SGD with μ_t = 0.1/sqrt(t+1), 30 rounds, 3 seeds) with the
paper's eleven methods, each with its default options: FOFedAvg, MOON, FedAdam,
FedNova, FedAvg, FedProx, SCAFFOLD, SparseSecAgg, DPSGD, FedBM, FDSE.

  fedfrac-reproduce fofedavg --tables=methods
"""
import ml_collections

from configs.fofedavg import digits

METHODS = ("fofedavg", "moon", "fedadam", "fednova", "fedavg", "fedprox", "scaffold",
           "sparse_secagg", "dp_sgd", "fedbm", "fdse")


def get_config():
  c = digits.get_config()
  c.name = "FOFedAvg and the paper's baselines: digits, Dirichlet 0.3, 10 clients"
  m = ml_collections.ConfigDict()
  for label in METHODS:
    m[label] = dict(name=label)
  c.methods = m
  return c
