"""Configs of configs/baselines/ (see configs/__init__.py)."""
