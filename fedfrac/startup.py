"""Ctrl-C while a fedfrac command is still importing its packages.

A command (``fedfrac-run``, ``fedfrac-sweep``, ``python -m fedfrac.sweep``, the
lab's commands above the library ...) spends its first seconds importing JAX and
fedfrac, before it installs its own SIGINT handler
(:mod:`fedfrac.runner.signals`); a Ctrl-C then is one line and exit status 130,
not a ``KeyboardInterrupt`` traceback. ``import fedfrac`` from your own Python is
left alone (the ``KeyboardInterrupt`` reaches you as usual). Kept free of
imports of fedfrac and JAX, since it runs before them.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Iterator

def started_as_command() -> bool:
  """Whether this process is one of fedfrac's commands (not your own script)."""
  if sys.argv and os.path.basename(sys.argv[0]).startswith("fedfrac-"):
    return True
  argv = list(getattr(sys, "orig_argv", ()))
  if "-m" in argv[:-1]:
    module = argv[argv.index("-m") + 1]
    return module.split(".")[0].startswith("fedfrac")   # the library's and the lab's
  return False


@contextlib.contextmanager
def interrupt_exits(what: str) -> Iterator[None]:
  """In a fedfrac command, a Ctrl-C inside ends the process at once with one line
  naming ``what`` it was doing and status 130 (128 + SIGINT).

  The handler exits itself (``os._exit``) rather than raise ``KeyboardInterrupt``:
  imports run garbage-collection callbacks (JAX's among them) that would only
  print such an exception and go on, and nothing is open yet that an exit could
  leave half-written."""
  if not started_as_command() or threading.current_thread() is not threading.main_thread():
    yield
    return

  def handle(signum, frame):
    sys.stderr.write(f"interrupted (SIGINT) while {what}; nothing has run yet: rerun "
                     f"the same command\n")
    sys.stderr.flush()
    os._exit(128 + int(signal.SIGINT))

  previous = signal.signal(signal.SIGINT, handle)
  try:
    yield
  finally:
    signal.signal(signal.SIGINT, previous)
