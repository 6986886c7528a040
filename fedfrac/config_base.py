"""``base_config()`` and the readers of its sections: the method labels a run
runs, each method's options and its ``client`` / ``server`` / ``attack`` sections
with its overrides applied. Everything here is re-exported by :mod:`fedfrac.config`;
the section checks (``fedfrac.<pkg>.validate``) import it from here, below
:func:`fedfrac.config.validate` that runs them.
"""
from __future__ import annotations

import importlib.util
import os

import ml_collections

from fedfrac._validation import check, fail
from fedfrac.algorithms import server as server_lib


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
  c.stop_at_target = False       # end a run at its first evaluation reaching the target
                                 # (target_accuracy; regression target_rmse), not `rounds`
  c.progress = True
  c.on_divergence = "stop"       # "stop": mark the run diverged; "error": raise
  c.only = ""                    # comma-separated method labels to run (empty = all)
  c.workers = 1                  # processes for the (method, seed) runs; 0 = one per
                                 # CPU core / local device (same results, faster compiles)

  c.data = ml_collections.ConfigDict()
  c.data.source = "sklearn_digits"
  c.data.num_clients = 10
  c.data.partition = "dirichlet"
  c.data.alpha = 0.5
  c.data.shards_per_client = 2
  c.data.classes_per_client = 2
  c.data.min_client_size = 64
  c.data.on_small = "error"
  c.data.label_skew_rule = "paper"   # paper (FIRMA §3.5) | reference_code (greedy)
  c.data.pathological_level = "severe"   # mild | moderate | severe (FOFedAvg app.)
  c.data.min_size = 1
  c.data.test_split = "like_train"   # like_train | iid | natural
  c.data.test_fraction = 0.2
  c.data.split_seed = 0
  # Tuning: each client's train rows split into train / validation with the data
  # seed (0 = no validation split); eval_split="val" evaluates on it instead of test.
  c.data.validation_fraction = 0.0
  c.data.eval_split = "test"         # test | val
  c.data.seed = -1                   # partition seed; -1 = the run's seed
  # Inputs (uint8 images scaled to [0, 1] first) standardised per channel as
  # (x - input_mean) / input_std, torchvision's Normalize: one value or one per
  # channel; () = only scaled. FIRMA's reference_code configs use the authors'.
  c.data.input_mean = ()
  c.data.input_std = ()
  c.data.augment = ""    # training batches, e.g. "crop:28:4,flip,cutout:16" (data/augment.py)
  c.data.compat = "paper"            # paper | reference_code (FIRMA authors' pipeline)
  c.data.synthetic = ml_collections.ConfigDict(dict(
      alpha=1.0, beta=1.0, dim=60, num_classes=10, iid=False, max_client_size=2000))
  c.data.tfds = ml_collections.ConfigDict(dict(
      name="mnist", data_dir="", download=False, max_train=0, max_test=0))
  # Local files (data.source="files", fedfrac.data.files): data.dir is the directory
  # (or the one .npz / mnist.pkl.gz / CIFAR .tar.gz file); format auto | idx |
  # cifar10 | cifar100 | npz | mnist_pkl; emnist_split picks emnist-<split>-* IDX
  # files; cifar100_labels fine | coarse; num_classes 0 = the format's own count;
  # max_train / max_test keep the first so many examples (0 = all).
  c.data.dir = ""
  c.data.files = ml_collections.ConfigDict(dict(
      format="auto", emnist_split="", cifar100_labels="fine", num_classes=0,
      max_train=0, max_test=0))
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
      regime_skew=0.0,                   # α_D of the regime partition (0 = per vehicle)
      num_regimes=4,                     # R mean-speed regimes (regime_skew > 0)
      ved_path="",                       # VED dynamic CSVs: file, dir or a,b,c
      ved_resample_dt_s=1.0, ved_max_gap_s=10.0, ved_vehicles=(),
      ved_current_sign="auto"))

  # conv_impl: auto (by backend, fedfrac.models.cnn.AUTO_CONV_IMPL) | im2col | xla.
  # init: flax (LeCun normal kernels, zero biases) | torch (PyTorch's defaults, as
  # the Kuramoto authors' models; cnn4, vgg11, mlp; fedfrac.models.torch_init).
  c.model = ml_collections.ConfigDict(dict(
      name="mlp", hidden=(200, 200), padding="VALID", dropout=0.5, rnn_hidden=64,
      conv_impl="auto", init="flax"))

  c.client = ml_collections.ConfigDict(dict(
      optimizer="sgd", lr=0.05, momentum=0.9, weight_decay=0.0,
      schedule="constant", final_lr_fraction=0.0, lr_decay=1.0,
      batch_size=32, local_epochs=1, local_steps=0))

  # mape_eps: ε_Y (label units, Wh for BEV). mape_rule: "stabilized" =
  # 100/N Σ |e|/(|y| + ε_Y) over all samples (FO-RI-FedAvg Eq. 34);
  # "thresholded" = 100 · mean |e|/|y| over samples with |y| > ε_Y.
  c.task = ml_collections.ConfigDict(dict(loss="cross_entropy", huber_delta=1.0,
                                          mape_eps=1.0, mape_rule="stabilized"))

  # client_parallelism: vmap | map | auto (map for conv models on CPU, else vmap);
  # unroll: local steps per loop iteration (0 = auto); dynamic_steps: local-step
  # loops stop at each client's own step count; step_buckets: vmapped groups of
  # the step-sorted cohort (0 = auto); shard_clients: shard the cohort over all
  # devices with shard_map (auto = when there are several); shard_client_state:
  # shard the clients' persistent state, tables and train rows over the same
  # devices (about K/D clients each) instead of replicating them (needs
  # shard_clients True or auto; fedfrac.sim.client_rows); cpu_devices: split
  # the CPU into this many devices, one per core (0 = leave JAX's default; only
  # takes effect before JAX first runs, e.g. from the CLI). None of them changes
  # which steps train; vmap and map agree to float rounding and differ in the
  # executed_steps cost measure (fedfrac.sim.execution docstring).
  # device_invariant: vmapped groups formed over the whole cohort, as on one
  # device, and dealt whole to devices: 1, 2 or 4 devices give the same bits
  # (parallel only with >= as many step_buckets as devices; not with
  # shard_client_state; fedfrac.sim.placement.ShardedGroups).
  # matmul_precision: highest | tensorfloat32 | bfloat16 (fedfrac.sim.precision).
  c.engine = ml_collections.ConfigDict(dict(
      client_parallelism="auto", unroll=0, eval_batch_size=1024,
      dynamic_steps=True, step_buckets=0, shard_clients="auto",
      shard_client_state=False, device_invariant=False, cpu_devices=0,
      matmul_precision="highest"))
  # cohort_rule: |S_t| under churn, "available" = max(ceil(C·|A_t|), 1) of the
  # available clients (FO-RI-FedAvg §IV-N) or "slots" = ceil(C·K) slots filled
  # from the available ones.
  c.churn = ml_collections.ConfigDict(dict(p_leave=0.0, p_join=1.0,
                                           cohort_rule="available"))
  # Asymmetric churn: client group (BEV: vehicle class) -> (p_leave, p_join);
  # groups not listed use p_leave/p_join above.
  c.churn.per_class = ml_collections.ConfigDict()

  # Heterogeneous client speed (fedfrac.ops.system; the guide's "Running
  # experiments", Stragglers):
  # speed equal | lognormal (s_k = exp(sigma·z), z ~ N(0, 1), fixed per seed) |
  # groups (group_speeds[groups[k]], groups empty = client k in group k mod G);
  # deadline T per round in time units (one local step at speed 1 = 1 unit;
  # inf = none); policy none (every client runs its E epochs: today's rounds) |
  # drop (clients that cannot finish by T send nothing) | partial (each client
  # runs the steps that fit before T).
  c.system = ml_collections.ConfigDict(dict(
      speed="equal", sigma=0.0, group_speeds=(), groups=(), deadline=float("inf"),
      policy="none"))

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

  # Run records besides metrics.csv / metrics.jsonl: tensorboard = also write
  # TensorBoard event files (extra ``tensorboard``; fedfrac.runner.tensorboard).
  c.log = ml_collections.ConfigDict(dict(tensorboard=False))
  return c


