"""Shared machinery of the FIRMA family (Hedjam, "FIRMA: FIbonacci Ring Model
Aggregation") and of the baselines it is compared with (RDFL, FedRep).

Decentralised ring algorithms keep every client's full model (extractor + head)
and its persistent optimizer states as K-stacked client state; ``aggregate``
mixes the stacked extractors with one N×N row-stochastic matrix
(:func:`fedfrac.ops.ring.apply_mixing`). What differs between the members is only
the mixing matrix and the local training, so this module provides:

* two-phase local training (adapted from FedRep): E_h epochs on the head with
  the extractor frozen, then E_e epochs on the extractor with the head frozen,
  each with its own persistent optimizer state (never reset, never sent);
* the local training accuracy a_i used by the FibFL+ gate: accuracy of the
  client's model after local training (before mixing) on its whole local train
  set, in evaluation mode — as the authors' code computes it;
* ring-state initialisation (shared initial model, or one random model per
  client as in the authors' code), mixing with spectral-gap metrics, and
  communication accounting from message shapes.

``compat`` (every FIRMA-family algorithm takes it): ``"paper"`` follows the
paper; ``"reference_code"`` reproduces what the authors' public code does where
it differs (docs/design.md §3.3): one random initial model per client, RDFL with γ = 1
(no mixing), 2-opt on the raw dot product of class proportions, a FibFL++
warm-up that averages heads too, and synchronous gossip passes.
"""
from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac.algorithms import local_training, schema, tasks, trees
from fedfrac.ops import ring

COMPAT = ("paper", "reference_code")


def check_compat(value):
  return value in COMPAT


# Options every FIRMA-family algorithm takes (docs/design.md §3.3).
COMPAT_HPARAMS = {
    "compat": schema.HParam("paper", schema.one_of(*COMPAT),
                            "allowed values are 'paper', 'reference_code'"),
    "init": schema.HParam(None, schema.one_of(None, "shared", "per_client"),
                          "allowed values are None (by compat), 'shared', 'per_client'"),
}


def per_client_init(hp) -> bool:
  """Whether every client starts from its own random model: ``init`` if given,
  else by ``compat`` (the reference code draws one per client, the paper shares one)."""
  return (hp["init"] or ("per_client" if hp["compat"] == "reference_code"
                         else "shared")) == "per_client"


def check_epoch_mode(training: local_training.LocalTraining, name: str):
  if training.local_steps is not None:
    raise ValueError(
        f"client.local_steps={training.local_steps}: algorithm {name!r} trains in "
        f"epochs (head/extractor epoch options); set client.local_steps=0")


# --------------------------------------------------------------------------------
# Local training.


