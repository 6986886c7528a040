"""Baseline comparison on scikit-learn digits (offline stand-in, clearly labelled).

The FOFedAvg paper compares its method with FedAvg, FedAvgM, FedProx, SCAFFOLD,
FedNova, FedOpt and MOON on MNIST-type data under label skew; this config runs
every baseline fedfrac ships on the offline 8×8 digits instead (1,437 train /
360 test images), so the numbers are a stand-in, not the paper's:

  * data: sklearn digits, Dirichlet(α = 0.3) label skew over 10 clients,
    per-client test splits with each client's own class mix;
  * participation C = 0.2 (the paper's client fraction, appendix B): 2 of the 10
    clients per round, sampled by the shared, seeded sampling stream;
  * model: MLP (128, 64); clients: SGD, lr 0.05 constant, B = 32, E = 2
    (the quickstart's client settings — the paper's μ0 = 0.01 is tuned for its
    CNN on MNIST and is slow for this MLP);
  * 150 rounds, evaluated every 5, seeds 0, 1, 2 (mean ± std in summary.md);
  * ``engine.unroll = 1``: for this small MLP compilation dominates on CPU and
    unrolling the local-step scan only makes it slower (same numbers).

Each method runs with its registered defaults (its entry's schema in
``fedfrac.algorithms.REGISTRY``; ``python -m fedfrac.main --list`` shows them) plus
its quickstart options.

  python -m fedfrac.main --config=configs/baselines/digits.py --workdir=runs/baselines_digits
"""
from ml_collections import ConfigDict

from fedfrac import algorithms
from fedfrac.config import base_config

METHODS = ("fedavg", "fedavgm", "fedprox", "scaffold", "fednova", "fedadam", "fedyogi",
           "fedadagrad", "moon", "feddyn", "dp_sgd", "fdse", "fedbm", "fedel")
# sparse_secagg is not listed: it needs participation = 1 (no dropout recovery),
# and this comparison samples C = 0.2.


def get_config():
  c = base_config()
  c.name = "baselines: digits (stand-in), Dirichlet 0.3, 10 clients, C = 0.2"
  c.seeds = (0, 1, 2)
  c.rounds = 150
  c.participation = 0.2
  c.eval_every = 5
  c.checkpoint_every = 4
  c.target_accuracy = 0.8
  c.data.source = "sklearn_digits"
  c.data.num_clients = 10
  c.data.partition = "dirichlet"
  c.data.alpha = 0.3
  c.data.test_split = "like_train"
  c.model.name = "mlp"
  c.model.hidden = (128, 64)
  c.client.optimizer = "sgd"
  c.client.lr = 0.05
  c.client.schedule = "constant"
  c.client.batch_size = 32
  c.client.local_epochs = 2
  c.engine.unroll = 1
  methods = ConfigDict()
  for name in METHODS:
    methods[name] = ConfigDict(dict(name=name, **algorithms.QUICKSTART.get(name, {})))
  c.methods = methods
  return c
