"""Asynchronous aggregation on the simulated clock (the guide's "Asynchronous runs")."""
