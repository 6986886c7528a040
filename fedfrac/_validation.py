"""Small helpers shared by argument checks across fedfrac: number tests, and
:class:`ConfigError` with :func:`check` / :func:`fail`, the one way a config check
reports a bad value (re-exported by :mod:`fedfrac.config`)."""
from __future__ import annotations

import math
import numbers

import jax
import numpy as np

# The largest finite float32: every float hyper-parameter ends up in float32
# arrays, so a value beyond it (1e308, 1e39) becomes inf there; and the
# smallest normal one: a nonzero value below it (1e-300, 1e-50) becomes 0 or a
# subnormal there (an lr that never moves the model).
FLOAT32_MAX = float(np.finfo(np.float32).max)
FLOAT32_TINY = float(np.finfo(np.float32).tiny)
# The largest int32: rounds and local steps are counted in int32 arrays, so a
# count beyond it (rounds=10**20, local_epochs=10**20) wraps around there.
INT32_MAX = 2**31 - 1


def finite_in_float32(v) -> bool:
  """Whether the real number ``v`` is finite and stays finite as a float32
  (``|v| <= 3.4028235e38``). Not a number (a string, a bool, None) gives False."""
  if isinstance(v, bool) or not isinstance(v, (numbers.Real, np.number)):
    return False
  try:
    return math.isfinite(v) and abs(float(v)) <= FLOAT32_MAX
  except (OverflowError, TypeError, ValueError):  # an int too large for a float
    return False


def usable_in_float32(v) -> bool:
  """:func:`finite_in_float32`, and not a nonzero number that float32 rounds to
  0 or a subnormal (``|v| < 1.1754944e-38``)."""
  if not finite_in_float32(v):
    return False
  return v == 0 or abs(float(v)) >= FLOAT32_TINY


def not_finite_note(v) -> str:
  """``"is not finite in float32 (|x| <= 3.4028235e+38); "`` for a real number that
  is NaN, infinite or beyond float32, ``"is 0 in float32 ...; "`` for a nonzero
  one below its smallest normal number, else ``""``: a prefix for range
  messages, so ``lr=1e308`` or ``lr=1e-300`` is not reported as if it were merely
  too small or too large."""
  if isinstance(v, bool) or not isinstance(v, (numbers.Real, np.number)):
    return ""
  if usable_in_float32(v):
    return ""
  if finite_in_float32(v):
    return (f"is 0 in float32, the precision it is used in (a nonzero value needs "
            f"|x| >= {FLOAT32_TINY:.8g}); ")
  try:
    finite = math.isfinite(v)
  except (OverflowError, TypeError, ValueError):
    finite = True
  if not finite:
    return "is not finite; "
  return f"is not finite in float32 (|x| <= {FLOAT32_MAX:.8g}); "


def concrete_scalar(x):
  """``float(x)`` for a concrete real scalar; None for a traced value.

  Non-scalar or non-numeric concrete input, and a number that is not usable
  in float32 (``1e308`` overflows the float32 arrays it ends up in, ``1e-300``
  becomes 0 there: :func:`usable_in_float32`), give NaN,
  which every range check rejects, so callers report it with their own ValueError.
  """
  if is_traced(x):
    return None
  if isinstance(x, (numbers.Real, np.number)) and not isinstance(x, np.complexfloating):
    return float(x) if usable_in_float32(x) else float("nan")
  arr = np.asarray(x)
  if arr.ndim != 0 or not (np.issubdtype(arr.dtype, np.integer)
                           or np.issubdtype(arr.dtype, np.floating)):
    return float("nan")
  value = arr.item()
  return float(value) if usable_in_float32(value) else float("nan")


def is_traced(x) -> bool:
  """Whether ``x`` is a traced JAX value (under jit/vmap/eval_shape): its number
  is not known yet, so range checks skip it. The one traced-value test of fedfrac."""
  return isinstance(x, jax.core.Tracer)


class ConfigError(ValueError):
  """A config value is invalid; the message names the key, value and allowed range."""


# How messages name the arguments of a run (``workdir``, ``overwrite``,
# ``config.rounds``): as ``ff.run``'s keywords and the config's keys from Python,
# as flags (``--workdir``) once the command line says so (:func:`name_flags`).
_WORDING = {"flags": False}


def name_flags(flags: bool = True) -> None:
  """Name arguments as command-line flags in messages from now on
  (:mod:`fedfrac.main` calls it; Python calls see ``workdir=``, ``overwrite=``)."""
  _WORDING["flags"] = bool(flags)


def on_command_line() -> bool:
  """Whether messages speak to a command line (:func:`name_flags` was called)
  rather than to a Python caller."""
  return _WORDING["flags"]


def run_again() -> str:
  """How a message asks for the same run again: ``rerun the same command`` on
  the command line, ``call it again`` from Python."""
  return "rerun the same command" if _WORDING["flags"] else "call it again"


def argument(name: str) -> str:
  """An argument named in a message: ``--workdir`` on the command line,
  ``workdir`` from Python."""
  return f"--{name}" if _WORDING["flags"] else name


def setting(name: str, value=True) -> str:
  """An argument with its value in a message: ``--overwrite``, ``--overwrite=fedavg``,
  ``--workdir=/tmp/x`` on the command line (shell-quoted), ``overwrite=True``,
  ``overwrite='fedavg'``, ``workdir='/tmp/x'`` from Python."""
  if not _WORDING["flags"]:
    return f"{name}={value!r}"
  if value is True:
    return f"--{name}"
  import shlex
  return f"--{name}={shlex.quote(str(value))}"


def fail(key, value, allowed):
  """Raise :class:`ConfigError` ``config.<key>=<value>: <allowed>`` (a number that
  is not finite in float32 is said to be so first)."""
  raise ConfigError(f"config.{key}={value!r}: {not_finite_note(value)}{allowed}")


def is_int(v):
  return isinstance(v, int) and not isinstance(v, bool)


def is_num(v):
  """An int or float (not a bool) that is usable in float32, the precision every
  hyper-parameter is used in (``1e308`` would become inf, ``1e-300`` 0)."""
  return isinstance(v, (int, float)) and usable_in_float32(v)


def check(cond, key, value, allowed):
  """:func:`fail` unless ``cond``."""
  if not cond:
    fail(key, value, allowed)


def get(c, dotted):
  """``c["a"]["b"]`` for ``dotted="a.b"``."""
  for part in dotted.split("."):
    c = c[part]
  return c


def int_at_least(c, key, lo):
  """Check that ``config.<key>`` is an integer >= ``lo``."""
  v = get(c, key)
  check(is_int(v) and v >= lo, key, v, f"must be an integer >= {lo}")


def int32_count(key, v, what) -> None:
  """Check that the integer ``v`` (``config.<key>``) fits the int32 counters
  ``what`` is kept in (``<= 2**31 - 1``)."""
  check(not is_int(v) or v <= INT32_MAX, key, v,
        f"must be at most {INT32_MAX} (2**31 - 1): {what} are counted in int32")
