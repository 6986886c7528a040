"""What a run can be made of, as text for ``python -m fedfrac.main --list``, and
the family of every method.

Generated from the registries themselves (``fedfrac.algorithms.REGISTRY`` and
each entry's :class:`~fedfrac.algorithms.schema.HParamSchema`, the data sources'
``SOURCE_DESCRIPTIONS``, the partitions' ``SCHEME_DESCRIPTIONS`` and the models'
``MODEL_DESCRIPTIONS``), so the listing cannot drift from what a config accepts.

:data:`FAMILIES` groups the registered algorithms by where they come from
(baselines, the fractional family, the FIRMA ring methods, Kuramoto, privacy and
secure aggregation, personalised methods); the quickstart figures draw one panel
per family and the summary tables name each method's family, both through
:func:`family`. :data:`STAND_INS` names the methods built without their paper's
full text, :data:`PAPERS` the paper each method comes from.
"""
from __future__ import annotations

import importlib

from fedfrac import algorithms, config_base, models
# The families of methods live with the algorithms (re-exported: --list, the docs).
from fedfrac.algorithms.families import (FAMILIES, OTHER, REFERENCE,  # noqa: F401
                                         STAND_INS, Family, family)
from fedfrac.algorithms.schema import HParam, OneOf
from fedfrac.data import sources

# fedfrac.data re-exports a function named ``partition``; this is the module.
partition = importlib.import_module("fedfrac.data.partition")


_FOFEDAVG = "Partohaghighi, Marcia, Chen: Fractional-Order Federated Learning (FOFedAvg)"
_BEV = ("Partohaghighi, Marcia, West, Chen: Fractional Order Federated Learning for "
        "BEV energy consumption modelling (FO-RI-FedAvg)")
_FIRMA = "Hedjam: FIRMA, FIbonacci Ring Model Aggregation"
_FEDOPT = "Reddi et al. 2021: Adaptive Federated Optimization (FedOpt)"
# The paper each method comes from (the API reference's algorithm pages).
PAPERS = {
    "fedavg": "McMahan et al. 2017: Communication-Efficient Learning of Deep Networks "
              "from Decentralized Data (FedAvg)",
    "fedavgm": "Hsu, Qi, Brown 2019: Measuring the Effects of Non-Identical Data "
               "Distribution for Federated Visual Classification (FedAvgM)",
    "fedprox": "Li et al. 2020: Federated Optimization in Heterogeneous Networks (FedProx)",
    "scaffold": "Karimireddy et al. 2020: SCAFFOLD, Stochastic Controlled Averaging for "
                "Federated Learning",
    "fednova": "Wang et al. 2020: Tackling the Objective Inconsistency Problem in "
               "Heterogeneous Federated Optimization (FedNova)",
    "fedadam": _FEDOPT, "fedyogi": _FEDOPT, "fedadagrad": _FEDOPT,
    "moon": "Li, He, Song 2021: Model-Contrastive Federated Learning (MOON)",
    "feddyn": "Acar et al. 2021: Federated Learning Based on Dynamic Regularization "
              "(FedDyn)",
    "fdse": "Wang et al., CVPR 2025: Federated Learning with Domain Shift Eraser (FDSE)",
    "fedel": "Zhang, Chen, Bian, Wang, Xu, NeurIPS 2025: FedEL, Federated Elastic "
             "Learning for Heterogeneous Devices (arXiv 2509.16902)",
    "fofedavg": _FOFEDAVG,
    "fo_ri_fedavg": _BEV, "fo_fedavg": _BEV, "ri_fedavg": _BEV,
    "rdfl": "Wang et al. 2021: ring decentralised federated learning (RDFL), the "
            "uniform-ring baseline of FIRMA",
    "fibfl": _FIRMA, "fibfl_plus": _FIRMA, "fibfl_pp": _FIRMA,
    "kuramoto_fedavg": "Muhebwa, Selialia, Anwar, Osman: Kuramoto-FedAvg "
                       "(arXiv:2505.19605)",
    "dp_fedavg": "McMahan, Ramage, Talwar, Zhang 2018: Learning Differentially Private "
                 "Recurrent Language Models (DP-FedAvg)",
    "dp_sgd": "Abadi et al. 2016: Deep Learning with Differential Privacy (DPSGD)",
    "sparse_secagg": "Ergün, Sami, Güler: Sparsified Secure Aggregation for "
                     "Privacy-Preserving Federated Learning (arXiv:2112.12872)",
    "fedrep": "Collins et al. 2021: Exploiting Shared Representations for "
              "Personalized Federated Learning (FedRep)",
    "fedbm": "Ping, Fu, Zhao, Liu, Pu, Ding, FGCS 2025: FedBM, Balancing Models for "
             "Personalized Federated Learning",
}

