"""Kuramoto-FedAvg on MNIST (tfds) with label shards — the paper's setup.

K ∈ {10, 20} clients, s ∈ {3, 5, 10} label shards per client (default K=10,
s=3), 2 local epochs, batch 64, SGD momentum 0.9, lr 0.01 cosine, 100 rounds;
the paper's "4-layer CNN" is ``cnn4`` (2 conv + 2 FC, McMahan et al. 2017).
Methods: FedAvg, SCAFFOLD and Kuramoto-FedAvg (coupled, paper, reference_code;
κ0 = 0.1). ``:mode=reference_code`` (e.g. ``:K=10,s=3,mode=reference_code``) is the
authors' whole run instead (their augmentation, normalisation, lr 0.01 × 0.99 per
round, weight decay 1e-5, constant κ, SCAFFOLD-client variant, their shard dealing
from their seed, PyTorch's initialisation; digits.py and docs/design.md §3.4).

Needs the dataset prepared once (internet):
  python -m fedfrac.main --config=configs/kuramoto/mnist.py:K=20,s=5 \\
      --workdir=runs/k_mnist --config.data.tfds.download=True

Offline, from local files (the MNIST IDX files, or an ``mnist.pkl.gz``), add
``--config.data.source=files --config.data.dir=DIR`` (see ``fedfrac.data.files``).
"""
from configs.kuramoto import digits


def get_config(arg=None):
  return digits.tfds_config(arg, "mnist", "MNIST", "cnn4", padding="SAME")
