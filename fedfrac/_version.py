"""fedfrac's version (the one in setup.cfg), below every module that records it."""
__version__ = "0.1.0"
