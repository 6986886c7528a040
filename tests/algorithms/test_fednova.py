"""FedNova: ‖a‖₁ against the optimizers' own step coefficients, and the
normalised aggregation on hand-made messages."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from fedfrac import algorithms
from fedfrac.algorithms import fednova
from tests import helpers
from tests import reference_loops as ref


@pytest.mark.parametrize("optimizer,rho", [("sgd", 0.0), ("momentum", 0.5),
                                           ("momentum", 0.9), ("nesterov", 0.9)])
@pytest.mark.parametrize("tau", [1, 3, 8])
def test_a_norm_matches_the_optimizers_coefficients(optimizer, rho, tau):
  """Feed the optimizer one-hot gradients e_0..e_{τ−1}: the total displacement is
  −a (unit learning rate), so Σ a_j is ‖a‖₁."""
  if optimizer == "sgd":
    tx = optax.sgd(1.0)
  else:
    tx = optax.sgd(1.0, momentum=rho, nesterov=optimizer == "nesterov")
  w = jnp.zeros(tau)
  state = tx.init(w)
  for j in range(tau):
    updates, state = tx.update(jax.nn.one_hot(j, tau), state, w)
    w = w + updates
  a = -np.asarray(w)
  assert np.all(a > 0)
  got = fednova.a_norm(tau, rho, nesterov=optimizer == "nesterov")
  np.testing.assert_allclose(float(got), a.sum(), rtol=1e-5)


def test_normalised_aggregation_on_hand_made_messages():
  sim = helpers.simulation(helpers.unequal_digits(),
                           lambda ctx: algorithms.make("fednova", ctx))
  alg = sim.algorithm
  w0 = sim.model.init(jax.random.PRNGKey(0))
  server, clients = alg.init(None, w0, 4, sim.data.info())
  rng = np.random.default_rng(1)
  deltas = jax.tree.map(lambda x: jnp.asarray(rng.normal(size=(4,) + x.shape),
                                              jnp.float32), w0)
  norms = jnp.asarray([2.0, 6.0, 3.0, 10.0])
  weights = jnp.asarray([10.0, 30.0, 25.0, 20.0])
  mask = jnp.asarray([True, True, False, True])
  server, _, metrics = alg.aggregate(server, clients, {"delta": deltas, "a_norm": norms},
                                     weights * mask, mask, None)
  p = np.asarray([10.0, 30.0, 0.0, 20.0]) / 60.0
  tau_eff = float(np.sum(p * np.asarray(norms)))
  coef = tau_eff * p / np.asarray(norms)
  want = ref.tree_map(lambda w, d: w + jnp.tensordot(jnp.asarray(coef, jnp.float32), d, 1),
                      w0, deltas)
  ref.assert_trees_close(server["params"], want, atol=1e-6)
  np.testing.assert_allclose(float(metrics["tau_eff"]), tau_eff, rtol=1e-6)


def test_client_reports_a_norm_of_its_own_steps():
  sim = helpers.simulation(helpers.unequal_digits(),
                           lambda ctx: algorithms.make("fednova", ctx),
                           {"optimizer": "momentum", "momentum": 0.9, "batch_size": 16,
                            "lr": 0.02}, rounds=1)
  _, m = sim.run_chunk(sim.init(0), 1)
  steps = np.asarray(m["clients/steps"][0])
  assert len(set(steps.tolist())) > 1
  np.testing.assert_allclose(m["clients/a_norm"][0], fednova.a_norm(steps, 0.9), rtol=1e-6)


def test_adaptive_client_optimizer_is_rejected():
  with pytest.raises(ValueError, match="client.optimizer='adam'"):
    helpers.simulation(helpers.unequal_digits(),
                       lambda ctx: algorithms.make("fednova", ctx), {"optimizer": "adam"})
