"""fedfrac: vectorised federated-learning simulation in JAX."""
__version__ = "0.1.0"
