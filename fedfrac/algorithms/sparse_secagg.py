"""SparseSecAgg: sparsified secure aggregation (Ergün, Sami, Güler, "Sparsified
Secure Aggregation for Privacy-Preserving Federated Learning", arXiv:2112.12872).

Clients run FedAvg's local training. Each client uploads a *sparse* set of
coordinates of its weighted update under pairwise additive masks, so that the
server learns only the sum of the sparsified updates; the coordinates each
client sends are chosen jointly with its partners from per-pair seeds, which is
what lets the pairwise masks cancel although every client sends only a fraction
of its coordinates. The full text was not available to us; this module follows
the abstract and the description in FOFedAvg's related work (random, pairwise
coordinated sparsification + pairwise masking), with the concrete construction
below ours.

Round t, K clients (full participation), d model coordinates, fixed point with
f fractional bits in the ring Z_{2^32}:

  * every ordered pair i < j derives a key from the round's pair seed and (i, j)
    (``jax.random.fold_in``); from it both members draw the same m index
    positions I_ij ∈ {0..d−1}^m (uniform, with replacement) and the same mask
    r_ij ∈ Z_{2^32}^m (uniform), m = ⌈k·d / (K−1)⌉ for the fraction k;
  * client i sends, for each partner j, the block
        v_ij = Q(p_i Δ_i[I_ij] / (α c_i[I_ij])) ± r_ij   (mod 2^32, + if i < j)
    with p_i = n_i / Σ_j n_j, c_i[ℓ] the number of times ℓ occurs in client
    i's blocks (duplicates share the value), α = 1 − (1 − 1/d)^{m(K−1)} the
    probability that a coordinate is in client i's support (so the estimate is
    unbiased) and Q(x) = round(x · 2^f) as a ring element;
  * the server scatter-adds all blocks: each pair's masks meet at the same
    positions with opposite signs and cancel *exactly* (integer addition mod
    2^32 is associative and exact, unlike float addition), leaving
    Σ_i p_i Δ_i[ℓ]·1[ℓ ∈ U_i] / α up to the quantisation error 2^−f per entry;
    it decodes (two's complement → float / 2^f) and applies w += η_g · sum.

With k = 1 every client sends all d coordinates (one dense block, no indices)
masked by Σ_{j≠i} ±r_ij; with ``masking=False`` the masks are zero. k = 1
without masks is FedAvg up to the fixed-point rounding. Values must stay within
±2^(31−f) (2048 for f = 20) or they wrap around.

Uplink bytes are the message's: per client (K−1)·m ring values (4 bytes) plus
(K−1)·m int32 indices; for k = 1, d values. The pair seed is part of the
broadcast (8 bytes), standing in for the key agreement.

Client dropout: the paper recovers a dropped client's masks through secret
sharing of the pair seeds; that is not implemented, so this algorithm requires
every client in every round (``participation=1``, no churn), checked by the
config validation (``full_participation``) and by ``build``.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from fedfrac.algorithms import contract, local_training, schema, tasks, trees

HPARAMS = schema.HParamSchema({
    "fraction": schema.HParam(0.1, schema.interval(0, 1, lo_open=True),
                              "sparsification fraction k; must be in (0, 1]"),
    "masking": schema.HParam(True, schema.boolean, "pairwise masks on; must be a bool"),
    "frac_bits": schema.HParam(20, lambda v: schema.positive_int(v) and 8 <= v <= 30,
                               "fixed-point fractional bits f; must be an int in [8, 30]"),
    "server_lr": schema.HParam(1.0, schema.positive, "server learning rate; must be > 0"),
})

_INDEX_STREAM, _MASK_STREAM = 1, 2


def pair_key(seed_key, i, j):
  """The key client i and client j share this round: from (min, max) of the ids."""
  lo, hi = jnp.minimum(i, j), jnp.maximum(i, j)
  return jax.random.fold_in(jax.random.fold_in(seed_key, lo), hi)


def block_size(fraction, dim, num_clients) -> int:
  """m = ⌈k·d / (K−1)⌉ positions per pair block (host side)."""
  return max(int(math.ceil(fraction * dim / max(num_clients - 1, 1) - 1e-9)), 1)


def coverage(block, dim, num_clients) -> float:
  """α = 1 − (1 − 1/d)^{m(K−1)}: probability a coordinate is in a client's support."""
  return float(-np.expm1(block * (num_clients - 1) * np.log1p(-1.0 / dim)))


def encode(x, frac_bits):
  """Q(x) = round(x · 2^f) as a uint32 ring element (two's complement)."""
  q = jnp.round(x.astype(jnp.float32) * (2.0 ** frac_bits)).astype(jnp.int32)
  return jax.lax.bitcast_convert_type(q, jnp.uint32)


def decode(v, frac_bits):
  """Inverse of :func:`encode`: a uint32 ring element → float32."""
  return jax.lax.bitcast_convert_type(v, jnp.int32).astype(jnp.float32) / (2.0 ** frac_bits)


