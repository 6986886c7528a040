"""The contract check: an algorithm's functions traced once on abstract arrays.

:func:`check_algorithm` walks one round the way the engine runs it
(:mod:`fedfrac.sim.round`) with ``jax.eval_shape`` — nothing is computed or
compiled —

  init -> broadcast -> client_update (one client) -> aggregate (a stacked
  cohort of S messages) -> eval_params, and the optional hooks

and checks what each function returns against the contract of
:mod:`fedfrac.algorithms.contract`: ``init`` gives ``(server_state,
client_states)`` with one row per client; ``client_update`` gives ``(message,
client_state, metrics)`` with the client state unchanged in structure, shape and
dtype and the metrics a dict; ``aggregate`` gives a ``ServerUpdate(server_state,
client_states, metrics)`` (the older 2- and 3-tuples warn) whose states match
what ``init`` made (they are the ``lax.scan`` carry of the rounds);
``eval_params`` gives parameters shaped like the model's and, for an algorithm
without ``personalized=True``, independent of the client state (else every
client would be evaluated with client 0's model). A mismatch raises
:class:`ContractError` in one line naming the function, what it returned and
what was expected, instead of an error from deep inside the engine (an
``IndexError`` in the cohort's vmap, ``KeyError: 0`` after ``aggregate``, a
scan-carry mismatch). The runner checks every algorithm registered with
:func:`fedfrac.algorithms.register` this way before any method compiles; the
built-in ones are covered by their tests.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac._validation import ConfigError
from fedfrac.algorithms.contract import BuildContext, FedAlgorithm, ServerUpdate, server_update
from fedfrac.algorithms.client_view import ClientView

_MAX_TEXT = 240
_view = cast(Any, ClientView)   # a view of abstract arrays (ShapeDtypeStruct fields)


class ContractError(ConfigError):
  """An algorithm's function returned something the engine cannot use (the
  message names the function, what it returned and what was expected). A
  :class:`fedfrac.config.ConfigError` (bad input, refused before any compute,
  one line on the command line) and a ``ValueError``."""


def describe(tree: Any, depth: int = 0) -> str:
  """A short text of an abstract pytree: ``{params: {w: float32[64,10]}}``,
  ``(float32[10], None)``; cut to about 240 characters."""
  def text(t, d):
    if t is None:
      return "None"
    if hasattr(t, "shape") and hasattr(t, "dtype"):
      return f"{np.dtype(t.dtype).name}[{','.join(str(int(n)) for n in t.shape)}]"
    if d >= 3:
      return "..."
    if isinstance(t, Mapping):
      items = list(t.items())
      body = ", ".join(f"{k}: {text(v, d + 1)}" for k, v in items[:6])
      return "{" + body + (", ..." if len(items) > 6 else "") + "}"
    if isinstance(t, (tuple, list)):
      body = ", ".join(text(v, d + 1) for v in t[:6])
      more = ", ..." if len(t) > 6 else ""
      if isinstance(t, tuple) and hasattr(t, "_fields"):
        return f"{type(t).__name__}({body}{more})"
      return (f"a tuple of {len(t)} ({body}{more})" if isinstance(t, tuple) and d == 0
              else ("(" if isinstance(t, tuple) else "[") + body + more
              + (")" if isinstance(t, tuple) else "]"))
    if isinstance(t, (bool, int, float, str)):
      return f"{type(t).__name__} {t!r}"
    return f"a {type(t).__name__}"
  out = text(tree, depth)
  return out if len(out) <= _MAX_TEXT else out[:_MAX_TEXT - 3] + "..."


def _key_text(path) -> str:
  return "".join(jax.tree_util.keystr((k,)) for k in path) or "(the whole value)"


def difference(got: Any, expected: Any) -> str | None:
  """None when ``got`` has ``expected``'s pytree structure, shapes and dtypes
  (weak types ignored), else where and how they differ, in one line."""
  got_def, exp_def = jax.tree.structure(got), jax.tree.structure(expected)
  if got_def != exp_def:   # type: ignore[operator]
    return f"{describe(got)} where {describe(expected)} was expected"
  got_leaves = jax.tree_util.tree_flatten_with_path(got)[0]
  for (path, g), e in zip(got_leaves, jax.tree.leaves(expected)):
    gs, es = tuple(np.shape(g)), tuple(np.shape(e))
    gd, ed = _dtype(g), _dtype(e)
    if gs != es or gd != ed:
      return (f"at {_key_text(path)} {describe(jax.ShapeDtypeStruct(gs, gd))} where "
              f"{describe(jax.ShapeDtypeStruct(es, ed))} was expected")
  return None


def _dtype(x):
  return np.dtype(x.dtype) if hasattr(x, "dtype") else np.dtype(jnp.result_type(x))


def _first_line(e: BaseException) -> str:
  lines = [l.strip() for l in str(e).splitlines() if l.strip()]
  text = lines[0] if lines else ""
  return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT - 3] + "..."


def _traced(name, signature, fn, *args):
  """``jax.eval_shape(fn, *args)``; an exception raised by ``fn`` becomes one
  :class:`ContractError` line naming the function (the original is its cause)."""
  try:
    return jax.eval_shape(fn, *args)
  except ContractError:
    raise
  except Exception as e:   # the user's function failed while tracing
    raise ContractError(f"algorithm {name!r}: {signature} raised {type(e).__name__}: "
                        f"{_first_line(e)}") from e


def _stack(tree, rows):
  return jax.tree.map(lambda x: jax.ShapeDtypeStruct((rows,) + tuple(x.shape), x.dtype),
                      tree)


def _row(tree):
  return jax.tree.map(lambda x: jax.ShapeDtypeStruct(tuple(x.shape[1:]), x.dtype), tree)


def _check_metrics(name, fn_name, metrics, position):
  if not isinstance(metrics, Mapping) or not all(isinstance(k, str) for k in metrics):
    raise ContractError(f"algorithm {name!r}: {fn_name} returned {describe(metrics)} as "
                        f"its {position}; expected a dict of metrics (name -> array, "
                        f"{{}} for none)")


def check_algorithm(algorithm: FedAlgorithm, ctx: BuildContext, data: Any,
                    cohort: int = 2) -> None:
  """Trace ``algorithm``'s functions through one round on abstract arrays.

  Args:
    algorithm: the :class:`FedAlgorithm` to check.
    ctx: the :class:`BuildContext` it was built with (model, data info).
    data: the :class:`fedfrac.data.FederatedData` it will run on (shapes and
      dtypes of the train arrays and index tables only).
    cohort: S, the sampled clients per round.
  Raises:
    ContractError: one line naming the function, what it returned and what
      was expected (or the exception it raised while being traced).
  """
  name = algorithm.name
  k = int(data.num_clients)
  s = max(1, min(int(cohort), k))
  key = jax.ShapeDtypeStruct((2,), jnp.uint32)
  i32 = jax.ShapeDtypeStruct((), jnp.int32)
  params0 = jax.eval_shape(ctx.model.init, key)
  info = ctx.data_info

  out = _traced(name, "init(key, params0, num_clients, data_info)",
                lambda kk, p: algorithm.init(kk, p, k, info), key, params0)
  if not (isinstance(out, tuple) and len(out) == 2):
    raise ContractError(f"algorithm {name!r}: init returned {describe(out)}; expected "
                        f"(server_state, client_states)")
  server, clients = out
  for path, leaf in jax.tree_util.tree_flatten_with_path(clients)[0]:
    if not np.shape(leaf) or np.shape(leaf)[0] != k:
      raise ContractError(
          f"algorithm {name!r}: init returned client_states with {describe(leaf)} at "
          f"{_key_text(path)}; expected a leading axis of num_clients={k} on every "
          f"leaf (one row per client; None for no client state)")
  payload = _traced(name, "broadcast(server_state)", algorithm.broadcast, server)

  x = jax.ShapeDtypeStruct(np.shape(data.x_train), np.asarray(data.x_train).dtype)
  y = jax.ShapeDtypeStruct(np.shape(data.y_train), np.asarray(data.y_train).dtype)
  index = jax.ShapeDtypeStruct((int(data.client_index.shape[1]),), jnp.int32)
  view = _view(x, y, index, i32, i32, i32, None)
  row = _row(clients)
  out = _traced(name, "client_update(payload, client_state, view, key, round)",
                lambda p, cs, v, kk, t: algorithm.client_update(p, cs, v, kk, t),
                payload, row, view, key, i32)
  if not (isinstance(out, tuple) and len(out) == 3):
    raise ContractError(f"algorithm {name!r}: client_update returned {describe(out)}; "
                        f"expected (message, client_state, metrics)")
  message, new_row, metrics = out
  wrong = difference(new_row, row)
  if wrong:
    raise ContractError(f"algorithm {name!r}: client_update returned a client_state "
                        f"{wrong} (the client_state it was given: same structure, "
                        f"shapes and dtypes)")
  _check_metrics(name, "client_update", metrics, "third value")

  messages = _stack(message, s)
  weights = jax.ShapeDtypeStruct((s,), jnp.float32)
  mask = jax.ShapeDtypeStruct((s,), jnp.bool_)
  if algorithm.prepare_cohort is not None:
    views = _view(x, y, _stack(index, s), _stack(i32, s), _stack(i32, s),
                       _stack(i32, s), None)
    got = _traced(name, "prepare_cohort(payload, cohort_states, views, keys, mask, round)",
                  algorithm.prepare_cohort, payload, _stack(row, s), views,
                  _stack(key, s), mask, i32)
    wrong = difference(got, _stack(row, s))
    if wrong:
      raise ContractError(f"algorithm {name!r}: prepare_cohort returned cohort_states "
                          f"{wrong} (the cohort_states it was given)")
  out = _traced(name, "aggregate(server_state, client_states, messages, weights, mask, "
                "key)", algorithm.aggregate, server, clients, messages, weights, mask, key)
  out = server_update(out, name)
  if not isinstance(out, ServerUpdate):
    raise ContractError(f"algorithm {name!r}: aggregate returned {describe(out)}; "
                        f"expected ServerUpdate(server_state, client_states, metrics) "
                        f"(fedfrac.algorithms.contract)")
  for position, got, expected in (("server_state", out.server, server),
                                  ("client_states", out.clients, clients)):
    wrong = difference(got, expected)
    if wrong:
      raise ContractError(f"algorithm {name!r}: aggregate returned a {position} {wrong} "
                          f"(what init made: the state carried from round to round "
                          f"keeps its structure, shapes and dtypes)")
  _check_metrics(name, "aggregate", out.metrics, "ServerUpdate.metrics")
  if algorithm.cohort_metrics is not None:
    got = _traced(name, "cohort_metrics(client_metrics, weights, mask)",
                  algorithm.cohort_metrics, _stack(metrics, s), weights, mask)
    _check_metrics(name, "cohort_metrics", got, "value")
  got = _traced(name, "eval_params(server_state, client_state)", algorithm.eval_params,
                server, row)
  wrong = difference(got, params0)
  if wrong:
    raise ContractError(f"algorithm {name!r}: eval_params returned {wrong} (the model's "
                        f"parameters, as model.init makes them)")
  if not algorithm.personalized:
    where = client_dependent_outputs(algorithm.eval_params, server, row)
    if where:
      raise ContractError(
          f"algorithm {name!r}: eval_params(server_state, client_state) returns "
          f"parameters that depend on the client state (at {', '.join(where[:3])}), but "
          f"the FedAlgorithm has personalized=False, so every client would be evaluated "
          f"with client 0's model; pass personalized=True to FedAlgorithm(...)")


def client_dependent_outputs(eval_params, server: Any, row: Any) -> list:
  """Where the output of ``eval_params(server, row)`` depends on ``row`` (the
  key paths of those leaves; empty when none does), from its jaxpr: a value
  computed from a client-state input counts, whatever the operation (a
  sub-program such as a ``cond`` counts for all its outputs)."""
  if not jax.tree.leaves(row):
    return []
  closed = jax.make_jaxpr(eval_params, return_shape=True)(server, row)
  jaxpr, out_shape = closed[0].jaxpr, closed[1]
  n_server = len(jax.tree.leaves(server))
  depends = set(jaxpr.invars[n_server:])
  for eqn in jaxpr.eqns:
    if any(not hasattr(v, "val") and v in depends for v in eqn.invars):
      depends.update(eqn.outvars)
  paths = [path for path, _ in jax.tree_util.tree_flatten_with_path(out_shape)[0]]
  return [_key_text(path) for path, v in zip(paths, jaxpr.outvars)
          if not hasattr(v, "val") and v in depends]
