"""FOFedAvg family on CIFAR-10 with CNNCifar (tfds; the FOFedAvg paper's CIFAR-10 setting).

FOFedAvg options follow the paper's appendix B (α 0.97, δ 1e-5, μ0 0.01,
C 0.2, μ_t = μ0/sqrt(t+1)); 100 clients with Dirichlet(0.3) label skew,
batch 50, 5 local epochs, 200 rounds. Needs the dataset prepared by tfds:

  python -m fedfrac.main --config=configs/fofedavg/cifar10_cnn.py --workdir=runs/fo_cifar \\
      --config.data.tfds.download=True        # first time, with internet
"""
from fedfrac.config import sibling_config


def get_config():
  """The MNIST setting of mnist_cnn.py with CIFAR-10 data, CNNCifar and 200 rounds."""
  c = sibling_config(__file__, "mnist_cnn.py").get_config()
  c.name = "fractional methods: CIFAR-10 CNN, Dirichlet 0.3, 100 clients, C=0.2"
  c.rounds = 200
  c.eval_every = 10
  c.checkpoint_every = 2
  c.target_accuracy = 0.5
  c.data.tfds.name = "cifar10"
  c.model.name = "cnn_cifar"
  return c
