"""What runs return: per-run records, :class:`Results`, summaries and tables."""
from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple, Optional

import numpy as np

from fedfrac.metrics import statistics
from fedfrac.runner.summary_table import format_table

FIRST_COLUMNS = ("method", "algorithm", "seed", "round")
_RAISE = object()


class UnknownMetric(KeyError):
  """A metric name no row holds (the message lists the names there are)."""

  def __str__(self):
    return str(self.args[0]) if self.args else ""


def metric_names_of(rows) -> list:
  """Metric columns of ``rows`` (every key but method, algorithm, seed, round), in
  the order they first appear."""
  return list(dict.fromkeys(k for r in rows for k in r if k not in FIRST_COLUMNS))


def unknown_metric(name, names) -> UnknownMetric:
  import difflib
  close = difflib.get_close_matches(str(name), names, n=1)
  hint = f"did you mean {close[0]!r}? " if close else ""
  return UnknownMetric(f"metric {name!r}: no evaluated row holds it; {hint}the metrics "
                       f"are {', '.join(names) or '(none: no rows)'}")


def nonfinite_keys(row, allowed=()):
  """Keys of ``row`` whose float value is not finite and that count for
  divergence (not ``server/*`` diagnostics, ``*_min``/``*_max`` spreads, nor
  ``allowed`` keys such as a DP ε that is infinite without noise)."""
  return [k for k, v in row.items() if isinstance(v, float) and not math.isfinite(v)
          and not k.startswith("server/") and not k.endswith(("_min", "_max"))
          and k not in allowed]


class Target(NamedTuple):
  """A run's target: config ``key`` (``target_accuracy`` / ``target_rmse``), the
  evaluated ``metric`` it applies to, its ``value`` and whether higher is better."""
  key: str
  metric: str
  value: float
  higher_is_better: bool

  def first_round(self, rows):
    """The first round of ``rows`` (evaluated rows) whose metric reaches the
    target (None: none does; values that are not finite never do)."""
    return statistics.rounds_to_target([r["round"] for r in rows],
                                       [r.get(self.metric, np.nan) for r in rows],
                                       self.value, self.higher_is_better)


def target_of(config):
  """The :class:`Target` of ``config``'s runs: ``accuracy >= target_accuracy``
  for classification, ``rmse <= target_rmse`` for regression (None when
  ``target_rmse`` is 0, off)."""
  if config.task.loss == "cross_entropy":
    return Target("target_accuracy", "accuracy", float(config.target_accuracy), True)
  if config.target_rmse > 0:
    return Target("target_rmse", "rmse", float(config.target_rmse), False)
  return None


def stop_target(config):
  """The :class:`Target` a run stops at with ``config.stop_at_target`` (else None)."""
  return target_of(config) if config.get("stop_at_target", False) else None


def stopped_entry(target, rows):
  """``{"round", "reason", "rounds_to_target", "bytes_up_to_target"}`` of a run
  whose evaluated ``rows`` reached ``target`` (it stopped after its last row),
  or None when they did not."""
  reached = target.first_round(rows) if target is not None and rows else None
  if reached is None:
    return None
  at = next(r for r in rows if r["round"] == reached)
  return {"round": int(rows[-1]["round"]),
          "reason": f"{target.key} {target.value:g} reached at round {reached}",
          "rounds_to_target": int(reached),
          "bytes_up_to_target": at.get("cum_bytes_up")}


