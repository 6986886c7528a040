"""Settings for every test: fedfrac's persistent compilation cache is off, so
no test writes under the user's cache directory or depends on what an earlier
run left there (tests/runner/test_compile_cache.py turns it on in a directory
of its own). Subprocesses the tests start inherit the setting."""
import os

os.environ["FEDFRAC_COMPILE_CACHE"] = "off"
