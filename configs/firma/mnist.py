"""FIRMA on MNIST-60k (Tables 9–10, 13 of the paper): tfds `mnist`, N = 10, R = 30.

The same six methods and Table 4 hyper-parameters as `configs/firma/digits.py`
(FIRMA MLP on the flattened image, batch 64), on a machine where tfds can provide
the dataset (prepare it once with `--config.data.tfds.download=True`):

  python -m fedfrac.main --config=configs/firma/mnist.py:paper,ls1 --workdir=runs/firma_mnist

The argument picks the compatibility mode and scenario as in digits.py. Inputs
are scaled to [0, 1]; the authors' code instead normalises with torchvision's
per-channel mean/std, which `compat="reference_code"` does not reproduce.
"""
import importlib.util
import os


def get_config(arg="paper,dir0.5"):
  path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "digits.py")
  spec = importlib.util.spec_from_file_location("firma_digits_config", path)
  digits = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(digits)
  return digits.tfds_config(arg, "mnist", "FIRMA MNIST-60k")
