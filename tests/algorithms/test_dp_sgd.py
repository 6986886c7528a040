"""DPSGD (Abadi et al. 2016): per-example clipping bound, noise std, reduction to
FedAvg, vectorised = per-client loop, and the record-level accountant."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac import algorithms
from fedfrac.algorithms import dp_sgd
from fedfrac.ops import dp
from tests import helpers
from tests import reference_loops as ref

# Step mode, every client holds >= B samples: every batch is full, so dividing the
# clipped sum by B equals FedAvg's masked mean.
CLIENT = {"batch_size": 16, "local_steps": 3, "lr": 0.1, "optimizer": "sgd"}


@functools.lru_cache(maxsize=None)
def _fed():
  return helpers.unequal_digits(sizes=(20, 40, 75, 22))


def _run(name, rounds=2, **options):
  sim = helpers.simulation(_fed(), lambda ctx: algorithms.make(name, ctx, **options),
                           CLIENT, rounds=rounds)
  state = sim.init(5)
  final, metrics = sim.run_chunk(state, rounds)
  return sim, state, final, metrics


def test_huge_clip_and_no_noise_equals_fedavg():
  _, _, got, _ = _run("dp_sgd", clip_norm=1e9, noise_multiplier=0.0)
  _, _, want, _ = _run("fedavg")
  ref.assert_trees_close(got.server["params"], want.server["params"], atol=2e-6, rtol=1e-5)


def test_clipping_changes_the_model():
  _, _, got, _ = _run("dp_sgd", clip_norm=0.01, noise_multiplier=0.0)
  _, _, want, _ = _run("fedavg")
  diff = max(float(jnp.max(jnp.abs(a - b))) for a, b in
             zip(jax.tree.leaves(got.server["params"]), jax.tree.leaves(want.server["params"])))
  assert diff > 1e-3


def test_each_clipped_per_example_gradient_is_within_the_clip_norm():
  rng = np.random.default_rng(0)
  grads = {"w": jnp.asarray(rng.normal(size=(32, 5, 3)) * rng.uniform(0, 4, (32, 1, 1)),
                            jnp.float32),
           "b": jnp.asarray(rng.normal(size=(32, 3)), jnp.float32)}
  clip = 1.5
  clipped, norms = dp_sgd.clip_per_example(grads, clip)
  after = np.sqrt(np.sum(np.asarray(clipped["w"]) ** 2, axis=(1, 2)) +
                  np.sum(np.asarray(clipped["b"]) ** 2, axis=1))
  assert np.all(after <= clip * (1 + 1e-6))
  small = np.asarray(norms) <= clip
  assert 0 < small.sum() < 32   # both branches are exercised
  np.testing.assert_allclose(after[small], np.asarray(norms)[small], rtol=1e-6)
  np.testing.assert_allclose(after[~small], clip, rtol=1e-5)


def test_noise_std_is_sigma_c_over_b():
  b, dim, sigma, clip = 8, 20000, 0.7, 2.0
  zeros = {"w": jnp.zeros((b, dim), jnp.float32)}
  mask = jnp.arange(b) < 6       # padded samples do not change the noise
  grad, info = dp_sgd.privatize_gradients(zeros, mask, clip, sigma, jax.random.PRNGKey(1))
  emp = float(np.std(np.asarray(grad["w"])))
  assert abs(emp - sigma * clip / b) < 0.02 * sigma * clip / b
  np.testing.assert_allclose(float(info["noise_std"]), sigma * clip / b, rtol=1e-6)


def test_privatized_gradient_is_clipped_sum_over_b():
  rng = np.random.default_rng(1)
  g = {"w": jnp.asarray(rng.normal(size=(4, 6)), jnp.float32)}
  mask = jnp.asarray([True, True, True, False])
  got, _ = dp_sgd.privatize_gradients(g, mask, 1.0, 0.0, jax.random.PRNGKey(0))
  x = np.asarray(g["w"])[:3]
  want = (x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1.0)).sum(0) / 4
  np.testing.assert_allclose(np.asarray(got["w"]), want, rtol=1e-5, atol=1e-7)


def test_dp_sgd_equals_per_client_loop():
  clip, sigma = 0.5, 0.3
  sim, state, final, _ = _run("dp_sgd", rounds=2, clip_norm=clip, noise_multiplier=sigma)
  loss_fn = dp_sgd.dp_loss(sim.model, sim.task, clip, sigma)
  grad = ref.batch_grad_fn(sim, jax.grad(lambda p, x, y, m, k, e: loss_fn(p, x, y, m, k)[0]))
  w = state.server["params"]
  for t in range(2):
    deltas = []
    for k in range(sim.num_clients):
      y, _ = ref.local_sgd(sim, w, k, t, state.key, grad)
      deltas.append(ref.tree_map(jnp.subtract, y, w))
    p, _ = ref.cohort_weights(sim, list(range(sim.num_clients)), "samples")
    w = ref.tree_map(jnp.add, w, ref.tree_sum(p, deltas))
  ref.assert_trees_close(final.server["params"], w, atol=2e-5, rtol=1e-4)


def test_per_example_gradients_match_single_example_grads():
  """The loss's gradient with σ = 0 is (1/B) Σ clip(∇ℓ_i), each ∇ℓ_i computed alone."""
  sim, state, _, _ = _run("dp_sgd", rounds=1, clip_norm=0.05, noise_multiplier=0.0)
  params = state.server["params"]
  fed = _fed()
  x = jnp.asarray(fed.x_train[fed.client_index[1][:16]])
  y = jnp.asarray(fed.y_train[fed.client_index[1][:16]])
  mask = jnp.ones((16,), bool)
  key = jax.random.PRNGKey(0)
  got = jax.grad(lambda p: dp_sgd.dp_loss(sim.model, sim.task, 0.05, 0.0)(
      p, x, y, mask, key)[0])(params)
  ones = []
  for i in range(16):
    gi = jax.grad(lambda p: sim.task.example_loss(
        sim.model.apply(p, x[i:i + 1], train=True, key=key), y[i:i + 1])[0])(params)
    ones.append(dp.clip_update(gi, 0.05)[0])
  want = ref.tree_map(lambda *g: sum(g) / 16, *ones)
  ref.assert_trees_close(got, want, atol=1e-7, rtol=1e-5)


def test_record_level_epsilon_grows_and_uses_the_smallest_client():
  sizes, steps = np.array([20, 200]), np.array([3, 3])
  curve = dp_sgd.record_epsilon_curve(1.0, sizes, steps, 16, 1e-5)
  eps = [curve(t) for t in range(4)]
  assert eps[0] == 0.0 and eps[1] < eps[2] < eps[3]
  want = dp.dp_epsilon(1.0, 16 / 20, 3 * 2, 1e-5)
  np.testing.assert_allclose(eps[2], want, rtol=1e-9)


def test_round_rows_report_epsilon():
  sim = helpers.simulation(_fed(), lambda ctx: algorithms.make("dp_sgd", ctx), CLIENT,
                           rounds=1)
  assert sim.algorithm.host_metrics(2)["dp_epsilon"] > sim.algorithm.host_metrics(1)[
      "dp_epsilon"] > 0
