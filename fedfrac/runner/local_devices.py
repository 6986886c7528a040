"""The local devices a sweep or ``config.workers`` spreads its worker processes
over: one per GPU, TPU chip or CPU core, found without initialising JAX here
(:func:`local_workers`), and the memory one worker may fill."""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import Optional


def _gpu_count() -> int:
  if os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
    return len([d for d in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()])
  if shutil.which("nvidia-smi") is None:
    return 0
  try:
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
  except (OSError, subprocess.SubprocessError):
    return 0
  return sum(line.startswith("GPU ") for line in out.stdout.splitlines())


def _tpu_count() -> int:
  return len([d for d in os.listdir("/dev") if d.startswith("accel")]) if os.path.isdir(
      "/dev") else 0


def _cpu_cores() -> list:
  try:
    return sorted(os.sched_getaffinity(0))
  except AttributeError:
    return list(range(os.cpu_count() or 1))


def local_workers(platform: Optional[str] = None) -> list:
  """One environment per worker process: ``[(kind, env updates)]``.

  Found without initialising JAX in this process (so a GPU parent does not
  reserve device memory its workers need): ``JAX_PLATFORMS=cpu`` or no
  accelerator -> one worker per usable CPU core (``cpu``, pinned with
  ``sched_setaffinity``, one XLA CPU device each); NVIDIA GPUs (``nvidia-smi``)
  -> one per GPU (``CUDA_VISIBLE_DEVICES``); TPU chips (``/dev/accel*``) -> one
  per chip (``TPU_VISIBLE_CHIPS``, one-chip process bounds).
  """
  platform = platform or os.environ.get("JAX_PLATFORMS", "").split(",")[0].strip()
  if platform in ("", "cuda", "gpu"):
    n = _gpu_count()
    if n:
      return [("gpu", {"CUDA_VISIBLE_DEVICES": str(i)}) for i in range(n)]
  if platform in ("", "tpu"):
    n = _tpu_count()
    if n:
      return [("tpu", {"TPU_VISIBLE_CHIPS": str(i), "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
                       "TPU_PROCESS_BOUNDS": "1,1,1"}) for i in range(n)]
  flags = " ".join(f for f in os.environ.get("XLA_FLAGS", "").split()
                   if not f.startswith("--xla_force_host_platform_device_count"))
  return [("cpu", {"JAX_PLATFORMS": "cpu", "FEDFRAC_CPU_CORE": str(core),
                   "XLA_FLAGS": (flags + " --xla_force_host_platform_device_count=1").strip()})
          for core in _cpu_cores()]


def worker_memory_bytes(num_workers: int = 1) -> int:
  """Memory one worker may fill: its accelerator's ``bytes_limit``, or on a CPU
  host the physical memory divided among ``num_workers`` workers."""
  import jax
  stats = None
  try:
    stats = jax.local_devices()[0].memory_stats()
  except Exception:   # backends without memory statistics
    stats = None
  if stats and stats.get("bytes_limit"):
    return int(stats["bytes_limit"])
  total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  return int(total // max(1, num_workers))
