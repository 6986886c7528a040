"""The BEV paper's training protocol (FO-RI-FedAvg paper §IV-P and Table VII) on
the SYNTHETIC fleet.

  python -m fedfrac.main --config=configs/bev/paper.py --workdir=runs/bev_paper

Values (§IV-P "Training protocol and hyperparameters" unless noted):

* T = 300 rounds. The paper gives T = 300 in §IV-P, §IV-N (churn) and §IV-O
  (architectures), and T = 200 only as the horizon of the rounds-to-threshold
  Table XI (and the t = 200 drift tables). We take 300, the protocol section's
  value; rounds-to-threshold within 200 rounds can be read off the same curves.
* C = 0.3, so |S_t| = max(⌈C·K⌉, 1) = 3 of the 10 vehicles (Alg. 1 l.4).
* E = 1 local epoch, B = 64, SGD with η_t = η0/√(t+1), η0 = 0.05
  (``client.schedule = "inv_sqrt"``, ``client.lr = 0.05``).
* Windows of n = 60 samples with stride 1; trip-level 70/10/20 split.
* FO-RI-FedAvg: α 0.8, δ 1e-6, p ∈ [0.2, 5], λ 0.1, M 10, ℓ 0.01, m 100,
  B_probe 128, R_probe 5, ε_A = ε_T = 1e-8, β_κ 0 (the algorithm's defaults).
* Seeds {1, 2, 3, 4, 5}; final checkpoint w_T, no early stopping.
* MAPE as Eq. 34 (``task.mape_rule = "stabilized"``) with ε_Y = 10 Wh (the
  paper gives no value; "small relative to typical |Y|": the synthetic fleet's
  mean |Y| is 124–953 Wh by vehicle class).
* Regime-based non-IID partition with moderate skew α_D = 0.3
  (``data.bev.regime_skew = REGIME_SKEW_ALPHA``, ``data.bev.num_regimes = 4``;
  §IV-P "Client construction and non-IID control", and α_D = 0.3 in the
  protocols of §IV-K, §IV-N and §IV-O). Built in :mod:`fedfrac.data.bev`: each
  trip's regime is its mean-speed quartile within its vehicle class (the paper
  says "based on route and context" without a rule; mean speed is the trip-level
  summary of the route), every client draws π_k ~ Dirichlet(α_D · 1_4), and whole
  trips of the client's class are dealt to the 10 clients by largest remainder
  before the trip-level 70/10/20 split (no trip in two splits).

  The paper contradicts itself here: §IV-B2 says natural per-vehicle partitions
  are used "throughout all experiments without introducing additional synthetic
  non-IID protocols", while §IV-P, the run recipe ("regime_skew=moderate") and
  the protocols of §IV-K/N/O state α_D = 0.3 as the default. We follow the
  latter: it is stated in more places, names a value, and is the one the
  experiment sections repeat as "the default federation settings". Setting
  ``--config.data.bev.regime_skew=0`` gives the §IV-B2 reading (one client per
  vehicle, its own trips).

At stride 1 a vehicle's 6 h give ~21,600 windows (20× the stride-20 suite) and
300 rounds × 5 seeds × every method is far beyond a shared 2-core CPU: the
``fedfrac-reproduce fo_ri_fedavg`` suite runs the scaled-down setup of
configs/bev/base.py and says so in its report.
"""
from __future__ import annotations

import ml_collections
from configs.bev import base

REGIME_SKEW_ALPHA = 0.3   # α_D, moderate regime skew (§IV-P; see above)
ROUNDS = 300              # §IV-P (Table XI's T = 200 is its threshold horizon)


def get_config():
  c = base.get_config()
  c.name = "BEV, the paper's protocol (§IV-P), SYNTHETIC fleet"
  c.seeds = (1, 2, 3, 4, 5)
  c.rounds = ROUNDS
  c.eval_every = 10
  c.participation = 0.3
  c.data.bev.window = 60
  c.data.bev.stride = 1
  c.data.bev.regime_skew = REGIME_SKEW_ALPHA
  c.data.bev.num_regimes = 4
  c.client.optimizer = "sgd"
  c.client.lr = 0.05           # η0
  c.client.schedule = "inv_sqrt"   # η_t = η0 / sqrt(t + 1)
  c.client.momentum = 0.0
  c.client.batch_size = 64
  c.client.local_epochs = 1
  c.task.mape_rule = "stabilized"
  c.methods = ml_collections.ConfigDict()
  names = base.available([a for a, _ in base.MAIN_METHODS.values()])
  for label, (name, options) in base.MAIN_METHODS.items():
    if name in names and "client" not in options:   # one shared client optimizer
      c.methods[label] = base.method(name, **options)
  return c
