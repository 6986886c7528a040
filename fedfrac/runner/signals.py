"""SIGINT (Ctrl-C) and SIGTERM handled alike.

Job schedulers stop a program with SIGTERM (SLURM at preemption or a time limit,
``timeout``, ``kill``), a terminal with SIGINT; fedfrac treats both the same way:

* ``fedfrac-run`` (:func:`fedfrac.runner.run`, graceful): the first signal asks
  every run to stop after its current chunk, write a checkpoint and the rows so
  far; the program prints how to resume and exits with status 128 + the signal
  (130 for SIGINT, 143 for SIGTERM). A second signal stops at once (the current
  chunk is lost; the last checkpoint stays).
* ``fedfrac-sweep`` (not graceful): a batch of vmapped runs has no checkpoints,
  so the signal stops at once; the points finished so far are kept (each is one
  file written atomically) and the workers are stopped.

* While a command writes its outputs (:func:`deferred`), a signal waits: the
  files are finished, then the command stops as above, saying the outputs are
  whole.

Handlers are installed only in the main thread (elsewhere :class:`Signals` does
nothing).
"""
from __future__ import annotations

import signal
import threading
from typing import Optional

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def name(signum: int) -> str:
  """``SIGINT`` / ``SIGTERM``."""
  return signal.Signals(signum).name


def exit_status(signum: int) -> int:
  """The shell's status of a program stopped by ``signum`` (128 + its number)."""
  return 128 + int(signum)


class Interrupted(KeyboardInterrupt):
  """SIGINT or SIGTERM stopped the work at once; ``signum`` says which and
  ``message`` (set by whoever knows what was kept) what to do next."""

  def __init__(self, signum: int, message: str = ""):
    super().__init__(message or name(signum))
    self.signum, self.message = int(signum), message


class Signals:
  """Context manager handling SIGINT and SIGTERM in the main thread.

  ``graceful=True``: the first signal only sets :attr:`requested` (its number)
  so the caller can stop at its next safe point; a later one raises
  :class:`Interrupted` at once, unless ``escalate=False`` (worker processes,
  which their parent kills if it must). ``graceful=False``: every signal raises
  :class:`Interrupted` at once, and leaving the block raises it again when that
  one was swallowed on the way (a signal inside a garbage-collection callback).
  """

  def __init__(self, graceful: bool = True, escalate: bool = True):
    self.graceful, self.escalate = graceful, escalate
    self.requested: Optional[int] = None
    self._previous: dict = {}

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      for s in SIGNALS:
        self._previous[s] = signal.signal(s, self._handle)
    return self

  def _handle(self, signum, frame):
    first = self.requested is None
    if first:
      self.requested = signum
    if self.graceful and (first or not self.escalate):
      return
    _RAISED[:] = [signum]    # until it reaches a caller (raise_if_swallowed)
    raise Interrupted(signum)

  def __exit__(self, exc_type, exc, tb):
    for s, handler in self._previous.items():
      signal.signal(s, handler)
    self._previous = {}
    if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
      _RAISED.clear()        # it reached its caller
    if exc_type is None and self.requested is not None and not self.graceful:
      # The handler raised, but nothing came out: the signal landed in code that
      # swallows exceptions (a garbage-collection callback, such as JAX's, prints
      # "Exception ignored" and goes on). Stop now rather than exit 0.
      raise Interrupted(self.requested)
    return False


# The signal a handler raised at once, until it reaches a caller: one raised inside
# a garbage-collection callback (JAX's) is printed there and dropped, and the
# work would go on to its end.
_RAISED: list = []


def raise_if_swallowed() -> None:
  """Raise :class:`Interrupted` again when a signal raised at once was swallowed
  on the way (called at every chunk boundary, :func:`fedfrac.runner.chunked.chunk_loop`,
  so a sweep or a run stops within one chunk)."""
  if _RAISED:
    raise Interrupted(_RAISED.pop())


# A worker process's own handler (see :func:`fedfrac.runner.points.work_queue`).
_WORKER: Optional[Signals] = None


def install_in_worker() -> None:
  """Graceful handling for the rest of this (worker) process's life: a signal
  asks the current item to stop at its next safe point (:func:`stop_requested`)."""
  global _WORKER
  _WORKER = Signals(graceful=True, escalate=False).__enter__()


def stop_requested() -> bool:
  """Whether this worker process was asked to stop (see :func:`install_in_worker`)."""
  return _WORKER is not None and _WORKER.requested is not None


def request_stop(signum: int = signal.SIGTERM) -> None:
  """Ask this worker process to stop as a signal would (its parent is gone)."""
  if _WORKER is not None and _WORKER.requested is None:
    _WORKER.requested = int(signum)


def deferred() -> Signals:
  """A ``with`` block that a signal does not cut short (writing outputs): the
  signal is kept in ``.requested`` for the caller to act on afterwards."""
  return Signals(graceful=True, escalate=False)