@dataclasses.dataclass
class RunRecord:
  """One (method, seed) run.

  ``status`` is ``"ok"``, ``"partial"`` (stopped before ``config.rounds`` by
  ``stop_after_round`` or Ctrl-C; resumable) or ``"diverged at round r"`` (r: the
  first round whose metrics were not finite); a diverged run's rows end at its
  last finite evaluation.
  ``nonfinite_allowed``: metric keys that may be infinite without the run
  having diverged. ``stopped``: for a run that ended at its target
  (``config.stop_at_target``; status ``ok``), where and why
  (:func:`stopped_entry`), else None.
  """
  method: str
  algorithm: str
  seed: int
  rows: list            # evaluated rounds
  round_rows: list      # every round
  status: str = "ok"
  compile_s: float = 0.0
  wall_s: float = 0.0
  client_arrays: dict = dataclasses.field(default_factory=dict)
  nonfinite_allowed: tuple = ()
  params: Any = dataclasses.field(default=None, compare=False, repr=False)
  stopped: Optional[dict] = None

  def __repr__(self) -> str:
    """One line: the run, its status and its last evaluated round (the rows are
    in ``.rows``; a whole dump of them ran to thousands of characters)."""
    last = self.rows[-1] if self.rows else {}
    score = next((f", {k} {last[k]:.4f}" for k in ("accuracy", "rmse")
                  if isinstance(last.get(k), (int, float))), "")
    at = f" at round {last['round']}" if "round" in last else ""
    return (f"RunRecord(method={self.method!r}, seed={self.seed}, status={self.status!r}, "
            f"{len(self.rows)} evaluated rounds{score}{at})")

  @property
  def diverged(self) -> bool:
    return self.status.startswith("diverged")

  def metric_names(self) -> list:
    """The metrics of this run's evaluated rows (what :meth:`curve` takes)."""
    return metric_names_of(self.rows)

  def curve(self, name, default=_RAISE):
    """``(rounds, values)`` of metric ``name`` over the evaluated rows (float64;
    NaN in a row without it). A name no row holds raises :class:`UnknownMetric`
    listing the metrics there are, unless a ``default`` value is given (a run
    without rows gives empty arrays)."""
    if self.rows and default is _RAISE and not any(name in r for r in self.rows):
      raise unknown_metric(name, self.metric_names())
    fill = np.nan if default is _RAISE else default
    return (np.asarray([r["round"] for r in self.rows]),
            np.asarray([r.get(name, fill) for r in self.rows], np.float64))

  def finite_rows(self, rows=None):
    """``rows`` (default: the evaluated rows) up to, not including, the first
    whose metrics are not finite (all of them for a run that did not diverge)."""
    rows = self.rows if rows is None else rows
    for i, row in enumerate(rows):
      if nonfinite_keys(row, self.nonfinite_allowed):
        return rows[:i]
    return rows


class RunFailed(RuntimeError):
  """A run that raised in a worker process (its traceback in the message);
  ``kind`` is the name of the exception it raised there."""

  def __init__(self, message, kind="RuntimeError"):
    super().__init__(message)
    self.kind = kind


class UnknownRun(KeyError):
  """A (method, seed) no record holds (the message lists those there are)."""

  def __str__(self):
    return str(self.args[0]) if self.args else ""


