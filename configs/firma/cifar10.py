"""FIRMA on CIFAR-10 (Tables 5–6 of the paper): tfds `cifar10`, N = 10, R = 30.

The same six methods and Table 4 hyper-parameters as `configs/firma/digits.py`
(FIRMA MLP on the flattened image, batch 64), on a machine where tfds can provide
the dataset (prepare it once with `--config.data.tfds.download=True`):

  python -m fedfrac.main --config=configs/firma/cifar10.py:paper,ls1 --workdir=runs/firma_cifar10

The argument picks the compatibility mode and scenario as in digits.py. Inputs
are scaled to [0, 1]; `compat="reference_code"` then normalises them as the
authors' code does (torchvision's Normalize, `AUTHORS_NORMALISATION` in digits.py).
"""
from configs.firma import digits


def get_config(arg="paper,dir0.5"):
  return digits.tfds_config(arg, "cifar10", "FIRMA CIFAR-10")
