"""FOFedAvg family on MNIST with CNNMnist (tfds; the FOFedAvg paper's MNIST setting).

FOFedAvg options follow the paper's appendix B (α 0.97, δ 1e-5, μ0 0.01,
C 0.2, μ_t = μ0/sqrt(t+1)); 100 clients with Dirichlet(0.3) label skew,
batch 50, 5 local epochs, 100 rounds. Needs the dataset prepared by tfds:

  python -m fedfrac.main --config=configs/fofedavg/mnist_cnn.py --workdir=runs/fo_mnist \\
      --config.data.tfds.download=True        # first time, with internet
  python scripts/sweep.py --config=configs/fofedavg/mnist_cnn.py \\
      --grid=alpha=0.5,0.6,0.8,0.97,1.0 --grid_methods=fofedavg --out=results/fo_mnist.md
"""
import ml_collections

from fedfrac.config import base_config


def fractional_methods():
  """FedAvg and the fractional family with the papers' default options; all use
  the run's client step-size schedule (inv_sqrt), so FedAvg = FOFedAvg at α = 1."""
  m = ml_collections.ConfigDict()
  m.fedavg = dict(name="fedavg")
  m.fofedavg = dict(name="fofedavg")                        # α 0.97, δ 1e-5, step memory
  m.fofedavg_round = dict(name="fofedavg", memory="round")  # w_prev from last participation
  m.fo_fedavg = dict(name="fo_fedavg")                      # element-wise p, λ = 0
  m.ri_fedavg = dict(name="ri_fedavg")                      # α = 1, roughness pull
  m.fo_ri_fedavg = dict(name="fo_ri_fedavg")                # both
  return m


def get_config():
  c = base_config()
  c.name = "fractional methods: MNIST CNN, Dirichlet 0.3, 100 clients, C=0.2"
  c.seeds = (0, 1, 2)
  c.rounds = 100
  c.participation = 0.2
  c.eval_every = 5
  c.checkpoint_every = 4
  c.target_accuracy = 0.97
  c.data.source = "tfds"
  c.data.tfds.name = "mnist"
  c.data.num_clients = 100
  c.data.partition = "dirichlet"
  c.data.alpha = 0.3
  c.data.min_size = 20
  c.model.name = "cnn_mnist"
  c.client.optimizer = "sgd"
  c.client.lr = 0.01
  c.client.schedule = "inv_sqrt"
  c.client.batch_size = 50
  c.client.local_epochs = 5
  c.methods = fractional_methods()
  return c
