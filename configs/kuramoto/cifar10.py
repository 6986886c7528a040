"""Kuramoto-FedAvg on CIFAR-10 (tfds) with label shards — the paper's setup.

K ∈ {10, 20} clients, s ∈ {3, 5, 10} label shards per client (default K=10,
s=3), 2 local epochs, batch 64, SGD momentum 0.9, lr 0.01 cosine, 100 rounds;
VGG-11 without batch norm (``vgg11``; ``--config.model.name=vgg11_gn`` uses
GroupNorm instead). Methods: FedAvg, SCAFFOLD and Kuramoto-FedAvg (coupled, paper,
reference_code; κ0 = 0.1). ``:mode=reference_code`` (e.g.
``:K=10,s=3,mode=reference_code``) is the authors' whole run instead (their
augmentation ``crop:32:4,flip,cutout:16``, CIFAR normalisation, lr 0.01 × 0.99 per
round, weight decay 1e-5, constant κ, SCAFFOLD-client variant, their shard dealing
from their seed, their VGG's initialisation; digits.py and docs/design.md §3.4).

Needs the dataset prepared once (internet):
  python -m fedfrac.main --config=configs/kuramoto/cifar10.py:K=10,s=5 \\
      --workdir=runs/k_cifar10 --config.data.tfds.download=True
"""
from configs.kuramoto import digits


def get_config(arg=None):
  return digits.tfds_config(arg, "cifar10", "CIFAR-10", "vgg11")