@dataclasses.dataclass
class Results:
  """What ``run`` returns: per-round rows, per-run records and a summary.

  ``failed``: ``{(method label, seed): exception}`` of the runs that raised
  (``ff.run`` keeps the others and says so in one line per failure; ``raise
  results.failed[key]`` shows the traceback). ``data``: ``{seed: FederatedData}``,
  the federated split each seed's runs used (:meth:`federated_data`)."""
  config: Any
  records: list
  failed: dict = dataclasses.field(default_factory=dict)
  data: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)

  def __repr__(self) -> str:
    """One line: the runs and how they ended (``.table()`` is the summary,
    ``.rows`` every evaluated round)."""
    name = getattr(self.config, "name", None)
    ok = sum(rec.status == "ok" for rec in self.records)
    seeds = sorted({rec.seed for rec in self.records})
    return (f"Results({name!r}: {len(self.records)} runs of {', '.join(self.methods())} "
            f"over seeds {seeds}, {ok} ok, {len(self.failed)} failed; .table() for the "
            f"summary, .rows for every evaluated round)")

  @property
  def rows(self):
    return [r for rec in self.records for r in rec.rows]

  @property
  def round_rows(self):
    return [r for rec in self.records for r in rec.round_rows]

  def record(self, method, seed):
    """The :class:`RunRecord` of ``method`` (its label) and ``seed``; an
    unknown one raises :class:`UnknownRun` naming the runs there are ("did you
    mean"), or the error of a run that failed."""
    for rec in self.records:
      if rec.method == method and rec.seed == seed:
        return rec
    if (method, seed) in self.failed:
      error = self.failed[(method, seed)]
      raise UnknownRun(f"method {method!r} seed {seed} failed: "
                       f"{error_text(error)}") from error
    import difflib
    labels = self.methods() + [m for m, _ in self.failed if m not in self.methods()]
    seeds = sorted({rec.seed for rec in self.records if rec.method == method})
    if method in labels:
      raise UnknownRun(f"method {method!r} has no seed {seed!r}; its seeds are "
                       f"{', '.join(map(str, seeds)) or '(none: it failed)'}")
    close = difflib.get_close_matches(str(method), labels, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise UnknownRun(f"method {method!r}: no such run; {hint}the methods are "
                     f"{', '.join(map(repr, labels)) or '(none)'}")

  def raise_failed(self) -> None:
    """Raise the first failed run's exception again (nothing when none failed)."""
    for error in self.failed.values():
      raise error

  def methods(self):
    return list(dict.fromkeys(rec.method for rec in self.records))

  def metric_names(self) -> list:
    """Every metric some run's evaluated rows hold."""
    return metric_names_of(self.rows)

  def final_params(self, method, seed=None, client=None):
    """The parameters ``method`` (its label) ended with, for ``seed`` (None: its
    only seed), as host NumPy arrays: the model every client evaluates for a
    global method; for a personalised method (FedRep, the FIRMA ring, ...) one
    model per client stacked on a leading ``[K]`` axis, or client ``client``'s.
    In fedfrac's ``{"extractor", "head"}`` structure; for a model given as a
    flax module (``ff.run(config, model=...)``) in that module's own structure,
    so ``module.apply({"params": p}, x)`` runs it. Kept by ``run`` and
    ``run_many`` unless ``keep_params=False``; records read back from a
    workdir have none (checkpoints hold the full state)."""
    seeds = [rec.seed for rec in self.records if rec.method == method]
    if not seeds:
      raise KeyError(f"method {method!r}: no such run; the methods are "
                     f"{', '.join(map(repr, self.methods()))}")
    if seed is None:
      if len(seeds) > 1:
        raise ValueError(f"method {method!r} ran seeds {seeds}: give seed=")
      seed = seeds[0]
    rec = self.record(method, seed)
    if rec.params is None:
      raise ValueError(f"method {method!r} seed {seed}: no parameters kept (a record "
                       f"read back from a workdir, or keep_params=False); a workdir's "
                       f"checkpoints hold the full state")
    params, per_client = rec.params
    if client is not None:
      if not per_client:
        raise ValueError(f"method {method!r} is not personalised: every client "
                         f"evaluates the same model; leave client= out")
      params = _tree_map(lambda x: x[client], params)
    return _module_params(self.config, params)

  def federated_data(self, seed=None):
    """The :class:`fedfrac.data.FederatedData` the runs of ``seed`` (None: the
    only seed) used: ``data=`` arrays or ``config.data`` split over the
    clients, e.g. ``client_test_arrays(k)`` to evaluate client ``k``'s
    personalised ``final_params(label, client=k)`` on its own test split.
    Kept by ``run`` and ``run_many``, not read back from a workdir."""
    if seed is None:
      if len(self.data) != 1:
        raise ValueError(f"the runs used seeds {sorted(self.data)}: give seed=" if self.data
                         else "no federated data kept (records read back from a workdir)")
      seed = next(iter(self.data))
    if seed not in self.data:
      raise UnknownRun(f"seed {seed!r}: no runs used it; the seeds are "
                     f"{', '.join(map(str, sorted(self.data))) or '(none)'}")
    return self.data[seed]

  def summary(self) -> dict:
    out = summarize(self.records, self.config)
    if self.failed:
      out["failed"] = {f"{m} seed {s}": error_text(e) for (m, s), e in self.failed.items()}
    return out

  def table(self) -> str:
    """The markdown table of :func:`format_table`, then a line per failed run."""
    lines = [f"failed: {m} seed {s}: {error_text(e)}" for (m, s), e in self.failed.items()]
    return "\n".join([format_table(self.summary(), self.config)] + lines)

  def plot(self, metric=None):
    """The two figures of ``metric`` (default accuracy, RMSE for regression),
    :func:`fedfrac.runner.overview.results_figures`: ``.rounds`` (one panel per
    method family, FedAvg dashed in each) and ``.ranking`` (final value per
    method, best first, ± std over seeds); both show inline in Jupyter,
    ``.save(directory)`` writes ``accuracy.png`` and ``ranking.png``."""
    from fedfrac.runner import overview
    return overview.results_figures(self, metric)


def error_text(error) -> str:
  """``"<exception type>: <first line of its message>"``; for an error raised
  inside a host callback (``jax.debug.callback``, ``jax.pure_callback``), whose
  message is JAX's line followed by the callback's traceback, the callback's own
  exception and where it was raised:
  ``"ValueError: boom (raised in a host callback: boom, my.py line 3; JaxRuntimeError)"``."""
  lines = [l.strip() for l in str(error).splitlines() if l.strip()]
  kind = getattr(error, "kind", type(error).__name__)
  if lines and lines[0].endswith("Traceback (most recent call last):") and len(lines) > 1:
    where = ""
    frames = [l for l in lines[1:-1] if l.startswith("File ")]
    if frames:
      parts = frames[-1].split(", ")   # File "path", line N, in name
      if len(parts) == 3:
        where = f": {parts[2].removeprefix('in ')}, {parts[0][6:-1]} {parts[1]}"
    return f"{lines[-1]} (raised in a host callback{where}; {kind})"
  return f"{kind}: {lines[0] if lines else ''}"


def _tree_map(fn, tree):
  import jax
  return jax.tree.map(fn, tree)


def _module_params(config, params):
  """``params`` in the structure of a model given as a flax module (identity
  for fedfrac's own models)."""
  from fedfrac import models
  adapter = models.USER_MODELS.get(config.model.name) if config is not None else None
  if adapter is None:
    return params
  return adapter.module_params(params)


def final_params(algorithm, server, clients, num_clients):
  """``(params, per_client)`` a finished run's evaluation uses, as host NumPy:
  one model (``eval_params(server, client 0)``) for a global algorithm, ``[K]``
  stacked models for a personalised one (``algorithm.personalized``)."""
  import jax
  host = lambda t: _tree_map(np.asarray, jax.device_get(t))   # noqa: E731
  if algorithm.personalized:
    return host(jax.vmap(algorithm.eval_params, in_axes=(None, 0))(server, clients)), True
  first = _tree_map(lambda x: x[0], clients) if num_clients else clients
  return host(algorithm.eval_params(server, first)), False


def _final_metric_names(records):
  names = []
  for rec in records:
    if rec.rows:
      for k, v in rec.rows[-1].items():
        if k not in FIRST_COLUMNS and isinstance(v, (int, float)) and k not in names:
          names.append(k)
  return names


def staleness_counts(round_rows) -> list:
  """How many applied updates were τ = 0, 1, ... server steps stale over a run
  (an asynchronous server's ``async/staleness_count_<τ>``; the last entry counts
  τ beyond the bound); empty for synchronous runs."""
  prefix = "async/staleness_count_"
  bins = sorted(int(k[len(prefix):]) for k in (round_rows[0] if round_rows else {})
                if k.startswith(prefix))
  return [float(sum(r.get(f"{prefix}{b}", 0.0) for r in round_rows)) for b in bins]


def summarize(records, config) -> dict:
  """Final metrics per method and seed, and their mean/std/95% CI over seeds."""
  out = {"name": config.name, "rounds": config.rounds, "methods": {}}
  classification = config.task.loss == "cross_entropy"
  target = target_of(config)
  for method in dict.fromkeys(r.method for r in records):
    recs = [r for r in records if r.method == method]
    per_seed = {}
    for rec in recs:
      # What metrics.csv holds: a diverged run's rows up to its last finite one.
      rows = rec.finite_rows()
      final = dict(rows[-1]) if rows else {}
      for k in FIRST_COLUMNS:
        final.pop(k, None)
      rounds_done = rec.rows[-1]["round"] if rec.rows else 0
      entry = {"status": rec.status, "rounds_done": rounds_done,
               "wall_s": rec.wall_s, "compile_s": rec.compile_s, "final": final}
      if classification and rows:
        r, acc = RunRecord(rec.method, rec.algorithm, rec.seed, rows, []).curve("accuracy")
        entry["best_accuracy"] = float(np.nanmax(acc))
        entry["best_round"] = int(r[int(np.nanargmax(acc))])
      if target is not None and rows:
        reached = target.first_round(rows)
        entry["rounds_to_target"] = reached
        # uplink bytes of every round up to and including the target round
        entry["bytes_up_to_target"] = (None if reached is None else next(
            row.get("cum_bytes_up") for row in rows if row["round"] == reached))
        if "clock/time" in rows[-1]:   # simulated time (config.clock) to the target
          entry["time_to_target"] = (None if reached is None else next(
              row.get("clock/time") for row in rows if row["round"] == reached))
      counts = staleness_counts(rec.round_rows)
      if counts:
        entry["staleness_counts"] = counts
      if rec.stopped is not None:
        entry["stopped"] = {"round": rec.stopped["round"], "reason": rec.stopped["reason"]}
      per_seed[str(rec.seed)] = entry
    agg = {}
    finals = [r.finite_rows()[-1] for r in recs if r.finite_rows()]
    for name in _final_metric_names(recs):
      agg[name] = statistics.seed_stats([f.get(name) for f in finals])
    agg["wall_s"] = statistics.seed_stats([r.wall_s for r in recs])
    if classification:
      agg["best_accuracy"] = statistics.seed_stats(
          [e.get("best_accuracy") for e in per_seed.values()])
    out["methods"][method] = {"algorithm": recs[0].algorithm, "seeds": per_seed,
                              "mean": agg}
  return out
