"""The simulated clock (``config.clock``): when each client's update arrives.

Each client k has a compute speed s_k (local steps per time unit) and a link
bandwidth b_k (bytes per time unit), fixed per seed: drawn from a named
distribution (``constant``, or ``lognormal`` m·exp(σ z), z ~ N(0, 1), through
:func:`fedfrac.ops.system.sample_speeds`) or read from a CSV trace (columns
``client,speed,bandwidth``, one row per client, and optionally ``windows``: the
client's availability windows, below). A client that starts at time t0
delivers its update at

  t0 + P / b_k + τ_k / s_k + U / b_k                                       (1)

with P the broadcast payload's bytes, U its message's bytes (both from the
message shapes, :mod:`fedfrac.sim.communication`) and τ_k its local steps. A
synchronous round lasts as long as its slowest participant's (1); the buffered
asynchronous server (:mod:`fedfrac.sim.asynchronous`) orders arrivals by (1).

A synchronous round may have a deadline T (``clock.deadline``, time units; inf:
none): a sampled client whose (1), less the round's start, exceeds T is
dropped (it trains nothing and sends nothing: masked, the cohort's shapes stay
static), and the round lasts

  min(T, max_k (1)_k)                                                      (2)

over the sampled clients: the server closes the round at T unless everyone
arrived before. A round whose every client missed T keeps the server and
client states.
Availability windows (the trace's ``windows`` column, e.g. ``0-100;250-inf``,
in time units): client k only starts training inside one of its windows
[a, b). Dispatched at time t, it starts at

  t0 = min over its windows with b > t of max(t, a)                        (3)

(it waits for its next window; a window's end only bounds when training may
start, not when it ends), and the asynchronous server samples new clients only
among those with a window still to come. Read by the asynchronous servers.

Time starts at 0; a run reports ``clock/time`` (the time at the end of each
server step) and ``clock/step_time`` per step.
"""
from __future__ import annotations

import csv
import dataclasses
import math
import os
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac.ops import system as system_lib
from fedfrac.sim.stages import Cohort, Stage, keep_unless_uploaded

DISTRIBUTIONS = ("constant", "lognormal")
ASYNCHRONOUS_SERVERS = ("fedbuff", "fedasync")   # servers that read clock.options
SERVERS = ("sync",) + ASYNCHRONOUS_SERVERS
TRACE_COLUMNS = ("client", "speed", "bandwidth")
WINDOWS_COLUMN = "windows"     # optional fourth column of a trace
CLOCK_TAG = 0x7FFFFFE0     # folded into the root key for speeds and bandwidths


@dataclasses.dataclass(frozen=True)
class ClockConfig:
  """Speeds and bandwidths of the clients, and the server that waits for them.

  Attributes:
    speed: ``constant`` (every client ``speed_mean``) or ``lognormal``
      (``speed_mean``·exp(``speed_spread``·z)); ignored with a trace.
    speed_mean, speed_spread: local steps per time unit, and σ of its log.
    bandwidth, bandwidth_mean, bandwidth_spread: the same for the link, in
      bytes per time unit (``inf``: communication takes no time).
    trace: ``None`` or a :class:`Trace` read by :func:`read_trace`.
    server: ``sync`` (rounds, timed by the slowest participant), ``fedbuff``
      or ``fedasync`` (:mod:`fedfrac.algorithms.fedbuff`,
      :mod:`fedfrac.algorithms.fedasync`).
    options: the server's built :class:`fedfrac.algorithms.asynchronous.AsyncServer`
      (``None`` for ``sync``).
    deadline: a ``sync`` round's deadline T in time units (``inf``: none):
      clients arriving later are dropped (eq. (2) of the module docstring).
  """
  speed: str = "constant"
  speed_mean: float = 1.0
  speed_spread: float = 0.0
  bandwidth: str = "constant"
  bandwidth_mean: float = math.inf
  bandwidth_spread: float = 0.0
  trace: Optional[tuple] = None
  server: str = "sync"
  options: Optional[object] = None
  deadline: float = math.inf

  @property
  def asynchronous(self) -> bool:
    return self.server != "sync"


