"""Per-run bookkeeping between chunks: rows, traffic, wall time, divergence."""
from __future__ import annotations

import inspect
import logging
import re
import sys
import warnings

import numpy as np

from fedfrac.runner.records import RunRecord, nonfinite_keys, stopped_entry


# JAX warns once per compiled program that its persistent cache cannot be written
# or read (a full disk, and the entries it cut short: 10 to 20 warnings a run);
# fedfrac says each kind once.
_CACHE_ERROR = re.compile(r"^Error (writing|reading) persistent compilation cache entry "
                          r"for '[^']*': (.*)$", re.S)
_CACHE_SAID = {
    "writing": "compiled programs cannot be written to the compile cache ({}), so the "
               "next run compiles them again",
    "reading": "compiled programs in the compile cache cannot be read ({}; written "
               "in part, e.g. when the disk filled), so they are compiled again"}


def _format(message, category, filename, lineno, line=None) -> str:
  return f"warning: {message}\n"


class _Shown:
  """``warnings.showwarning`` that says a failed compile-cache write or read
  once per process, naming what to do, and passes every other warning on."""

  def __init__(self, show):
    self.show, self.said = show, set()

  def __call__(self, message, category, filename, lineno, file=None, line=None):
    cache = _CACHE_ERROR.match(str(message))
    if cache:
      kind, why = cache.group(1), cache.group(2).strip()
      if kind in self.said:
        return
      self.said.add(kind)
      message = (_CACHE_SAID[kind].format(why) + "; free space there, or set "
                 "FEDFRAC_COMPILE_CACHE=DIR (another folder) or =off (further such "
                 "warnings are not shown)")
    self.show(message, category, filename, lineno, file, line)


def one_line_warnings() -> None:
  """Show warnings as one line, ``warning: <message>`` (a command line's way),
  instead of Python's two: the file and line, then the source line that warned
  (``  warnings.warn(msg)``, which reads as a second, broken line). JAX's
  warning per program that the compile cache cannot be written or read (a
  full disk) is said once for each, with what to do."""
  warnings.formatwarning = _format
  if not isinstance(warnings.showwarning, _Shown):
    warnings.showwarning = _Shown(warnings.showwarning)


# JAX's log records for an exception raised in a host callback, each with the
# callback's traceback; the run's failure line (chunked.failure_line) names the
# same exception, message and place in one line.
CALLBACK_FAILED = {"jax._src.debugging": "jax.debug.callback failed",
                   "jax._src.callback": ("jax.pure_callback failed", "jax.io_callback failed")}


class _CallbackTracebacks(logging.Filter):
  def filter(self, record: logging.LogRecord) -> bool:
    said = CALLBACK_FAILED.get(record.name, ())
    return not (record.exc_info and record.getMessage() in said)


def quiet_callback_tracebacks() -> None:
  """Leave out JAX's logged traceback of an exception raised in a host callback
  (``jax.debug.callback`` and the like): the run fails with that exception and
  its one line names it. Other JAX log records are untouched."""
  for name in CALLBACK_FAILED:
    logger = logging.getLogger(name)
    if not any(isinstance(f, _CallbackTracebacks) for f in logger.filters):
      logger.addFilter(_CallbackTracebacks())


def round_communication(comm):
  """``(payload_bytes, message_bytes, participants, round_index) -> (up, down)``.

  An algorithm's ``comm`` may take a ``round_index`` keyword (0-based) when its
  traffic changes between rounds (e.g. FibFL++ warm-up rounds).
  """
  try:
    takes_round = "round_index" in inspect.signature(comm).parameters
  except (TypeError, ValueError):
    takes_round = False
  if takes_round:
    return lambda p, m, n, r: comm(p, m, n, round_index=r)
  return lambda p, m, n, r: comm(p, m, n)


def _scalar(v):
  v = np.asarray(v)
  return float(v) if v.ndim == 0 else None


def progress_bar_class():
  """tqdm's notebook-aware bar when ipywidgets (the ``notebooks`` extra) is
  installed, else the text bar (tqdm.auto would warn in Jupyter without it)."""
  import importlib.util
  if importlib.util.find_spec("ipywidgets") is not None:
    from tqdm.auto import tqdm
  else:
    from tqdm.std import tqdm
  return tqdm


