"""Configs of configs/fofedavg/ (see configs/__init__.py)."""
