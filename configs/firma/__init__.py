"""Configs of configs/firma/ (see configs/__init__.py)."""