def allowed_text(hp: HParam) -> str:
  """What option ``hp`` allows: its listed values, else its ``allowed`` phrase."""
  if isinstance(hp.check, OneOf):
    return "one of " + ", ".join(repr(v) for v in hp.check.values)
  return hp.allowed or "any value"


def option_line(key: str, hp: HParam) -> str:
  """``<key> = <default!r>  (<allowed>)``: one option of an algorithm."""
  return f"{key} = {hp.default!r}  ({allowed_text(hp)})"


def algorithm_block(name: str) -> list:
  """Lines describing algorithm ``name``: summary, capabilities, options."""
  e = algorithms.entry(name)
  caps = e.capabilities()
  lines = [f"  {name}: {e.summary}" + (f"  [{', '.join(caps)}]" if caps else "")]
  options = list(e.schema.items())
  lines += [f"      {option_line(key, hp)}" for key, hp in options]
  if not options:
    lines.append("      (no options)")
  return lines


def _named(title, config_key, descriptions) -> list:
  width = max(len(n) for n in descriptions)
  return ([f"{title} ({config_key}):"] +
          [f"  {n.ljust(width)}  {d}" for n, d in descriptions.items()])


def config_keys_text() -> list:
  """Every config key (``--config.<key>=<value>``) with its default, what its
  checks allow and what it means, section by section, from its one declaration
  (:func:`fedfrac.config_base.schema`)."""
  lines, section = ["Config keys (--config.<key>=<value>; default, (allowed), meaning):"], None
  for key, default, allowed, doc in config_base.schema().described():
    head = key.split(".", 1)[0] if "." in key else ""
    if head != section:
      section = head
      lines.append(f"  [{head or 'run'}]")
    lines.append(f"  {key} = {default!r}" + (f"  ({allowed})" if allowed else "") +
                 (f"  {doc}" if doc else ""))
  return lines


def catalog_text() -> str:
  """Every algorithm with its options, defaults and allowed values; every data
  source, partition and model; every config key."""
  lines = ["Algorithms (config.methods.<label>.name; options go beside it):"]
  for name in algorithms.names():
    lines += algorithm_block(name)
  lines += ["", "Asynchronous servers (config.clock.server; options in "
            "config.clock.options; the client update is the method's, for methods "
            "marked asynchronous):"]
  for name, e in algorithms.ASYNC_SERVERS.items():
    lines.append(f"  {name}: {e.summary}")
    lines += [f"      {option_line(key, hp)}" for key, hp in e.schema.items()]
  lines.append("")
  lines += _named("Data sources", "config.data.source", sources.SOURCE_DESCRIPTIONS)
  lines.append("")
  lines += _named("Partitions", "config.data.partition", partition.SCHEME_DESCRIPTIONS)
  lines += ["", "Input normalisation (config.data.input_mean / config.data.input_std):",
            "  one value or one per channel: (x - mean) / std after images are scaled "
            "to [0, 1]", "  (torchvision's Normalize); () = off (default)", ""]
  lines += ["Training-data augmentation (config.data.augment; fedfrac.data.augment):",
            "  comma-separated ops applied in order to every local-step batch of image",
            "  data [H, W, C], on device; '' = off (default):",
            "  crop:SIZE:PAD  zero-pad PAD pixels, random SIZE x SIZE window (SIZE = the "
            "image's)",
            "  flip           horizontal flip with probability 1/2",
            "  cutout:SIZE    SIZE x SIZE square at a random centre set to data.input_mean "
            "(0 after normalisation)",
            "  e.g. 'crop:28:4,flip,cutout:16' (the Kuramoto-FedAvg authors' MNIST / "
            "Fashion-MNIST transform)", ""]
  lines += _named("Models", "config.model.name", models.MODEL_DESCRIPTIONS)
  lines += [""] + config_keys_text()
  return "\n".join(lines)
