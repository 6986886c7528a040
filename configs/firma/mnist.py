"""FIRMA on MNIST-60k (Tables 9–10, 13 of the paper): tfds `mnist`, N = 10, R = 30.

The same six methods and Table 4 hyper-parameters as `configs/firma/digits.py`
(FIRMA MLP on the flattened image, batch 64), on a machine where tfds can provide
the dataset (prepare it once with `--config.data.tfds.download=True`):

  python -m fedfrac.main --config=configs/firma/mnist.py:paper,ls1 --workdir=runs/firma_mnist

Offline, from local files (the MNIST IDX files, or an `mnist.pkl.gz`), add
`--config.data.source=files --config.data.dir=DIR` (see `fedfrac.data.files`).

The argument picks the compatibility mode and scenario as in digits.py. Inputs
are scaled to [0, 1]; `compat="reference_code"` then normalises them as the
authors' code does (torchvision's Normalize, `AUTHORS_NORMALISATION` in digits.py).
"""
from configs.firma import digits


def get_config(arg="paper,dir0.5"):
  return digits.tfds_config(arg, "mnist", "FIRMA MNIST-60k")
