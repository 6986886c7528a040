"""Default experiment config and its validation (DESIGN §2.3).

``base_config()`` returns a ConfigDict holding every field a run reads; files in
``configs/`` start from it and change what they need. ``validate(config)`` checks
every field before any compute and raises :class:`ConfigError` naming the key,
the value and what is allowed.
"""
from __future__ import annotations

import math

import ml_collections

from fedfrac import algorithms
import importlib
partition_lib = importlib.import_module("fedfrac.data.partition")
from fedfrac.data import sources
from fedfrac import models
from fedfrac.optim import schedules


class ConfigError(ValueError):
  """A config value is invalid; the message names the key, value and allowed range."""


def base_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.name = "experiment"
  c.seeds = (0,)
  c.rounds = 30
  c.participation = 1.0          # C: |S_t| = max(ceil(C K), 1)
  c.eval_every = 1               # rounds per compiled chunk; evaluate after each
  c.checkpoint_every = 1         # chunks between checkpoints (0 = only at the end)
  c.target_accuracy = 0.8        # for rounds-to-target
  c.target_rmse = 0.0            # regression: rounds until RMSE <= this (0 = off)
  c.progress = True
  c.on_divergence = "stop"       # "stop": mark the run diverged; "error": raise
  c.only = ""                    # comma-separated method labels to run (empty = all)

  c.data = ml_collections.ConfigDict()
  c.data.source = "sklearn_digits"
  c.data.num_clients = 10
  c.data.partition = "dirichlet"
  c.data.alpha = 0.5
  c.data.shards_per_client = 2
  c.data.classes_per_client = 2
  c.data.min_client_size = 64
  c.data.on_small = "error"
  c.data.min_size = 1
  c.data.test_split = "like_train"   # like_train | iid | natural
  c.data.test_fraction = 0.2
  c.data.split_seed = 0
  c.data.seed = -1                   # partition seed; -1 = the run's seed
  c.data.compat = "paper"            # paper | reference_code (FIRMA authors' pipeline)
  c.data.synthetic = ml_collections.ConfigDict(dict(
      alpha=1.0, beta=1.0, dim=60, num_classes=10, iid=False, max_client_size=2000))
  c.data.tfds = ml_collections.ConfigDict(dict(
      name="mnist", data_dir="", download=False, max_train=0, max_test=0))

  c.model = ml_collections.ConfigDict(dict(
      name="mlp", hidden=(200, 200), padding="VALID", dropout=0.5))

  c.client = ml_collections.ConfigDict(dict(
      optimizer="sgd", lr=0.05, momentum=0.9, weight_decay=0.0,
      schedule="constant", final_lr_fraction=0.0, lr_decay=1.0,
      batch_size=32, local_epochs=1, local_steps=0))

  c.task = ml_collections.ConfigDict(dict(loss="cross_entropy", huber_delta=1.0))

  c.engine = ml_collections.ConfigDict(dict(
      client_parallelism="auto", unroll=0, eval_batch_size=1024,
      dynamic_steps=False))
  c.churn = ml_collections.ConfigDict(dict(p_leave=0.0, p_join=1.0))

  # label -> {name: <algorithm>, <options>..., client: {<client overrides>}}
  c.methods = ml_collections.ConfigDict()
  c.methods.fedavg = ml_collections.ConfigDict(dict(name="fedavg"))
  return c


def _fail(key, value, allowed):
  raise ConfigError(f"config.{key}={value!r}: {allowed}")


def _is_int(v):
  return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v):
  return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check(cond, key, value, allowed):
  if not cond:
    _fail(key, value, allowed)


def _int_at_least(c, key, lo):
  v = _get(c, key)
  _check(_is_int(v) and v >= lo, key, v, f"must be an integer >= {lo}")


def _get(c, dotted):
  for part in dotted.split("."):
    c = c[part]
  return c


def method_labels(config):
  labels = list(config.methods.keys())
  if config.only:
    wanted = [s.strip() for s in config.only.split(",") if s.strip()]
    for w in wanted:
      if w not in labels:
        _fail("only", config.only, f"unknown method label {w!r}; labels are "
              f"{', '.join(labels)}")
    labels = [l for l in labels if l in wanted]
  return labels


