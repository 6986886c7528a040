"""Configs of configs/kuramoto/ (see configs/__init__.py)."""
