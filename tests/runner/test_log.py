"""Command-line warnings (fedfrac.runner.log.one_line_warnings): one line each,
and JAX's warning per compiled program that the compile cache cannot be written
or read (a full disk: 10 to 20 a run) said once per kind, with what to do."""
from __future__ import annotations

import warnings

from fedfrac.runner import log as log_lib


def test_compile_cache_errors_are_said_once_each_and_other_warnings_pass():
  format_before = warnings.formatwarning
  try:
    with warnings.catch_warnings(record=True) as seen:
      warnings.simplefilter("always")
      log_lib.one_line_warnings()
      log_lib.one_line_warnings()          # twice: still one filter
      for name in ("jit_stage", "jit_add", "jit__run_chunk"):
        warnings.warn(f"Error writing persistent compilation cache entry for '{name}': "
                      f"OSError: [Errno 28] No space left on device")
      for name in ("jit_stage", "jit_add"):
        warnings.warn(f"Error reading persistent compilation cache entry for '{name}': "
                      f"error: Error -5 while decompressing data: incomplete or truncated "
                      f"stream")
      warnings.warn("something else")
      shown = [str(w.message) for w in seen]
      line = warnings.formatwarning(seen[0].message, UserWarning, "f.py", 1)
  finally:
    warnings.formatwarning = format_before
  assert shown == [
      "compiled programs cannot be written to the compile cache (OSError: [Errno 28] No "
      "space left on device), so the next run compiles them again; free space there, or "
      "set FEDFRAC_COMPILE_CACHE=DIR (another folder) or =off (further such warnings are "
      "not shown)",
      "compiled programs in the compile cache cannot be read (error: Error -5 while "
      "decompressing data: incomplete or truncated stream; written in part, e.g. when the "
      "disk filled), so they are compiled again; free space there, or set "
      "FEDFRAC_COMPILE_CACHE=DIR (another folder) or =off (further such warnings are not "
      "shown)",
      "something else"]
  assert line == f"warning: {shown[0]}\n"
