"""Default experiment config and its validation (DESIGN §2.3).

``base_config()`` returns a ConfigDict holding every field a run reads; files in
``configs/`` start from it and change what they need. ``validate(config)`` checks
every field before any compute and raises :class:`ConfigError` naming the key,
the value and what is allowed.
"""
from __future__ import annotations

import importlib.util
import math
import os

import ml_collections

from fedfrac import algorithms
from fedfrac import engine as engine_lib
from fedfrac.algorithms import server as server_lib
import importlib
partition_lib = importlib.import_module("fedfrac.data.partition")
from fedfrac.data import sources
from fedfrac import models
from fedfrac.optim import schedules


class ConfigError(ValueError):
  """A config value is invalid; the message names the key, value and allowed range."""


def sibling_config(config_file, name):
  """Import the config module ``name`` that sits beside ``config_file`` (pass
  ``__file__``), so one config file can build on another: config files are loaded
  by path (``--config=configs/x/y.py``), not imported as a package."""
  path = os.path.join(os.path.dirname(os.path.abspath(config_file)), name)
  label = os.path.relpath(path).replace(os.sep, "_").replace(".", "_")
  spec = importlib.util.spec_from_file_location(f"fedfrac_config_{label}", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


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
  # BEV energy sources (synthetic_bev, ved_csv): one client per vehicle, so
  # data.partition must be "natural"; data.num_clients = vehicles in the synthetic
  # fleet (ved_csv: 0 = every usable vehicle in the files).
  c.data.bev = ml_collections.ConfigDict(dict(
      hours_per_vehicle=3.0,             # synthetic fleet: driving hours per vehicle
      class_mix=(0.6, 0.2, 0.2),         # synthetic fleet: passenger, truck, bus
      temperature_range_c=(-5.0, 30.0),  # synthetic fleet: per-vehicle climate range
      window=60,                         # L_win samples per window
      stride=10,                         # window stride (the VED paper uses 1)
      fractions=(0.7, 0.1, 0.2),         # train/val/test trips per vehicle
      holdout_vehicles=(),               # vehicles whose windows all go to test
      min_windows=1,                     # drop vehicles with fewer windows
      eval_split="test",                 # split the engine evaluates: test | val
      input_clip=0.0,                    # clip normalised inputs to ±this (0 = off)
      ved_path="",                       # VED dynamic CSVs: file, dir or a,b,c
      ved_resample_dt_s=1.0, ved_max_gap_s=10.0, ved_vehicles=(),
      ved_current_sign="auto"))

  c.model = ml_collections.ConfigDict(dict(
      name="mlp", hidden=(200, 200), padding="VALID", dropout=0.5, rnn_hidden=64))

  c.client = ml_collections.ConfigDict(dict(
      optimizer="sgd", lr=0.05, momentum=0.9, weight_decay=0.0,
      schedule="constant", final_lr_fraction=0.0, lr_decay=1.0,
      batch_size=32, local_epochs=1, local_steps=0))

  # mape_eps: ε_Y (label units, Wh for BEV): MAPE counts samples with |y| > ε_Y.
  c.task = ml_collections.ConfigDict(dict(loss="cross_entropy", huber_delta=1.0,
                                          mape_eps=1.0))

  # client_parallelism: vmap | map | auto (map for conv models on CPU, else vmap);
  # unroll: local steps per loop iteration (0 = auto); dynamic_steps: local-step
  # loops stop at each client's own step count; step_buckets: vmapped groups of
  # the step-sorted cohort (0 = auto); shard_clients: shard the cohort over all
  # devices with shard_map (auto = when there are several); cpu_devices: split
  # the CPU into this many devices, one per core (0 = leave JAX's default; only
  # takes effect before JAX first runs, e.g. from the CLI). None of them changes
  # results.
  c.engine = ml_collections.ConfigDict(dict(
      client_parallelism="auto", unroll=0, eval_batch_size=1024,
      dynamic_steps=True, step_buckets=0, shard_clients="auto",
      cpu_devices=0))
  c.churn = ml_collections.ConfigDict(dict(p_leave=0.0, p_join=1.0))
  # Asymmetric churn: client group (BEV: vehicle class) -> (p_leave, p_join);
  # groups not listed use p_leave/p_join above.
  c.churn.per_class = ml_collections.ConfigDict()

  # How the server combines the cohort's updates (fedfrac.algorithms.server):
  # mean | median | trimmed_mean (trim_beta per side) | krum | multi_krum
  # (num_byzantine = f; multi = clients averaged, 0 = cohort − f).
  c.server = ml_collections.ConfigDict(dict(
      aggregator="mean", trim_beta=0.1, num_byzantine=0, multi=0))
  # Byzantine clients, fixed per seed: kind none | sign_flip (send −scale·Δ) |
  # gaussian (send N(0, std²) noise) | scaled (send scale·Δ) | label_flip
  # (train on C−1−y); fraction of the K clients; seed -1 = the run's seed.
  c.attack = ml_collections.ConfigDict(dict(
      kind="none", fraction=0.0, scale=1.0, std=1.0, seed=-1))

  # label -> {name: <algorithm>, <options>..., client: {<client overrides>},
  #           server: {<server overrides>}, attack: {<attack overrides>}}
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


# Sections a method entry may override for itself (``methods.<label>.<section>``).
METHOD_SECTIONS = ("client", "server", "attack")


def method_options(method_cfg) -> dict:
  """Algorithm options of one ``methods.<label>`` entry (without name and the
  per-method ``client`` / ``server`` / ``attack`` overrides)."""
  return {k: v for k, v in method_cfg.items()
          if k != "name" and k not in METHOD_SECTIONS}


def _section(config, section) -> ml_collections.ConfigDict:
  """``config.<section>``; the defaults when a hand-built config lacks it."""
  value = config.get(section, None)
  return base_config()[section] if value is None else value


def _section_config(config, label, section) -> ml_collections.ConfigDict:
  """``config.<section>`` with ``methods.<label>.<section>`` overrides applied."""
  merged = ml_collections.ConfigDict(_section(config, section).to_dict())
  overrides = config.methods[label].get(section, None)
  if overrides:
    for k, v in overrides.items():
      if k not in merged:
        _fail(f"methods.{label}.{section}.{k}", v,
              f"unknown {section} option; allowed: {', '.join(merged.keys())}")
      merged[k] = v
  return merged


def client_config(config, label) -> ml_collections.ConfigDict:
  """``config.client`` with the method's ``client`` overrides applied."""
  return _section_config(config, label, "client")


def server_config(config, label) -> ml_collections.ConfigDict:
  """``config.server`` with the method's ``server`` overrides applied."""
  return _section_config(config, label, "server")


def attack_config(config, label) -> ml_collections.ConfigDict:
  """``config.attack`` with the method's ``attack`` overrides applied."""
  return _section_config(config, label, "attack")


def _spec(sc) -> server_lib.AggregatorSpec:
  return server_lib.AggregatorSpec(name=sc.aggregator, trim_beta=sc.trim_beta,
                                   num_byzantine=sc.num_byzantine, multi=sc.multi)


def aggregator_spec(config, label) -> server_lib.AggregatorSpec:
  """The :class:`AggregatorSpec` of method ``label``."""
  return _spec(server_config(config, label))


def engine_attack(config, label):
  """The engine's :class:`AttackConfig` of method ``label`` (None: no attack)."""
  ac = attack_config(config, label)
  if ac.kind == "none":
    return None
  return engine_lib.AttackConfig(kind=ac.kind, fraction=float(ac.fraction),
                                 scale=float(ac.scale), std=float(ac.std),
                                 seed=None if ac.seed < 0 else int(ac.seed))


def _validate_server(config, sc, prefix, label=None):
  """Check a ``server`` section; with ``label``, also that the method supports it."""
  spec = _spec(sc)
  cohort = engine_lib.cohort_size(config.participation, config.data.num_clients)
  try:
    spec.check(cohort, prefix=f"{prefix}.")
  except ValueError as e:
    raise ConfigError(f"config.{e}") from None
  if label is not None and not spec.is_mean:
    name = config.methods[label].name
    if not algorithms.supports_robust_aggregation(name):
      supported = [n for n in algorithms.names() if algorithms.supports_robust_aggregation(n)]
      _fail(f"{prefix}.aggregator", spec.name,
            f"algorithm {name!r} (method {label!r}) does not combine client updates "
            f"through server.combine_deltas; robust aggregators work with "
            f"{', '.join(supported)}")


def _validate_attack(config, ac, prefix):
  """Check an ``attack`` section."""
  _check(ac.kind in engine_lib.ATTACKS, f"{prefix}.kind", ac.kind,
         f"allowed values are {', '.join(engine_lib.ATTACKS)}")
  _check(_is_num(ac.fraction) and 0 <= ac.fraction <= 1, f"{prefix}.fraction",
         ac.fraction, "must be in [0, 1]")
  _check(_is_num(ac.scale), f"{prefix}.scale", ac.scale, "must be a finite number")
  _check(_is_num(ac.std) and ac.std >= 0, f"{prefix}.std", ac.std, "must be >= 0")
  _check(_is_int(ac.seed) and ac.seed >= -1, f"{prefix}.seed", ac.seed,
         "must be an integer >= 0, or -1 for the run's seed")
  if ac.kind == "label_flip":
    _check(config.task.loss == "cross_entropy", f"{prefix}.kind", ac.kind,
           "label_flip needs a classification task (task.loss='cross_entropy')")


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


_BEV_CLASSES = ("passenger", "truck", "bus", "ev", "phev")


def _validate_bev(config):
  d, b = config.data, config.data.bev
  _check(d.partition == "natural", "data.partition", d.partition,
         f"source {d.source!r} has one client per vehicle: must be 'natural'")
  _check(config.task.loss in ("mse", "huber"), "task.loss", config.task.loss,
         f"source {d.source!r} is a regression task: allowed values are 'mse', 'huber'")
  _check(_is_num(b.hours_per_vehicle) and b.hours_per_vehicle > 0,
         "data.bev.hours_per_vehicle", b.hours_per_vehicle, "must be > 0")
  _check(isinstance(b.class_mix, (tuple, list)) and len(b.class_mix) == 3
         and all(_is_num(v) and v >= 0 for v in b.class_mix) and sum(b.class_mix) > 0,
         "data.bev.class_mix", b.class_mix,
         "must be 3 non-negative weights (passenger, truck, bus), not all 0")
  tr = b.temperature_range_c
  _check(isinstance(tr, (tuple, list)) and len(tr) == 2 and all(_is_num(v) for v in tr)
         and tr[0] <= tr[1], "data.bev.temperature_range_c", tr,
         "must be (low, high) in °C with low <= high")
  _int_at_least(config, "data.bev.window", 1)
  _int_at_least(config, "data.bev.stride", 1)
  _int_at_least(config, "data.bev.min_windows", 1)
  fr = b.fractions
  _check(isinstance(fr, (tuple, list)) and len(fr) == 3
         and all(_is_num(v) and v >= 0 for v in fr) and abs(sum(fr) - 1) < 1e-6
         and fr[0] > 0, "data.bev.fractions", fr,
         "must be 3 non-negative train/val/test fractions summing to 1, train > 0")
  _check(isinstance(b.holdout_vehicles, (tuple, list)), "data.bev.holdout_vehicles",
         b.holdout_vehicles, "must be a tuple of vehicle ids")
  _check(b.eval_split in ("test", "val"), "data.bev.eval_split", b.eval_split,
         "allowed values are 'test', 'val'")
  _check(b.eval_split != "val" or fr[1] > 0, "data.bev.eval_split", b.eval_split,
         "'val' needs a validation fraction > 0 in data.bev.fractions")
  _check(_is_num(b.input_clip) and b.input_clip >= 0, "data.bev.input_clip",
         b.input_clip, "must be >= 0 (0 = off)")
  if d.source == "ved_csv":
    _check(isinstance(b.ved_path, str) and b.ved_path != "", "data.bev.ved_path",
           b.ved_path, "give the VED dynamic-data CSV file(s) or their directory")
    _check(_is_num(b.ved_resample_dt_s) and b.ved_resample_dt_s > 0,
           "data.bev.ved_resample_dt_s", b.ved_resample_dt_s, "must be > 0")
    _check(_is_num(b.ved_max_gap_s) and b.ved_max_gap_s > 0, "data.bev.ved_max_gap_s",
           b.ved_max_gap_s, "must be > 0")
    _check(b.ved_current_sign in ("auto", 1, -1), "data.bev.ved_current_sign",
           b.ved_current_sign, "allowed values are 'auto', 1, -1")


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
  _int_at_least(config, "data.num_clients", 0 if d.source == "ved_csv" else 1)
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
  bev_source = d.source in sources.BEV_SOURCES
  if bev_source:
    _validate_bev(config)

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
  _check(_is_num(config.task.huber_delta) and config.task.huber_delta > 0,
         "task.huber_delta", config.task.huber_delta, "must be > 0")
  _check(_is_num(config.task.get("mape_eps", 1.0)) and config.task.get("mape_eps", 1.0) >= 0,
         "task.mape_eps", config.task.get("mape_eps"), "must be >= 0")
  _check(_is_num(config.target_rmse) and config.target_rmse >= 0, "target_rmse",
         config.target_rmse, "must be >= 0 (0 = off)")
  _check(_is_int(m.get("rnn_hidden", 64)) and m.get("rnn_hidden", 64) >= 1,
         "model.rnn_hidden", m.get("rnn_hidden"), "must be an integer >= 1")
  if m.name in models.WINDOW_MODELS:
    _check(config.task.loss in ("mse", "huber"), "task.loss", config.task.loss,
           f"model.name={m.name!r} is a regressor: allowed values are 'mse', 'huber'")

  e = config.engine
  _check(e.client_parallelism in ("vmap", "map", "auto"), "engine.client_parallelism",
         e.client_parallelism, "allowed values are 'vmap', 'map', 'auto'")
  _int_at_least(config, "engine.unroll", 0)
  _check(isinstance(e.get("dynamic_steps", False), bool), "engine.dynamic_steps",
         e.get("dynamic_steps", False), "must be True or False")
  _check(e.get("shard_clients", False) in (True, False, "auto"), "engine.shard_clients",
         e.get("shard_clients", False), "allowed values are True, False, 'auto'")
  for key in ("step_buckets", "cpu_devices"):
    if key in e:
      _int_at_least(config, f"engine.{key}", 0)
  _int_at_least(config, "engine.eval_batch_size", 1)
  ch = config.churn
  _check(_is_num(ch.p_leave) and 0 <= ch.p_leave <= 1, "churn.p_leave", ch.p_leave,
         "must be in [0, 1]")
  _check(_is_num(ch.p_join) and 0 <= ch.p_join <= 1, "churn.p_join", ch.p_join,
         "must be in [0, 1]")

  for cls, rates in ch.get("per_class", {}).items():
    _check(bev_source, f"churn.per_class.{cls}", rates,
           f"per-class churn needs a source with client groups "
           f"({', '.join(sources.BEV_SOURCES)}); data.source={d.source!r}")
    _check(cls in _BEV_CLASSES, f"churn.per_class.{cls}", rates,
           f"unknown vehicle class {cls!r}; allowed: {', '.join(_BEV_CLASSES)}")
    _check(isinstance(rates, (tuple, list)) and len(rates) == 2
           and all(_is_num(r) and 0 <= r <= 1 for r in rates),
           f"churn.per_class.{cls}", rates, "must be (p_leave, p_join), each in [0, 1]")

  _validate_client(config.client, "client")
  _validate_server(config, _section(config, "server"), "server")
  _validate_attack(config, _section(config, "attack"), "attack")
  _check(len(config.methods) > 0, "methods", "{}", "must name at least one method")
  for label in method_labels(config):
    mc = config.methods[label]
    name = mc.get("name", None)
    _check(name in algorithms.names(), f"methods.{label}.name", name,
           f"allowed values are {', '.join(algorithms.names())}")
    _validate_client(client_config(config, label), f"methods.{label}.client")
    server_prefix = "server" if "server" not in mc else f"methods.{label}.server"
    _validate_server(config, server_config(config, label), server_prefix, label)
    attack_prefix = "attack" if "attack" not in mc else f"methods.{label}.attack"
    _validate_attack(config, attack_config(config, label), attack_prefix)
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
