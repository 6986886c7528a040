"""FedAvgM: the server momentum recursion, checked on hand-made messages."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac import algorithms
from tests import helpers
from tests import reference_loops as ref


def test_server_momentum_recursion():
  beta, lr = 0.7, 0.5
  sim = helpers.simulation(helpers.unequal_digits(),
                           lambda ctx: algorithms.make("fedavgm", ctx, momentum=beta,
                                                       server_lr=lr))
  alg = sim.algorithm
  aggregate = jax.jit(alg.aggregate)
  w0 = sim.model.init(jax.random.PRNGKey(0))
  server, clients = alg.init(jax.random.PRNGKey(1), w0, 4, sim.data.info())
  rng = np.random.default_rng(0)
  weights = jnp.asarray([10.0, 30.0, 0.0, 20.0])
  mask = jnp.asarray([True, True, False, True])
  p = np.asarray([10.0, 30.0, 0.0, 20.0]) / 60.0
  w, v = w0, jax.tree.map(jnp.zeros_like, w0)
  for _ in range(3):
    msgs = jax.tree.map(lambda x: jnp.asarray(rng.normal(size=(4,) + x.shape),
                                              jnp.float32), w0)
    server, clients, metrics = aggregate(server, clients, msgs, weights, mask, None)
    mean = jax.tree.map(lambda m: jnp.tensordot(jnp.asarray(p, jnp.float32), m, 1), msgs)
    v = ref.tree_map(lambda a, b: beta * a + b, v, mean)   # v ← βv + Δ̄
    w = ref.tree_map(lambda a, b: a + lr * b, w, v)       # w ← w + η_g v
    ref.assert_trees_close(server["params"], w, atol=1e-6)
    ref.assert_trees_close(server["momentum"], v, atol=1e-6)
  assert float(metrics["momentum_norm"]) > 0


@pytest.mark.parametrize("value", [1.0, -0.1, "0.9"])
def test_momentum_out_of_range_is_rejected(value):
  with pytest.raises(ValueError, match="momentum=.*must be in \\[0, 1\\)"):
    algorithms.hparams("fedavgm", {"momentum": value})


def test_nesterov_server_momentum_equals_per_client_loop():
  # Clients: FedAvg's local SGD; server: v ← βv + Δ̄, w ← w + η_g (Δ̄ + βv).
  beta, server_lr = 0.8, 0.7
  sim = helpers.simulation(
      helpers.unequal_digits(),
      lambda ctx: algorithms.make("fedavgm", ctx, momentum=beta, server_lr=server_lr,
                                  nesterov=True),
      {"batch_size": 16, "lr": 0.1}, rounds=3, participation=0.75)
  state = sim.init(1)
  final, metrics = sim.run_chunk(state, 3)
  ids = np.asarray(metrics["clients/ids"]).tolist()
  grad = ref.supervised_grad(sim)
  w = state.server["params"]
  v = jax.tree.map(jnp.zeros_like, w)
  for t, cohort in enumerate(ids):
    deltas = [ref.tree_map(jnp.subtract, ref.local_sgd(sim, w, k, t, state.key, grad)[0],
                           w) for k in cohort]
    p, _ = ref.cohort_weights(sim, cohort, "samples")
    mean = ref.tree_sum(p, deltas)
    v = ref.tree_map(lambda a, b: beta * a + b, v, mean)
    w = ref.tree_map(lambda a, d, b: a + server_lr * (d + beta * b), w, mean, v)
  ref.assert_trees_close(final.server["params"], w)
  ref.assert_trees_close(final.server["momentum"], v)


def test_nesterov_must_be_a_bool():
  with pytest.raises(ValueError, match="nesterov='yes': .*True or False"):
    algorithms.hparams("fedavgm", {"nesterov": "yes"})
