"""SparseSecAgg: masks cancel exactly in the sum, a masked upload says nothing
about the update, bytes come from the sparse message, k = 1 without masks is FedAvg."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac import algorithms
from fedfrac.algorithms import sparse_secagg as ssa
from tests import helpers
from tests import reference_loops as ref

CLIENT = {"batch_size": 16, "local_steps": 3, "lr": 0.1, "optimizer": "sgd"}
K, DIM, FBITS = 5, 3000, 20


@functools.lru_cache(maxsize=None)
def _fed():
  return helpers.unequal_digits()


def _updates(seed=0):
  rng = np.random.default_rng(seed)
  return jnp.asarray(rng.normal(size=(K, DIM)) * 0.05, jnp.float32)


def _messages(updates, fraction, masking, seed_key=jax.random.PRNGKey(7)):
  weights = jnp.full((K,), 1.0 / K)
  return jax.vmap(lambda u, i, w: ssa.sparse_message(u, i, w, seed_key, K, fraction, masking,
                                                     FBITS))(updates, jnp.arange(K), weights)


@pytest.mark.parametrize("fraction", [1.0, 0.3])
def test_masked_sum_equals_unmasked_sum(fraction):
  updates = _updates()
  masked = _messages(updates, fraction, True)
  plain = _messages(updates, fraction, False)
  # the masks cancel exactly in the ring: identical decoded sums, bit for bit
  np.testing.assert_array_equal(np.asarray(ssa.unmask_sum(masked, DIM, FBITS)),
                                np.asarray(ssa.unmask_sum(plain, DIM, FBITS)))
  assert not np.array_equal(np.asarray(masked["values"]), np.asarray(plain["values"]))
  if fraction == 1.0:   # dense: the sum is the mean update up to the fixed-point step
    np.testing.assert_allclose(np.asarray(ssa.unmask_sum(plain, DIM, FBITS)),
                               np.asarray(updates.mean(0)), atol=K * 2.0 ** -FBITS)


def test_sparse_sum_is_an_unbiased_estimate_of_the_mean():
  updates = jnp.tile(jnp.linspace(-1, 1, DIM)[None], (K, 1))
  sums = [ssa.unmask_sum(_messages(updates, 0.3, True, jax.random.PRNGKey(s)), DIM, FBITS)
          for s in range(40)]
  est = np.mean(np.stack([np.asarray(s) for s in sums]), axis=0)
  err = est - np.asarray(updates[0])
  assert abs(err.mean()) < 0.01 and np.corrcoef(est, np.asarray(updates[0]))[0, 1] > 0.95


@pytest.mark.parametrize("fraction", [1.0, 0.3])
def test_a_single_masked_upload_is_unrelated_to_the_update(fraction):
  updates = _updates(1)
  msg = _messages(updates, fraction, True)
  plain = _messages(updates, fraction, False)
  for i in range(K):
    masked_vals = np.asarray(jax.lax.bitcast_convert_type(msg["values"][i], jnp.int32),
                             np.float64).ravel()
    true_vals = np.asarray(jax.lax.bitcast_convert_type(plain["values"][i], jnp.int32),
                           np.float64).ravel()
    n = masked_vals.size
    assert abs(np.corrcoef(masked_vals, true_vals)[0, 1]) < 4 / np.sqrt(n)
    # the masked values are spread over the whole ring, the plain ones are not
    assert np.std(masked_vals) > 1e8 > np.std(true_vals)


def test_pairs_share_positions_and_masks():
  msg = _messages(_updates(), 0.3, True)
  m = ssa.block_size(0.3, DIM, K)
  assert msg["indices"].shape == (K, K - 1, m)
  # client 0's block for partner 1 (r = 0) and client 1's block for partner 0 (r = K-2)
  np.testing.assert_array_equal(np.asarray(msg["indices"][0, 0]),
                                np.asarray(msg["indices"][1, K - 2]))


def _sim(rounds=2, **options):
  return helpers.simulation(_fed(), lambda ctx: algorithms.make("sparse_secagg", ctx,
                                                                **options),
                            CLIENT, rounds=rounds)


def test_bytes_up_come_from_the_sparse_message():
  sim = _sim(fraction=0.2)
  state = sim.init(0)
  payload_bytes, message_bytes = sim.communication_bytes(state)
  dim = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(state.server["params"]))
  k = sim.num_clients
  m = ssa.block_size(0.2, dim, k)
  assert message_bytes == (k - 1) * m * (4 + 4)   # uint32 values + int32 indices
  assert message_bytes < 4 * dim * (0.2 * 1.2) * 2
  assert payload_bytes == 4 * dim + 8             # the model and the pair seed
  dense = _sim(fraction=1.0)
  assert dense.communication_bytes(dense.init(0))[1] == 4 * dim


def test_k1_without_masks_equals_fedavg():
  sim = _sim(fraction=1.0, masking=False)
  state = sim.init(3)
  got, _ = sim.run_chunk(state, 2)
  fedavg = helpers.simulation(_fed(), lambda ctx: algorithms.make("fedavg", ctx), CLIENT,
                              rounds=2)
  want, _ = fedavg.run_chunk(fedavg.init(3), 2)
  ref.assert_trees_close(got.server["params"], want.server["params"], atol=1e-5, rtol=1e-4)


def test_masked_training_equals_unmasked_training():
  sims = [_sim(fraction=0.5, masking=m) for m in (True, False)]
  finals = [s.run_chunk(s.init(1), 2)[0] for s in sims]
  for a, b in zip(jax.tree.leaves(finals[0].server["params"]),
                  jax.tree.leaves(finals[1].server["params"])):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_partial_participation_is_refused():
  with pytest.raises(ValueError, match=r"participation=0.5: sparse_secagg"):
    helpers.simulation(_fed(), lambda ctx: algorithms.make(
        "sparse_secagg", ctx.__class__(**{**ctx.__dict__, "participation": 0.5})),
        CLIENT, rounds=1)
  with pytest.raises(ValueError, match=r"fraction=0: sparsification fraction"):
    algorithms.hparams("sparse_secagg", {"fraction": 0})


def test_config_with_partial_participation_or_churn_is_refused():
  from fedfrac.runner import validate
  c = helpers.tiny_config(participation=0.5)
  c.methods = {"s": {"name": "sparse_secagg"}}
  with pytest.raises(ValueError, match=r"participation.*must be 1 for method 's'"):
    validate.validate_methods(c)
  c = helpers.tiny_config()
  c.churn.p_leave = 0.2
  c.methods = {"s": {"name": "sparse_secagg"}}
  with pytest.raises(ValueError, match=r"churn.p_leave.*must be 0"):
    validate.validate_methods(c)
