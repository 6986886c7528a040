"""Configs of configs/robust/ (see configs/__init__.py)."""