def steps_per_epoch(size, batch_size):
  """ceil(n_k / B) as int32 (0 for an empty client)."""
  return ((size + batch_size - 1) // batch_size).astype(jnp.int32)


def phase_training(training: local_training.LocalTraining, epochs: int, n_max: int):
  """``training`` for one phase of ``epochs`` epochs over an index table of width
  ``n_max`` (the static scan length covers the largest possible client)."""
  max_steps = max(int(epochs) * math.ceil(n_max / training.batch_size), 1)
  return dataclasses.replace(training, local_epochs=int(epochs), local_steps=None,
                             max_steps=max_steps,
                             unroll=max(1, min(training.unroll, max_steps)))


def train_phase(params, opt_state, view, key, lr, loss_fn, training, epochs,
                optimizer=None):
  """Run ``epochs`` epochs of ``loss_fn`` on ``params`` (one phase).

  Returns ``(params, opt_state, metrics)`` as :func:`local_training.local_train`.
  """
  n_max = view.index.shape[0]
  phase = phase_training(training, epochs, n_max)
  # E epochs of the client's own batches; a slot the engine gives zero steps (a pad
  # slot of a sharded or bucketed cohort) stays at zero.
  steps = int(epochs) * steps_per_epoch(view.size, training.batch_size)
  view = view._replace(num_steps=jnp.where(view.num_steps > 0, steps, 0).astype(jnp.int32))
  return local_training.local_train(params, opt_state, view, key, lr, loss_fn, phase,
                                    optimizer=optimizer)


def head_loss(model, task, extractor):
  """Loss of the head with the extractor frozen (FIRMA phase 1): differentiates
  only w.r.t. the head, so no backward pass runs through the extractor."""
  full = tasks.supervised_loss(model, task)
  return lambda head, x, y, m, k: full({"extractor": extractor, "head": head}, x, y, m, k)


def extractor_loss(model, task, head):
  """Loss of the extractor with the head frozen (FIRMA phase 2)."""
  full = tasks.supervised_loss(model, task)
  return lambda ext, x, y, m, k: full({"extractor": ext, "head": head}, x, y, m, k)


def two_phase_train(params, opt_head, opt_ext, view, key, lr, model, task, training,
                    head_epochs, extractor_epochs):
  """FIRMA/FedRep local training: head phase then extractor phase.

  Args:
    params: ``{"extractor", "head"}`` of one client.
    opt_head, opt_ext: the client's persistent optimizer states for the head
      and the extractor (``training.optimizer``).
    view: the client's :class:`fedfrac.algorithms.contract.ClientView`.
    key: client key for this round (split into one key per phase).
    lr: learning rate of the round.
    head_epochs, extractor_epochs: E_h, E_e (static ints).
  Returns:
    ``(params, opt_head, opt_ext, metrics)`` with metrics ``head_loss``,
    ``loss`` (extractor phase) and ``steps`` (both phases).
  """
  k_head, k_ext = jax.random.split(key)
  head, opt_head, m_head = train_phase(
      params["head"], opt_head, view, k_head, lr,
      head_loss(model, task, params["extractor"]), training, head_epochs)
  ext, opt_ext, m_ext = train_phase(
      params["extractor"], opt_ext, view, k_ext, lr,
      extractor_loss(model, task, head), training, extractor_epochs)
  metrics = {"head_loss": m_head["loss"], "loss": m_ext["loss"],
             "steps": m_head["steps"] + m_ext["steps"]}
  return {"extractor": ext, "head": head}, opt_head, opt_ext, metrics


def train_accuracy(model, params, view, dynamic, chunk=256):
  """Accuracy of ``params`` on the client's whole local train set: ``[]`` f32.

  Evaluated in chunks of ``chunk`` rows (a dynamic loop over ceil(n_k/chunk)
  chunks when ``dynamic``, else a masked scan over the padded index table).
  An empty client gets 0.
  """
  n_max = view.index.shape[0]
  chunk = int(min(chunk, n_max))

  def count(c):
    pos = c * chunk + jnp.arange(chunk)
    valid = pos < view.size
    rows = view.index[jnp.minimum(pos, n_max - 1)]
    logits = model.apply(params, view.x[rows])
    hit = (jnp.argmax(logits, -1) == view.y[rows]) & valid
    return jnp.sum(hit.astype(jnp.float32))

  if dynamic:
    n_chunks = (view.size + chunk - 1) // chunk
    correct = jax.lax.fori_loop(0, n_chunks, lambda c, acc: acc + count(c),
                                jnp.zeros((), jnp.float32))
  else:
    correct = jnp.sum(jax.lax.map(count, jnp.arange(-(-n_max // chunk))))
  return correct / jnp.maximum(view.size.astype(jnp.float32), 1.0)


# --------------------------------------------------------------------------------
# Initial state.


def torch_style_init(params, key):
  """Re-draw every layer that has a ``kernel`` the way PyTorch's ``nn.Linear`` /
  ``nn.Conv`` do by default: kernel and bias ~ U(−1/√fan_in, 1/√fan_in)
  (kaiming-uniform with a = √5); other parameters (LayerNorm scale/bias) keep
  their values. Used for the per-client initial models of the authors' code."""
  leaves_key = [key]

  def draw(shape, bound):
    leaves_key[0], sub = jax.random.split(leaves_key[0])
    return jax.random.uniform(sub, shape, jnp.float32, -bound, bound)

  def walk(tree):
    if isinstance(tree, dict) and "kernel" in tree:
      kernel = tree["kernel"]
      bound = 1.0 / math.sqrt(max(int(np.prod(kernel.shape[:-1])), 1))
      out = dict(tree)
      out["kernel"] = draw(kernel.shape, bound).astype(kernel.dtype)
      if "bias" in tree:
        out["bias"] = draw(tree["bias"].shape, bound).astype(tree["bias"].dtype)
      return out
    if isinstance(tree, dict):
      return {k: walk(v) for k, v in sorted(tree.items())}
    return tree
  return walk(params)


def initial_models(model, key, params0, num_clients, per_client):
  """K-stacked initial models: ``params0`` for every client (shared start) or,
  with ``per_client``, one independent random model per client drawn as the
  authors' PyTorch code does (a fresh model per client with PyTorch's default
  layer initialisation, :func:`torch_style_init`)."""
  if per_client:
    def one(k):
      k_model, k_torch = jax.random.split(k)
      return torch_style_init(model.init(k_model), k_torch)
    return jax.vmap(one)(jax.random.split(key, num_clients))
  return trees.stack_for_clients(params0, num_clients)


def stacked_init(optimizer, stacked_params):
  """Optimizer state for each row of K-stacked params."""
  return jax.vmap(optimizer.init)(stacked_params)


def class_proportions(class_counts):
  """``[K, C]`` normalised class-proportion vectors q_i from a ``[K, C]`` class
  count table (host NumPy)."""
  counts = np.asarray(class_counts, np.float64)
  totals = counts.sum(axis=1, keepdims=True)
  return np.where(totals > 0, counts / np.where(totals > 0, totals, 1.0), 0.0)


def size_weights(data_info):
  """``[K]`` float32 n_k / Σ n_j (FedAvg weights of the FibFL++ warm-up)."""
  n = np.asarray(data_info.client_size, np.float64)
  return jnp.asarray(n / max(n.sum(), 1.0), jnp.float32)


# --------------------------------------------------------------------------------
# Mixing and metrics.


def spectral_gap(matrix):
  """``1 − |λ₂|`` of a row-stochastic ``[n, n]`` matrix, jittable (CPU/GPU eig).

  Same definition as :func:`fedfrac.ops.ring.spectral_gap` (host NumPy).
  """
  moduli = jnp.sort(jnp.abs(jnp.linalg.eigvals(matrix.astype(jnp.float32))))
  return (1.0 - moduli[-2]).astype(jnp.float32)


def mix_extractors(client_states, matrix):
  """Apply ``matrix`` to the stacked extractors only; heads are not passed in.

  Returns new client states whose ``params["extractor"]`` rows are
  ``Σ_j M[i, j] φ_j`` and whose heads are the same arrays as before.
  """
  params = client_states["params"]
  mixed = ring.apply_mixing(matrix, params["extractor"])
  return {**client_states, "params": {**params, "extractor": mixed}}


def average_optimizer_state(matrix, stacked_state):
  """``matrix`` applied to the floating leaves of a K-stacked optimizer state
  (Adam's first and second moments: row i becomes ``Σ_j M[i, j] m_j``), the
  others (step counts) kept; ``matrix`` is ``[K, K]``, every leaf ``[K, ...]``."""
  leaves, treedef = jax.tree.flatten(stacked_state)
  floating = [jnp.issubdtype(x.dtype, jnp.floating) for x in leaves]
  mixed = ring.apply_mixing(matrix, [x for x, f in zip(leaves, floating) if f])
  it = iter(mixed)
  return jax.tree.unflatten(treedef, [next(it) if f else x
                                      for x, f in zip(leaves, floating)])


def uniform_average_matrix(weights):
  """``1 pᵀ``: every row is the weight vector (a FedAvg average as mixing)."""
  return jnp.broadcast_to(weights[None, :], (weights.shape[0], weights.shape[0]))


def gated_out(gates, tau, order):
  """Number of clients whose two ring neighbours are both below τ (they keep
  their own extractor in FibFL+)."""
  n = gates.shape[0]
  pos = jnp.argsort(order)
  left, right = order[(pos - 1) % n], order[(pos + 1) % n]
  low = gates < tau
  return jnp.sum((low[left] & low[right]).astype(jnp.float32))


# --------------------------------------------------------------------------------
# Communication (paper Table 2).


def ring_communication(passes):
  """Ring gossip traffic: in each of ``passes`` passes every client sends its
  message to its two neighbours. Returns ``comm(payload_bytes, message_bytes,
  participants) -> (up, down)`` with up = 2·K_g·N·|message| (every transmission
  counted once) and down = 0 (no server): RDFL 2Np, FibFL/FibFL+ 2Np_e,
  FibFL++ 2K_gNp_e bytes per round (FIRMA Table 2)."""
  def comm(payload_bytes, message_bytes, participants):
    del payload_bytes
    return 2 * passes * participants * message_bytes, 0
  return comm


def tree_nbytes_of(fn, *args):
  """Bytes of the pytree ``fn(*args)`` would return (shapes only)."""
  out = jax.eval_shape(fn, *args)
  return int(sum(np.prod(x.shape, dtype=np.int64) * np.dtype(x.dtype).itemsize
                 for x in jax.tree.leaves(out)))
