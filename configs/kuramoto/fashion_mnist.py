"""Kuramoto-FedAvg on Fashion-MNIST (tfds) with label shards — the paper's setup.

K ∈ {10, 20} clients, s ∈ {3, 5, 10} label shards per client (default K=10,
s=3), 2 local epochs, batch 64, SGD momentum 0.9, lr 0.01 cosine, 100 rounds;
the paper's "4-layer CNN" is ``cnn4`` (2 conv + 2 FC, McMahan et al. 2017).
Methods: FedAvg and Kuramoto-FedAvg (coupled, paper, reference_code; κ0 = 0.1).

Needs the dataset prepared once (internet):
  python -m fedfrac.main --config=configs/kuramoto/fashion_mnist.py:K=20,s=5 \\
      --workdir=runs/k_fmnist --config.data.tfds.download=True
"""
import importlib.util
import os

from fedfrac.config import base_config


def _load_protocol():
  """configs/kuramoto/digits.py, which holds the protocol shared by these configs."""
  path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "digits.py")
  spec = importlib.util.spec_from_file_location("fedfrac_configs_kuramoto_digits", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def get_config(arg=None):
  c = _load_protocol().paper_protocol(base_config(), arg)
  c.name = f"kuramoto: Fashion-MNIST, K={c.data.num_clients}, s={c.data.shards_per_client}"
  c.data.source = "tfds"
  c.data.tfds.name = "fashion_mnist"
  c.model.name = "cnn4"
  c.model.padding = "SAME"
  return c