class Progress:
  """A tqdm bar on stderr (or nothing when disabled)."""

  def __init__(self, enabled, total, desc, initial):
    self.bar = None
    if enabled:
      tqdm = progress_bar_class()
      self.bar = tqdm(total=total, desc=desc, initial=initial, leave=False,
                      dynamic_ncols=True, file=sys.stderr)

  def update(self, n, row=None, seconds=0.0):
    """Advance by ``n`` rounds, showing ``row``'s accuracy (or RMSE) and rounds/s."""
    if self.bar is not None:
      self.bar.update(n)
      if row:
        value = row.get("accuracy", row.get("rmse", float("nan")))
        self.bar.set_postfix({"acc": f"{value:.4f}",
                              "rps": f"{n / max(seconds, 1e-9):.1f}"}, refresh=False)

  def close(self):
    if self.bar is not None:
      self.bar.close()


class PointProgress:
  """A tqdm bar over a sweep's points on stderr, with an ETA (or nothing when
  disabled). Points finished by an earlier, interrupted sweep count as done
  from the start but not in the rate, so the ETA is from this run's speed."""

  def __init__(self, enabled, total, done=0, desc="sweep"):
    self.bar = None
    if enabled and total:
      from tqdm.auto import tqdm
      self.bar = tqdm(total=total, initial=done, desc=desc, unit="point",
                      dynamic_ncols=True, file=sys.stderr, smoothing=0.1)

  def update(self, n=1):
    if self.bar is not None:
      self.bar.update(n)

  def close(self):
    if self.bar is not None:
      self.bar.close()


def divergence_advice(round_number) -> str:
  """What to check when a run's metrics stop being finite at ``round_number``:
  from round 1 on, the data and labels as much as the learning rate."""
  if round_number <= 1:
    return ("not finite from the first round: check the data as well as the learning "
            "rate: labels in 0..C-1 and finite inputs on a sensible scale (standardise "
            "features), then lower client.lr or check the method's options (a traced "
            "option outside its range gives NaN)")
  return "lower client.lr or check the method's options"


