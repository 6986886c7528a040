"""FO-RI-FedAvg family: reductions, probe schedule and reuse, spectral gate, diagnostics."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy import stats

from fedfrac import algorithms
from fedfrac import config as config_lib
from fedfrac import sim as sim_lib
from fedfrac import metrics
from fedfrac.algorithms import fo_ri_fedavg
from fedfrac.ops import roughness_index
from fedfrac.optim import fractional
from tests import helpers

CLIENT = {"schedule": "inv_sqrt", "batch_size": 16, "lr": 0.1}
PROBE = dict(num_directions=3, grid=6, probe_batch=8, radius=0.05)


@pytest.fixture(scope="module")
def fed():
  return helpers.unequal_digits(sizes=(13, 40, 75, 22))


def _params_equal(a, b):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_array_equal(x, y)


def _fedavg_with(optimizer):
  def builder(ctx):
    training = dataclasses.replace(ctx.training, optimizer=optimizer(ctx.training))
    return algorithms.make("fedavg", dataclasses.replace(ctx, training=training))
  return builder


def test_lambda_zero_is_fo_fedavg_and_alpha_one_is_fedavg(fed):
  # FO-FedAvg written independently: FedAvg whose client optimizer is the
  # element-wise fractional preconditioner followed by SGD.
  fo = helpers.simulation(fed, _fedavg_with(lambda tr: optax.chain(
      fractional(0.8, 1e-6, "elementwise", p_min=0.2, p_max=5.0), tr.optimizer)), CLIENT)
  want, _ = fo.run_chunk(fo.init(0), 2)
  # λ = 0 with probing switched on: probes run, the pull stays off.
  ri = helpers.simulation(fed, lambda ctx: algorithms.make(
      "fo_ri_fedavg", ctx, lam=0.0, probe="on", probe_every=1, **PROBE), CLIENT)
  got, m = ri.run_chunk(ri.init(0), 2)
  _params_equal(got.server["params"], want.server["params"])
  assert np.all(np.asarray(m["clients/probed"]) == 1)
  assert np.all(np.asarray(got.clients["probes"]) == 2)
  fedavg = helpers.simulation(fed, lambda ctx: algorithms.make("fedavg", ctx), CLIENT)
  plain, _ = fedavg.run_chunk(fedavg.init(0), 2)
  both = helpers.simulation(fed, lambda ctx: algorithms.make("fo_fedavg", ctx, alpha=1.0),
                            CLIENT)
  got, _ = both.run_chunk(both.init(0), 2)
  _params_equal(got.server["params"], plain.server["params"])


def _reference_probe_rows(key, index, size, b):
  """b_probe^k written out: the client's valid rows ranked by a uniform score drawn
  with the client's key (folded with PROBE_BATCH_TAG), the first B of them."""
  u = np.asarray(jax.random.uniform(
      jax.random.fold_in(key, fo_ri_fedavg.PROBE_BATCH_TAG), (len(index),)))
  valid = np.arange(len(index)) < size
  order = np.argsort(np.where(valid, u, 2.0 + u), kind="stable")[:b]
  return index[order], np.arange(b) < size


def _probe_reference_fn(sim, hp):
  """I_k written directly with ff.ops.roughness_index on a random probe batch."""
  b = hp["probe_batch"]

  def loss(p, batch):
    x, y, v = batch
    per = optax.softmax_cross_entropy_with_integer_labels(sim.model.apply(p, x), y)
    return jnp.sum(per * v) / jnp.sum(v)

  index_fn = jax.jit(lambda p, batch, key: roughness_index(
      loss, p, batch, key, hp["num_directions"], hp["radius"], hp["grid"]))

  def probe_reference(params, k, t, root_key):
    key = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(root_key, t),
                                                sim_lib.CLIENT), k)
    rows, valid = _reference_probe_rows(key, sim.data.client_index[k],
                                        sim.data.client_size[k], b)
    batch = (jnp.asarray(sim.data.x_train[rows]), jnp.asarray(sim.data.y_train[rows]),
             jnp.asarray(valid))
    return float(index_fn(params, batch,
                          jax.random.fold_in(key, fo_ri_fedavg.PROBE_KEY_TAG)))
  return probe_reference


