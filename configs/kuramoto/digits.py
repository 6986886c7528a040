"""Kuramoto-FedAvg, offline stand-in: scikit-learn digits with label shards.

The paper's protocol (docs/design.md §3.4) on the 1,797 real 8×8 digits instead of
MNIST: K clients (10 or 20), each holding s label shards (sort by label, K·s
equal shards, dealt without replacement; s ∈ {3, 5, 10} in the paper), 2 local
epochs, batch 64, SGD with momentum 0.9, learning rate 0.01 with cosine decay
over 100 rounds, full participation. The model is a small MLP (64→128→64→10) so
that whole sweeps run on a CPU in minutes; ``--config.model.name=cnn4`` gives the
paper's 2-conv + 2-FC CNN (on a CPU about 80× slower per round than the MLP).
Methods: the paper's two baselines, FedAvg and SCAFFOLD (§5.1), and
Kuramoto-FedAvg in its three weightings at κ0 = 0.1, β = 0.01. β (the decay of
κ_t = κ0·exp(−β t)) has no value in the paper: 0.01 is our choice. The paper
reports test accuracy averaged over clients (§5.1): each client has a test split
with its own class mix (``test_split="like_train"``) and the run logs its mean as
``client_accuracy_mean`` beside the global-test-set ``accuracy``.

  python -m fedfrac.main --config=configs/kuramoto/digits.py --workdir=runs/k_digits
  python -m fedfrac.main --config=configs/kuramoto/digits.py:K=20,s=5 --workdir=...

A κ0 sweep over seeds runs as one program with
``ff.run_many(config, seeds, grid={"kappa0": [0.005, 0.1, 0.3]})``; the committed
digits table (results/kuramoto_digits.md) comes from ``fedfrac-reproduce kuramoto``.
"""
import ml_collections

from fedfrac.config import base_config

WEIGHTINGS = ("coupled", "paper", "reference_code")


BASELINES = ("fedavg", "scaffold")   # Kuramoto-FedAvg §5.1
BETA = 0.01                          # our choice: the paper gives no β


def kuramoto_methods(kappa0=0.1, beta=BETA):
  """FedAvg and SCAFFOLD plus Kuramoto-FedAvg in each weighting (labels
  ``kuramoto_<weighting>``)."""
  methods = ml_collections.ConfigDict()
  for name in BASELINES:
    methods[name] = ml_collections.ConfigDict(dict(name=name))
  for weighting in WEIGHTINGS:
    methods[f"kuramoto_{weighting}"] = ml_collections.ConfigDict(dict(
        name="kuramoto_fedavg", weighting=weighting, kappa0=kappa0, beta=beta))
  return methods


def parse_arg(arg):
  """``"K=20,s=5"`` -> (num_clients, shards_per_client); defaults K=10, s=3."""
  values = {"K": 10, "s": 3}
  for item in filter(None, (arg or "").split(",")):
    key, _, value = item.partition("=")
    if key.strip() not in values or not value.strip().isdigit():
      raise ValueError(f"config argument {item!r}: expected K=<clients>,s=<shards>")
    values[key.strip()] = int(value)
  return values["K"], values["s"]


def paper_protocol(c, arg=None):
  """The paper's federated setup on ``c`` (data source and model set by the caller)."""
  k, s = parse_arg(arg)
  c.seeds = (0, 1, 2)
  c.rounds = 100
  c.eval_every = 1
  c.checkpoint_every = 10
  c.target_accuracy = 0.8
  c.participation = 1.0
  c.data.num_clients = k
  c.data.partition = "shards"
  c.data.shards_per_client = s
  c.data.test_split = "like_train"
  c.client.optimizer = "momentum"
  c.client.momentum = 0.9
  c.client.lr = 0.01
  c.client.schedule = "cosine"
  c.client.final_lr_fraction = 0.0
  c.client.batch_size = 64
  c.client.local_epochs = 2
  c.methods = kuramoto_methods()
  return c


def get_config(arg=None):
  c = paper_protocol(base_config(), arg)
  c.name = (f"kuramoto: digits stand-in, K={c.data.num_clients}, "
            f"s={c.data.shards_per_client}")
  c.data.source = "sklearn_digits"
  c.model.name = "mlp"
  c.model.hidden = (128, 64)
  return c


def tfds_config(arg, tfds_name, title, model, padding=None):
  """The paper's protocol on a tfds dataset (configs/kuramoto/<dataset>.py)."""
  c = paper_protocol(base_config(), arg)
  c.name = f"kuramoto: {title}, K={c.data.num_clients}, s={c.data.shards_per_client}"
  c.data.source = "tfds"
  c.data.tfds.name = tfds_name
  c.model.name = model
  if padding:
    c.model.padding = padding
  return c