def method_labels(config):
  """The labels of the methods to run: all, or those named by ``config.only``."""
  labels = list(config.methods.keys())
  check(isinstance(config.only, str), "only", config.only,
        "must be a string of comma-separated method labels ('' = all)")
  if config.only:
    wanted = [s.strip() for s in config.only.split(",") if s.strip()]
    check(wanted, "only", config.only, f"names no method label; labels are "
          f"{', '.join(labels)} ('' runs all)")
    for w in wanted:
      if w not in labels:
        fail("only", config.only, f"unknown method label {w!r}; labels are "
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


def config_section(config, section) -> ml_collections.ConfigDict:
  """``config.<section>``; the defaults when a hand-built config lacks it."""
  value = config.get(section, None)
  return base_config()[section] if value is None else value


def section_config(config, label, section) -> ml_collections.ConfigDict:
  """``config.<section>`` with ``methods.<label>.<section>`` overrides applied."""
  merged = ml_collections.ConfigDict(config_section(config, section).to_dict())
  overrides = config.methods[label].get(section, None)
  if overrides:
    for k, v in overrides.items():
      if k not in merged:
        fail(f"methods.{label}.{section}.{k}", v,
              f"unknown {section} option; allowed: {', '.join(merged.keys())}")
      merged[k] = v
  return merged


def client_config(config, label) -> ml_collections.ConfigDict:
  """``config.client`` with the method's ``client`` overrides applied."""
  return section_config(config, label, "client")


def server_config(config, label) -> ml_collections.ConfigDict:
  """``config.server`` with the method's ``server`` overrides applied."""
  return section_config(config, label, "server")


def attack_config(config, label) -> ml_collections.ConfigDict:
  """``config.attack`` with the method's ``attack`` overrides applied."""
  return section_config(config, label, "attack")


def aggregator_spec_of(sc) -> server_lib.AggregatorSpec:
  return server_lib.AggregatorSpec(name=sc.aggregator, trim_beta=sc.trim_beta,
                                   num_byzantine=sc.num_byzantine, multi=sc.multi)


def aggregator_spec(config, label) -> server_lib.AggregatorSpec:
  """The :class:`AggregatorSpec` of method ``label``."""
  return aggregator_spec_of(server_config(config, label))


def files_source(config, data_dir, format="auto", **options):
  """``config`` reading local files: ``data.source="files"``, ``data.dir=data_dir``,
  ``data.files.format=format`` and any other ``data.files`` option. Every config
  of a tfds dataset works this way, as does the command-line override
  ``--config.data.source=files --config.data.dir=DIR``."""
  config.data.source = "files"
  config.data.dir = data_dir
  config.data.files.format = format
  for key, value in options.items():
    if key not in config.data.files:
      fail(f"data.files.{key}", value,
            f"unknown option; allowed: {', '.join(config.data.files.keys())}")
    config.data.files[key] = value
  return config
