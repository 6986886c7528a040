"""Ctrl-C while a fedfrac command imports its packages: one line, status 130;
your own script's ``import fedfrac`` keeps its KeyboardInterrupt."""
from __future__ import annotations

import sys

import pytest

from fedfrac import startup


@pytest.mark.parametrize("argv,orig_argv,command", [
    (["/venv/bin/fedfrac-sweep", "--config=c.py"], ["/venv/bin/python", "/venv/bin/fedfrac-sweep"],
     True),
    (["-m"], ["python", "-m", "fedfrac.sweep", "--config=c.py"], True),
    (["-m"], ["python", "-m", "fedfrac_lab.reproduce", "stragglers"], True),
    (["my_script.py"], ["python", "my_script.py"], False),
    (["-m"], ["python", "-m", "pytest", "-q"], False),
    (["-c"], ["python", "-c", "import fedfrac"], False),
])
def test_which_processes_are_fedfrac_commands(monkeypatch, argv, orig_argv, command):
  monkeypatch.setattr(sys, "argv", argv)
  monkeypatch.setattr(sys, "orig_argv", orig_argv, raising=False)
  assert startup.started_as_command() is command


def test_ctrl_c_while_a_command_starts_is_one_line_and_status_130():
  """A real SIGINT inside the block of a command (a child process named as
  ``python -m fedfrac.sweep`` would be): one line, status 130, no traceback."""
  import os
  import signal
  import subprocess
  code = ("import os, signal, sys\n"
          "sys.argv = ['/venv/bin/fedfrac-sweep']\n"
          "from fedfrac import startup\n"
          "with startup.interrupt_exits('fedfrac was starting'):\n"
          "  os.kill(os.getpid(), signal.SIGINT)\n"
          "  print('not reached')\n")
  env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(startup.__file__)))
  done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        env=env, timeout=60,
                        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
  assert done.returncode == 130, done
  assert done.stdout == ""
  assert done.stderr.splitlines() == ["interrupted (SIGINT) while fedfrac was starting; "
                                      "nothing has run yet: rerun the same command"], done


def test_ctrl_c_in_your_own_script_stays_a_keyboard_interrupt(monkeypatch, capsys):
  monkeypatch.setattr(sys, "argv", ["my_script.py"])
  monkeypatch.setattr(sys, "orig_argv", ["python", "my_script.py"], raising=False)
  import os
  import signal
  # A shell starts a background job with SIGINT ignored; this test is about a
  # script that Ctrl-C reaches, so it starts from Python's own handler.
  before = signal.signal(signal.SIGINT, signal.default_int_handler)
  try:
    with pytest.raises(KeyboardInterrupt):
      with startup.interrupt_exits("fedfrac was starting"):
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        os.kill(os.getpid(), signal.SIGINT)
  finally:
    signal.signal(signal.SIGINT, before)
  assert capsys.readouterr().err == ""
