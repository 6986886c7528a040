"""Baseline comparison on MNIST with the CNNMnist model (needs the tfds dataset).

The full-size setting of the FOFedAvg paper's baseline comparison: 60,000 MNIST
training images over 100 clients with Dirichlet(α = 0.3) label skew, client
fraction C = 0.2 (the paper's, appendix B: 20 clients per round), CNNMnist
(conv5-10, conv5-20, FC-50, dropout 0.5), SGD clients with lr 0.01, B = 50,
E = 5, 200 rounds, seeds 0, 1, 2, every baseline fedfrac ships at its defaults.

The dataset is read with ``tfds.data_source`` and is NOT downloaded by default:
on a machine with internet prepare it once with

  python -m fedfrac.main --config=configs/baselines/mnist_cnn.py \
      --workdir=runs/baselines_mnist --config.data.tfds.download=True

(``pip install 'fedfrac[tfds]'``), or point ``--config.data.tfds.data_dir`` at a
prepared copy. This is a GPU-sized run (100 clients × 5 epochs per round); on CPU
use ``--config.only=fedavg,scaffold`` and fewer rounds.
"""
from ml_collections import ConfigDict

from fedfrac.config import base_config

METHODS = ("fedavg", "fedavgm", "fedprox", "scaffold", "fednova", "fedadam", "fedyogi",
           "fedadagrad", "moon", "feddyn", "dp_sgd", "fdse", "fedbm",
           "fedel")


def get_config():
  c = base_config()
  c.name = "baselines: MNIST CNN, Dirichlet 0.3, 100 clients, C = 0.2"
  c.seeds = (0, 1, 2)
  c.rounds = 200
  c.participation = 0.2
  c.eval_every = 10
  c.checkpoint_every = 1
  c.target_accuracy = 0.97
  c.data.source = "tfds"
  c.data.tfds.name = "mnist"
  c.data.tfds.download = False
  c.data.num_clients = 100
  c.data.partition = "dirichlet"
  c.data.alpha = 0.3
  c.data.test_split = "like_train"
  c.model.name = "cnn_mnist"
  c.model.padding = "VALID"
  c.model.dropout = 0.5
  c.client.optimizer = "sgd"
  c.client.lr = 0.01
  c.client.schedule = "constant"
  c.client.batch_size = 50
  c.client.local_epochs = 5
  methods = ConfigDict()
  for name in METHODS:
    methods[name] = ConfigDict(dict(name=name))
  c.methods = methods
  return c