def method_options(method_cfg) -> dict:
  """Algorithm options of one ``methods.<label>`` entry (without name/client)."""
  return {k: v for k, v in method_cfg.items() if k not in ("name", "client")}


def client_config(config, label) -> ml_collections.ConfigDict:
  """``config.client`` with the method's ``client`` overrides applied."""
  merged = ml_collections.ConfigDict(config.client.to_dict())
  overrides = config.methods[label].get("client", None)
  if overrides:
    for k, v in overrides.items():
      if k not in merged:
        _fail(f"methods.{label}.client.{k}", v,
              f"unknown client option; allowed: {', '.join(merged.keys())}")
      merged[k] = v
  return merged


def _validate_client(cc, prefix):
  _check(cc.optimizer in schedules.OPTIMIZERS, f"{prefix}.optimizer", cc.optimizer,
         f"allowed values are {', '.join(schedules.OPTIMIZERS)}")
  _check(_is_num(cc.lr) and cc.lr > 0, f"{prefix}.lr", cc.lr, "must be > 0")
  _check(_is_num(cc.momentum) and 0 <= cc.momentum < 1, f"{prefix}.momentum",
         cc.momentum, "must be in [0, 1)")
  _check(_is_num(cc.weight_decay) and cc.weight_decay >= 0, f"{prefix}.weight_decay",
         cc.weight_decay, "must be >= 0")
  _check(cc.schedule in schedules.SCHEDULES, f"{prefix}.schedule", cc.schedule,
         f"allowed values are {', '.join(schedules.SCHEDULES)}")
  _check(_is_num(cc.final_lr_fraction) and 0 <= cc.final_lr_fraction <= 1,
         f"{prefix}.final_lr_fraction", cc.final_lr_fraction, "must be in [0, 1]")
  _check(_is_num(cc.lr_decay) and 0 < cc.lr_decay <= 1, f"{prefix}.lr_decay",
         cc.lr_decay, "must be in (0, 1]")
  _check(_is_int(cc.batch_size) and cc.batch_size >= 1, f"{prefix}.batch_size",
         cc.batch_size, "must be an integer >= 1")
  _check(_is_int(cc.local_steps) and cc.local_steps >= 0, f"{prefix}.local_steps",
         cc.local_steps, "must be an integer >= 0 (0 = epoch mode)")
  if cc.local_steps == 0:
    _check(_is_int(cc.local_epochs) and cc.local_epochs >= 1, f"{prefix}.local_epochs",
           cc.local_epochs, "must be an integer >= 1 (or set local_steps > 0)")


