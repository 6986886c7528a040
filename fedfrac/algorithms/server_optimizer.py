"""Any optax optimizer as the server step of a FedAvg-family method.

FedAvg, FedProx (option ``server_optimizer``) and FedOpt (FedAdam, FedYogi,
FedAdagrad: presets of it with Reddi et al.'s rules) share one server step
(Reddi et al. 2021, "Adaptive Federated Optimization", Alg. 1, ServerOpt): the
cohort's updates Δ_k = w_k − w_t are combined (the sample-weighted mean, or the
robust rule of ``config.server``) and their negation is the pseudo-gradient an
optax ``GradientTransformation`` turns into the server's update:

  Δ̄_t = Σ_{k∈S_t} p_k Δ_k                         (or the robust rule)
  u_t, s_t = tx.update(−Δ̄_t, s_{t−1}, w_t)          # ServerOpt(w_t, −Δ̄_t, η, t)
  w_{t+1} = w_t + u_t

so ``optax.sgd(1.0)`` is FedAvg, ``optax.sgd(η, momentum=β)`` FedAvgM (β v + Δ̄,
its ``nesterov=True`` too), ``optax.adam(η, β1, β2, eps=τ)`` FedAdam with
``bias_correction=True``. The server state is ``{"params", "opt_state"}``.

``server_optimizer`` takes, in Python, an optax ``GradientTransformation``
(``optax.adam(1e-2)``, any chain of them), or, in a config file or on the command
line, its name and arguments as text: ``"adam(0.01)"``,
``"sgd(0.5, momentum=0.9)"`` (an optimizer of :data:`NAMES` called with literal
arguments: :func:`from_text`; its learning rate is its first argument). None
keeps the method's own server step.
"""
from __future__ import annotations

import ast
import inspect
import json
import math
from typing import Any, Optional

import jax
import jax.numpy as jnp
import optax

from fedfrac.algorithms import contract, server, trees

# optax optimizers usable by name (each takes the learning rate first).
NAMES = ("sgd", "adam", "adamw", "adagrad", "adabelief", "adamax", "amsgrad", "lamb",
         "lion", "nadam", "novograd", "radam", "rmsprop", "yogi")

ALLOWED = ("must be an optax GradientTransformation (e.g. optax.adam(1e-2)), or the name of "
           f"one of optax's {', '.join(NAMES)} with its arguments as text, e.g. "
           "'adam(0.01)' or 'sgd(0.5, momentum=0.9)'; None for the method's own server "
           "step")


def is_transformation(value: Any) -> bool:
  """Whether ``value`` is an optax ``GradientTransformation`` (init, update)."""
  return isinstance(value, optax.GradientTransformation)


def _call_parts(text: str) -> tuple[str, list, dict]:
  """``(name, args, kwargs)`` of ``"name(arg, ..., key=value)"`` (literal
  arguments only; nothing is evaluated); ValueError naming what is wrong."""
  try:
    node = ast.parse(text.strip(), mode="eval").body
  except SyntaxError:
    raise ValueError("not a call such as 'adam(0.01)'") from None
  if isinstance(node, ast.Name):
    return node.id, [], {}
  if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
    raise ValueError("not a call such as 'adam(0.01)'")
  try:
    args = [ast.literal_eval(a) for a in node.args]
    kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
  except ValueError:
    raise ValueError("its arguments must be numbers, strings, True/False or None") from None
  if any(k is None for k in kwargs):
    raise ValueError("its arguments must be numbers, strings, True/False or None")
  return node.func.id, args, kwargs


