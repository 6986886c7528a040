"""Settings for every test.

* fedfrac's persistent compilation cache is off, so no test writes under the
  user's cache directory or depends on what an earlier run left there
  (tests/runner/test_compile_cache.py turns it on in a directory of its own).
* XLA:CPU compiles at backend optimisation level 1 (LLVM's ``-O1``) instead of
  the default 2, unless ``XLA_FLAGS`` already names a level. Most of the
  suite's time is compiling small programs: a third less with level 1, and the
  programs compute the same numbers bit for bit (checked on the FO-RI
  participation study of ``tests/reproduce/test_reproduce.py``: every metric of
  16 runs equal; level 0 would change them at float rounding). Users' runs keep
  XLA's default.

Subprocesses the tests start inherit both settings.
"""
import os

os.environ["FEDFRAC_COMPILE_CACHE"] = "off"
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                             + " --xla_backend_optimization_level=1").strip()
