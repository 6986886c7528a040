"""fedfrac: vectorised federated-learning simulation in JAX.

    import fedfrac as ff
    results = ff.run(config)          # config from fedfrac.config.base_config()
"""
__version__ = "0.1.0"

from fedfrac import algorithms, data, engine, metrics, models, ops, optim
from fedfrac.algorithms.base import ClientView, FedAlgorithm
from fedfrac.config import ConfigError, base_config
from fedfrac.experiment import Results, run, run_many