def from_text(text: str) -> optax.GradientTransformation:
  """The optax optimizer that ``text`` (``"adam(0.01)"``, ``"sgd(0.5,
  momentum=0.9)"``) names: one of :data:`NAMES` called with its literal
  arguments. ValueError in one line for an unknown name, arguments the
  optimizer does not take, or a learning rate that is not a number > 0."""
  shown = f"server_optimizer={text!r}"
  try:
    name, args, kwargs = _call_parts(text)
  except ValueError as e:
    raise ValueError(f"{shown}: {e}") from None
  if name not in NAMES:
    import difflib
    close = difflib.get_close_matches(name, NAMES, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ValueError(f"{shown}: {hint}the optimizers usable by name are "
                     f"{', '.join(NAMES)} (pass any other optax GradientTransformation "
                     f"from Python)")
  fn = getattr(optax, name)
  signature = inspect.signature(fn)
  try:
    bound = signature.bind_partial(*args, **kwargs)
  except TypeError as e:
    raise ValueError(f"{shown}: optax.{name} {e}") from None
  if "learning_rate" not in bound.arguments:
    raise ValueError(f"{shown}: give optax.{name} its learning rate, e.g. "
                     f"'{name}(0.01)'")
  try:
    signature.bind(*args, **kwargs)
  except TypeError as e:
    raise ValueError(f"{shown}: optax.{name} {e}") from None
  lr = bound.arguments["learning_rate"]
  if not (isinstance(lr, (int, float)) and not isinstance(lr, bool)
          and math.isfinite(lr) and lr > 0):
    raise ValueError(f"{shown}: the learning rate {lr!r} must be a number > 0")
  return fn(*args, **kwargs)


def ascends(tx: optax.GradientTransformation) -> bool:
  """Whether ``tx``'s first step on a probe (parameters and gradient all ones,
  four float32 entries) moves up the gradient: an optimizer with a learning rate
  < 0 (``optax.sgd(-0.5)``), which would raise the loss every round. False when
  the probe cannot tell: a step of 0 (a rate of 0, or a warm-up schedule that
  starts at 0), an optimizer that needs other parameters (``multi_transform``
  labels), or a probe that fails or is traced."""
  try:
    ones = {"w": jnp.ones((4,), jnp.float32)}
    updates, _ = tx.update(ones, tx.init(ones), ones)
    step = float(sum(jnp.sum(u) for u in jax.tree.leaves(updates)))
  except Exception:   # noqa: BLE001  (an optimizer the probe does not fit)
    return False
  return math.isfinite(step) and step > 0


def problem(value: Any) -> Optional[str]:
  """None when ``value`` is a valid ``server_optimizer`` option, else what is
  wrong, as ``server_optimizer=<value>: ...``. An optax object's learning rate is
  not readable; one probe step (:func:`ascends`) refuses one that moves up the
  gradient (a rate < 0)."""
  if value is None:
    return None
  if is_transformation(value):
    if ascends(value):
      return ("server_optimizer=<optax GradientTransformation>: its first step on a "
              "probe gradient moves up the gradient, so every round would raise the "
              "loss; is its learning rate < 0? optax optimizers take a rate > 0 "
              "(optax.sgd(0.5), not optax.sgd(-0.5))")
    return None
  if isinstance(value, str):
    try:
      from_text(value)
    except ValueError as e:
      return str(e)
    return None
  return f"server_optimizer={value!r}: {ALLOWED}"


def check(value: Any) -> bool:
  """The option's own check (:class:`fedfrac.algorithms.schema.HParam`): its type
  and text; the probe step of :func:`problem` runs in the method's checks."""
  return is_transformation(value) or problem(value) is None


def transformation(value: Any) -> Optional[optax.GradientTransformation]:
  """The ``GradientTransformation`` of a checked ``server_optimizer`` value
  (None stays None)."""
  return from_text(value) if isinstance(value, str) else value


def init(tx: optax.GradientTransformation, params0: Any) -> dict:
  """The server state ``{"params": w_0, "opt_state": tx.init(w_0)}``."""
  return {"params": params0, "opt_state": tx.init(params0)}


def server_step(tx: optax.GradientTransformation, spec=None) -> tuple:
  """``(init, aggregate)`` of the contract for the server step ``tx``
  (ServerOpt(w_t, −Δ̄_t), Reddi et al. 2021, Alg. 1): the server state of
  :func:`init` and :func:`aggregate_with`; no client state."""
  def init_state(key, params0, num_clients, data_info):
    del key, num_clients, data_info
    return init(tx, params0), None
  return init_state, aggregate_with(tx, spec)


def aggregate_with(tx: optax.GradientTransformation, spec=None):
  """The contract's ``aggregate`` of the server step above: combine the
  cohort's ``[S, ...]`` updates (``spec``: the robust rule, None the mean),
  feed −Δ̄_t to ``tx`` and apply its update; the round's server metrics are
  ``server_step_norm`` = ‖u_t‖₂ and the rule's own (Krum's selection)."""

  def aggregate(server_state, client_states, messages, weights, mask, key):
    mean_delta, info = server.combine_deltas(messages, weights, mask, key, spec)
    pseudo_grad = jax.tree.map(jnp.negative, mean_delta)    # −Δ̄_t
    updates, opt_state = tx.update(pseudo_grad, server_state["opt_state"],
                                   server_state["params"])
    params = optax.apply_updates(server_state["params"], updates)
    return contract.ServerUpdate({"params": params, "opt_state": opt_state}, client_states,
                                 {**info, "server_step_norm": trees.tree_norm(updates)})
  return aggregate


def describe(value: Any, depth: int = 0) -> str:
  """A text of a ``server_optimizer`` value that is the same in every process
  and differs when its settings do: for a ``GradientTransformation``, the
  functions it is built from with the numbers, strings and flags they close
  over (``chain(scale_by_adam(b1=0.9, ...), ...)``), for a workdir's
  fingerprint and a sweep point's id."""
  if not callable(value) and not is_transformation(value):
    return repr(value)
  if is_transformation(value):
    return describe(value.update, depth)
  if depth > 6:
    return "..."
  name = getattr(value, "__qualname__", type(value).__name__).replace(".<locals>", "")
  code = getattr(value, "__code__", None)
  cells = getattr(value, "__closure__", None) or ()
  parts = []
  for var, cell in zip(code.co_freevars if code else (), cells):
    try:
      content = cell.cell_contents
    except ValueError:   # an empty cell
      continue
    if isinstance(content, (bool, int, float, str)) or content is None:
      parts.append(f"{var}={content!r}")
    elif callable(content) or is_transformation(content):
      parts.append(f"{var}={describe(content, depth + 1)}")
    elif isinstance(content, (tuple, list)) and all(callable(c) for c in content):
      parts.append(f"{var}=({', '.join(describe(c, depth + 1) for c in content)})")
    elif hasattr(content, "shape") and hasattr(content, "dtype"):
      parts.append(f"{var}={jnp.asarray(content).tolist()!r}")
  return f"{name}({', '.join(parts)})"


def plain(tree: Any) -> Any:
  """``tree`` (dicts, lists) with every ``GradientTransformation`` in it
  replaced by :func:`describe`'s text (other values unchanged)."""
  if is_transformation(tree):
    return f"optax {describe(tree)}"
  if isinstance(tree, dict):
    return {k: plain(v) for k, v in tree.items()}
  if isinstance(tree, (list, tuple)):
    return type(tree)(plain(v) for v in tree) if not hasattr(tree, "_fields") else tree
  return tree


def plain_config(config) -> dict:
  """A ``ConfigDict`` as JSON gives it (its keys in their order, what JSON cannot
  hold as ml_collections' best effort writes it), with every
  ``GradientTransformation`` in it (a method's ``server_optimizer``, wherever
  one is given) as :func:`plain`'s text, the text a workdir's fingerprint holds,
  instead of the names of its two functions (``config.json`` of a workdir)."""
  out = json.loads(config.to_json_best_effort())

  def put(objects, into):
    for key, value in into.items():
      given = objects.get(key) if hasattr(objects, "get") else None
      if is_transformation(given):
        into[key] = plain(given)
      elif isinstance(value, dict) and given is not None:
        put(given, value)
  put(config, out)
  return out
