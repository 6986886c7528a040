"""FedOpt: the server optimizers against a NumPy transcription of Reddi et al.
2021, Alg. 2, and the full server step on hand-made messages."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac import algorithms
from fedfrac.algorithms import fedopt
from tests import helpers


def numpy_alg2(kind, grads, b1, b2, tau, bias_correction=False):
  """Outputs m_t/(√v_t + τ) for pseudo-gradients g_t (Alg. 2, v_{−1} = τ²; with
  ``bias_correction`` Adam's v_{−1} = 0 and corrected moments)."""
  m = np.zeros_like(grads[0])
  v = np.full_like(grads[0], 0.0 if bias_correction else tau ** 2)
  outs = []
  for t, g in enumerate(grads, start=1):
    m = b1 * m + (1 - b1) * g
    if kind == "adagrad":
      v = v + g ** 2
    elif kind == "yogi":
      v = v - (1 - b2) * g ** 2 * np.sign(v - g ** 2)
    else:
      v = b2 * v + (1 - b2) * g ** 2
    if bias_correction:
      c2 = 1 - b2 ** t if kind != "adagrad" else 1.0
      outs.append((m / (1 - b1 ** t)) / (np.sqrt(v / c2) + tau))
    else:
      outs.append(m / (np.sqrt(v) + tau))
  return outs


@pytest.mark.parametrize("kind", ["adam", "yogi", "adagrad"])
@pytest.mark.parametrize("bias_correction", [False, True])
def test_scale_by_reddi_matches_alg2(kind, bias_correction):
  rng = np.random.default_rng(0)
  grads = [rng.normal(scale=0.1, size=(5,)) for _ in range(4)]
  tx = fedopt.scale_by_reddi(kind, 0.9, 0.99, 1e-3, bias_correction)
  state = tx.init(jnp.zeros(5))
  want = numpy_alg2(kind, grads, 0.9, 0.99, 1e-3, bias_correction)
  for g, w in zip(grads, want):
    out, state = tx.update(jnp.asarray(g, jnp.float32), state)
    np.testing.assert_allclose(out, w, rtol=1e-4, atol=1e-6)


def test_bias_corrected_fedadam_is_optax_adam_on_the_same_gradients():
  """``bias_correction=True`` is documented as optax.adam's form. Its second
  moment used to start at τ², which made the first step 10× smaller than
  optax's at |g| = 1e-4 (a 15-round run: 0.877 against 0.909)."""
  import optax
  rng = np.random.default_rng(3)
  scales = [1e-4] * 3 + [1e-2] * 3 + [1.0] * 3 + [1e-4] * 3
  grads = [{"w": jnp.asarray(rng.normal(scale=s, size=(4, 3)), jnp.float32),
            "b": jnp.asarray(rng.normal(scale=s, size=(3,)), jnp.float32)} for s in scales]
  hp = algorithms.hparams("fedadam", {"bias_correction": True, "server_lr": 0.02,
                                      "beta1": 0.8, "beta2": 0.95, "tau": 1e-3})
  ours, ref = fedopt.server_optimizer(hp), optax.adam(0.02, b1=0.8, b2=0.95, eps=1e-3)
  params = jax.tree.map(jnp.zeros_like, grads[0])
  s_ours, s_ref = ours.init(params), ref.init(params)
  for g in grads:
    u_ours, s_ours = ours.update(g, s_ours, params)
    u_ref, s_ref = ref.update(g, s_ref, params)
    for a, b in zip(jax.tree.leaves(u_ours), jax.tree.leaves(u_ref)):
      np.testing.assert_allclose(a, b, rtol=1e-6, atol=0)
  g = grads[0]["b"]   # Adam's first step: −η g / (|g| + τ), about 10 % of η here
  first = ours.update(grads[0], ours.init(params), params)[0]["b"]
  np.testing.assert_allclose(first, -0.02 * g / (jnp.abs(g) + 1e-3), rtol=1e-5)


@pytest.mark.parametrize("name", ["fedadam", "fedyogi", "fedadagrad", "sgd"])
def test_server_step_on_hand_made_messages(name):
  options = {"server_opt": "sgd", "server_lr": 0.7} if name == "sgd" else {}
  registered = "fedadam" if name == "sgd" else name
  sim = helpers.simulation(helpers.unequal_digits(),
                           lambda ctx: algorithms.make(registered, ctx, **options))
  hp = algorithms.hparams(registered, options)
  alg = sim.algorithm
  aggregate = jax.jit(alg.aggregate)
  w0 = sim.model.init(jax.random.PRNGKey(0))
  server, clients = alg.init(None, w0, 4, sim.data.info())
  rng = np.random.default_rng(2)
  weights = jnp.asarray([10.0, 30.0, 0.0, 20.0])
  mask = weights > 0
  p = np.asarray(weights) / 60.0
  history, params = [], jax.tree.map(np.asarray, w0)
  for _ in range(3):
    msgs = jax.tree.map(lambda x: jnp.asarray(rng.normal(scale=0.01, size=(4,) + x.shape),
                                              jnp.float32), w0)
    server, clients, _ = aggregate(server, clients, msgs, weights, mask, None)
    mean = jax.tree.map(lambda m: np.tensordot(p, np.asarray(m, np.float64), 1), msgs)
    history.append(mean)
    if name == "sgd":
      params = jax.tree.map(lambda w, d: w + 0.7 * d, params, mean)
    else:
      kind = hp["server_opt"]
      # x_{t+1} = x_t + η m_t/(√v_t + τ) with m, v built from Δ̄ (Alg. 2)
      step = jax.tree.map(
          lambda *ds: numpy_alg2(kind, [-d for d in ds], hp["beta1"], hp["beta2"],
                                 hp["tau"])[-1], *history)
      prev = params
      params = jax.tree.map(lambda w, s: w - hp["server_lr"] * s, prev, step)
    for got, want in zip(jax.tree.leaves(server["params"]), jax.tree.leaves(params)):
      np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_presets_and_validation():
  assert algorithms.hparams("fedyogi")["server_opt"] == "yogi"
  assert algorithms.hparams("fedadagrad")["server_opt"] == "adagrad"
  with pytest.raises(ValueError, match="server_opt='rmsprop'"):
    algorithms.hparams("fedadam", {"server_opt": "rmsprop"})
  with pytest.raises(ValueError, match="beta2=1.0: second-moment decay"):
    algorithms.hparams("fedadam", {"beta2": 1.0})
  with pytest.raises(ValueError, match="tau=0: adaptivity"):
    algorithms.hparams("fedyogi", {"tau": 0})
