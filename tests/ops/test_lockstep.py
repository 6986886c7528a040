"""fedfrac.ops.lockstep: the local-step loop of vmapped clients (and runs) takes
the steps every member shares without selecting its carry, with the same results
as the selecting loop up to float rounding (the two programs are compiled apart:
a few ulps)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from fedfrac.algorithms.client_view import ClientView
from fedfrac.algorithms.local_training import LocalTraining, local_train
from fedfrac.ops import lockstep


def test_shared_min_is_the_identity_outside_named_axes_and_the_min_inside():
  x = jnp.arange(6).reshape(2, 3) + 4
  assert lockstep.axes() == ()
  assert int(lockstep.shared_min(jnp.int32(7))) == 7
  seen = []

  def element(v):
    seen.append(lockstep.axes())
    return lockstep.shared_min(v)
  outer = lockstep.vmap(lockstep.vmap(element, "c"), "r")
  np.testing.assert_array_equal(outer(x), np.full((2, 3), 4))
  assert seen == [("r", "c")]
  assert lockstep.axes() == ()     # registered only while tracing


def _problem(sizes, n_max=40, dim=5, seed=0):
  rng = np.random.default_rng(seed)
  x = jnp.asarray(rng.normal(size=(int(np.sum(sizes)) + 1, dim)).astype(np.float32))
  y = jnp.asarray(rng.integers(0, 3, size=x.shape[0]))
  index, start = [], 0
  for s in sizes:
    row = np.zeros(n_max, np.int32)
    row[:s] = np.arange(start, start + s)
    index.append(row)
    start += s
  return x, y, jnp.asarray(np.stack(index)), jnp.asarray(np.asarray(sizes, np.int32))


def _loss(params, xb, yb, mask, key):
  logits = xb @ params["w"] + params["b"]
  per = optax.softmax_cross_entropy_with_integer_labels(logits, yb)
  return jnp.sum(per * mask) / jnp.maximum(jnp.sum(mask), 1.0), None


def _client(x, y, training):
  opt = optax.adam(1.0)

  def one(params, index, size, key):
    steps = (training.local_epochs * ((size + training.batch_size - 1)
                                      // training.batch_size)).astype(jnp.int32)
    view = ClientView(x, y, index, size, steps, jnp.int32(0))
    p, s, m = local_train(params, opt.init(params), view, key, 0.05, _loss, training)
    return p, s, m
  return one


def _same(a, b):
  np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("sizes,unroll", [((16, 16, 16), 1), ((16, 7, 33, 0), 2)])
def test_clients_and_runs_in_lockstep_give_the_selecting_loop_to_rounding(sizes, unroll):
  x, y, index, size = _problem(sizes)
  training = LocalTraining(optimizer=optax.adam(1.0), lr_schedule=lambda t: 0.05,
                           batch_size=4, local_epochs=2, local_steps=None, max_steps=20,
                           unroll=unroll, dynamic_steps=True)
  one = _client(x, y, training)
  k = len(sizes)
  params = {"w": jnp.zeros((k, 5, 3)), "b": jnp.zeros((k, 3))}
  keys = jax.random.split(jax.random.PRNGKey(1), k)
  plain = jax.jit(jax.vmap(one))(params, index, size, keys)
  locked = jax.jit(lockstep.vmap(one, "cohort"))(params, index, size, keys)
  jax.tree.map(_same, plain, locked)
  assert float(plain[2]["steps"].sum()) == float(2 * np.ceil(np.asarray(sizes) / 4).sum())
  # Two runs of the cohort vmapped on top (as FIRMA's seeds are): the shared step
  # count is the smallest over runs and clients.
  runs = jax.tree.map(lambda a: jnp.stack([a, a]), (params, index, size))
  keys2 = jnp.stack([keys, jax.random.split(jax.random.PRNGKey(2), k)])
  plain2 = jax.jit(jax.vmap(jax.vmap(one)))(*runs, keys2)
  locked2 = jax.jit(lockstep.vmap(lockstep.vmap(one, "cohort"), "runs"))(*runs, keys2)
  jax.tree.map(_same, plain2, locked2)


def test_the_shared_loop_has_an_unbatched_trip_count():
  x, y, index, size = _problem((16, 16))
  training = LocalTraining(optimizer=optax.adam(1.0), lr_schedule=lambda t: 0.05,
                           batch_size=4, local_epochs=1, local_steps=None, max_steps=4,
                           dynamic_steps=True)
  one = _client(x, y, training)
  params = {"w": jnp.zeros((2, 5, 3)), "b": jnp.zeros((2, 3))}
  keys = jax.random.split(jax.random.PRNGKey(1), 2)

  def first_loop_predicate_shape(fn):
    jaxpr = jax.make_jaxpr(fn)(params, index, size, keys).jaxpr
    loop = [e for e in jaxpr.eqns if e.primitive.name == "while"][0]
    return loop.params["cond_jaxpr"].jaxpr.outvars[0].aval.shape
  # vmap of a loop whose trip count differs per client has a per-client predicate,
  # which XLA lowers to a select of every carry leaf (weights and their Adam
  # moments) each step; in lockstep the shared loop's predicate is one scalar.
  assert first_loop_predicate_shape(jax.vmap(one)) == (2,)
  assert first_loop_predicate_shape(lockstep.vmap(one, "cohort")) == ()
