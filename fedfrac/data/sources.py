"""Dataset sources: host-side NumPy arrays with a global train/test split.

Every source returns a :class:`Dataset`. Nothing here downloads at import; the
``tfds`` source downloads only when asked to (``download=True``) on a machine with
internet, and its tests run under ``tfds.testing.mock_data``. The ``files`` source
(:mod:`fedfrac.data.files`) reads the standard distribution files of MNIST,
Fashion-MNIST, EMNIST and CIFAR from a local directory.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Optional

import numpy as np

from fedfrac._validation import fail
from fedfrac.data.dataset import Dataset  # noqa: F401  (re-exported)

if TYPE_CHECKING:
  from ml_collections import ConfigDict

  from fedfrac.data.bev import BEVData


def stratified_split(labels: np.ndarray, test_fraction: float,
                     seed: int) -> tuple:
  """Per-class random split; returns (train_idx, test_idx), both sorted."""
  rng = np.random.default_rng(seed)
  train, test = [], []
  for c in np.unique(labels):
    idx = rng.permutation(np.flatnonzero(labels == c))
    n_test = int(round(test_fraction * idx.size))
    test.append(idx[:n_test])
    train.append(idx[n_test:])
  if not sum(t.size for t in test):
    largest = int(max(np.sum(labels == c) for c in np.unique(labels)))
    fail("data.test_fraction", test_fraction,
         f"holds out no test example (each class keeps round(test_fraction x its "
         f"{largest} or fewer examples) = 0); give more than {0.5 / largest:.3g}")
  return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def sklearn_digits(test_fraction: float = 0.2, split_seed: int = 0,
                   split: str = "stratified") -> Dataset:
  """scikit-learn's bundled 8x8 digits (1,797 real images; offline).

  Pixel values 0..16 are scaled to [0, 1]; inputs are ``[N, 8, 8, 1]`` float32.
  The global test set is a ``test_fraction`` split drawn with ``split_seed``:
  ``split="stratified"`` (default) splits every class separately and keeps the
  original sample order; ``split="permutation"`` is the FIRMA authors' split
  (``fibfl/data.py``): one random permutation of all samples, the first
  ``int((1 - test_fraction) * 1797)`` (1,437 at 0.2, with seed 42 in their code)
  form the train set, in permutation order.
  """
  if not 0.0 < test_fraction < 1.0:
    raise ValueError(f"data.test_fraction={test_fraction!r}: must be in (0, 1)")
  if split not in ("stratified", "permutation"):
    raise ValueError(f"split={split!r}: allowed values are 'stratified', 'permutation'")
  from sklearn.datasets import load_digits
  d = load_digits()
  x = (d.images.astype(np.float32) / 16.0)[..., None]
  y = d.target.astype(np.int32)
  if split == "stratified":
    tr, te = stratified_split(y, test_fraction, split_seed)
  else:
    perm = np.random.default_rng(split_seed).permutation(y.size)
    n_train = int((1.0 - test_fraction) * y.size)
    tr, te = perm[:n_train], perm[n_train:]
  return Dataset("sklearn_digits", x[tr], y[tr], x[te], y[te], num_classes=10)


def synthetic(alpha: float = 1.0, beta: float = 1.0, num_clients: int = 30, dim: int = 60,
              num_classes: int = 10, iid: bool = False, test_fraction: float = 0.2,
              max_client_size: int = 2000, seed: int = 0) -> Dataset:
  """FedProx / LEAF Synthetic(alpha, beta) (Li et al. 2020, §5.1).

  Client k draws u_k ~ N(0, alpha), B_k ~ N(0, beta); its model
  W_k ~ N(u_k, 1) ``[dim, C]``, b_k ~ N(u_k, 1); inputs x ~ N(v_k, Σ) with
  v_k ~ N(B_k, 1) and Σ = diag(j^-1.2); labels y = argmax(softmax(x W_k + b_k)).
  ``iid=True`` shares one model and one input mean (Synthetic-IID). Client sizes
  follow the reference lognormal(4, 2) + 50, capped at ``max_client_size``.
  Each client keeps ``test_fraction`` of its samples as its own test split; the
  global test set is their union. ``train_groups``/``test_groups`` carry the
  client ids for the ``natural`` partition.
  """
  for key, val in (("alpha", alpha), ("beta", beta)):
    if not np.isfinite(val) or val < 0:
      raise ValueError(f"data.synthetic.{key}={val!r}: must be >= 0")
  if num_clients < 1 or dim < 1 or num_classes < 2:
    raise ValueError(
        f"data.synthetic: num_clients={num_clients}, dim={dim}, "
        f"num_classes={num_classes}: need num_clients >= 1, dim >= 1, classes >= 2")
  rng = np.random.default_rng(seed)
  sizes = np.minimum(rng.lognormal(4, 2, num_clients).astype(np.int64) + 50,
                     max_client_size)
  cov_diag = np.arange(1, dim + 1, dtype=np.float64) ** -1.2
  w_shared = rng.normal(0, 1, (dim, num_classes))
  b_shared = rng.normal(0, 1, num_classes)
  mean_w = rng.normal(0, alpha, num_clients)
  mean_x = rng.normal(rng.normal(0, beta, num_clients)[:, None], 1, (num_clients, dim))
  xs_tr, ys_tr, g_tr, xs_te, ys_te, g_te = [], [], [], [], [], []
  for k in range(num_clients):
    if iid:
      w, b, mu = w_shared, b_shared, np.zeros(dim)
    else:
      w = rng.normal(mean_w[k], 1, (dim, num_classes))
      b = rng.normal(mean_w[k], 1, num_classes)
      mu = mean_x[k]
    x = rng.normal(mu, np.sqrt(cov_diag), (sizes[k], dim)).astype(np.float32)
    y = np.argmax(x @ w + b, axis=1).astype(np.int32)
    n_test = max(1, int(round(test_fraction * sizes[k])))
    perm = rng.permutation(sizes[k])
    te, tr = perm[:n_test], perm[n_test:]
    xs_tr.append(x[tr])
    ys_tr.append(y[tr])
    g_tr.append(np.full(tr.size, k))
    xs_te.append(x[te])
    ys_te.append(y[te])
    g_te.append(np.full(te.size, k))
  return Dataset(
      f"synthetic({alpha},{beta})", np.concatenate(xs_tr), np.concatenate(ys_tr),
      np.concatenate(xs_te), np.concatenate(ys_te), num_classes=num_classes,
      train_groups=np.concatenate(g_tr).astype(np.int32),
      test_groups=np.concatenate(g_te).astype(np.int32))


# name -> (label key, number of classes)
TFDS_DATASETS = {
    "mnist": ("label", 10),
    "fashion_mnist": ("label", 10),
    "cifar10": ("label", 10),
    "cifar100": ("label", 100),
    "emnist": ("label", 62),
    "emnist/balanced": ("label", 47),
    "emnist/byclass": ("label", 62),
    "emnist/letters": ("label", 37),
    "emnist/digits": ("label", 10),
    "emnist/mnist": ("label", 10),
}


def _read_source(source, image_key, label_key, max_examples=None):
  n = len(source) if max_examples is None else min(len(source), max_examples)
  images, labels = [], []
  for i in range(n):
    ex = source[i]
    images.append(np.asarray(ex[image_key]))
    labels.append(int(ex[label_key]))
  return np.stack(images), np.asarray(labels, np.int32)


# Modules tfds's download_and_prepare imports for TFDS_DATASETS (the builders,
# image encoding, file reading) -> the distribution installing each; the ``tfds``
# extra of setup.cfg lists these distributions.
TFDS_PREPARE_MODULES = {
    "tensorflow": "tensorflow-cpu",
    "importlib_resources": "importlib_resources",
    "six": "six",
    "PIL": "Pillow",
    "array_record": "array_record",
}


def _missing_module(error: Optional[BaseException]) -> Optional[str]:
  """The name of the module whose import failed in ``error``'s chain, or None."""
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    if isinstance(error, ImportError):
      return error.name or str(error)
    error = error.__cause__ or error.__context__
  return None


