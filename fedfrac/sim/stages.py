"""The stages of a round (docs/design.md §2.2): what composes around FedAvg's path.

A round (:func:`fedfrac.sim.round.run_round`) is FedAvg's path —

  sample S_t → broadcast → client_update over the cohort → aggregate → metrics

— and a tuple of :class:`Stage` values, each present only when the config asks
for it (churn, deadlines, Byzantine clients, client rows sharded over devices,
the algorithm's cohort hooks). Without stages the round is FedAvg's path and
nothing else: the compiled program of a plain run does not change when a stage
is added to the library.

A stage overrides the hooks it needs; every other hook passes its input
through. The round calls each hook of every stage in the order of the tuple, at
a fixed point of the path (the points are the methods of :class:`Stage`, in the
order a round reaches them). Hooks are pure, traceable functions of arrays
(they run inside the round's ``jit``; a Python loop over stages is a trace-time
loop, never one over clients or steps). What one hook of a stage decides for a
later hook of the same stage (e.g. the deadline schedule, used again for the
round's metrics) travels in :attr:`Cohort.values` under the stage's own key.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp

from fedfrac.algorithms.client_view import ClientView


class Cohort(NamedTuple):
  """The sampled clients of one round and what the stages decided for them.

  Attributes:
    ids: ``[S]`` int32 client ids (S = the static cohort slots).
    mask: ``[S]`` bool, the clients whose upload is aggregated (after sampling:
      the slots that hold an available client).
    num_steps: ``[S]`` local steps each client runs (0: it trains nothing).
    keys: ``[S, 2]`` the clients' round keys ``fold_in(fold_in(root_t, CLIENT), k)``.
    budget: ``None`` or ``[S]`` each client's step budget (``ClientView.step_budget``).
    byzantine: ``None`` or ``[S]`` bool, the cohort's Byzantine clients.
    values: per-round values a stage hands from one of its hooks to a later
      one, keyed by the stage's name.
  """
  ids: jax.Array
  mask: jax.Array
  num_steps: jax.Array
  keys: jax.Array
  budget: Optional[jax.Array] = None
  byzantine: Optional[jax.Array] = None
  values: Any = None

  def value(self, name: str):
    """The value stage ``name`` stored this round."""
    return self.values[name]

  def with_value(self, name: str, value) -> "Cohort":
    """This cohort with ``value`` stored for stage ``name``."""
    return self._replace(values={**(self.values or {}), name: value})


class Stage:
  """A part of a round that composes around FedAvg's path; every hook is optional.

  Hooks, in the order a round calls them:

  * :meth:`availability` — before sampling: the clients that can be sampled.
  * :meth:`cohort` — after sampling: who trains, for how many steps, with which
    budget (client timing), which clients are Byzantine.
  * :meth:`data` — the data arrays the cohort trains on (e.g. poisoned labels).
  * :meth:`before_clients` — over the stacked cohort, before ``client_update``.
  * :meth:`rows` — where each client's view reads its rows.
  * :meth:`client` — per client, under the cohort's vmap: its
    ``(message, state, metrics)`` after ``client_update`` (what it uploads).
  * :meth:`uploads` — after the clients ran: whose upload is aggregated.
  * :meth:`server` — after ``aggregate``: the server and client states the
    round keeps (a buffer would keep the old ones until enough arrived).
  * :meth:`server_metrics` — server diagnostics, recorded as ``server/<name>``.
  * :meth:`metrics` — the stage's own round metrics.
  """

  def availability(self, available, key, t):
    """``[K]`` bool availability after round ``t``'s transition."""
    del key, t
    return available

  def cohort(self, cohort: Cohort, arrays: dict, state) -> Cohort:
    """The cohort as this stage changes it (``state``: the round's input carry)."""
    del arrays, state
    return cohort

  def data(self, arrays: dict, cohort: Cohort) -> dict:
    """The data arrays the cohort's clients (and :meth:`before_clients`) read."""
    del cohort
    return arrays

  def before_clients(self, payload, cohort_states, arrays: dict, cohort: Cohort, t):
    """The cohort's ``[S, ...]`` client states before ``client_update``."""
    del payload, arrays, cohort, t
    return cohort_states

  def rows(self, arrays: dict, index, rows):
    """``(index [S, n], rows)``: the rows each client's view reads
    (``rows`` ``None``: the shared ``arrays["x"], arrays["y"]``)."""
    del arrays
    return index, rows

  def client(self, out, byzantine, key):
    """One client's ``(message, client_state, metrics)`` (under the vmap)."""
    del byzantine, key
    return out

  def uploads(self, cohort: Cohort, client_metrics: dict, arrays: dict, state) -> Cohort:
    """The cohort after its clients ran (``client_metrics``: ``[S]`` each)."""
    del client_metrics, arrays, state
    return cohort

  def server(self, new, old, cohort: Cohort):
    """``(server_state, client_states)`` the round keeps: ``new`` from
    ``aggregate``, ``old`` the round's input."""
    del old, cohort
    return new

  def server_metrics(self, client_metrics: dict, weights, mask) -> dict:
    """Scalars recorded as ``server/<name>``."""
    del client_metrics, weights, mask
    return {}

  def metrics(self, cohort: Cohort) -> dict:
    """This stage's round metrics."""
    del cohort
    return {}


class CohortHooks(Stage):
  """The algorithm's optional hooks over the whole cohort (contract:
  ``prepare_cohort`` and ``cohort_metrics``, :mod:`fedfrac.algorithms.contract`)."""

  def __init__(self, algorithm):
    self.algorithm = algorithm

  def before_clients(self, payload, cohort_states, arrays, cohort, t):
    """``prepare_cohort`` on views whose per-client fields carry the ``[S]`` axis."""
    if self.algorithm.prepare_cohort is None:
      return cohort_states
    views = ClientView(arrays["x"], arrays["y"], arrays["client_index"][cohort.ids],
                       arrays["client_size"][cohort.ids], cohort.num_steps, cohort.ids,
                       cohort.budget)
    return self.algorithm.prepare_cohort(payload, cohort_states, views, cohort.keys,
                                         cohort.mask, t)

  def server_metrics(self, client_metrics, weights, mask):
    if self.algorithm.cohort_metrics is None:
      return {}
    return self.algorithm.cohort_metrics(client_metrics, weights, mask)


def keep_unless_uploaded(new, old, mask):
  """``new`` (the round's states after ``aggregate``) if any client of the
  ``[S]`` ``mask`` uploaded, else ``old``: a round nobody uploaded to (every
  client missed its deadline) aggregates nothing and keeps its states."""
  anyone = jnp.any(mask)
  return jax.tree.map(lambda a, b: jnp.where(anyone, a, b), new, old)


def algorithm_stages(algorithm) -> tuple:
  """The stages an algorithm brings itself: its cohort hooks, if it has any."""
  if algorithm.prepare_cohort is None and algorithm.cohort_metrics is None:
    return ()
  return (CohortHooks(algorithm),)
