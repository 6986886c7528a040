"""The window's processes, forked from the supervisor (the package is imported
once, and nothing in the supervisor has touched the accelerator): the worker
(:mod:`fedfrac_lab.campaign.worker`) and the compile-ahead process
(:mod:`fedfrac_lab.campaign.precompile`), each with default signal handling and its
output into a pipe the supervisor copies into the log.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys


def _child_setup(err_w, parent_fds):
  """In a forked child: default signal handling, the parent's ends of the pipes
  closed, stdout and stderr into the supervisor's log pipe."""
  for s in (signal.SIGTERM, signal.SIGINT):
    signal.signal(s, signal.SIG_DFL)
  for fd in parent_fds:
    os.close(fd)
  os.dup2(err_w, 1)
  os.dup2(err_w, 2)


def _worker_child(ev_w, req_r, err_w, parent_fds, staging, data_dir):
  """The forked worker: :func:`_child_setup`, then
  :func:`fedfrac_lab.campaign.worker.serve`."""
  _child_setup(err_w, parent_fds)
  os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.6")   # room for PyTorch
  from fedfrac_lab.campaign import worker
  code = worker.serve(os.fdopen(ev_w, "w"), os.fdopen(req_r), staging, data_dir)
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(code)


def _precompile_child(request_line, data_dir, err_w, parent_fds):
  """The forked compile-ahead process (:mod:`fedfrac_lab.campaign.precompile`)."""
  _child_setup(err_w, parent_fds)
  from fedfrac_lab.campaign import precompile
  precompile.main_child(request_line, data_dir, os.dup(err_w))
  os._exit(0)


def fork_worker(staging, data_dir):
  """``(process, request stream, events stream, output stream)`` of a new worker."""
  ev_r, ev_w = os.pipe()
  req_r, req_w = os.pipe()
  err_r, err_w = os.pipe()
  proc = mp.get_context("fork").Process(
      target=_worker_child, args=(ev_w, req_r, err_w, (ev_r, req_w, err_r), staging,
                                  data_dir), name="fedfrac-campaign-worker")
  proc.start()
  for fd in (ev_w, req_r, err_w):
    os.close(fd)
  return (proc, os.fdopen(req_w, "w", buffering=1), os.fdopen(ev_r),
          os.fdopen(err_r, errors="replace"))


def fork_precompiler(request_line, data_dir):
  """``(process, output stream)`` of a new compile-ahead process."""
  err_r, err_w = os.pipe()
  proc = mp.get_context("fork").Process(
      target=_precompile_child, args=(request_line, data_dir, err_w, (err_r,)),
      name="fedfrac-campaign-compile-ahead")
  proc.start()
  os.close(err_w)
  return proc, os.fdopen(err_r, errors="replace")


def stop(*procs):
  """Terminate each live process, then kill what is still alive after 5 s."""
  for w in procs:
    if w is None or not w.is_alive():
      continue
    w.terminate()
    w.join(5)
    if w.is_alive():
      w.kill()
      w.join()
