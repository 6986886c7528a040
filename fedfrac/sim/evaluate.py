"""Test metrics of a simulation state: global test set and per-client splits.

Each task kind has one :class:`TaskEvaluation` — how its per-example statistics
are computed and how their sums become reported metrics — looked up once by
:func:`task_evaluation` (the engine branches nowhere else on the task).

Classification reports ``accuracy``, ``loss`` and ``client_accuracy_{mean,min,
max,gini}``; regression reports, in physical units (labels de-normalised per
sample), ``rmse``, ``mae``, ``mape``, ``rmse_norm``, ``loss``, their ``*_macro``
means over clients with test data and ``client_rmse_{mean,min,max,gini}``.
Per-client arrays are under ``clients/*``.
"""
from __future__ import annotations

import hashlib
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from fedfrac.algorithms.tasks import Task
from fedfrac.metrics.fairness import gini_jnp


class TaskEvaluation(NamedTuple):
  """Evaluation behaviour of one task kind.

  Attributes:
    classification: whether outputs are class scores (labels are class ids).
    stats: ``stats(task, outputs [B, ...], y [B], scale [B], center [B]) -> dict
      of [B]`` per-example statistics.
    summarise: ``summarise(means, per_client, has_test) -> dict``: reported
      metrics from example-weighted means, per-client ``[K]`` means and the
      ``[K]`` mask of clients with test data.
  """
  classification: bool
  stats: Callable
  summarise: Callable


def _client_spread(result, name, client_metric, has_test):
  """``<name>_{mean,min,max,gini}`` over clients with test data."""
  w = has_test.astype(jnp.float32)
  n = jnp.maximum(w.sum(), 1.0)
  result[f"{name}_mean"] = jnp.sum(w * client_metric) / n
  result[f"{name}_min"] = jnp.min(jnp.where(has_test, client_metric, jnp.inf))
  result[f"{name}_max"] = jnp.max(jnp.where(has_test, client_metric, -jnp.inf))
  result[f"{name}_gini"] = gini_jnp(client_metric, has_test)
  result[f"clients/{name}"] = client_metric
  result["clients/has_test"] = has_test
  return result


def _classification_summary(out, per_client, has_test):
  result = {"accuracy": out["correct"], "loss": out["loss"]}
  return _client_spread(result, "client_accuracy", per_client["correct"], has_test)


def _regression_summary(out, per_client, has_test):
  # Physical units (labels de-normalised per sample); *_macro = mean over
  # clients with test data of each client's metric. MAPE = Σ ape / Σ ape_count
  # (task.mape_rule: Eq. 34 of the FO-RI-FedAvg paper over every window by
  # default, see fedfrac.algorithms.tasks.regression_task).
  result = {"rmse": jnp.sqrt(out["sq_err"]), "mae": out["abs_err"],
            "mape": out["ape"] / jnp.maximum(out["ape_count"], 1e-12),
            "rmse_norm": jnp.sqrt(out["sq_err_norm"]), "loss": out["loss"]}
  client_metric = jnp.sqrt(per_client["sq_err"])
  w = has_test.astype(jnp.float32)
  n = jnp.maximum(w.sum(), 1.0)
  result["rmse_macro"] = jnp.sum(w * client_metric) / n
  result["mae_macro"] = jnp.sum(w * per_client["abs_err"]) / n
  has_ape = has_test & (per_client["ape_count"] > 0)
  client_mape = per_client["ape"] / jnp.maximum(per_client["ape_count"], 1e-12)
  result["mape_macro"] = (jnp.sum(jnp.where(has_ape, client_mape, 0.0)) /
                          jnp.maximum(has_ape.sum(), 1))
  result["clients/client_mae"] = per_client["abs_err"]
  result["clients/client_mape"] = client_mape
  return _client_spread(result, "client_rmse", client_metric, has_test)


_EVALUATIONS = {
    "classification": TaskEvaluation(
        True, lambda task, out, y, scale, center: task.example_stats(out, y),
        _classification_summary),
    "regression": TaskEvaluation(
        False, lambda task, out, y, scale, center: task.example_stats(out, y, scale,
                                                                      center),
        _regression_summary),
}


def task_evaluation(task: Task) -> TaskEvaluation:
  """The :class:`TaskEvaluation` of ``task``'s kind."""
  if task.name not in _EVALUATIONS:
    raise ValueError(f"task.name={task.name!r}: allowed values are "
                     f"{', '.join(_EVALUATIONS)}")
  return _EVALUATIONS[task.name]