def tfds_source(name: str, data_dir: Optional[str] = None, download: bool = False,
                train_split: str = "train", test_split: str = "test",
                max_train: Optional[int] = None, max_test: Optional[int] = None) -> Dataset:
  """Image classification data through ``tfds.data_source`` (random access).

  Inputs stay uint8 ``[N, H, W, C]`` on the host and device; models scale them by
  ``input_scale = 1/255``. ``download=True`` downloads and prepares the dataset
  (needs internet and, for preparation, the ``tfds`` extra:
  ``pip install 'fedfrac[tfds]'``). Without it a missing dataset raises one
  clear error saying how to obtain it.
  """
  if name not in TFDS_DATASETS:
    raise ValueError(
        f"data.tfds.name={name!r}: allowed values are {', '.join(TFDS_DATASETS)}")
  import tensorflow_datasets as tfds
  label_key, num_classes = TFDS_DATASETS[name]
  try:
    train = tfds.data_source(name, split=train_split, data_dir=data_dir,
                             download=download)
    test = tfds.data_source(name, split=test_split, data_dir=data_dir,
                            download=download)
  except Exception as e:  # tfds raises several types for a missing dataset
    missing = _missing_module(e)
    if missing is not None:
      raise ImportError(
          f"tfds dataset {name!r}: preparing it needs the Python module {missing!r}, "
          f"which is not installed ({type(e).__name__}: {e}); install "
          f"{TFDS_PREPARE_MODULES.get(missing.split('.')[0], missing)!r} (all of "
          f"them: pip install 'fedfrac[tfds]')", name=missing) from e
    where = data_dir or os.environ.get("TFDS_DATA_DIR", "~/tensorflow_datasets")
    raise FileNotFoundError(
        f"tfds dataset {name!r} is not available in {where} ({type(e).__name__}: "
        f"{e}). Prepare it on a machine with internet with "
        f"--config.data.tfds.download=True (install the extra: "
        f"pip install 'fedfrac[tfds]'), or point --config.data.tfds.data_dir at "
        f"a prepared copy.") from e
  x_tr, y_tr = _read_source(train, "image", label_key, max_train)
  x_te, y_te = _read_source(test, "image", label_key, max_test)
  if x_tr.ndim == 3:
    x_tr, x_te = x_tr[..., None], x_te[..., None]
  return Dataset(f"tfds:{name}", x_tr.astype(np.uint8), y_tr, x_te.astype(np.uint8),
                 y_te, num_classes=num_classes, input_scale=1.0 / 255.0)


