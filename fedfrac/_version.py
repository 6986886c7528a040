"""fedfrac's version, in one place: setup.cfg reads it (``attr:``), below every
module that records it."""
__version__ = "0.1.0"
