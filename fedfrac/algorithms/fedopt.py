"""FedOpt: FedAdam, FedYogi, FedAdagrad (Reddi et al. 2021, "Adaptive Federated
Optimization", Alg. 2), plus a plain SGD server.

Clients run the shared local training and upload Δ_k = w_k − w_t. The server
averages them, Δ̄_t = Σ_{k∈S} p_k Δ_k (p_k = n_k / Σ_{j∈S} n_j), and feeds the
pseudo-gradient −Δ̄_t to an optax server optimizer with learning rate η:

  m_t = β1 m_{t−1} + (1 − β1) Δ̄_t                                 # Alg. 2
  v_t = v_{t−1} + Δ̄_t²                               (FedAdagrad)
  v_t = v_{t−1} − (1 − β2) Δ̄_t² sign(v_{t−1} − Δ̄_t²)   (FedYogi)
  v_t = β2 v_{t−1} + (1 − β2) Δ̄_t²                    (FedAdam)
  w_{t+1} = w_t + η m_t / (√v_t + τ)

with m_{−1} = 0 and v_{−1} = τ² (Alg. 2 requires v_{−1} ≥ τ²). As in Alg. 2 there
is no bias correction by default. ``bias_correction=True`` is Adam's form
(Kingma & Ba 2015, Alg. 1), the one ``optax.adam`` computes: both moments start
at zero, m_{−1} = v_{−1} = 0, and the step is

  w_{t+1} = w_t + η m̂_t / (√v̂_t + τ),  m̂_t = m_t / (1 − β1^{t+1}),
  v̂_t = v_t / (1 − β2^{t+1})                     (FedAdagrad: v̂_t = v_t)

so FedAdam with it equals a FedAvg server running ``optax.adam(η, β1, β2,
eps=τ)`` on the pseudo-gradient (``server_optimizer``, :mod:`fedfrac.algorithms.fedavg`).
(Starting v at τ² as well made the first steps up to 1/(τ√(1−β2)) times smaller
than Adam's for small updates: 10× at |Δ̄| = 1e-4 with τ = 1e-3.)
``server_opt="sgd"`` is w_{t+1} = w_t + η Δ̄_t (η = 1 is FedAvg).

Each is a preset of FedAvg's ``server_optimizer`` (any optax optimizer as the
server step, :mod:`fedfrac.algorithms.server_optimizer`): the same clients and
server step with the transformation :func:`server_optimizer` makes.

Registered presets: ``fedadam``, ``fedyogi``, ``fedadagrad`` (Reddi et al.'s
defaults β1 = 0.9, β2 = 0.99, τ = 1e-3).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from fedfrac.algorithms import contract, fedavg, schema, trees

SERVER_OPTIMIZERS = ("adam", "yogi", "adagrad", "sgd")


_decay = schema.interval(0, 1, hi_open=True)   # [0, 1)


HPARAMS = schema.HParamSchema({
    "server_opt": schema.HParam("adam", schema.one_of(*SERVER_OPTIMIZERS),
                                "allowed values are " + ", ".join(SERVER_OPTIMIZERS)),
    "server_lr": schema.HParam(0.01, schema.positive, "server learning rate η; must be > 0"),
    "beta1": schema.HParam(0.9, _decay, "first-moment decay β1; must be in [0, 1)"),
    "beta2": schema.HParam(0.99, _decay, "second-moment decay β2; must be in [0, 1)"),
    "tau": schema.HParam(1e-3, schema.positive, "adaptivity τ (eps); must be > 0"),
    "bias_correction": schema.HParam(False, schema.one_of(False, True),
                                     "must be True or False"),
})


class AdaptiveState(NamedTuple):
  count: jax.Array   # type: ignore[assignment]  # [] int32 server steps taken
  m: optax.Updates
  v: optax.Updates


def scale_by_reddi(kind, beta1=0.9, beta2=0.99, tau=1e-3, bias_correction=False):
  """The second-moment rules of Reddi et al. 2021, Alg. 2, as an optax transformation.

  Takes (pseudo-)gradients g (a pytree, any shapes) and returns m / (√v + τ)
  built from g (the caller scales by −η). ``kind`` is ``"adam"``, ``"yogi"`` or
  ``"adagrad"``. Without ``bias_correction`` v starts at τ² (Alg. 2); with it,
  both moments start at zero and are divided by 1 − β^{t+1} (Adam, Kingma & Ba
  2015, Alg. 1: ``kind="adam"`` is ``optax.scale_by_adam(β1, β2, eps=τ)``).
  """
  if kind not in ("adam", "yogi", "adagrad"):
    raise ValueError(f"server_opt={kind!r}: allowed values are adam, yogi, adagrad")

  def init_fn(params):
    v0 = 0.0 if bias_correction else tau * tau   # Adam's v_{−1} = 0; Alg. 2's τ²
    return AdaptiveState(jnp.zeros((), jnp.int32), trees.tree_zeros_like(params),
                         jax.tree.map(lambda p: jnp.full_like(p, v0), params))

  def update_fn(updates, state, params=None):
    del params
    m = jax.tree.map(lambda m, g: beta1 * m + (1.0 - beta1) * g, state.m, updates)
    if kind == "adagrad":
      v = jax.tree.map(lambda v, g: v + g * g, state.v, updates)
    elif kind == "yogi":
      v = jax.tree.map(lambda v, g: v - (1.0 - beta2) * g * g * jnp.sign(v - g * g),
                       state.v, updates)
    else:
      v = jax.tree.map(lambda v, g: beta2 * v + (1.0 - beta2) * g * g, state.v, updates)
    count = state.count + 1
    if bias_correction:
      t = count.astype(jnp.float32)
      c1 = 1.0 - jnp.power(beta1, t)
      c2 = 1.0 - jnp.power(beta2, t) if kind != "adagrad" else 1.0
      out = jax.tree.map(lambda m, v: (m / c1) / (jnp.sqrt(v / c2) + tau), m, v)
    else:
      out = jax.tree.map(lambda m, v: m / (jnp.sqrt(v) + tau), m, v)
    return out, AdaptiveState(count, m, v)

  return optax.GradientTransformation(init_fn, update_fn)


def server_optimizer(hp) -> optax.GradientTransformation:
  """The optax server optimizer of a resolved FedOpt option dict."""
  kind = hp["server_opt"]
  if kind == "sgd":
    return optax.sgd(hp["server_lr"])
  return optax.chain(
      scale_by_reddi(kind, hp["beta1"], hp["beta2"], hp["tau"], hp["bias_correction"]),
      optax.scale(-1.0 * hp["server_lr"]))


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
  """FedAvg with :func:`server_optimizer` as its ``server_optimizer``: the
  server step of :mod:`fedfrac.algorithms.server_optimizer`."""
  preset = {"server_lr": 1.0, "server_optimizer": server_optimizer(hp)}
  return fedavg.build(ctx, preset)._replace(name="fedopt")


ENTRIES = (
    contract.AlgorithmEntry(
        "fedadam", build, HPARAMS.with_defaults(server_opt="adam"),
        "FedAdam: adaptive server optimizer (Adam)", robust_aggregation=True),
    contract.AlgorithmEntry(
        "fedyogi", build, HPARAMS.with_defaults(server_opt="yogi"),
        "FedYogi: adaptive server optimizer (Yogi)", robust_aggregation=True),
    contract.AlgorithmEntry(
        "fedadagrad", build, HPARAMS.with_defaults(server_opt="adagrad", server_lr=0.1),
        "FedAdagrad: adaptive server optimizer (Adagrad)", robust_aggregation=True),
)
