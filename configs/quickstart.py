"""Quickstart: every algorithm in fedfrac on scikit-learn digits (offline).

10 clients, Dirichlet(α=0.5) label skew, full participation, 30 rounds, a
2-layer MLP, SGD clients (lr 0.1, batch 32, 2 local epochs). The methods run
side by side, one worker process per CPU core (``workers = 0``); most of the
time is each method's one compilation.

  python -m fedfrac.main --config=configs/quickstart.py --workdir=runs/quickstart
"""
from fedfrac import algorithms
from fedfrac.config import base_config


def get_config():
  c = base_config()
  c.name = "quickstart: digits, Dirichlet 0.5, 10 clients"
  c.seeds = (0,)
  c.rounds = 30
  c.eval_every = 1
  c.checkpoint_every = 0
  c.target_accuracy = 0.8
  c.data.source = "sklearn_digits"
  c.data.num_clients = 10
  c.data.partition = "dirichlet"
  c.data.alpha = 0.5
  c.model.name = "mlp"
  c.model.hidden = (128, 64)
  c.client.optimizer = "sgd"
  c.client.lr = 0.1
  c.client.batch_size = 32
  c.client.local_epochs = 2
  c.engine.unroll = 1          # short compiles: ~26 methods each compile once
  c.workers = 0                # one process per CPU core: compiles run side by side
  methods = type(c.methods)()
  for name, options in algorithms.quickstart_methods().items():
    methods[name] = type(c.methods)(dict(name=name, **options))
  c.methods = methods
  return c
