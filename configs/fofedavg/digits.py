"""FOFedAvg and the FO-RI-FedAvg family on scikit-learn digits (offline stand-in).

A stand-in for the papers' MNIST experiments that runs without downloads:
10 clients, Dirichlet(α=0.3) label skew, full participation, 30 rounds, 3 seeds,
MLP (128, 64), SGD clients (batch 32, 2 local epochs). Every method uses the same
client step size μ_t = η_t = 0.1/sqrt(t+1) (``client.schedule="inv_sqrt"``);
``fedavg_const`` is FedAvg with the constant rate 0.1 for reference. Fractional
and FO-RI options are the papers' defaults (FOFedAvg: α 0.97, δ 1e-5; FO-RI:
α 0.8, δ 1e-6, p ∈ [0.2, 5], λ 0.1, M 10, ℓ 0.01, m 100, B_probe 128,
R_probe 5); the step size is the quickstart's (the papers' μ0 = 0.01 / η0 = 0.05
barely move a digits MLP in 30 rounds).

  python -m fedfrac.main --config=configs/fofedavg/digits.py --workdir=runs/fo_digits
  fedfrac-sweep --config=configs/fofedavg/digits.py \\
      --grid=alpha=0.5,0.6,0.8,0.97,1.0 --grid_methods=fofedavg \\
      --out=results/fractional_digits.md
"""
import ml_collections

from fedfrac.config import base_config

ALPHA_GRID = (0.5, 0.6, 0.8, 0.97, 1.0)
DELTA_GRID = (1e-6, 1e-5, 1e-4, 1e-3)


def get_config():
  c = base_config()
  c.name = "fractional methods: digits, Dirichlet 0.3, 10 clients"
  c.seeds = (0, 1, 2)
  c.rounds = 30
  c.eval_every = 5
  c.checkpoint_every = 0
  c.target_accuracy = 0.8
  c.data.source = "sklearn_digits"
  c.data.num_clients = 10
  c.data.partition = "dirichlet"
  c.data.alpha = 0.3
  c.data.min_size = 10
  c.model.name = "mlp"
  c.model.hidden = (128, 64)
  c.client.optimizer = "sgd"
  c.client.lr = 0.1
  c.client.schedule = "inv_sqrt"
  c.client.batch_size = 32
  c.client.local_epochs = 2
  m = ml_collections.ConfigDict()
  m.fedavg_const = dict(name="fedavg", client=dict(schedule="constant"))
  m.fedavg = dict(name="fedavg")
  m.fofedavg = dict(name="fofedavg")
  m.fofedavg_round = dict(name="fofedavg", memory="round")
  m.fo_fedavg = dict(name="fo_fedavg")
  m.ri_fedavg = dict(name="ri_fedavg")
  m.fo_ri_fedavg = dict(name="fo_ri_fedavg")
  c.methods = m
  return c
