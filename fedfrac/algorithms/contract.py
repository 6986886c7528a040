"""The algorithm contract (docs/design.md §2.1): what an algorithm is and how it registers.

Registration: every algorithm module ends with ``ENTRIES``, a tuple of
:class:`AlgorithmEntry` (name, ``build``, hyper-parameter schema, capabilities);
``fedfrac.algorithms`` collects them into its registry. Nothing else about a
module is read by the registry.

An algorithm is a value, :class:`FedAlgorithm`, of pure functions:

  init(key, params0, num_clients, data_info) -> (server_state, client_states)
  broadcast(server_state) -> payload                       # downlink, per client
  client_update(payload, client_state, client_view, key, round)
      -> (message, client_state, client_metrics)           # message = uplink
  aggregate(server_state, client_states, messages, weights, mask, key)
      -> ServerUpdate(server, clients, metrics)            # metrics: server/<name>
  eval_params(server_state, client_state) -> params used to evaluate that client

Two optional hooks (``None`` = not used):

  prepare_cohort(payload, cohort_states, views, keys, mask, round) -> cohort_states
      runs once per round on the whole sampled cohort, outside the per-client
      vmap, before ``client_update`` (``views`` is a :class:`ClientView` whose
      per-client fields carry a leading ``[S]`` axis). Work that only some
      clients need this round (e.g. a periodic loss-landscape probe) can run for
      exactly those clients here, instead of for every client under a vmapped
      ``lax.cond`` (which becomes a select).
  cohort_metrics(client_metrics, weights, mask) -> dict of scalars
      round diagnostics computed from the stacked ``[S]`` client metrics
      (e.g. drift statistics); recorded as ``server/<name>``.

``client_states`` is one pytree whose leaves have a leading axis K (all clients);
the engine gathers the sampled rows, vmaps ``client_update`` and scatters them
back before calling ``aggregate`` with the stacked ``messages [S, ...]``,
``weights [S]`` (n_k, zero for masked slots) and ``mask [S]``.

Continuous hyper-parameters may arrive as traced JAX values (so whole runs can be
vmapped over a grid): builders must use them only in ``jnp`` arithmetic, never in
Python control flow.

Server-side combination of updates: an algorithm whose server averages the
cohort's updates (FedAvg, FedAvgM, FedOpt, FedProx, SCAFFOLD, ...) combines them
with one line,

    combined, info = server.combine_deltas(messages, weights, mask, key, ctx.aggregator)

(``fedfrac.algorithms.server``) instead of calling ``weighted_mean`` itself, and
registers with ``robust_aggregation=True`` (:class:`AlgorithmEntry`); the config's ``server``
section then selects the mean, coordinate median, trimmed mean or (Multi-)Krum
for it (the mean is the default and gives identical numbers). ``info`` holds
server metrics to return in ``ServerUpdate.metrics``.

Adversarial clients (``config.attack``) are simulated by the engine, not by the
algorithms: Byzantine clients' uploaded messages are transformed after
``client_update`` (so messages should be updates, e.g. model deltas), and
label-flipping clients see poisoned labels in ``ClientView.y``.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Callable, Mapping, NamedTuple, Optional

import jax
from jax.typing import ArrayLike

from fedfrac._validation import ConfigError

from fedfrac.algorithms.client_view import ClientView, step_budget  # noqa: F401
from fedfrac.algorithms.schema import HParamSchema
from fedfrac.algorithms.local_training import LocalTraining
from fedfrac.algorithms.tasks import Task
from fedfrac.data.federated_data import DataInfo
from fedfrac.models.base import Model


def star_communication(payload_bytes: ArrayLike, message_bytes: ArrayLike,
                       participants: ArrayLike) -> tuple[Any, Any]:
  """Server-client accounting: each participant downloads the payload and uploads
  its message. Returns ``(bytes_up, bytes_down)`` for the round."""
  return message_bytes * participants, payload_bytes * participants


class ServerUpdate(NamedTuple):
  """What ``aggregate`` returns, the one shape for every algorithm.

  Attributes:
    server: the new server state (the structure ``init`` made; part of the
      scan carry).
    clients: the new client states, leaves ``[K, ...]`` (the structure ``init``
      made).
    metrics: dict of round diagnostics, each recorded as ``server/<name>``
      (scalars, or ``[S]`` per cohort slot); empty when there are none. A new
      dict each call: never mutate the default.
  """
  server: Any
  clients: Any
  metrics: Mapping[str, Any] = {}


def server_update(out: Any, name: str = "") -> Any:
  """``aggregate``'s result ``out`` as a :class:`ServerUpdate`.

  ``(server_state, client_states)`` and ``(server_state, client_states,
  metrics)`` tuples, the shapes before :class:`ServerUpdate`, are accepted for
  one release with a ``DeprecationWarning``; anything else is returned as it is
  (the contract check, :mod:`fedfrac.algorithms.check`, names what is wrong).
  """
  if isinstance(out, ServerUpdate):
    return out
  if isinstance(out, tuple) and len(out) in (2, 3):
    warnings.warn(
        f"algorithm {name!r}: aggregate returned a tuple of {len(out)}; return "
        "fedfrac.algorithms.contract.ServerUpdate(server_state, client_states, "
        "metrics) instead (tuples are deprecated and stop working in the next release)",
        DeprecationWarning, stacklevel=2)
    return ServerUpdate(out[0], out[1], out[2] if len(out) == 3 else {})
  return out


class FedAlgorithm(NamedTuple):
  """A federated algorithm as six pure functions (see module docstring).

  ``personalized=True`` means ``eval_params`` depends on the client state, so the
  engine evaluates every client's own model instead of one global model.
  ``comm(payload_bytes, message_bytes, participants) -> (up, down)`` turns the
  message and payload shapes into a round's traffic (decentralised algorithms
  override it, e.g. a ring sends each message to two neighbours per pass).
  ``host_metrics(rounds_done) -> dict of float`` (optional, host side, not
  jitted) adds metrics computed from the round count alone to every round's
  row, e.g. DP-FedAvg's privacy budget ε.
  ``prepare_cohort`` and ``cohort_metrics`` are the optional hooks described in
  the module docstring.
  ``elastic=True`` means the algorithm fits a client's local work into its
  runtime budget itself (``ClientView.step_budget``) by making its steps
  cheaper rather than fewer, and reports the cost of one of its local steps as
  a fraction of a full step in the client metric ``step_cost`` (``[]`` float in
  [0, 1]; 0 = it trained nothing). Under ``config.system`` the engine then
  neither drops nor truncates such a client: it runs all its steps, counts
  ``num_steps · step_cost / s_k`` as its time, and leaves a client with
  ``step_cost = 0`` out of the aggregate (counted as dropped)
  (:func:`fedfrac.ops.system.round_schedule`). FedEL is one.
  """
  name: str
  init: Callable
  broadcast: Callable
  client_update: Callable
  aggregate: Callable
  eval_params: Callable
  personalized: bool = False
  comm: Callable = star_communication
  host_metrics: Optional[Callable] = None
  prepare_cohort: Optional[Callable] = None
  cohort_metrics: Optional[Callable] = None
  elastic: bool = False


@dataclasses.dataclass(frozen=True)
class BuildContext:
  """Everything an algorithm builder may close over (static, host-side).

  ``aggregator`` is the :class:`fedfrac.algorithms.server.AggregatorSpec` the
  config's ``server`` section selects (pass it to ``server.combine_deltas``);
  ``participation`` is the client fraction C of the run.
  """
  model: Model
  task: Task
  training: LocalTraining
  data_info: DataInfo
  rounds: int
  client_cfg: Any = None
  aggregator: Any = None        # server.AggregatorSpec; None = weighted mean
  participation: float = 1.0    # client fraction C (sampling rate of a round)


def init_global_model(key: jax.Array, params0: Any, num_clients: int,
                      data_info: DataInfo) -> tuple[dict, None]:
  """``init`` of a server that only keeps the global model: ``({"params"}, None)``."""
  del key, num_clients, data_info
  return {"params": params0}, None


def broadcast_params(server_state: dict) -> Any:
  """``broadcast`` that sends the global model ``server_state["params"]``."""
  return server_state["params"]


def eval_global_params(server_state: dict, client_state: Any) -> Any:
  """``eval_params`` that evaluates the global model for every client."""
  del client_state
  return server_state["params"]



@dataclasses.dataclass(frozen=True)
class AlgorithmEntry:
  """One registered algorithm: the protocol between a module and the registry.

  Every module under ``fedfrac.algorithms`` lists its entries in ``ENTRIES``
  (one module may serve several names, e.g. FedOpt's FedAdam/FedYogi/FedAdagrad
  or RI-FedAvg = FO-RI-FedAvg with α = 1, which differ only in defaults).

  Attributes:
    name: the public name (``config.methods.<label>.name``).
    build: ``build(ctx: BuildContext, hp: dict) -> FedAlgorithm``; ``hp`` is the
      resolved options (values may be traced, see the module docstring).
    schema: the :class:`HParamSchema` of its options (defaults already set to
      this name's preset).
    summary: one line for ``--list``.
    robust_aggregation: its server combines updates with
      ``server.combine_deltas``, so ``config.server`` (median, trimmed mean,
      Krum, ...) applies.
    full_participation: every client takes part in every round (no sampling,
      no churn).
    decentralised: clients exchange models with each other (a ring), not
      through a server.
    needs_head: it uses the model's head apart from its extractor (keeps it per
      client, or reads the features that enter it), so a model whose head has
      no parameters is refused before compute.
    asynchronous: its client update can run under an asynchronous server
      (FedBuff, FedAsync; :mod:`fedfrac.algorithms.asynchronous`): it starts
      from whatever global model version it is given, broadcasts the global
      parameters, uploads a model delta, and its ``aggregate`` adds a weighted
      mean of the deltas to the global model.
  """
  name: str
  build: Callable
  schema: HParamSchema
  summary: str = ""
  robust_aggregation: bool = False
  full_participation: bool = False
  decentralised: bool = False
  needs_head: bool = False
  asynchronous: bool = False

  def hparams(self, given: Optional[Mapping[str, Any]] = None, prefix: str = "") -> dict:
    """Resolved, validated options (defaults fill what ``given`` lacks)."""
    return self.schema.resolve(self.name, given or {}, prefix)

  def make(self, ctx: BuildContext, **given: Any) -> FedAlgorithm:
    """Build this algorithm with options ``given``.

    Raises:
      ConfigError: ``build`` read an option its schema does not declare (a
        ``KeyError`` of a name ``hp`` lacks), or returned something other than a
        :class:`FedAlgorithm`; the message names the algorithm and what to change.
    """
    hp = self.hparams(given)
    try:
      built = self.build(ctx, hp)
    except KeyError as e:
      key = e.args[0] if len(e.args) == 1 else None
      if not isinstance(key, str) or key in hp:
        raise
      declared = ", ".join(sorted(self.schema)) or "none"
      raise ConfigError(
          f"algorithm {self.name!r}: build(ctx, hp) reads hp[{key!r}] but its schema "
          f"declares no {key!r} (declared: {declared}); register an "
          f"AlgorithmEntry({self.name!r}, build, HParamSchema({{{key!r}: HParam(...)}})) "
          f"and set it with config.methods.<label>.{key}") from None
    if not isinstance(built, FedAlgorithm):
      raise ConfigError(
          f"algorithm {self.name!r}: build(ctx, hp) returned "
          f"{'None' if built is None else type(built).__name__}, expected a FedAlgorithm "
          f"(name, init, broadcast, client_update, aggregate, eval_params); did it miss "
          f"a return?")
    return built._replace(name=self.name)

  def capabilities(self) -> tuple:
    """Names of the capabilities this algorithm has (for listings)."""
    return tuple(c for c in ("robust_aggregation", "full_participation",
                             "decentralised", "asynchronous") if getattr(self, c))