# Battery-electric-vehicle energy sources: clients are vehicles (natural partition),
# samples are windows ``[L, F]`` of driving signals, labels the window energy (Wh).
# data.source -> one line for ``--list`` (the registry of data sources).
SOURCE_DESCRIPTIONS = {
    "sklearn_digits": "scikit-learn's 8x8 digits, 10 classes (no download)",
    "synthetic": "Synthetic(alpha, beta) federated classification (data.synthetic)",
    "tfds": "a TensorFlow Datasets image set (data.tfds.name: "
            + ", ".join(TFDS_DATASETS) + ")",
    "files": "local image files in their distribution formats (data.dir, "
             "data.files.format: IDX, CIFAR pickles, .npz, mnist.pkl.gz)",
    "synthetic_bev": "synthetic electric-vehicle fleet, energy regression per "
                     "window, one client per vehicle (data.bev)",
    "ved_csv": "Vehicle Energy Dataset CSVs (data.bev.ved_path), energy regression, "
               "one client per vehicle",
}
BEV_SOURCES = ("synthetic_bev", "ved_csv")
SOURCES = tuple(SOURCE_DESCRIPTIONS)


def _opt_tuple(v):
  """``()`` / ``None`` / ``""`` -> None, else a tuple (config tuples of ids)."""
  if v is None or v == "" or (isinstance(v, (tuple, list)) and len(v) == 0):
    return None
  return tuple(v) if isinstance(v, (tuple, list)) else (v,)


