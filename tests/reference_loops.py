"""Plain per-client Python loops (no scan, vmap or masking) for checking algorithms.

They follow the engine's documented key derivation and batch sampler
(``fold_in(round)`` → ``fold_in(CLIENT)`` → ``fold_in(client_id)``, then
``local_training.batch_positions``) like ``reference_fedavg_round`` in
tests/sim/test_simulation.py, and take plain SGD steps w ← w − η·hook(g, w).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac import sim as sim_lib
from fedfrac.algorithms import contract, local_training, tasks


def tree_map(f, *trees):
  return jax.tree.map(f, *trees)


def tree_sum(weights, trees):
  """Σ_i w_i t_i for a Python list of pytrees."""
  return tree_map(lambda *xs: sum(float(w) * x for w, x in zip(weights, xs)), *trees)


def client_view(sim, k):
  data = sim.data
  return contract.ClientView(jnp.asarray(data.x_train), jnp.asarray(data.y_train),
                             jnp.asarray(data.client_index[k]),
                             jnp.asarray(data.client_size[k]),
                             jnp.asarray(sim.num_steps[k]), jnp.asarray(k))


def batch_grad_fn(sim, grad_fn):
  """Jitted ``(params, view, batch_key, step_key, h, perms, extra) -> grads`` for
  step h: the engine's batch sampler, then ``grad_fn(params, x, y, mask, key, extra)``.
  """
  training = sim.training

  def one(params, view, batch_key, step_key, h, perms, extra):
    pos, mask = local_training.batch_positions(view, batch_key, h, training, perms)
    rows = view.index[pos]
    return grad_fn(params, view.x[rows], view.y[rows], mask,
                   jax.random.fold_in(step_key, h), extra)
  return jax.jit(one)


_perms = jax.jit(local_training.epoch_permutations, static_argnums=(2, 3, 4))


def local_sgd(sim, params, k, t, root_key, batch_grad, hook=None, extra=None):
  """Client k's local SGD in round t, one Python iteration per step.

  ``batch_grad`` comes from :func:`batch_grad_fn`; ``hook(grads, params)``
  adjusts each gradient; ``extra`` is passed through to the gradient function.
  Returns ``(params, steps)``.
  """
  training = sim.training
  key_t = jax.random.fold_in(root_key, t)
  key = jax.random.fold_in(jax.random.fold_in(key_t, sim_lib.CLIENT), k)
  batch_key, step_key = jax.random.split(key)
  view = client_view(sim, k)
  perms = jnp.zeros((1, 1), jnp.int32)
  if training.local_steps is None:
    perms = _perms(batch_key, view.size, view.index.shape[0], training.local_epochs,
                   training.batch_size)
  lr = training.lr_schedule(t)
  p = params
  steps = int(sim.num_steps[k])
  for h in range(steps):
    g = batch_grad(p, view, batch_key, step_key, jnp.asarray(h), perms, extra)
    if hook is not None:
      g = hook(g, p)
    p = tree_map(lambda w, gi: w - lr * gi, p, g)
  return p, steps


def supervised_grad(sim):
  """``batch_grad`` of the plain supervised loss."""
  loss_fn = tasks.supervised_loss(sim.model, sim.task)
  return batch_grad_fn(sim, jax.grad(lambda p, x, y, m, k, extra: loss_fn(p, x, y, m, k)[0]))


def full_local_gradient(sim, params, k):
  """∇ of client k's mean supervised loss over all its n_k samples at ``params``
  (one batch of every row; SCAFFOLD option I's g_k(x))."""
  loss_fn = tasks.supervised_loss(sim.model, sim.task)
  rows = np.asarray(sim.data.client_index[k][:int(sim.data.client_size[k])])
  x, y = jnp.asarray(sim.data.x_train[rows]), jnp.asarray(sim.data.y_train[rows])
  mask = jnp.ones(len(rows), bool)
  return jax.grad(lambda p: loss_fn(p, x, y, mask, None)[0])(params)


def cohort_weights(sim, cohort, weighting):
  """(p, q): model-average weights over the cohort and population shares."""
  n = np.asarray(sim.data.client_size, np.float64)
  if weighting == "uniform":
    return (np.full(len(cohort), 1.0 / len(cohort)),
            np.full(len(cohort), 1.0 / sim.num_clients))
  return n[cohort] / n[cohort].sum(), n[cohort] / n.sum()


def assert_trees_close(got, want, atol=1e-5, rtol=1e-5):
  got_leaves, want_leaves = jax.tree.leaves(got), jax.tree.leaves(want)
  assert jax.tree.structure(got) == jax.tree.structure(want)
  for a, b in zip(got_leaves, want_leaves):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=atol, rtol=rtol)
