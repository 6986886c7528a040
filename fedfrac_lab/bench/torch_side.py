"""The PyTorch side of ``fedfrac-bench --vs-torch``: one reference FedAvg round
(``benchmarks/torch_reference.py``) on the device PyTorch sees, timed so that it
can be interleaved with fedfrac's rounds in the same process.

Styles (``TorchRound(style=...)``): ``sequential`` (one client after another,
a fresh model copy and optimizer per client: the papers' code), ``batched``
(the cohort's clients at once with ``torch.func.vmap``) and ``compiled``
(``batched`` under ``torch.compile``). On a GPU every round ends with
``torch.cuda.synchronize()`` before the clock stops.
"""
from __future__ import annotations

import os
import time

from fedfrac_lab.reproduce import common

STYLES = ("sequential", "batched", "compiled")


def torch_available() -> bool:
  """Whether ``import torch`` works here."""
  try:
    import torch   # noqa: F401
  except ImportError:
    return False
  return True


def torch_device() -> str:
  """``cuda`` when PyTorch sees a GPU, else ``cpu``."""
  import torch
  return "cuda" if torch.cuda.is_available() else "cpu"


def reference_module():
  """``benchmarks/torch_reference.py`` of the checkout."""
  return common.load_module(os.path.join("benchmarks", "torch_reference.py"))


class TorchRound:
  """One PyTorch FedAvg round of a reference workload, timed per call.

  ``name``: ``cnn_mnist`` or ``firma_mlp``; ``clients`` of ``per_client``
  samples (``pool``: shared pool, see ``make_workload``); ``cohort``: clients
  per round (None: all); ``threads``: CPU threads (``torch.set_num_threads``);
  ``epochs``: local epochs (None: the workload's). The constructor runs one
  warm-up round (and, for ``compiled``, the compilation)."""

  def __init__(self, name, clients, threads=None, style="sequential", device=None,
               cohort=None, per_client=None, pool=None, epochs=None):
    import torch
    if style not in STYLES:
      raise ValueError(f"style={style!r}: allowed values are {', '.join(STYLES)}")
    tr = reference_module()
    self.tr, self.torch, self.style = tr, torch, style
    self.device = device or torch_device()
    self.threads = threads or os.cpu_count() or 1
    torch.set_num_threads(self.threads)
    torch.manual_seed(0)
    self.version = torch.__version__
    self.model, self.clients, self.opt, self.b, self.e = tr.make_workload(
        name, clients, per_client, 0, self.device, pool, epochs)
    self.cohort = cohort
    self.gen = torch.Generator().manual_seed(1)
    if style == "sequential":
      self._round = lambda: tr.fedavg_round(self.model, self.clients, self.opt, self.b,
                                            self.e, self.gen, self.cohort)
    else:
      runner = tr.batched_runner(name, self.model, self.clients, self.b, self.e,
                                 cohort, compile=style == "compiled")
      self._round = lambda: runner(self.gen)
    t0 = time.perf_counter()
    self.steps = self._round()    # warm-up (and compile)
    tr.synchronize(self.device)
    self.warmup_s = time.perf_counter() - t0

  def __call__(self):
    self.torch.set_num_threads(self.threads)
    self.tr.synchronize(self.device)
    t0 = time.perf_counter()
    self.steps = self._round()
    self.tr.synchronize(self.device)
    return time.perf_counter() - t0
