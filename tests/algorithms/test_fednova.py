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


@pytest.mark.parametrize("shrink", [0.05, 0.3])
@pytest.mark.parametrize("tau", [1, 4, 9])
def test_proximal_a_norm_matches_the_step_coefficients(shrink, tau):
  """Proximal SGD w ← w − (g + μ(w − w_0)) at unit rate (ημ = ``shrink``) on
  one-hot gradients e_0..e_{τ−1}: the displacement is −a."""
  w = np.zeros(tau)
  for j in range(tau):
    w = w - (np.eye(tau)[j] + shrink * w)
  a = -w
  assert np.all(a > 0)
  np.testing.assert_allclose(float(fednova.a_norm_proximal(tau, shrink)), a.sum(),
                             rtol=1e-5)


def reference_fednova(sim, state, ids, mu, beta):
  """Wang et al. 2020 (FedNova on FedProx's local objective, server momentum as
  in the authors' gmf) as plain Python loops over clients and local steps."""
  grad = ref.supervised_grad(sim)
  x = state.server["params"]
  v = jax.tree.map(jnp.zeros_like, x)
  n = np.asarray(sim.data.client_size, np.float64)
  for t, cohort in enumerate(ids):
    lr = float(sim.training.lr_schedule(t))
    p = n[cohort] / n[cohort].sum()
    deltas, norms = [], []
    for k in cohort:
      hook = lambda g, w: ref.tree_map(lambda gi, wi, xi: gi + mu * (wi - xi), g, w, x)
      y, steps = ref.local_sgd(sim, x, k, t, state.key, grad, hook=hook)
      deltas.append(ref.tree_map(jnp.subtract, y, x))
      norms.append(sum((1.0 - lr * mu) ** j for j in range(steps)))   # ‖a_k‖₁
    tau_eff = float(np.sum(p * np.asarray(norms)))
    step = ref.tree_sum(tau_eff * p / np.asarray(norms), deltas)   # τ_eff Σ p_k d_k
    v = ref.tree_map(lambda m, s: beta * m + s / lr, v, step)       # v ← βv + step/η_t
    x = ref.tree_map(lambda w, m: w + lr * m, x, v)                  # w ← w + η_t v
  return x, v


def test_proximal_variant_with_server_momentum_equals_per_client_loop():
  mu, beta = 0.5, 0.6
  sim = helpers.simulation(
      helpers.unequal_digits(),
      lambda ctx: algorithms.make("fednova", ctx, mu=mu, server_momentum=beta),
      {"batch_size": 16, "lr": 0.1, "schedule": "inv_sqrt"}, rounds=3, participation=0.75)
  assert len(set(sim.num_steps.tolist())) > 1
  state = sim.init(2)
  final, metrics = sim.run_chunk(state, 3)
  ids = np.asarray(metrics["clients/ids"]).tolist()
  x, v = reference_fednova(sim, state, ids, mu, beta)
  ref.assert_trees_close(final.server["params"], x)
  ref.assert_trees_close(final.server["momentum"], v, atol=1e-4)
  assert int(final.server["round"]) == 3
  steps = np.asarray(metrics["clients/steps"][0])
  np.testing.assert_allclose(metrics["clients/a_norm"][0],
                             fednova.a_norm_proximal(steps, mu * 0.1), rtol=1e-6)


def test_defaults_keep_the_plain_fednova_state():
  sim = helpers.simulation(helpers.unequal_digits(),
                           lambda ctx: algorithms.make("fednova", ctx))
  assert set(sim.init(0).server) == {"params"}


@pytest.mark.parametrize("options,client,match", [
    ({"mu": 0.1}, {"optimizer": "momentum"}, "client.optimizer='momentum'.*mu=0.1"),
    ({"mu": 20.0}, {"lr": 0.1}, "mu=20.0: .*client.lr·mu < 1"),
    ({"server_momentum": 1.0}, {}, "server_momentum=1.0: .*\\[0, 1\\)"),
    ({"mu": -1.0}, {}, "mu=-1.0")])
def test_invalid_variant_options_are_rejected(options, client, match):
  with pytest.raises(ValueError, match=match):
    helpers.simulation(helpers.unequal_digits(),
                       lambda ctx: algorithms.make("fednova", ctx, **options), client)
