"""MOON (Li, He & Song 2021, "Model-Contrastive Federated Learning", local learning).

Each client trains with the supervised loss plus a model-contrastive term that
pulls the representation z of its local model towards that of the global model
z_glob and away from that of its own previous local model z_prev:

  ℓ_con = −log [ exp(sim(z, z_glob)/τ) /
                 (exp(sim(z, z_glob)/τ) + exp(sim(z, z_prev)/τ)) ]      # model-contrastive loss
  ℓ = ℓ_sup(w; x, y) + μ ℓ_con(w; w_t, w_k^{prev}; x)                   # local objective

with sim the cosine similarity, averaged over the mini-batch. The reported client
``loss`` is this local objective ℓ (supervised plus μ·contrastive).

Representation. The paper's network is base encoder → projection head → output
layer. fedfrac models are ``extractor → head``; MOON adds a projection head as a
separate, small parameter subtree: a 2-layer MLP on the extractor features
(F → F, ReLU, F → P with P = ``proj_dim``; ``proj_dim=0`` uses the raw features).
The projection head is trained, uploaded and averaged with the model; the
classifier head still reads the extractor features directly (the model itself is
unchanged, so evaluation and every other algorithm see the same network).
z_glob and z_prev come from the frozen global and previous models run in
inference mode (no dropout).

State. The server holds the model and projection head; each client keeps its
previous local model (model + projection, one row per client, initialised to the
initial global model, so the first round's contrastive term is the constant log 2
with zero gradient). The server is FedAvg: w_{t+1} = w_t + Σ_k p_k Δ_k with
p_k = n_k / Σ_{j∈S} n_j. The paper's defaults are τ = 0.5 and μ ∈ {1, 5}.

Model buffer (option ``buffer_size`` = b > 1; the authors' ``model_buffer_size``,
the paper's study of more negative pairs): each client keeps its last b local
models, newest first, and every one of them is a negative,

  ℓ_con = −log [ exp(sim(z, z_glob)/τ) /
                 (exp(sim(z, z_glob)/τ) + Σ_{j<b'} exp(sim(z, z_prev_j)/τ)) ]

over the b' = min(participations, b) models the client has produced so far
(before its first participation the one negative is the initial global model, as
with b = 1). The buffer advances when the client takes part (the authors' code
runs every client every round, where the two agree). State ``prev`` then has
leaves ``[K, b, ...]`` and ``filled [K]`` counts b'; b = 1 (default) keeps the
single-model state above, bit for bit.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from fedfrac.algorithms import contract, local_training, schema, server, tasks, trees


def _proj_dim(v):
  return isinstance(v, int) and not isinstance(v, bool) and v >= 0


HPARAMS = schema.HParamSchema({
    "mu": schema.HParam(1.0, schema.non_negative, "contrastive weight μ; must be >= 0"),
    "temperature": schema.HParam(0.5, schema.positive, "temperature τ; must be > 0"),
    "proj_dim": schema.HParam(64, _proj_dim,
                              "projection output size; an integer >= 0 (0 = no projection "
                            "head, contrast the extractor features)"),
    "buffer_size": schema.HParam(1, schema.positive_int,
                                 "previous local models kept as negatives; an "
                                 "integer >= 1"),
})


def init_projection(key, feature_dim, proj_dim):
  """Projection head params: ``w1 [F, F], b1 [F], w2 [F, P], b2 [P]`` (LeCun normal
  weights, zero biases), or ``{}`` when ``proj_dim == 0``."""
  if proj_dim == 0:
    return {}
  k1, k2 = jax.random.split(key)
  scale = 1.0 / math.sqrt(max(feature_dim, 1))
  return {"w1": scale * jax.random.normal(k1, (feature_dim, feature_dim), jnp.float32),
          "b1": jnp.zeros((feature_dim,), jnp.float32),
          "w2": scale * jax.random.normal(k2, (feature_dim, proj_dim), jnp.float32),
          "b2": jnp.zeros((proj_dim,), jnp.float32)}


def project(proj, features):
  """``[B, F] -> [B, P]`` (identity when ``proj`` is empty)."""
  if not proj:
    return features
  h = jax.nn.relu(features @ proj["w1"] + proj["b1"])
  return h @ proj["w2"] + proj["b2"]


def _unit(z):
  # z / max(‖z‖, 1e-8), safe to differentiate at z = 0.
  return z * jax.lax.rsqrt(jnp.maximum(jnp.sum(z * z, -1, keepdims=True), 1e-16))


def contrastive_loss(z, z_glob, z_prev, temperature):
  """Per-example model-contrastive loss ℓ_con: ``[B, P] x3 -> [B]``."""
  zu = _unit(z)
  pos = jnp.sum(zu * _unit(z_glob), -1) / temperature
  neg = jnp.sum(zu * _unit(z_prev), -1) / temperature
  return jnp.logaddexp(pos, neg) - pos


def contrastive_loss_buffer(z, z_glob, z_prevs, valid, temperature):
  """Per-example ℓ_con with several negatives: ``z, z_glob [B, P]``, ``z_prevs
  [b, B, P]``, ``valid [b]`` bool (which buffer slots count) -> ``[B]``.

  −log(e^{pos} / (e^{pos} + Σ_{j valid} e^{neg_j})) with pos = sim(z, z_glob)/τ,
  neg_j = sim(z, z_prev_j)/τ; one valid slot gives :func:`contrastive_loss`.
  """
  zu = _unit(z)
  pos = jnp.sum(zu * _unit(z_glob), -1) / temperature               # [B]
  neg = jnp.sum(zu[None] * _unit(z_prevs), -1) / temperature          # [b, B]
  neg = jnp.where(valid[:, None], neg, -jnp.inf)
  return jax.nn.logsumexp(jnp.concatenate([pos[None], neg], 0), axis=0) - pos


def representation_fn(model):
  """``(net, x, train, key) -> (outputs [B, C], z [B, P])`` for net = {model, proj}."""
  def rep(net, x, train=False, key=None):
    out, features = model.apply(net["model"], x, train=train, key=key,
                                return_features=True)
    return out, project(net["proj"], features)
  return rep


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
  training = ctx.training
  model, task = ctx.model, ctx.task
  mu, temperature, proj_dim = hp["mu"], hp["temperature"], hp["proj_dim"]
  buffer_size = hp["buffer_size"]
  rep = representation_fn(model)

  def init(key, params0, num_clients, data_info):
    del data_info
    x = jnp.zeros((1,) + tuple(model.input_shape), jnp.float32)
    feature_dim = jax.eval_shape(
        lambda p: model.apply(p, x, return_features=True), params0)[1].shape[-1]
    net = {"model": params0, "proj": init_projection(key, feature_dim, proj_dim)}
    if buffer_size == 1:
      return {"params": net}, {"prev": trees.stack_for_clients(net, num_clients)}
    slots = trees.stack_for_clients(net, buffer_size)                  # [b, ...]
    return {"params": net}, {"prev": trees.stack_for_clients(slots, num_clients),
                             "filled": jnp.zeros((num_clients,), jnp.int32)}

  def broadcast(server_state):
    return server_state["params"]

  def client_update(payload, client_state, view, key, round_index):
    lr = training.lr_schedule(round_index)
    glob = jax.lax.stop_gradient(payload)
    prev = jax.lax.stop_gradient(client_state["prev"])

    if buffer_size > 1:
      # the b' filled slots, or the initial global model in slot 0 before the
      # client's first participation
      valid = jnp.arange(buffer_size) < jnp.maximum(client_state["filled"], 1)

    def contrast(z, z_glob, x):
      if buffer_size == 1:
        _, z_prev = rep(prev, x)
        return contrastive_loss(z, z_glob, z_prev, temperature)
      _, z_prevs = jax.vmap(lambda p: rep(p, x))(prev)              # [b, B, P]
      return contrastive_loss_buffer(z, z_glob, z_prevs, valid, temperature)

    def loss_fn(net, x, y, mask, step_key):
      out, z = rep(net, x, train=True, key=step_key)
      _, z_glob = rep(glob, x)
      sup = tasks.masked_mean(task.example_loss(out, y), mask)
      con = tasks.masked_mean(contrast(z, z_glob, x), mask)
      # ℓ = ℓ_sup + μ ℓ_con   (Li et al. 2021, local objective)
      return sup + mu * con, (sup, con)

    opt_state = training.optimizer.init(payload)
    net, _, metrics = local_training.local_train(payload, opt_state, view, key, lr,
                                                 loss_fn, training)
    delta = trees.tree_sub(net, payload)
    metrics["update_norm"] = trees.tree_norm(delta)
    if buffer_size == 1:
      return delta, {"prev": net}, metrics
    # newest first; the oldest model leaves the buffer
    shifted = jax.tree.map(lambda new, old: jnp.concatenate([new[None], old[:-1]], 0),
                           net, client_state["prev"])
    return delta, {"prev": shifted, "filled": jnp.minimum(client_state["filled"] + 1,
                                                          buffer_size)}, metrics

  def aggregate(server_state, client_states, messages, weights, mask, key):
    mean_delta, _ = server.combine_deltas(messages, weights, mask, key, ctx.aggregator)
    return contract.ServerUpdate(
        {"params": trees.tree_add(server_state["params"], mean_delta)}, client_states)

  def eval_params(server_state, client_state):
    del client_state
    return server_state["params"]["model"]

  return contract.FedAlgorithm("moon", init, broadcast, client_update, aggregate,
                               eval_params)


ENTRIES = (
    contract.AlgorithmEntry(
        "moon", build, HPARAMS,
        "MOON: model-contrastive local learning", robust_aggregation=True,
        needs_head=True),
)
