"""FIRMA on Fashion-MNIST (Tables 7–8 of the paper): tfds `fashion_mnist`, N = 10, R = 30.

The same six methods and Table 4 hyper-parameters as `configs/firma/digits.py`
(FIRMA MLP on the flattened image, batch 64), on a machine where tfds can provide
the dataset (prepare it once with `--config.data.tfds.download=True`):

  python -m fedfrac.main --config=configs/firma/fashion_mnist.py:paper,ls1 --workdir=runs/firma_fashion_mnist

Offline, from the original IDX files (e.g. Debian's `dataset-fashion-mnist`,
`make data-fashion-mnist`), add
`--config.data.source=files --config.data.dir=/usr/share/datasets/fashion-mnist`.

The argument picks the compatibility mode and scenario as in digits.py. Inputs
are scaled to [0, 1]; `compat="reference_code"` then normalises them as the
authors' code does (torchvision's Normalize, `AUTHORS_NORMALISATION` in digits.py).
"""
from configs.firma import digits


def get_config(arg="paper,dir0.5"):
  return digits.tfds_config(arg, "fashion_mnist", "FIRMA Fashion-MNIST")
