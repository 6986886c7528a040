"""How ``fedfrac-reproduce firma_files`` runs FIRMA's cells on this machine:
its clients and seeds mapped or vmapped (``--parallelism``) and the processes
it starts (``--workers``), chosen by the backend.
"""
from __future__ import annotations

import os


def cpu_backend() -> bool:
  import jax
  return jax.default_backend() == "cpu"


def parallelism(setting: str) -> str:
  """``--parallelism``: ``auto`` is ``map`` on a CPU (one client after another,
  and the run's seeds one after another in the same program: 1.42–1.53 ms of CPU
  per client-step on one core against 2.32 for the ten clients vmapped,
  docs/design.md §2.5) and ``vmap`` on an accelerator (seeds vmapped too)."""
  if setting == "auto":
    return "map" if cpu_backend() else "vmap"
  return setting


def workers(setting: int) -> int:
  """``--workers``: 0 is one process per CPU core, each pinned to its core, on a
  CPU (two single-core processes train 1.6–2× the client-steps of one
  two-threaded process, docs/design.md §2.5), and 1 (this process) on an
  accelerator."""
  if setting:
    return setting
  return max(1, os.cpu_count() or 1) if cpu_backend() else 1
