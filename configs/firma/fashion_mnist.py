"""FIRMA on Fashion-MNIST (Tables 7–8 of the paper): tfds `fashion_mnist`, N = 10, R = 30.

The same six methods and Table 4 hyper-parameters as `configs/firma/digits.py`
(FIRMA MLP on the flattened image, batch 64), on a machine where tfds can provide
the dataset (prepare it once with `--config.data.tfds.download=True`):

  python -m fedfrac.main --config=configs/firma/fashion_mnist.py:paper,ls1 --workdir=runs/firma_fashion_mnist

The argument picks the compatibility mode and scenario as in digits.py. Inputs
are scaled to [0, 1]; the authors' code instead normalises with torchvision's
per-channel mean/std, which `compat="reference_code"` does not reproduce.
"""
import importlib.util
import os


def _digits():
  path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "digits.py")
  spec = importlib.util.spec_from_file_location("firma_digits_config", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def get_config(arg="paper,dir0.5"):
  digits = _digits()
  parts = [p.strip() for p in (arg or "").split(",") if p.strip()]
  compat = parts[0] if parts else "paper"
  scenario = parts[1] if len(parts) > 1 else "dir0.5"
  c = digits.firma_config(compat, scenario, num_clients=10, rounds=30)
  c.name = c.name.replace("FIRMA digits (MNIST-1797)", "FIRMA Fashion-MNIST")
  c.data.source = "tfds"
  c.data.tfds.name = "fashion_mnist"
  return c