def check_clock(clock: ClockConfig, prefix: str = "clock.") -> ClockConfig:
  """Raise ``ValueError`` (one line, naming the key) for an invalid clock."""
  for name in ("speed", "bandwidth"):
    kind = getattr(clock, name)
    if kind not in DISTRIBUTIONS:
      raise ValueError(f"{prefix}{name}={kind!r}: allowed values are "
                       f"{', '.join(DISTRIBUTIONS)}")
    mean, spread = getattr(clock, f"{name}_mean"), getattr(clock, f"{name}_spread")
    if not (isinstance(mean, (int, float)) and not isinstance(mean, bool) and mean > 0):
      raise ValueError(f"{prefix}{name}_mean={mean!r}: must be a number > 0 "
                       "(inf allowed for the bandwidth)" if name == "bandwidth" else
                       f"{prefix}{name}_mean={mean!r}: must be a finite number > 0")
    if name == "speed" and not math.isfinite(mean):
      raise ValueError(f"{prefix}speed_mean={mean!r}: must be a finite number > 0")
    if not (isinstance(spread, (int, float)) and not isinstance(spread, bool)
            and math.isfinite(spread) and spread >= 0):
      raise ValueError(f"{prefix}{name}_spread={spread!r}: must be a finite number >= 0")
  if clock.server not in SERVERS:
    raise ValueError(f"{prefix}server={clock.server!r}: allowed values are "
                     f"{', '.join(SERVERS)}")
  deadline = clock.deadline
  if not (isinstance(deadline, (int, float)) and not isinstance(deadline, bool)
          and deadline > 0 and not math.isnan(deadline)):
    raise ValueError(f"{prefix}deadline={deadline!r}: must be a number > 0 in time "
                     "units (inf: no deadline)")
  if clock.asynchronous and math.isfinite(deadline):
    raise ValueError(f"{prefix}deadline={deadline!r}: a deadline closes a synchronous "
                     f"round; only with {prefix}server='sync' (server is "
                     f"{clock.server!r}), else leave it at inf")
  return clock


class Trace(NamedTuple):
  """A client trace (:func:`read_trace`).

  Attributes:
    speeds, bandwidths: ``[K]`` tuples of floats.
    windows: ``None`` (always available) or ``[K]`` tuples of ``(start, end)``
      pairs, in time order and disjoint (``end`` may be inf).
  """
  speeds: tuple
  bandwidths: tuple
  windows: Optional[tuple] = None


def parse_windows(text: str, where: str) -> tuple:
  """``"0-100;250-inf"`` -> ``((0.0, 100.0), (250.0, inf))``; raises
  ``ValueError`` starting with ``where`` and naming the offending window."""
  if not text.strip():
    raise ValueError(f"{where}: the client is never available (no window); give it "
                     "one, e.g. 0-inf, or leave the windows column out")
  windows: list = []
  for part in text.split(";"):
    part = part.strip()
    start_text, sep, end_text = part.partition("-")
    try:
      if not sep:
        raise ValueError
      start, end = float(start_text), float(end_text)
    except ValueError:
      raise ValueError(f"{where}: window {part!r}: expected START-END in time units "
                       "(END may be inf), windows separated by ';'") from None
    if not (math.isfinite(start) and start >= 0):
      raise ValueError(f"{where}: window {part!r}: its start must be a finite number "
                       ">= 0")
    if not end > start:
      raise ValueError(f"{where}: window {part!r} is reversed or empty: its end must "
                       "be after its start")
    if windows and start < windows[-1][1]:
      raise ValueError(f"{where}: window {part!r} overlaps or precedes the window "
                       f"before it ({windows[-1][0]:g}-{windows[-1][1]:g}): windows "
                       "must be in time order and disjoint")
    windows.append((start, end))
  return tuple(windows)


