"""Configs of configs/bev/ (see configs/__init__.py)."""
