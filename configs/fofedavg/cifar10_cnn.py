"""FOFedAvg on CIFAR-10 with CNNCifar, the FOFedAvg paper's settings (tfds).

The MNIST settings of ``mnist_cnn.py`` (B = 50, E = 20, C = 0.2, SGD with
μ_t = μ0/sqrt(t+1), μ0 = 0.01, FOFedAvg α = 0.97, δ = 1e-5) with CIFAR-10 data and
CNNCifar. The argument after the colon picks the experiment:

  fig2      Fig. 2 (default): non-IID, 30 rounds, FedAvg, FOFedAvg and the
            baselines; K = 10, Dirichlet α = 0.1 (the paper gives neither for
            CIFAR-10; we use its MNIST Fig. 1 / Table V reading).
  alpha     Figs. 12 (right) – 13: IID, FOFedAvg at α ∈ {0.96, 0.97, 0.985, 0.99},
            70 rounds (the longest budget the figures show).
  mild, moderate, shard_severe
            Appendix E / Figs. 10 and 22 (``data.partition="pathological"``).
  iid       the IID split with the Fig. 2 methods.

  python -m fedfrac.main --config=configs/fofedavg/cifar10_cnn.py --workdir=runs/fo_cifar \\
      --config.data.tfds.download=True        # first time, with internet
"""
from configs import args
from configs.fofedavg import mnist_cnn

FIG12_ALPHAS = (0.96, 0.97, 0.985, 0.99)
SCENARIOS = ("fig2", "alpha", "iid", "mild", "moderate", "shard_severe")


def get_config(arg="fig2"):
  scenario = args.parse(arg, {"scenario": "fig2"}, {"scenario": SCENARIOS})["scenario"]
  c = mnist_cnn.get_config("fig1" if scenario in ("fig2", "alpha") else scenario)
  c.rounds = 30                  # Fig. 2
  c.target_accuracy = 0.5
  c.data.tfds.name = "cifar10"
  c.model.name = "cnn_cifar"
  if scenario == "alpha":
    c.rounds = 70
    c.data.partition = "iid"
    c.methods = mnist_cnn.alpha_methods(FIG12_ALPHAS)
  c.name = f"FOFedAvg paper: CIFAR-10 CNN, {scenario}, {c.data.num_clients} clients, C=0.2"
  return c