def read_trace(path: str, num_clients: int, key: str = "clock.trace") -> Trace:
  """The :class:`Trace` of a CSV file with header ``client,speed,bandwidth``
  (optionally ``,windows``) and one row per client 0..K-1 (speed in local
  steps, bandwidth in bytes, per time unit; ``inf`` bandwidth: no communication
  time; windows as :func:`parse_windows` reads them). Raises ``ValueError``
  naming ``key``, the file, the line and the value."""
  if not os.path.isfile(path):
    raise ValueError(f"{key}={path!r}: no such file")
  with open(path, newline="") as f:
    reader = csv.DictReader(f)
    header = tuple(reader.fieldnames or ())
    if header not in (TRACE_COLUMNS, TRACE_COLUMNS + (WINDOWS_COLUMN,)):
      raise ValueError(f"{key}={path!r}: the header is {','.join(header) or '(empty)'}; "
                       f"it must be {','.join(TRACE_COLUMNS)} (optionally "
                       f",{WINDOWS_COLUMN})")
    rows = list(reader)
  speeds, bandwidths, windows = {}, {}, {}
  for line, row in enumerate(rows, start=2):
    try:
      client = int(row["client"])
      speed, bandwidth = float(row["speed"]), float(row["bandwidth"])
    except (TypeError, ValueError):
      raise ValueError(f"{key}={path!r}: line {line} {dict(row)}: client must be an "
                       "integer, speed and bandwidth numbers") from None
    if not 0 <= client < num_clients:
      raise ValueError(f"{key}={path!r}: line {line}: client={client} is not one of "
                       f"the run's clients 0..{num_clients - 1}")
    if client in speeds:
      raise ValueError(f"{key}={path!r}: line {line}: client={client} appears twice")
    if not (math.isfinite(speed) and speed > 0):
      raise ValueError(f"{key}={path!r}: line {line}: speed={row['speed']} of client "
                       f"{client}: must be a finite number > 0")
    if not bandwidth > 0:
      raise ValueError(f"{key}={path!r}: line {line}: bandwidth={row['bandwidth']} of "
                       f"client {client}: must be a number > 0 (inf allowed)")
    if WINDOWS_COLUMN in header:
      windows[client] = parse_windows(
          row[WINDOWS_COLUMN] or "",
          f"{key}={path!r}: line {line}: windows={row[WINDOWS_COLUMN] or ''!r} of "
          f"client {client}")
    speeds[client], bandwidths[client] = speed, bandwidth
  missing = [k for k in range(num_clients) if k not in speeds]
  if missing:
    shown = ", ".join(map(str, missing[:8])) + (", ..." if len(missing) > 8 else "")
    raise ValueError(f"{key}={path!r}: clients missing from the trace: {shown} "
                     f"({len(missing)} of {num_clients}); every client needs a row")
  return Trace(tuple(speeds[k] for k in range(num_clients)),
               tuple(bandwidths[k] for k in range(num_clients)),
               tuple(windows[k] for k in range(num_clients)) if windows else None)


def always_available(trace: Optional[Trace]) -> int:
  """Clients whose last window never ends (all of them without windows)."""
  if trace is None or trace.windows is None:
    return len(trace.speeds) if trace is not None else 0
  return sum(w[-1][1] == math.inf for w in trace.windows)


def window_arrays(clock: ClockConfig):
  """``None`` (no windows) or ``(starts, ends)``, float32 ``[K, W]`` (W the most
  windows of a client; shorter lists padded with empty windows at inf)."""
  if clock.trace is None or clock.trace.windows is None:
    return None
  width = max(len(w) for w in clock.trace.windows)
  pad = [list(w) + [(math.inf, math.inf)] * (width - len(w)) for w in clock.trace.windows]
  return (jnp.asarray([[a for a, _ in w] for w in pad], jnp.float32),
          jnp.asarray([[b for _, b in w] for w in pad], jnp.float32))


def start_times(windows, ids, now):
  """``[S]`` eq. (3): the earliest time >= ``now`` inside a window of each
  client ``ids`` (inf: none of its windows is still to come); ``windows`` from
  :func:`window_arrays`."""
  starts, ends = windows[0][ids], windows[1][ids]                     # [S, W]
  return jnp.min(jnp.where(ends > now, jnp.maximum(now, starts), jnp.inf), axis=1)