def partners(client_id, num_clients):
  """The K−1 partners of ``client_id``: ``(i + 1 + r) mod K`` for r = 0..K−2, ``[K−1]``."""
  return (client_id + 1 + jnp.arange(num_clients - 1)) % num_clients


def sparse_message(flat_update, client_id, weight, seed_key, num_clients, fraction,
                   masking, frac_bits):
  """Client i's upload from its flat update ``[d]`` (see the module docstring).

  Returns ``{"values": uint32 [K−1, m], "indices": int32 [K−1, m]}`` for k < 1 or
  ``{"values": uint32 [d]}`` for k = 1.
  """
  dim = flat_update.shape[0]
  others = partners(client_id, num_clients)
  sign = jnp.where(client_id < others, jnp.uint32(1), jnp.uint32(0xFFFFFFFF))  # ±1 mod 2^32
  keys = jax.vmap(lambda j: pair_key(seed_key, client_id, j))(others)
  scaled = weight * flat_update
  if fraction >= 1:
    def add_mask(r, acc):
      mask = jax.random.bits(jax.random.fold_in(keys[r], _MASK_STREAM), (dim,), jnp.uint32)
      return acc + sign[r] * mask
    values = encode(scaled, frac_bits)
    if masking:
      values = jax.lax.fori_loop(0, num_clients - 1, add_mask, values)
    return {"values": values}
  m = block_size(fraction, dim, num_clients)
  alpha = coverage(m, dim, num_clients)
  idx = jax.vmap(lambda k: jax.random.randint(jax.random.fold_in(k, _INDEX_STREAM), (m,),
                                              0, dim, jnp.int32))(keys)
  counts = jnp.zeros((dim,), jnp.float32).at[idx.ravel()].add(1.0)
  values = encode(scaled[idx] / (alpha * counts[idx]), frac_bits)
  if masking:
    masks = jax.vmap(lambda k: jax.random.bits(jax.random.fold_in(k, _MASK_STREAM), (m,),
                                               jnp.uint32))(keys)
    values = values + sign[:, None] * masks
  return {"values": values, "indices": idx}


def unmask_sum(messages, dim, frac_bits):
  """The server's sum of the cohort's stacked messages → float32 ``[d]``.

  Ring addition (uint32, wraps mod 2^32) makes the pairwise masks cancel exactly.
  """
  values = messages["values"]
  if "indices" in messages:
    total = jnp.zeros((dim,), jnp.uint32).at[messages["indices"].ravel()].add(values.ravel())
  else:
    total = jnp.sum(values, axis=0, dtype=jnp.uint32)
  return decode(total, frac_bits)


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
  if ctx.participation != 1:
    raise ValueError(f"participation={ctx.participation!r}: sparse_secagg needs every "
                     "client in every round (dropout recovery is not implemented); "
                     "use participation=1")
  training = ctx.training
  loss_fn = tasks.supervised_loss(ctx.model, ctx.task)
  num_clients = int(ctx.data_info.num_clients)
  fraction, masking, frac_bits = float(hp["fraction"]), bool(hp["masking"]), hp["frac_bits"]
  if fraction < 1 and num_clients < 2:
    raise ValueError(f"fraction={fraction!r}: sparse blocks are shared by pairs of "
                     "clients, which needs num_clients >= 2; use fraction=1")
  sizes = np.asarray(ctx.data_info.client_size, np.float64)
  share = jnp.asarray(sizes / sizes.sum(), jnp.float32)   # p_i = n_i / Σ n
  server_lr = hp["server_lr"]

  def init(key, params0, num_clients_, data_info):
    del num_clients_, data_info
    return {"params": params0, "pair_seed": jax.random.fold_in(key, 0x5EC)}, None

  def broadcast(server_state):
    return server_state

  def client_update(payload, client_state, view, key, round_index):
    delta, metrics = local_training.local_delta(payload["params"], view, key, round_index,
                                                loss_fn, training)
    flat, _ = ravel_pytree(delta)
    message = sparse_message(flat, view.client_id, share[view.client_id],
                             payload["pair_seed"], num_clients, fraction, masking,
                             frac_bits)
    return message, client_state, metrics

  def aggregate(server_state, client_states, messages, weights, mask, key):
    del weights, mask   # every client takes part; weights p_i are applied by clients
    flat_params, unravel = ravel_pytree(server_state["params"])
    total = unmask_sum(messages, flat_params.shape[0], frac_bits)
    params = trees.tree_add(server_state["params"], unravel(server_lr * total))
    return contract.ServerUpdate({"params": params, "pair_seed": key}, client_states)

  def eval_params(server_state, client_state):
    del client_state
    return server_state["params"]

  return contract.FedAlgorithm("sparse_secagg", init, broadcast, client_update, aggregate,
                               eval_params)


ENTRIES = (
    contract.AlgorithmEntry(
        "sparse_secagg", build, HPARAMS,
        "SparseSecAgg: pairwise-masked sparse uploads, the server learns only the sum",
        full_participation=True),
)