class RunLog:
  """Rows, cumulative traffic, wall time and status of one (method, seed) run.

  ``target``: the :class:`fedfrac.runner.records.Target` the run stops at
  (``config.stop_at_target``; None: it runs every round). Once an evaluated row
  reaches it, :attr:`stopped` says where and why and the run records nothing
  further (it is no longer :attr:`running`); a history restored from a
  checkpoint is checked against it again, so a run kept from a command that
  stopped at its target is finished, and one continued without
  ``stop_at_target`` (or with a target not reached yet) goes on.
  """

  def __init__(self, label, algorithm_name, seed, comm, payload_bytes, message_bytes,
               on_divergence="stop", history=None, host_metrics=None, target=None):
    self.label, self.algorithm_name, self.seed = label, algorithm_name, seed
    self.host_metrics = host_metrics
    self._host_keys = set((history or {}).get("nonfinite_allowed", ()))
    self._dropped: set = set()   # metrics left out of the table (said once each)
    self.comm = round_communication(comm)
    self.payload_bytes, self.message_bytes = payload_bytes, message_bytes
    self.on_divergence = on_divergence
    h = history or {}
    self.rows = h.get("rows", [])
    self.round_rows = h.get("round_rows", [])
    self.status = h.get("status", "ok")
    self.wall = h.get("wall_s", 0.0)
    self.cum_up = h.get("cum_bytes_up", 0.0)
    self.cum_down = h.get("cum_bytes_down", 0.0)
    self.compile_s = h.get("compile_s", 0.0)   # summed over the sittings of a resumed run
    self.client_arrays = {}
    self.target = target
    self.stopped = stopped_entry(target, self.rows) if self.status == "ok" else None

  @property
  def running(self) -> bool:
    """Whether the run goes on: not diverged and not stopped at its target."""
    return self.status == "ok" and self.stopped is None

  def history(self):
    out = {"rows": self.rows, "round_rows": self.round_rows, "status": self.status,
           "wall_s": self.wall, "compile_s": self.compile_s, "cum_bytes_up": self.cum_up,
           "cum_bytes_down": self.cum_down, "algorithm": self.algorithm_name,
           "nonfinite_allowed": sorted(self._host_keys)}
    if self.stopped is not None:
      out["stopped"] = self.stopped
    return out

  def add_chunk(self, first_round, round_metrics, evaluation, seconds):
    """Record a chunk (host arrays, leading axis = rounds); returns the eval row.

    A run is marked diverged at the first round whose training-side metrics are
    not finite — whatever ``eval_every`` is — or else at the chunk's evaluation
    if that is not finite; it then records nothing further (or raises, with
    ``on_divergence="error"``, after recording the chunk). A round without any
    participating client has no ``train_*`` metrics (absent, not zero).
    """
    if not self.running:
      return None
    n = len(round_metrics["cohort"])
    self.wall += seconds
    diverged_at, bad = None, []
    for i in range(n):
      participants = float(round_metrics["cohort"][i])
      up, down = self.comm(self.payload_bytes, self.message_bytes, participants,
                           first_round + i)
      self.cum_up += up
      self.cum_down += down
      row = {"method": self.label, "algorithm": self.algorithm_name, "seed": self.seed,
             "round": first_round + i + 1, "bytes_up": up, "bytes_down": down,
             "cum_bytes_up": self.cum_up, "cum_bytes_down": self.cum_down}
      for k, v in round_metrics.items():
        if k.startswith("clients/"):
          # A client metric of one number per client is tabulated as train_<name>;
          # one of several ([S, d] per round) is not.
          if np.ndim(v) > 2:
            self._note_dropped(k[len("clients/"):], np.shape(v)[2:], "per client")
          continue
        if participants == 0 and k.startswith("train_"):
          continue
        value = _scalar(v[i])
        if value is not None:   # server/* arrays (e.g. Kuramoto phases): not tabulated
          row[k] = value
      if self.host_metrics is not None:
        extra = {k: float(v) for k, v in self.host_metrics(first_round + i + 1).items()}
        self._host_keys.update(extra)
        row.update(extra)
      self.round_rows.append(row)
      if diverged_at is None:
        bad = nonfinite_keys(row, self._host_keys)
        if bad:
          diverged_at = row["round"]
    row = dict(self.round_rows[-1])
    row.update({k: float(v) for k, v in evaluation.items() if not k.startswith("clients/")})
    row["wall_s"] = self.wall
    self.rows.append(row)
    self.client_arrays = {k: np.asarray(v) for k, v in evaluation.items()
                          if k.startswith("clients/")}
    if diverged_at is None:
      bad = nonfinite_keys(row, self._host_keys)  # host keys: e.g. ε = inf without noise
      if bad:
        diverged_at = row["round"]
    if diverged_at is not None:
      msg = (f"method {self.label!r} seed {self.seed} diverged at round {diverged_at}: "
             f"{', '.join(bad)} not finite ({divergence_advice(diverged_at)})")
      self.status = f"diverged at round {diverged_at}"
      if self.on_divergence == "error":
        raise FloatingPointError(msg)
      warnings.warn(msg)
    elif self.target is not None:
      self.stopped = stopped_entry(self.target, [row])
    return row

  def _note_dropped(self, name, shape, where) -> None:
    """Say once per run that client metric ``name`` (``shape`` ``where``, not
    one number) is left out of the per-round table."""
    if name in self._dropped:
      return
    self._dropped.add(name)
    warnings.warn(f"method {self.label!r} seed {self.seed}: metric {name!r} holds "
                  f"{tuple(shape)} values {where}, not one number, so it is left out of "
                  f"the per-round table; report a scalar (e.g. its mean or norm) to "
                  f"tabulate it")

  def record(self, partial: bool = False) -> RunRecord:
    """The run's :class:`RunRecord`; ``partial``: it stopped before its last round."""
    status = "partial" if partial and self.running else self.status
    return RunRecord(self.label, self.algorithm_name, self.seed, self.rows,
                     self.round_rows, status, self.compile_s, self.wall,
                     self.client_arrays, tuple(sorted(self._host_keys)),
                     stopped=self.stopped)