def client_rates(clock: ClockConfig, key, num_clients: int):
  """``(speeds [K], bandwidths [K])`` float32 of every client, fixed by ``key``
  (the run's root key; indexed by client id)."""
  if clock.trace is not None:
    return (jnp.asarray(clock.trace.speeds, jnp.float32),
            jnp.asarray(clock.trace.bandwidths, jnp.float32))
  key = jax.random.fold_in(key, CLOCK_TAG)

  def draw(kind, mean, spread, k):
    model = "equal" if kind == "constant" else "lognormal"
    return jnp.float32(mean) * system_lib.sample_speeds(k, num_clients, model, spread)
  return (draw(clock.speed, clock.speed_mean, clock.speed_spread,
               jax.random.fold_in(key, 0)),
          draw(clock.bandwidth, clock.bandwidth_mean, clock.bandwidth_spread,
               jax.random.fold_in(key, 1)))


def durations(rates, ids, num_steps, payload_bytes: int, message_bytes: int):
  """``[S]`` time from download to delivered update of clients ``ids`` running
  ``num_steps`` local steps (eq. (1) above, less the start time)."""
  speeds, bandwidths = rates
  bw = bandwidths[ids]
  return (jnp.float32(payload_bytes) / bw + num_steps.astype(jnp.float32) / speeds[ids]
          + jnp.float32(message_bytes) / bw)


def cost_table(clock: ClockConfig, num_clients: int, steps, payload_bytes: int,
               message_bytes: int, seed: int = 0) -> np.ndarray:
  """Host ``[K]`` durations of every client's full local work (for reports)."""
  rates = client_rates(clock, jax.random.PRNGKey(seed), num_clients)
  return np.asarray(durations(rates, jnp.arange(num_clients), jnp.asarray(steps),
                              payload_bytes, message_bytes))


class SyncClock(Stage):
  """A synchronous round on the clock: every sampled client starts at the
  round's start and the round lasts as long as its slowest uploading client's
  eq. (1); with a finite ``clock.deadline`` T, clients whose eq. (1) exceeds T
  are dropped before they train and the round lasts eq. (2)."""
  NAME = "clock"

  def __init__(self, clock: ClockConfig, payload_bytes: int, message_bytes: int):
    self.clock = clock
    self.payload_bytes = payload_bytes
    self.message_bytes = message_bytes
    self.deadline = math.isfinite(clock.deadline)

  def cohort(self, cohort: Cohort, arrays, state) -> Cohort:
    rates = client_rates(self.clock, state.key, arrays["num_steps"].shape[0])
    took = durations(rates, cohort.ids, cohort.num_steps, self.payload_bytes,
                     self.message_bytes)                                  # [S]
    if not self.deadline:
      return cohort.with_value(self.NAME, took)
    on_time = took <= jnp.float32(self.clock.deadline)
    sampled = cohort.mask
    return cohort._replace(mask=sampled & on_time,
                           num_steps=jnp.where(on_time, cohort.num_steps, 0)
                           ).with_value(self.NAME, (took, sampled))

  def server(self, new, old, cohort: Cohort):
    # Every client missed the deadline: nothing arrived, the states stay.
    return keep_unless_uploaded(new, old, cohort.mask) if self.deadline else new

  def metrics(self, cohort: Cohort) -> dict:
    if not self.deadline:
      took = jnp.where(cohort.mask, cohort.value(self.NAME), 0.0)
      return {"clock/step_time": jnp.max(took)}
    took, sampled = cohort.value(self.NAME)
    closed = jnp.minimum(jnp.where(sampled, took, 0.0),
                         jnp.float32(self.clock.deadline))                # eq. (2)
    return {"clock/step_time": jnp.max(closed),
            "clock/dropped": jnp.sum(sampled & ~cohort.mask).astype(jnp.float32)}


def advance(state, metrics):
  """After a synchronous round: the carried time (``SimState.clock``) plus the
  round's ``clock/step_time``, also reported as ``clock/time``."""
  now = state.clock + metrics["clock/step_time"]
  return state._replace(clock=now), {**metrics, "clock/time": now}
