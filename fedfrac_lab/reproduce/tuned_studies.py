"""The learning-rate-tuned studies (:mod:`fedfrac_lab.reproduce.tuned`): each a
paper's setting on its stand-in data, its methods and the grid of client
learning rates, with the validation split carved from each client's train rows."""
from __future__ import annotations


from typing import Callable, NamedTuple, Optional


from fedfrac_lab.reproduce import common



VALIDATION_FRACTION = 0.2


def _fractional(c):
  """configs/fofedavg/digits.py methods plus FedProx, SCAFFOLD and FOFedAvg's α
  grid as separate methods (each α is tuned on its own)."""
  import ml_collections
  m = ml_collections.ConfigDict()
  m.fedavg = dict(name="fedavg")
  m.fedprox = dict(name="fedprox")
  m.scaffold = dict(name="scaffold")
  for a in (0.5, 0.8, 0.97):
    m["fofedavg_a" + f"{a}".replace(".", "")] = dict(name="fofedavg", alpha=a)
  m.fo_fedavg = dict(name="fo_fedavg")
  m.ri_fedavg = dict(name="ri_fedavg")
  m.fo_ri_fedavg = dict(name="fo_ri_fedavg")
  c.methods = m
  return c


def _kuramoto(c):
  import ml_collections
  m = c.methods
  m.scaffold = ml_collections.ConfigDict(dict(name="scaffold"))
  return c


def _firma(c):
  for label in list(c.methods.keys()):
    if label not in ("fedavg", "fedrep", "fibfl_pp"):
      del c.methods[label]
  return c


class Study(NamedTuple):
  """One study: its config (file and argument), the edit of its methods, the
  learning-rate grid every method runs, the score, and two lines of text."""
  path: str
  arg: Optional[str]
  edit: Callable
  lrs: tuple
  metric: str
  paper_text: str
  data_text: str


# Log grids (steps of ×√10, rounded) spanning two decades or more around each paper
# rate, the same for every method of a study (Kuramoto: three decades, since
# FedAvg's best rate on 0.001 … 0.1 was the top one).
STUDIES = {
    "fractional": Study(
        "fofedavg/digits.py", None, _fractional, (0.03, 0.1, 0.3, 1.0, 3.0), "accuracy",
        "client lr 0.1 with μ_t = 0.1/sqrt(t+1) for every method "
        "(configs/fofedavg/digits.py)",
        "digits (offline stand-in for MNIST), Dirichlet 0.3, 10 clients, 30 rounds"),
    "kuramoto": Study(
        "kuramoto/digits.py", "s=3", _kuramoto, (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0),
        "client_accuracy_mean",
        "SGD momentum 0.9, lr 0.01 cosine (the paper's Section 5.1); Kuramoto-FedAvg "
        "κ0 = 0.1, β = 0.01",
        "digits (offline stand-in for MNIST), 3 label shards per client, K = 10, "
        "100 rounds"),
    "firma": Study(
        "firma/digits.py", "paper,dir0.5", _firma, (0.003, 0.01, 0.03, 0.1, 0.3),
        "client_accuracy_mean",
        "FIRMA Table 4: FedAvg/FedRep SGD momentum 0.9 lr 0.01, FibFL++ Adam lr 0.01",
        "MNIST-1797 (the paper's digits), Dir 0.5, N = 5, R = 10"),
}
def study_config(study, rounds=None, data_dir=None, file_format=None):
  """The config of ``study`` (methods edited, ``rounds`` overridden when given;
  ``data_dir`` switches the data to ``data.source="files"``)."""
  st = STUDIES[study]
  module = common.config_module(st.path)
  cfg = module.get_config(st.arg) if st.arg is not None else module.get_config()
  cfg = st.edit(cfg)
  if rounds:
    cfg.rounds = int(rounds)
  if data_dir:
    cfg.data.source = "files"
    cfg.data.dir = data_dir
    if file_format:
      cfg.data.files.format = file_format
  cfg.eval_every = cfg.rounds
  cfg.checkpoint_every = 0
  cfg.progress = False
  return cfg