def load_bev(data_cfg: ConfigDict, seed: int) -> BEVData:
  """The :class:`fedfrac.data.bev.BEVData` named by ``data_cfg.source`` (physical units).

  ``synthetic_bev``: a seeded physics-based fleet of ``data_cfg.num_clients``
  vehicles (``data_cfg.bev.hours_per_vehicle`` h each, class mix
  ``data_cfg.bev.class_mix``), generated from ``seed``. ``ved_csv``: the VED
  dynamic-data CSVs at ``data_cfg.bev.ved_path`` (file, directory or
  comma-separated list); ``data_cfg.num_clients`` is 0 (keep every EV/PHEV) or the
  number of vehicles expected. Both use windows of ``data_cfg.bev.window`` samples
  with stride ``data_cfg.bev.stride``, a trip-level train/val/test split with
  ``data_cfg.bev.fractions`` seeded by ``seed``, and the vehicles in
  ``data_cfg.bev.holdout_vehicles`` held out (all their windows in test).
  ``data_cfg.bev.regime_skew`` > 0 replaces the per-vehicle clients by the
  regime-based partition with α_D = regime_skew over ``data_cfg.bev.num_regimes``
  regimes (:mod:`fedfrac.data.bev`), seeded by ``seed``.
  """
  b = data_cfg.bev
  hold = _opt_tuple(b.holdout_vehicles)
  regimes = dict(regime_skew=b.get("regime_skew", None),
                 num_regimes=b.get("num_regimes", 4))
  if data_cfg.source == "synthetic_bev":
    from fedfrac.data.synthetic_bev import synthetic_bev as make_fleet
    return make_fleet(
        num_vehicles=data_cfg.num_clients, hours_per_vehicle=b.hours_per_vehicle,
        seed=seed, class_mix=tuple(b.class_mix), window=b.window, stride=b.stride,
        temperature_range_c=tuple(b.temperature_range_c), holdout_vehicles=hold,
        min_windows=b.min_windows, fractions=tuple(b.fractions), **regimes)
  if data_cfg.source == "ved_csv":
    from fedfrac.data.ved import load_ved_csv
    path = b.ved_path
    if not path:
      raise ValueError(
          "data.bev.ved_path='': give the VED dynamic-data CSV file(s) or the "
          "directory holding them (the Vehicle Energy Dataset, "
          "https://github.com/gsoh/VED; unzip its 'Dynamic Data' weekly CSVs)")
    paths = [q.strip() for q in str(path).split(",") if q.strip()]
    for q in paths:
      if not os.path.exists(q):
        raise FileNotFoundError(
            f"data.bev.ved_path={path!r}: {q!r} does not exist; point it at the VED "
            f"dynamic-data CSVs (https://github.com/gsoh/VED)")
    vehicles = _opt_tuple(b.ved_vehicles)
    data = load_ved_csv(
        paths if len(paths) > 1 else paths[0], window=b.window, stride=b.stride,
        resample_dt_s=b.ved_resample_dt_s, max_gap_s=b.ved_max_gap_s,
        vehicles=vehicles, min_windows=b.min_windows, seed=seed,
        holdout_vehicles=hold, current_sign=b.ved_current_sign,
        fractions=tuple(b.fractions), **regimes)
    if data_cfg.num_clients and data_cfg.num_clients != data.num_clients:
      raise ValueError(
          f"data.num_clients={data_cfg.num_clients}: the VED files hold "
          f"{data.num_clients} usable vehicles; set data.num_clients=0 (all) or "
          f"select vehicles with data.bev.ved_vehicles")
    return data
  raise ValueError(f"data.source={data_cfg.source!r}: not a BEV source; BEV sources "
                   f"are {', '.join(BEV_SOURCES)}")


def bev_dataset(bev_data: BEVData) -> Dataset:
  """A normalised :class:`Dataset` view of BEV data (vehicle ids as groups).

  Train inputs/labels are standardised per vehicle with that vehicle's TRAIN
  statistics (:meth:`fedfrac.data.bev.BEVData.normalized`); the test set is the
  union of the vehicles' test windows.
  """
  nb = bev_data if bev_data.is_normalized else bev_data.normalized()
  return Dataset(f"{nb.meta.get('source', 'bev')}", nb.x_train, nb.y_train, nb.x_test,
                 nb.y_test, num_classes=0, task="regression",
                 train_groups=nb.client_train, test_groups=nb.client_test)


def load(data_cfg: ConfigDict, seed: int) -> Dataset:
  """Build the :class:`Dataset` named by ``data_cfg.source``."""
  source = data_cfg.source
  if source == "sklearn_digits":
    split = ("permutation" if data_cfg.get("compat", "paper") == "reference_code"
             else "stratified")
    return sklearn_digits(test_fraction=data_cfg.test_fraction,
                          split_seed=data_cfg.get("split_seed", 0), split=split)
  if source == "synthetic":
    s = data_cfg.synthetic
    return synthetic(alpha=s.alpha, beta=s.beta, num_clients=data_cfg.num_clients,
                     dim=s.dim, num_classes=s.num_classes, iid=s.iid,
                     test_fraction=data_cfg.test_fraction,
                     max_client_size=s.max_client_size, seed=seed)
  if source == "tfds":
    t = data_cfg.tfds
    return tfds_source(t.name, data_dir=t.data_dir or None, download=t.download,
                       max_train=t.max_train or None, max_test=t.max_test or None)
  if source == "files":
    from fedfrac.data import files
    f = data_cfg.files
    return files.load_files(data_cfg.dir, format=f.format, emnist_split=f.emnist_split,
                            cifar100_labels=f.cifar100_labels,
                            num_classes=f.num_classes, max_train=f.max_train,
                            max_test=f.max_test)
  if source in BEV_SOURCES:
    return bev_dataset(load_bev(data_cfg, seed))
  raise ValueError(f"data.source={source!r}: allowed values are {', '.join(SOURCES)}")
