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
``ff.run_many(config, seeds=seeds, grid={"kappa0": [0.005, 0.1, 0.3]})``; the committed
digits table (results/kuramoto_digits.md) comes from ``fedfrac-reproduce kuramoto``.

``mode=reference_code`` (``--config=configs/kuramoto/digits.py:mode=reference_code``,
with K and s as above) is the authors' whole run as their public code does it
(github.com/amuhebwa/Kuramoto-FedAvg, ``src/config/*.json``, ``main.py``,
``algorithms/BaseServer.py``, ``train_tools/preprocessing/*/loader.py``; every
point where it departs from the paper is listed in docs/design.md §3.4): training
batches augmented (random crop after zero padding, horizontal flip, Cutout;
``data.augment``), inputs normalised with their mean / std, SGD momentum 0.9 with
weight decay 1e-5 at lr 0.01 × 0.99 per round, 2 local epochs (their JSON's
``local_epochs: 1`` plus the one their server adds), their shard dealing drawn as
their code draws it from their fixed seed 19940817, one partition for every seed
(``data.partition="shards_reference"``, ``data.seed``), PyTorch's default
initialisation of the model (``model.init="torch"``), 100 rounds, and the methods
of their ``main.py``: FedAvg, SCAFFOLD,
Kuramoto-FedAvg with FedAvg clients (their ``_aggregation_with_kuramoto``:
constant κ = 0.3, clamp ±1e3) and Kuramoto-FedAvg with SCAFFOLD clients (their
shipped ``kuramoto`` entry runs the SCAFFOLD server: κ = 0.2, clamp ±10). Their
shipped JSONs set ``sync: 0``, so as shipped no run of theirs synchronises at all;
the two Kuramoto rows are their code with ``sync`` on. The headline is the global
model's accuracy on the whole test set (``accuracy``, what they log), with the
per-client mean beside it. On the 8×8 digits the augmentation is scaled down
(``crop:8:1,flip,cutout:4``, our choice) and the MNIST normalisation is kept.
"""
import ml_collections

from configs import args
from fedfrac.config import base_config
from fedfrac.data.shards_reference import AUTHORS_SEED

WEIGHTINGS = ("coupled", "paper", "reference_code")


BASELINES = ("fedavg", "scaffold")   # Kuramoto-FedAvg §5.1
BETA = 0.01                          # our choice: the paper gives no β
MODES = ("paper", "reference_code")

# The authors' run (reference_code mode). Their training transform
# (preprocessing/mnist/loader.py, cifar10/loader.py): RandomCrop(size, padding=4),
# RandomHorizontalFlip, ToTensor, Normalize, Cutout(16); 8x8 digits: ours, scaled.
AUTHORS_AUGMENT = {"grey": "crop:28:4,flip,cutout:16", "colour": "crop:32:4,flip,cutout:16",
                   "digits": "crop:8:1,flip,cutout:4"}
AUTHORS_NORMALISATION = {
    "grey": ((0.1307,), (0.3081,)),
    "colour": ((0.49139968, 0.48215827, 0.44653124), (0.24703233, 0.24348505, 0.26158768)),
}
AUTHORS_KAPPA = 0.3             # BaseServer.run: K_t=0.3, max_sync_clip=1e3
AUTHORS_SYNC_CLIP = 1e3
AUTHORS_SCAFFOLD_KAPPA = 0.2    # scaffold/Server.py run: K_t=0.2, max_sync_clip=1e1
AUTHORS_SCAFFOLD_SYNC_CLIP = 10.0


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


def reference_methods():
  """The authors' methods (their ``main.py`` ALGO table, ``sync`` on for the
  Kuramoto rows): FedAvg, SCAFFOLD, Kuramoto-FedAvg on FedAvg clients and on
  SCAFFOLD clients, κ constant (β = 0)."""
  methods = ml_collections.ConfigDict()
  for name in BASELINES:
    methods[name] = ml_collections.ConfigDict(dict(name=name))
  methods.kuramoto_reference_code = ml_collections.ConfigDict(dict(
      name="kuramoto_fedavg", weighting="reference_code", kappa0=AUTHORS_KAPPA, beta=0.0,
      sync_clip=AUTHORS_SYNC_CLIP))
  methods.kuramoto_scaffold = ml_collections.ConfigDict(dict(
      name="kuramoto_fedavg", weighting="reference_code", kappa0=AUTHORS_SCAFFOLD_KAPPA,
      beta=0.0, sync_clip=AUTHORS_SCAFFOLD_SYNC_CLIP, clients="scaffold"))
  return methods


def parse_arg(arg):
  """``"K=20,s=5,mode=reference_code"`` -> (num_clients, shards_per_client, mode);
  defaults K=10, s=3, mode=paper (:func:`configs.args.parse`)."""
  values = args.parse(arg, {"K": 10, "s": 3, "mode": "paper"}, {"mode": MODES})
  return values["K"], values["s"], values["mode"]


def reference_run(c, kind):
  """The authors' run settings on ``c`` (``kind``: "grey", "colour", "digits")."""
  c.name += " [reference_code]"
  c.data.partition = "shards_reference"   # their sharding_partition, their draws
  c.data.seed = AUTHORS_SEED       # one partition for every seed: their fixed seed
  c.model.init = "torch"           # PyTorch's default initialisation (their modules)
  c.data.augment = AUTHORS_AUGMENT[kind]
  c.data.input_mean, c.data.input_std = AUTHORS_NORMALISATION[
      "colour" if kind == "colour" else "grey"]
  c.client.schedule = "exponential"   # StepLR(step_size=1, gamma=0.99) per round
  c.client.lr_decay = 0.99
  c.client.weight_decay = 1e-5
  c.client.local_epochs = 2        # JSON local_epochs 1, BaseServer adds 1
  c.methods = reference_methods()
  return c


def paper_protocol(c, arg=None):
  """The paper's federated setup on ``c`` (data source and model set by the caller)."""
  k, s, _ = parse_arg(arg)
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
  if parse_arg(arg)[2] == "reference_code":
    reference_run(c, "digits")
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
  if parse_arg(arg)[2] == "reference_code":
    reference_run(c, "colour" if tfds_name.startswith("cifar") else "grey")
  return c