def validate(config) -> None:
  """Check every field; raise :class:`ConfigError` on the first bad one."""
  seeds = config.seeds
  if isinstance(seeds, int):
    seeds = (seeds,)
  _check(isinstance(seeds, (tuple, list)) and len(seeds) > 0
         and all(_is_int(s) and s >= 0 for s in seeds), "seeds", config.seeds,
         "must be a non-empty tuple of integers >= 0")
  _int_at_least(config, "rounds", 1)
  _check(_is_num(config.participation) and 0 < config.participation <= 1,
         "participation", config.participation, "must be in (0, 1]")
  _int_at_least(config, "eval_every", 1)
  _int_at_least(config, "checkpoint_every", 0)
  _check(_is_num(config.target_accuracy) and 0 <= config.target_accuracy <= 1,
         "target_accuracy", config.target_accuracy, "must be in [0, 1]")
  _check(config.on_divergence in ("stop", "error"), "on_divergence",
         config.on_divergence, "allowed values are 'stop', 'error'")

  d = config.data
  _check(d.source in sources.SOURCES, "data.source", d.source,
         f"allowed values are {', '.join(sources.SOURCES)}")
  _int_at_least(config, "data.num_clients", 1)
  _check(d.partition in partition_lib.SCHEMES, "data.partition", d.partition,
         f"allowed values are {', '.join(partition_lib.SCHEMES)}")
  _check(_is_num(d.alpha) and d.alpha > 0, "data.alpha", d.alpha, "must be > 0")
  _int_at_least(config, "data.shards_per_client", 1)
  _int_at_least(config, "data.classes_per_client", 1)
  _int_at_least(config, "data.min_size", 1)
  _int_at_least(config, "data.min_client_size", 1)
  _check(d.on_small in ("drop", "error"), "data.on_small", d.on_small,
         "allowed values are 'drop', 'error'")
  _check(d.test_split in ("like_train", "iid", "natural"), "data.test_split",
         d.test_split, "allowed values are 'like_train', 'iid', 'natural'")
  _check(_is_num(d.test_fraction) and 0 < d.test_fraction < 1, "data.test_fraction",
         d.test_fraction, "must be in (0, 1)")
  _check(_is_int(d.seed) and d.seed >= -1, "data.seed", d.seed,
         "must be an integer >= 0, or -1 for the run's seed")
  compat = d.get("compat", "paper")
  _check(compat in ("paper", "reference_code"), "data.compat", compat,
         "allowed values are 'paper', 'reference_code'")
  if compat == "reference_code":
    _check(d.partition in ("iid", "dirichlet", "label_skew"), "data.partition",
           d.partition, "data.compat='reference_code' supports 'iid', "
           "'dirichlet', 'label_skew' (the FIRMA authors' splits)")
  if d.source == "tfds":
    _check(d.tfds.name in sources.TFDS_DATASETS, "data.tfds.name", d.tfds.name,
           f"allowed values are {', '.join(sources.TFDS_DATASETS)}")

  m = config.model
  _check(m.name in models.MODELS, "model.name", m.name,
         f"allowed values are {', '.join(models.MODELS)}")
  _check(isinstance(m.hidden, (tuple, list)) and all(_is_int(h) and h > 0 for h in m.hidden),
         "model.hidden", m.hidden, "must be a tuple of positive integers")
  _check(m.padding in ("VALID", "SAME"), "model.padding", m.padding,
         "allowed values are 'VALID', 'SAME'")
  _check(_is_num(m.dropout) and 0 <= m.dropout < 1, "model.dropout", m.dropout,
         "must be in [0, 1)")

  _check(config.task.loss in ("cross_entropy", "mse", "huber"), "task.loss",
         config.task.loss, "allowed values are 'cross_entropy', 'mse', 'huber'")

  e = config.engine
  _check(e.client_parallelism in ("vmap", "map", "auto"), "engine.client_parallelism",
         e.client_parallelism, "allowed values are 'vmap', 'map', 'auto'")
  _int_at_least(config, "engine.unroll", 0)
  _check(isinstance(e.get("dynamic_steps", False), bool), "engine.dynamic_steps",
         e.get("dynamic_steps", False), "must be True or False")
  _int_at_least(config, "engine.eval_batch_size", 1)
  ch = config.churn
  _check(_is_num(ch.p_leave) and 0 <= ch.p_leave <= 1, "churn.p_leave", ch.p_leave,
         "must be in [0, 1]")
  _check(_is_num(ch.p_join) and 0 <= ch.p_join <= 1, "churn.p_join", ch.p_join,
         "must be in [0, 1]")

  _validate_client(config.client, "client")
  _check(len(config.methods) > 0, "methods", "{}", "must name at least one method")
  for label in method_labels(config):
    mc = config.methods[label]
    name = mc.get("name", None)
    _check(name in algorithms.names(), f"methods.{label}.name", name,
           f"allowed values are {', '.join(algorithms.names())}")
    _validate_client(client_config(config, label), f"methods.{label}.client")
    try:
      algorithms.hparams(name, method_options(mc), prefix=f"methods.{label}.")
    except ConfigError:
      raise
    except ValueError as e:
      raise ConfigError(f"config.{e}") from None
    module = importlib.import_module(f"fedfrac.algorithms.{algorithms.REGISTRY[name][0]}")
    if getattr(module, "FULL_PARTICIPATION", False):
      # Ring gossip mixes every client's model every round.
      _check(config.participation == 1, "participation", config.participation,
             f"must be 1 for method {label!r} ({name}: decentralised ring, every "
             f"client takes part in every round)")
      _check(config.churn.p_leave == 0 and config.churn.p_join == 1, "churn.p_leave",
             config.churn.p_leave, f"must be 0 (with churn.p_join=1) for method "
             f"{label!r} ({name}: decentralised ring without churn)")
