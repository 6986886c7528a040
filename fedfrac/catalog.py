"""What a run can be made of, as text for ``python -m fedfrac.main --list``.

Generated from the registries themselves (``fedfrac.algorithms.REGISTRY`` and
each entry's :class:`~fedfrac.algorithms.schema.HParamSchema`, the data sources'
``SOURCE_DESCRIPTIONS``, the partitions' ``SCHEME_DESCRIPTIONS`` and the models'
``MODEL_DESCRIPTIONS``), so the listing cannot drift from what a config accepts.
"""
from __future__ import annotations

import importlib

from fedfrac import algorithms, models
from fedfrac.algorithms.schema import HParam, OneOf
from fedfrac.data import sources

# fedfrac.data re-exports a function named ``partition``; this is the module.
partition = importlib.import_module("fedfrac.data.partition")


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


def catalog_text() -> str:
  """Every algorithm with its options, defaults and allowed values; every data
  source, partition and model."""
  lines = ["Algorithms (config.methods.<label>.name; options go beside it):"]
  for name in algorithms.names():
    lines += algorithm_block(name)
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
  return "\n".join(lines)
