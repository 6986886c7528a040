"""Hyper-parameter schemas: each algorithm's options, defaults and checks.

An algorithm's options are one :class:`HParamSchema` of named :class:`HParam`
(default, per-value check, what is allowed) plus checks that involve several
options. :meth:`HParamSchema.resolve` fills defaults, checks every concrete
value and raises a one-line ``ValueError`` naming the key, the value and what is
allowed; an unknown option name gets the closest known name ("did you mean").
Traced values (a vmapped grid of runs) cannot be checked in Python: the runner
checks a grid's values concretely before tracing, and a traced value that
reaches :meth:`HParamSchema.resolve` anyway (your own ``jax.vmap`` over a
``Simulation``) becomes NaN where it is outside its range, when its check has a
traced form (:class:`Interval`: ``positive``, ``non_negative``,
``unit_interval``, ... , and FOFedAvg's α): the run then diverges visibly
instead of training with a value the algorithm does not define (an α of 3
trained to 10 % accuracy, like a plausible bad run).
"""
from __future__ import annotations

import difflib
from typing import Any, Callable, ItemsView, Mapping, NamedTuple, Optional

import math

import jax.numpy as jnp

from fedfrac._validation import is_traced, not_finite_note, usable_in_float32


class HParam(NamedTuple):
  """One option: its default, ``check(value) -> bool`` (None = any value) and a
  short phrase saying what is allowed (shown in errors and ``--list``)."""
  default: Any
  check: Optional[Callable] = None
  allowed: str = ""


class HParamSchema:
  """An algorithm's options: ``{name: HParam}`` plus cross-option checks.

  Each entry of ``checks`` is ``check(hp) -> None or str``: given the resolved
  options it returns None when they are consistent, else a message that starts
  with the offending ``key=value`` (e.g. ``"p_min=3: must be <= p_max=2"``).
  Checks must pass traced values (see :func:`fedfrac._validation.is_traced`).
  """

  def __init__(self, options: Mapping[str, HParam], checks=()):
    self.options = dict(options)
    self.checks = tuple(checks)

  def __iter__(self):
    return iter(self.options)

  def __contains__(self, key):
    return key in self.options

  def items(self) -> ItemsView[str, Any]:
    return self.options.items()

  def defaults(self) -> dict:
    return {k: hp.default for k, hp in self.options.items()}

  def with_defaults(self, **defaults) -> "HParamSchema":
    """The same schema with some defaults replaced (a named preset)."""
    unknown = sorted(set(defaults) - set(self.options))
    if unknown:
      raise ValueError(f"{unknown[0]}: not an option of this schema")
    options = {k: hp._replace(default=defaults[k]) if k in defaults else hp
               for k, hp in self.options.items()}
    return HParamSchema(options, self.checks)

  def resolve(self, algorithm_name: str, given: Mapping, prefix: str = "") -> dict:
    """Defaults + ``given``, every concrete value checked.

    Raises ``ValueError`` with one line: ``<prefix><key>=<value>: <allowed>``, or
    for an unknown key ``<prefix><key>: unknown option ...; did you mean ...``.
    """
    for key in given:
      if key not in self.options:
        raise ValueError(f"{prefix}{key}: {self.unknown_message(algorithm_name, key)}")
    out = {}
    for key, hp in self.options.items():
      value = given.get(key, hp.default)
      if hp.check is not None and not is_traced(value) and not hp.check(value):
        raise ValueError(f"{prefix}{key}={value!r}: {not_finite_note(value)}"
                         f"{hp.allowed or 'invalid value'}")
      out[key] = value
    for key, hp in self.options.items():   # traced: NaN outside the range
      if hp.check is not None and is_traced(out[key]):
        out[key] = nan_outside(hp.check, out[key], out)
    for check in self.checks:
      message = check(out)
      if message:
        raise ValueError(f"{prefix}{message}")
    return out

  def unknown_message(self, algorithm_name: str, key: str) -> str:
    close = difflib.get_close_matches(str(key), list(self.options), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return (f"unknown option for algorithm {algorithm_name!r}; {hint}allowed options "
            f"are {', '.join(sorted(self.options)) or '(none)'}")


class OneOf:
  """Check ``value in values`` (kept as ``values`` so listings can show them)."""

  def __init__(self, *values):
    self.values = values

  def __call__(self, v):
    return v in self.values


def one_of(*values) -> OneOf:
  return OneOf(*values)


def is_number(v: Any) -> bool:
  """An int or float (not a bool) that is usable in float32 (finite, and not a
  nonzero value float32 makes 0)."""
  return isinstance(v, (int, float)) and usable_in_float32(v)


class Interval:
  """Check ``lo <= v <= hi`` (``<`` at an open end) for a number finite in
  float32 (``optional``: ``None`` passes too). :meth:`traced` is the same test
  on a traced value, as a JAX boolean (see :func:`nan_outside`)."""

  def __init__(self, lo: float = -math.inf, hi: float = math.inf, *,
               lo_open: bool = False, hi_open: bool = False, optional: bool = False):
    self.lo, self.hi, self.lo_open, self.hi_open = lo, hi, lo_open, hi_open
    self.optional = optional

  def __call__(self, v: Any) -> bool:
    if v is None:
      return self.optional
    if not is_number(v):
      return False
    above = v > self.lo if self.lo_open else v >= self.lo
    below = v < self.hi if self.hi_open else v <= self.hi
    return bool(above and below)

  def traced(self, v: Any, hp: Optional[Mapping] = None) -> Any:
    ok = jnp.isfinite(v)
    if self.lo > -math.inf:
      ok = ok & ((v > self.lo) if self.lo_open else (v >= self.lo))
    if self.hi < math.inf:
      ok = ok & ((v < self.hi) if self.hi_open else (v <= self.hi))
    return ok


def interval(lo: float = -math.inf, hi: float = math.inf, *, lo_open: bool = False,
             hi_open: bool = False, optional: bool = False) -> Interval:
  """An :class:`Interval` check (e.g. ``interval(0, 1, hi_open=True)``: [0, 1))."""
  return Interval(lo, hi, lo_open=lo_open, hi_open=hi_open, optional=optional)


def nan_outside(check: Callable, value: Any, hp: Mapping) -> Any:
  """A traced float ``value`` where ``check.traced(value, hp)`` holds, else NaN
  (unchanged when the check has no traced form or the value is not a float)."""
  traced = getattr(check, "traced", None)
  if traced is None or not jnp.issubdtype(jnp.result_type(value), jnp.floating):
    return value
  return jnp.where(traced(value, hp), value, jnp.nan)


positive = interval(0, lo_open=True)      # > 0
non_negative = interval(0)                # >= 0
unit_interval = interval(0, 1)            # [0, 1]


def boolean(v: Any) -> bool:
  return isinstance(v, bool)


def positive_int(v: Any) -> bool:
  return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def non_negative_int(v: Any) -> bool:
  return isinstance(v, int) and not isinstance(v, bool) and v >= 0
