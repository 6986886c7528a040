"""Settings for every test.

* fedfrac's persistent compilation cache lives in a directory made for this
  pytest run (removed when it ends) and shared by its worker processes and the
  processes the tests start: no test writes under the user's cache directory or
  depends on what an earlier run left there, and a program that many tests
  compile (the quickstart's FedAvg on digits, the command-line runs) compiles
  once per run. A cache hit gives the program the compiler would have built, so
  the numbers are the same (tests/runner/test_compile_cache.py checks it, in
  directories of its own).
* XLA:CPU compiles at backend optimisation level 1 (LLVM's ``-O1``) instead of
  the default 2, unless ``XLA_FLAGS`` already names a level. Most of the
  suite's time is compiling small programs: a third less with level 1, and the
  programs compute the same numbers bit for bit (checked on the FO-RI
  participation study of ``tests/reproduce/test_reproduce.py``: every metric of
  16 runs equal; level 0 would change them at float rounding). Users' runs keep
  XLA's default.

Subprocesses the tests start inherit both settings.

* Every test starts with messages naming ``ff.run``'s keywords
  (``workdir='...'``): a test that parses a command line in this process
  (:func:`fedfrac.main.parse_flags` switches messages to flags, ``--workdir=...``)
  does not change what the next test reads, nor leaves its flags parsed
  (absl keeps them between parses).
"""
import atexit
import os
import shutil
import tempfile

import pytest

RUN_CACHE = "FEDFRAC_TEST_RUN_CACHE"   # set by the first process of a pytest run
if RUN_CACHE not in os.environ:
  os.environ[RUN_CACHE] = tempfile.mkdtemp(prefix="fedfrac-test-jax-")
  atexit.register(shutil.rmtree, os.environ[RUN_CACHE], True)
os.environ["FEDFRAC_COMPILE_CACHE"] = os.environ[RUN_CACHE]
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                             + " --xla_backend_optimization_level=1").strip()


@pytest.fixture(autouse=True)
def _messages_name_keywords():
  yield
  from fedfrac import _validation
  _validation.name_flags(False)
  import sys
  if "absl.flags" in sys.modules:          # a command line parsed in this process
    sys.modules["absl.flags"].FLAGS.unparse_flags()