def example_stats(apply, task, params, x, y, scale, center, batch_size):
  """Per-example stats dict over a test array ``x [N, ...]``, in batches of
  ``batch_size`` (``apply(params, x) -> outputs``)."""
  stats_fn = task_evaluation(task).stats
  n = x.shape[0]
  b = min(batch_size, n)
  nb = -(-n // b)
  pad = nb * b - n

  def pad_rows(a):
    return jnp.pad(a, ((0, pad),) + ((0, 0),) * (a.ndim - 1)).reshape(
        (nb, b) + a.shape[1:])

  def batch_stats(args):
    xb, yb, sb, cb = args
    return stats_fn(task, apply(params, xb), yb, sb, cb)
  stats = jax.lax.map(batch_stats, tuple(map(pad_rows, (x, y, scale, center))))
  return jax.tree.map(lambda s: s.reshape(-1)[:n], stats)


def eval_params(algorithm, state):
  """The parameters :func:`evaluate` evaluates: the global model's
  (``algorithm.eval_params(server, client 0)``, one parameter tree) or, for a
  personalised algorithm, every client's (a tree whose leaves gain a leading
  ``[K]`` axis)."""
  if not algorithm.personalized:
    first = jax.tree.map(lambda x: x[0], state.clients)
    return algorithm.eval_params(state.server, first)
  return jax.vmap(lambda client: algorithm.eval_params(state.server, client))(state.clients)


def evaluate_params(model, task, personalized, arrays, params, batch_size):
  """Test metrics of ``params`` (from :func:`eval_params`; see the module
  docstring): global parameters are evaluated once on the whole test set,
  personalised ones (``personalized``, a leading ``[K]`` axis) each on their
  client's test split. Depends on the algorithm only through ``params``, so
  every method whose evaluated parameters have the same structure runs the
  same program (:func:`shared_program`)."""
  evaluation = task_evaluation(task)
  test_index, test_size = arrays["client_test_index"], arrays["client_test_size"]
  valid = jnp.arange(test_index.shape[1])[None, :] < test_size[:, None]
  has_test = test_size > 0
  if not personalized:
    stats = example_stats(model.apply, task, params, arrays["x_test"], arrays["y_test"],
                          arrays["y_test_scale"], arrays["y_test_center"], batch_size)
    sums = {k: jnp.sum(v * valid, axis=1) for k, v in
            ((k, v[test_index]) for k, v in stats.items())}
    out = {k: jnp.mean(v) for k, v in stats.items()}
  else:
    def client_stats(client_params, index, ok):
      out = model.apply(client_params, arrays["x_test"][index])
      s = evaluation.stats(task, out, arrays["y_test"][index],
                           arrays["y_test_scale"][index], arrays["y_test_center"][index])
      return {k: jnp.sum(v * ok) for k, v in s.items()}
    sums = jax.vmap(client_stats)(params, test_index, valid)
    total = jnp.maximum(test_size.sum(), 1)
    out = {k: jnp.sum(v) / total for k, v in sums.items()}
  per_client = {k: v / jnp.maximum(test_size, 1) for k, v in sums.items()}
  return evaluation.summarise(out, per_client, has_test)


def evaluate(algorithm, model, task, arrays, state, batch_size):
  """Test metrics of ``state`` (see the module docstring): :func:`evaluate_params`
  of the algorithm's :func:`eval_params`."""
  return evaluate_params(model, task, algorithm.personalized, arrays,
                         eval_params(algorithm, state), batch_size)


_PROGRAMS: dict = {}   # digest of a lowered program and its pytrees -> executable
MAX_PROGRAMS = 64


def shared_program(function, *args):
  """``jax.jit(function)`` compiled for ``args``, shared by every caller in this
  process whose program is the same: the key is the lowered program's text
  (shapes, dtypes, shardings and every operation) and the pytree structures of
  its inputs and outputs, so the evaluation of two methods whose evaluated
  parameters have the same structure compiles once, and parameters with the
  same leaves in another tree (a flax module's head split off or not) never
  get an executable compiled for the other tree. Trace ``function`` under the
  same settings (e.g. the matmul precision scope) as its callers."""
  lowered = jax.jit(function).lower(*args)
  text = f"{lowered.as_text()}\n{lowered.in_tree}\n{lowered.out_tree}"
  key = hashlib.sha256(text.encode()).hexdigest()
  if key not in _PROGRAMS:
    while len(_PROGRAMS) >= MAX_PROGRAMS:
      _PROGRAMS.pop(next(iter(_PROGRAMS)))
    _PROGRAMS[key] = lowered.compile()
  return _PROGRAMS[key]
