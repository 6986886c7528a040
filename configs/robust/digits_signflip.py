"""Robust aggregation under a 20% sign-flip attack on scikit-learn digits (offline).

10 clients, IID split (the setting of the robust-aggregation papers: Yin et al.
2018, Blanchard et al. 2017), full participation, 30 rounds, 3 seeds, a 2-layer
MLP trained by SGD (lr 0.1, batch 32, 2 local epochs). Two of the ten clients are
Byzantine (fixed per seed) and upload −10·Δ instead of their update Δ. With that
magnitude the plain mean moves against the honest direction
(0.8·Δ − 0.2·10·Δ < 0), so FedAvg collapses, while the coordinate median, the
20%-trimmed mean and (Multi-)Krum with f = 2 ignore the attackers.
``fedavg_clean`` (no attack) is the reference.

  fedfrac-reproduce robust --config=configs/robust/digits_signflip.py --out=results/robust_digits.md
  python -m fedfrac.main --config=configs/robust/digits_signflip.py --workdir=runs/robust
"""
import ml_collections

from fedfrac.config import base_config


def get_config():
  c = base_config()
  c.name = "digits, IID, 10 clients, 20% sign-flip (x10) attackers"
  c.seeds = (0, 1, 2)
  c.rounds = 30
  c.eval_every = 1
  c.checkpoint_every = 0
  c.target_accuracy = 0.85
  c.data.source = "sklearn_digits"
  c.data.num_clients = 10
  c.data.partition = "iid"
  c.model.name = "mlp"
  c.model.hidden = (128, 64)
  c.client.optimizer = "sgd"
  c.client.lr = 0.1
  c.client.batch_size = 32
  c.client.local_epochs = 2

  c.attack.kind = "sign_flip"
  c.attack.fraction = 0.2
  c.attack.scale = 10.0

  def method(aggregator="mean", attack=True, **server):
    m = ml_collections.ConfigDict(dict(name="fedavg"))
    m.server = ml_collections.ConfigDict(dict(aggregator=aggregator, **server))
    if not attack:
      m.attack = ml_collections.ConfigDict(dict(kind="none"))
    return m

  c.methods = ml_collections.ConfigDict()
  c.methods.fedavg_clean = method(attack=False)
  c.methods.fedavg = method()
  c.methods.median = method("median")
  c.methods.trimmed_mean = method("trimmed_mean", trim_beta=0.2)
  c.methods.krum = method("krum", num_byzantine=2)
  c.methods.multi_krum = method("multi_krum", num_byzantine=2)
  return c