@pytest.fixture(scope="module")
def probed_run(fed):
  """FO-RI with R_probe = 2 under partial participation, one round at a time."""
  hp = dict(PROBE, lam=0.5, probe_every=2)
  sim = helpers.simulation(fed, lambda ctx: algorithms.make("fo_ri_fedavg", ctx, **hp),
                           CLIENT, rounds=5, participation=0.5)
  state = sim.init(1)
  history = []
  for _ in range(5):
    before = state
    state, m = sim.run_chunk(state, 1)
    history.append((before, jax.tree.map(lambda x: np.asarray(x[0]), m)))
  return sim, hp, state, history


def test_probe_every_r_participations_with_reuse(probed_run):
  sim, hp, final, history = probed_run
  probe_reference = _probe_reference_fn(sim, hp)
  reused = fresh_after_first = 0
  for t, (before, m) in enumerate(history):
    for slot, k in enumerate(m["clients/ids"].tolist()):
      count = int(before.clients["participations"][k])
      due = count % hp["probe_every"] == 0
      assert m["clients/probed"][slot] == float(due)
      if due:
        want = probe_reference(before.server["params"], k, t, before.key)
        assert m["clients/roughness"][slot] == pytest.approx(want, rel=1e-4, abs=1e-6)
        fresh_after_first += count > 0
      else:
        assert m["clients/roughness"][slot] == before.clients["roughness"][k]
        reused += 1
      r = m["clients/roughness"][slot]
      assert m["clients/prox_coef"][slot] == pytest.approx(hp["lam"] * r / (r + 1.0),
                                                           rel=1e-5)
  assert reused > 0 and fresh_after_first > 0
  parts = np.asarray(final.clients["participations"])
  np.testing.assert_array_equal(np.asarray(final.clients["probes"]),
                                -(-parts // hp["probe_every"]))


def test_diagnostics_match_numpy(probed_run):
  _, _, _, history = probed_run
  checked = 0
  for _, m in history:
    valid = np.asarray(m["clients/mask"], bool)
    drift, rough = m["clients/drift"][valid], m["clients/roughness"][valid]
    want = metrics.drift_stats(drift)
    assert m["server/drift_mean"] == pytest.approx(want["drift_mean"], rel=1e-5)
    assert m["server/drift_cv"] == pytest.approx(want["drift_cv"], rel=1e-4, abs=1e-7)
    tert = metrics.tertile_means(rough, drift)
    got = [m[f"server/drift_tertile_{n}"] for n in ("low", "mid", "high")]
    np.testing.assert_allclose(got, tert, rtol=1e-5)
    assert m["server/roughness_mean"] == pytest.approx(rough.mean(), rel=1e-5)
    if np.ptp(rough) > 0:
      assert m["server/pearson_roughness_drift"] == pytest.approx(
          stats.pearsonr(rough, drift)[0], abs=1e-4)
      assert m["server/spearman_roughness_drift"] == pytest.approx(
          stats.spearmanr(rough, drift)[0], abs=1e-4)
      checked += 1
  assert checked > 0


def _kappa(params):
  """κ = σ_max / ‖W‖_F of the head's kernel (BEV Eq. 19), by SVD in float64."""
  w = np.asarray(params["head"]["Dense_0"]["kernel"], np.float64)
  sv = np.linalg.svd(w, compute_uv=False)
  return sv[0] / np.sqrt(np.sum(sv ** 2))


def _steps_scaled_after_first(factor):
  """Client optimizer: unit scale on local step 0, ``factor`` on steps h >= 1."""
  return lambda tr: optax.chain(
      optax.scale_by_schedule(lambda count: jnp.where(count == 0, 1.0, factor)),
      tr.optimizer)


def test_spectral_gate_leaves_step_zero_unscaled(fed):
  # Alg. 1 l.15-18: the first local step is plain (proximal) SGD, not gated.
  client = dict(CLIENT, local_steps=1)
  plain = helpers.simulation(fed, lambda ctx: algorithms.make("fedavg", ctx), client)
  want, _ = plain.run_chunk(plain.init(0), 2)
  gated = helpers.simulation(fed, lambda ctx: algorithms.make(
      "fo_fedavg", ctx, alpha=1.0, beta_kappa=2.0), client)
  got, _ = gated.run_chunk(gated.init(0), 2)
  _params_equal(got.server["params"], want.server["params"])


def test_spectral_gate_is_computed_once_per_round_on_the_global_model(fed):
  # κ_k on W(w_t) (Alg. 1 l.11), constant over the round's local steps: FO-FedAvg
  # at α = 1 without clip equals SGD whose steps h >= 1 are scaled by the fixed
  # 1/(1 + β κ(w_t)).
  client = dict(CLIENT, local_steps=6, lr=1.0, schedule="constant")
  beta = 2.0
  gated = helpers.simulation(fed, lambda ctx: algorithms.make(
      "fo_fedavg", ctx, alpha=1.0, beta_kappa=beta, p_min=0.0, p_max=0.0), client)
  s0 = gated.init(0)
  got, _ = gated.run_chunk(s0, 1)
  gate = 1.0 / (1.0 + beta * _kappa(s0.server["params"]))
  ref = helpers.simulation(fed, _fedavg_with(_steps_scaled_after_first(gate)), client)
  want, _ = ref.run_chunk(ref.init(0), 1)
  for a, b in zip(jax.tree.leaves(got.server["params"]),
                  jax.tree.leaves(want.server["params"])):
    np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)
  # The head moves within the round: a κ taken from the current iterate would
  # give a different gate.
  assert abs(_kappa(got.server["params"]) - _kappa(s0.server["params"])) > 1e-3


def test_spectral_gate_comes_before_the_clip(fed):
  # Alg. 1 l.22-26: p ← clip(p / (1 + β κ)). With α = 1 (p = 1) and a gate
  # below p_min, every step h >= 1 uses exactly p_min; clipping first would
  # leave the gate's 1/(1 + β κ) < p_min.
  client = dict(CLIENT, local_steps=4)
  beta, p_min = 10.0, 0.5
  gated = helpers.simulation(fed, lambda ctx: algorithms.make(
      "fo_fedavg", ctx, alpha=1.0, beta_kappa=beta, p_min=p_min, p_max=5.0), client)
  s0 = gated.init(0)
  assert 1.0 / (1.0 + beta * _kappa(s0.server["params"])) < p_min - 0.1
  got, _ = gated.run_chunk(s0, 1)
  ref = helpers.simulation(fed, _fedavg_with(_steps_scaled_after_first(p_min)), client)
  want, _ = ref.run_chunk(ref.init(0), 1)
  for a, b in zip(jax.tree.leaves(got.server["params"]),
                  jax.tree.leaves(want.server["params"])):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_probe_rows_are_a_random_sample_of_the_client():
  index = np.arange(100, 400, dtype=np.int32)
  index[250:] = 0                          # padding past the client's 250 rows
  size, b = 250, 128
  rows_fn = jax.jit(fo_ri_fedavg.probe_rows, static_argnums=(3,))
  draws = [np.asarray(rows_fn(jax.random.PRNGKey(i), index, size, b)[0])
           for i in range(40)]
  first = index[:b]
  for rows in draws:
    assert len(set(rows.tolist())) == b                  # without replacement
    assert set(rows.tolist()) <= set(index[:size].tolist())
    assert not np.array_equal(np.sort(rows), np.sort(first))
  assert not np.array_equal(draws[0], draws[1])          # the key decides the batch
  # Every row is drawn with probability b / size: the last rows (never in the
  # first-rows batch) appear about as often as the first ones.
  counts = np.bincount(np.concatenate(draws) - 100, minlength=size)
  assert counts[:size // 2].sum() == pytest.approx(counts[size // 2:].sum(), rel=0.15)
  # A client smaller than B_probe: all its rows, the rest masked.
  rows, valid = rows_fn(jax.random.PRNGKey(0), index, 5, 8)
  np.testing.assert_array_equal(np.asarray(valid), np.arange(8) < 5)
  assert sorted(np.asarray(rows)[:5].tolist()) == index[:5].tolist()


def test_response_functions():
  index = jnp.asarray([0.0, 0.5, 2.0])
  np.testing.assert_allclose(fo_ri_fedavg.response(index, "saturating", tau=0.5),
                             [0.0, 0.5, 0.8], rtol=1e-6)
  np.testing.assert_allclose(fo_ri_fedavg.response(index, "clip", i_min=0.1, i_max=1.0),
                             [0.1, 0.5, 1.0])
  with pytest.raises(ValueError, match="response='tanh'"):
    fo_ri_fedavg.response(index, "tanh")


def test_presets_and_validation():
  assert algorithms.hparams("ri_fedavg")["alpha"] == 1.0
  assert algorithms.hparams("fo_fedavg")["lam"] == 0.0
  defaults = algorithms.hparams("fo_ri_fedavg")
  assert (defaults["alpha"], defaults["delta"], defaults["p_min"], defaults["p_max"],
          defaults["lam"], defaults["num_directions"], defaults["radius"], defaults["grid"],
          defaults["probe_batch"], defaults["probe_every"], defaults["beta_kappa"]) == (
              0.8, 1e-6, 0.2, 5.0, 0.1, 10, 0.01, 100, 128, 5, 0.0)
  cases = [
      ({"probe": "off"}, "probe='off'"),
      ({"p_min": 3.0, "p_max": 2.0}, "p_min=3.0"),
      ({"alpha": 1.2}, "alpha=1.2"),
      ({"probe_every": 0}, "probe_every=0"),
      ({"response": "tanh"}, "response='tanh'"),
  ]
  for options, match in cases:
    c = helpers.tiny_config()
    c.methods = type(c.methods)({"ri": type(c.methods)(dict(name="fo_ri_fedavg", **options))})
    with pytest.raises(config_lib.ConfigError, match=f"methods.ri.{match}".replace("(", r"\(")):
      config_lib.validate(c)
  algorithms.hparams("fo_fedavg", {"probe": "off"})   # λ = 0: no probe needed


# ------------------------------------------------- probes that measure rounding

# The paper's radius and grid on a digits MLP: every slice changes the loss by
# about one float32 spacing per grid step (M and B_probe kept small).
ROUNDING_PROBE = dict(num_directions=3, grid=100, radius=0.01, probe_batch=8,
                      probe_every=1, lam=0.5)


def _rounding_run(fed, **options):
  sim = helpers.simulation(fed, lambda ctx: algorithms.make(
      "fo_ri_fedavg", ctx, **ROUNDING_PROBE, **options), CLIENT, rounds=2,
      participation=0.5, hidden=(64,))
  _, m = sim.run_chunk(sim.init(0), 2)
  return jax.tree.map(np.asarray, m)


def test_paper_increments_report_rounding_once_per_run(fed):
  with pytest.warns(RuntimeWarning, match="I_k measures float rounding") as caught:
    m = _rounding_run(fed, probe_increments="paper")
  assert sum("float rounding" in str(w.message) for w in caught) == 1
  assert np.all(m["server/roughness_rounding"] >= 0.5)
  valid = m["clients/mask"].astype(bool)
  np.testing.assert_allclose(m["server/roughness_rounding"],
                             [m["clients/roughness_rounding"][t][valid[t]].mean()
                              for t in range(2)], rtol=1e-6)


def test_derivative_increments_are_the_default_and_do_not_warn(fed):
  import warnings
  assert algorithms.hparams("fo_ri_fedavg")["probe_increments"] == "derivative"
  with warnings.catch_warnings():
    warnings.simplefilter("error", RuntimeWarning)
    m = _rounding_run(fed)
  # The same slices are flagged (their amplitude is at rounding level) ...
  assert np.all(m["server/roughness_rounding"] >= 0.5)
  # ... but resolved: nearly linear over [−ℓ, ℓ], so I_k and the pull are ~0.
  assert np.all(m["clients/roughness"] < 0.05)


def test_rounding_warning_is_shown_for_every_run_in_one_process():
  import warnings
  reports = [fo_ri_fedavg.rounding_reporter() for _ in range(2)]   # two runs
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("default")
    for report in reports:
      report(0.0, 0)          # nothing flagged yet: no warning
      report(0.5, 3)
      report(1.0, 4)          # already warned in this run
  messages = [str(w.message) for w in caught]
  assert len(messages) == 2 and all("at round 4, 50%" in m for m in messages)
