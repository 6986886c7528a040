"""FIRMA family (RDFL, FibFL, FibFL+, FibFL++, FedRep) through the FedAlgorithm
contract: private heads, persistent optimizer states, the accuracy gate inside
the algorithm, a per-client Python reference loop, Table 2 traffic and the
FedAvg warm-up."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac import algorithms, models, runner
from fedfrac import sim as sim_lib
from fedfrac.algorithms import contract, firma, local_training, tasks
from fedfrac.algorithms import fibfl_pp as fibfl_pp_lib
from fedfrac.config import base_config
from fedfrac.ops import ring
from tests import helpers

SIZES = (20, 35, 50)   # unequal: 2, 3, 4 batches of 16


def firma_sim(fed, name, rounds=2, dynamic=False, client=None, **options):
  """A Simulation of FIRMA-family algorithm ``name`` (tiny MLP, Adam, B=16)."""
  c = base_config()
  c.client.optimizer, c.client.lr, c.client.batch_size = "adam", 0.01, 16
  c.client.local_epochs = 1
  for k, v in (client or {}).items():
    c.client[k] = v
  c.model.hidden = (16,)
  task = tasks.classification_task()
  model = models.build(c.model, fed.input_shape, fed.num_classes, fed.input_scale)
  training = runner.make_training(c.client, fed.client_size, rounds, 1, dynamic)
  ctx = contract.BuildContext(model, task, training, fed.info(), rounds, c.client)
  algorithm = algorithms.make(name, ctx, **options)
  return sim_lib.Simulation(algorithm, fed, model, task, training,
                               sim_lib.EngineConfig(client_parallelism="vmap"))


def leaves_equal(a, b):
  return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def perturbed_states(sim, seed=0, acc=None):
  """Initial client states with distinct random extractors/heads per client."""
  state = sim.init(0)
  key = jax.random.PRNGKey(seed)
  params = jax.tree.map(
      lambda x: x + jax.random.normal(jax.random.fold_in(key, x.size), x.shape),
      state.clients["params"])
  clients = {**state.clients, "params": params}
  if acc is not None:
    clients["acc"] = jnp.asarray(acc, jnp.float32)
  return state.server, clients


# ----------------------------------------------------------------- private heads


@pytest.mark.parametrize("name,options", [
    ("fibfl", {}), ("fibfl_plus", {}),
    ("fibfl_pp", {"warmup_rounds": 0}),            # ring round
    ("fibfl_pp", {"warmup_rounds": 1, "warmup_heads": False}),  # extractor-only warm-up
])
def test_heads_bit_identical_across_mixing(name, options):
  fed = helpers.unequal_digits(sizes=(20, 35, 50, 30, 25))
  sim = firma_sim(fed, name, **options)
  server, clients = perturbed_states(sim, acc=[0.9, 0.6, 0.8, 0.7, 0.95])
  new_server, new_clients, metrics = jax.jit(sim.algorithm.aggregate)(
      server, clients, None, None, None, jax.random.PRNGKey(0))
  assert leaves_equal(new_clients["params"]["head"], clients["params"]["head"])
  assert not leaves_equal(new_clients["params"]["extractor"],
                          clients["params"]["extractor"])
  assert 0.0 <= float(metrics["spectral_gap"]) <= 1.0


def test_mixing_step_receives_extractor_leaves_only(monkeypatch):
  seen = []
  real = ring.apply_mixing

  def spy(matrix, tree):
    seen.append(jax.tree_util.tree_structure(tree))
    return real(matrix, tree)
  monkeypatch.setattr(ring, "apply_mixing", spy)
  fed = helpers.unequal_digits(sizes=(20, 35, 50))
  sim = firma_sim(fed, "fibfl_plus")
  server, clients = perturbed_states(sim, acc=[0.9, 0.8, 0.7])
  sim.algorithm.aggregate(server, clients, None, None, None, jax.random.PRNGKey(0))
  assert seen == [jax.tree_util.tree_structure(clients["params"]["extractor"])]


def test_reference_code_warmup_averages_heads_and_rdfl_gamma_one_never_mixes():
  fed = helpers.unequal_digits(sizes=(20, 35, 50))
  sim = firma_sim(fed, "fibfl_pp", compat="reference_code")
  server, clients = perturbed_states(sim, acc=[0.9, 0.8, 0.7])
  _, new, _ = sim.algorithm.aggregate(server, clients, None, None, None, None)
  w = np.asarray(fed.client_size, np.float64) / fed.client_size.sum()
  for got, old in zip(jax.tree.leaves(new["params"]), jax.tree.leaves(clients["params"])):
    avg = np.tensordot(w, np.asarray(old, np.float64), axes=(0, 0))
    for k in range(3):
      np.testing.assert_allclose(got[k], avg, rtol=1e-5, atol=1e-6)
  rdfl = firma_sim(fed, "rdfl", compat="reference_code")
  server, clients = perturbed_states(rdfl)
  _, new, metrics = rdfl.algorithm.aggregate(server, clients, None, None, None, None)
  assert leaves_equal(new["params"], clients["params"])
  assert float(metrics["spectral_gap"]) == 0.0


# ---------------------------------------------------------- gate inside the algorithm


@pytest.mark.parametrize("name", ["fibfl_plus", "fibfl_pp"])
def test_both_neighbours_below_tau_leave_extractor_unchanged(name):
  fed = helpers.unequal_digits(sizes=(20, 35, 50, 30, 25))
  options = {"warmup_rounds": 0, "sweep": "synchronous"} if name == "fibfl_pp" else {}
  sim = firma_sim(fed, name, **options)
  server, clients = perturbed_states(sim)
  server = {**server, "order": jnp.arange(5, dtype=jnp.int32)}
  # Client 2's neighbours (1 and 3) are below τ = 0.35; everyone else mixes.
  clients["acc"] = jnp.asarray([0.9, 0.1, 0.9, 0.2, 0.5], jnp.float32)
  _, new, metrics = sim.algorithm.aggregate(server, clients, None, None, None, None)
  old_e, new_e = clients["params"]["extractor"], new["params"]["extractor"]
  assert leaves_equal(jax.tree.map(lambda x: x[2], new_e), jax.tree.map(lambda x: x[2], old_e))
  for k in (0, 1, 3, 4):
    assert not leaves_equal(jax.tree.map(lambda x: x[k], new_e),
                            jax.tree.map(lambda x: x[k], old_e))
  assert float(metrics["gated_out"]) == 1.0


# ------------------------------------------------------- persistent optimizer states


def test_persistent_adam_state_changes_across_rounds_and_is_per_client():
  fed = helpers.unequal_digits(sizes=SIZES)
  sim = firma_sim(fed, "fibfl", head_epochs=1, extractor_epochs=2)
  state = sim.init(0)
  s1, _ = sim.run_chunk(state, 1)
  s2, _ = sim.run_chunk(s1, 1)
  spe = np.ceil(np.asarray(SIZES) / 16)
  for s, rounds in ((s1, 1), (s2, 2)):
    # Never reset: Adam's step count accumulates each client's own steps.
    np.testing.assert_array_equal(s.clients["opt_head"][0].count, rounds * 1 * spe)
    np.testing.assert_array_equal(s.clients["opt_ext"][0].count, rounds * 2 * spe)
  mu1 = jax.tree.leaves(s1.clients["opt_ext"][0].mu)[0]
  mu2 = jax.tree.leaves(s2.clients["opt_ext"][0].mu)[0]
  assert not np.array_equal(mu1, mu2)
  assert all(not np.array_equal(mu2[i], mu2[j]) for i in range(3) for j in range(i))
  # Optimizer states are never part of what a client sends.
  message = jax.eval_shape(lambda: sim.algorithm.client_update(
      {}, jax.tree.map(lambda x: x[0], state.clients),
      contract.ClientView(sim.arrays["x"], sim.arrays["y"], sim.arrays["client_index"][0],
                          sim.arrays["client_size"][0], sim.arrays["num_steps"][0],
                          jnp.asarray(0)), jax.random.PRNGKey(0), jnp.asarray(0))[0])
  assert jax.tree_util.tree_structure(message) == jax.tree_util.tree_structure(
      state.clients["params"]["extractor"])


def test_fedrep_keeps_private_heads_and_persistent_sgd_momentum():
  fed = helpers.unequal_digits(sizes=SIZES)
  sim = firma_sim(fed, "fedrep", client={"optimizer": "momentum", "lr": 0.05})
  s1, _ = sim.run_chunk(sim.init(0), 1)
  s2, _ = sim.run_chunk(s1, 1)
  trace1 = jax.tree.leaves(s1.clients["opt_ext"])
  trace2 = jax.tree.leaves(s2.clients["opt_ext"])
  assert any(np.abs(t).sum() > 0 for t in trace1)
  assert not leaves_equal(trace1, trace2)
  heads = jax.tree.leaves(s2.clients["head"])[0]
  assert not np.array_equal(heads[0], heads[1])
  ev = sim.evaluate(s2)
  assert 0.0 < float(ev["client_accuracy_mean"]) <= 1.0


# ------------------------------------------------ vectorised == per-client Python loop


def run_steps(params, opt_state, loss, view, key, training, epochs, lr):
  """Plain Python loop over one phase's steps (documented sampler, no scan/vmap)."""
  b = training.batch_size
  phase = firma.phase_training(training, epochs, view.index.shape[0])
  batch_key, step_key = jax.random.split(key)
  perms = local_training.epoch_permutations(batch_key, view.size, view.index.shape[0],
                                            epochs, b)
  grad = jax.jit(jax.grad(loss))
  for h in range(epochs * math.ceil(int(view.size) / b)):
    pos, mask = local_training.batch_positions(view, batch_key, h, phase, perms)
    rows = view.index[pos]
    g = grad(params, view.x[rows], view.y[rows], mask, jax.random.fold_in(step_key, h))
    updates, opt_state = training.optimizer.update(g, opt_state, params)
    params = jax.tree.map(lambda p, u: p + lr * u, params, updates)
  return params, opt_state


def reference_fibfl_pp(sim, state, rounds, e_h, e_e, warmup, tau=0.35,
                       gamma_start=0.4, gamma_end=0.05):
  """FibFL++ (paper mode: sequential in-place passes) as loops over clients,
  steps, passes and ring positions."""
  fed, training, model, task = sim.data, sim.training, sim.model, sim.task
  n = fed.num_clients
  full = tasks.supervised_loss(model, task)
  row = lambda tree, k: jax.tree.map(lambda x: x[k], tree)
  params = [row(state.clients["params"], k) for k in range(n)]
  opt_h = [row(state.clients["opt_head"], k) for k in range(n)]
  opt_e = [row(state.clients["opt_ext"], k) for k in range(n)]
  opt_w = [row(state.clients["opt_warm"], k) for k in range(n)]
  order = np.asarray(state.server["order"])
  w = fed.client_size / fed.client_size.sum()
  passes = math.ceil(n / 2)
  alpha, beta = 1 / ring.PHI, 1 / ring.PHI ** 2
  for t in range(rounds):
    client_root = jax.random.fold_in(jax.random.fold_in(state.key, t), sim_lib.CLIENT)
    lr = float(training.lr_schedule(t))
    acc = np.zeros(n)
    for k in range(n):
      key = jax.random.fold_in(client_root, k)
      view = contract.ClientView(jnp.asarray(fed.x_train), jnp.asarray(fed.y_train),
                                 jnp.asarray(fed.client_index[k]),
                                 jnp.asarray(fed.client_size[k]), jnp.asarray(0), jnp.asarray(k))
      if t < warmup:
        params[k], opt_w[k] = run_steps(params[k], opt_w[k], lambda p, *a: full(p, *a)[0],
                                        view, key, training, max(e_h, e_e), lr)
      else:
        k_head, k_ext = jax.random.split(key)
        ext = params[k]["extractor"]
        head, opt_h[k] = run_steps(
            params[k]["head"], opt_h[k],
            lambda hd, *a: full({"extractor": ext, "head": hd}, *a)[0],
            view, k_head, training, e_h, lr)
        ext, opt_e[k] = run_steps(
            ext, opt_e[k], lambda ex, *a: full({"extractor": ex, "head": head}, *a)[0],
            view, k_ext, training, e_e, lr)
        params[k] = {"extractor": ext, "head": head}
      x, y = fed.client_arrays(k)
      acc[k] = np.mean(np.argmax(np.asarray(model.apply(params[k], jnp.asarray(x))), -1) == y)
    exts = [jax.tree.map(lambda a: np.asarray(a, np.float64), p["extractor"]) for p in params]
    if t < warmup:   # Alg. 3 l.9: the full model is averaged, heads included
      avg = jax.tree.map(lambda *xs: sum(wk * xk for wk, xk in zip(w, xs)), *exts)
      exts = [avg] * n
      heads = [jax.tree.map(lambda a: np.asarray(a, np.float64), p["head"]) for p in params]
      avg_head = jax.tree.map(lambda *xs: sum(wk * xk for wk, xk in zip(w, xs)), *heads)
      params = [{**p, "head": avg_head} for p in params]
    else:
      span = max(rounds - warmup - 1, 1)
      g_r = gamma_end + 0.5 * (gamma_start - gamma_end) * (
          1 + math.cos(math.pi * min(max(t - warmup, 0), span) / span))
      g_in = g_r ** (1.0 / passes)
      gate = np.where(acc >= tau, acc, 0.0)
      for _ in range(passes):
        for p in range(n):            # in place along the ring (Alg. 3)
          i, left, right = order[p], order[(p - 1) % n], order[(p + 1) % n]
          total = gate[left] + gate[right]
          if total < 1e-12:
            continue
          a_l = alpha / 2 + gate[left] / total / 2
          a_r = beta / 2 + gate[right] / total / 2
          exts[i] = jax.tree.map(lambda s, l, r: g_in * s + (1 - g_in) * (a_l * l + a_r * r),
                                 exts[i], exts[left], exts[right])
    params = [{"extractor": e, "head": p["head"]} for e, p in zip(exts, params)]
  return params


@pytest.mark.parametrize("dynamic", [False, True])
def test_vectorised_fibfl_pp_equals_per_client_loop(dynamic):
  fed = helpers.unequal_digits(sizes=SIZES, test_size=30)
  rounds, e_h, e_e = 3, 1, 2
  sim = firma_sim(fed, "fibfl_pp", rounds=rounds, dynamic=dynamic, head_epochs=e_h,
                  extractor_epochs=e_e, warmup_rounds=1, tau=0.2)
  state = sim.init(0)
  want = reference_fibfl_pp(sim, state, rounds, e_h, e_e, warmup=1, tau=0.2)
  got, _ = sim.run_chunk(state, rounds)
  for k in range(fed.num_clients):
    for g, w in zip(jax.tree.leaves(jax.tree.map(lambda x: x[k], got.clients["params"])),
                    jax.tree.leaves(want[k])):
      np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5)


# ------------------------------------------------------------------ warm-up = FedAvg


def test_fibfl_pp_warmup_round_equals_fedavg():
  fed = helpers.unequal_digits(sizes=SIZES)
  e_w = 2
  pp = firma_sim(fed, "fibfl_pp", rounds=6, head_epochs=1, extractor_epochs=e_w,
                 compat="reference_code", init="shared")
  ref = firma_sim(fed, "fedavg", rounds=6, client={"local_epochs": e_w})
  s_pp, m_pp = pp.run_chunk(pp.init(0), 1)
  s_avg, _ = ref.run_chunk(ref.init(0), 1)
  assert float(m_pp["server/warmup"][0]) == 1.0
  for k in range(fed.num_clients):   # heads averaged too (authors' warm-up)
    for got, want in zip(jax.tree.leaves(jax.tree.map(lambda x: x[k], s_pp.clients["params"])),
                         jax.tree.leaves(s_avg.server["params"])):
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  ext_only = firma_sim(fed, "fibfl_pp", rounds=6, head_epochs=1, extractor_epochs=e_w,
                       compat="reference_code", init="shared", warmup_heads=False)
  s_ext, _ = ext_only.run_chunk(ext_only.init(0), 1)
  for k in range(fed.num_clients):   # warmup_heads=False: extractors averaged only
    assert leaves_equal(jax.tree.map(lambda x: x[k], s_ext.clients["params"]["extractor"]),
                        jax.tree.map(lambda x: x[k], s_pp.clients["params"]["extractor"]))
  heads = jax.tree.leaves(s_ext.clients["params"]["head"])[0]
  assert not np.allclose(heads[0], heads[1])


def warmup_optimizer_aggregate(option, round_index, warmup_rounds=1):
  """One FibFL++ aggregate with ``warmup_optimizer=option`` at server round
  ``round_index`` from client states whose warm-up Adam states are distinct
  random moments (and distinct step counts): ``(clients in, clients out, sim)``."""
  fed = helpers.unequal_digits(sizes=SIZES)
  sim = firma_sim(fed, "fibfl_pp", rounds=6, warmup_rounds=warmup_rounds,
                  compat="reference_code", warmup_optimizer=option)
  server, clients = perturbed_states(sim, acc=[0.9, 0.6, 0.8])
  key = jax.random.PRNGKey(7)
  leaves, treedef = jax.tree.flatten(clients["opt_warm"])
  drawn = [jnp.abs(jax.random.normal(jax.random.fold_in(key, i), x.shape)).astype(x.dtype)
           if jnp.issubdtype(x.dtype, jnp.floating) else
           x + jnp.arange(1, x.shape[0] + 1, dtype=x.dtype).reshape((-1,) + (1,) * (x.ndim - 1))
           for i, x in enumerate(leaves)]
  clients = {**clients, "opt_warm": jax.tree.unflatten(treedef, drawn)}
  server = {**server, "round": jnp.asarray(round_index, jnp.int32)}
  _, new_clients, _ = jax.jit(sim.algorithm.aggregate)(
      server, clients, None, None, None, jax.random.PRNGKey(0))
  return clients, new_clients, sim


def test_fibfl_pp_warmup_optimizer_keep_leaves_the_state_as_it_was():
  """``keep`` (the default): the warm-up average touches the params only, every
  leaf of every client's warm-up Adam state is the same bits as before; and the
  params equal those of the other options (the option touches nothing else)."""
  assert algorithms.hparams("fibfl_pp")["warmup_optimizer"] == "keep"
  before, kept, _ = warmup_optimizer_aggregate("keep", 0)
  assert leaves_equal(kept["opt_warm"], before["opt_warm"])
  assert not leaves_equal(kept["params"], before["params"])   # the average happened
  for option in ("reset", "average"):
    _, other, _ = warmup_optimizer_aggregate(option, 0)
    assert leaves_equal(other["params"], kept["params"]), option
    assert leaves_equal(other["opt_head"], kept["opt_head"]), option
    assert leaves_equal(other["opt_ext"], kept["opt_ext"]), option


def test_fibfl_pp_warmup_optimizer_reset_gives_a_fresh_state():
  before, after, sim = warmup_optimizer_aggregate("reset", 0)
  fresh = firma.stacked_init(sim.training.optimizer, after["params"])
  assert leaves_equal(after["opt_warm"], fresh)
  assert all(not np.any(np.asarray(x)) for x in jax.tree.leaves(after["opt_warm"]))
  assert not leaves_equal(before["opt_warm"], fresh)
  # After the warm-up (ring rounds) the warm-up state is left alone.
  before, after, _ = warmup_optimizer_aggregate("reset", 1)
  assert leaves_equal(after["opt_warm"], before["opt_warm"])


def test_fibfl_pp_warmup_optimizer_average_averages_the_moments():
  before, after, sim = warmup_optimizer_aggregate("average", 0)
  weights = np.asarray(sim.data.client_size, np.float64) / sum(SIZES)
  floating = 0
  for got, old in zip(jax.tree.leaves(after["opt_warm"]), jax.tree.leaves(before["opt_warm"])):
    got, old = np.asarray(got), np.asarray(old)
    if np.issubdtype(old.dtype, np.floating):
      want = np.tensordot(weights, old.astype(np.float64), axes=1)
      for k in range(got.shape[0]):   # every client holds the weighted mean n_i/n
        np.testing.assert_allclose(got[k], want, rtol=1e-5, atol=1e-6)
      floating += 1
    else:                             # step counts stay each client's own
      np.testing.assert_array_equal(got, old)
      assert len(np.unique(got)) == got.shape[0]
  assert floating >= 2               # Adam's first and second moments at least
  before, after, _ = warmup_optimizer_aggregate("average", 1)
  assert leaves_equal(after["opt_warm"], before["opt_warm"])


def test_fibfl_pp_warmup_optimizer_names_the_allowed_values():
  with pytest.raises(ValueError, match="warmup_optimizer.*'keep', 'reset', 'average'"):
    algorithms.hparams("fibfl_pp", {"warmup_optimizer": "zero"})


def test_fibfl_pp_paper_heads_shared_through_warmup_then_private():
  """FIRMA §4.5 / Alg. 3: with R = 12 the first W = ⌊12/6⌋ = 2 rounds average
  the full model, so after round W every client holds the same head; from round
  W + 1 heads are private and drift apart."""
  fed = helpers.unequal_digits(sizes=SIZES)
  sim = firma_sim(fed, "fibfl_pp", rounds=12, head_epochs=1, extractor_epochs=1)
  state = sim.init(0)
  heads_differ = []
  for _ in range(3):
    state, metrics = sim.run_chunk(state, 1)
    head = jax.tree.leaves(state.clients["params"]["head"])
    heads_differ.append(any(not np.allclose(h[0], h[k], rtol=1e-5, atol=1e-6)
                            for h in head for k in range(1, fed.num_clients)))
  assert heads_differ == [False, False, True]
# ---------------------------------------------------------------- traffic (Table 2)


def test_communication_bytes_follow_table_2():
  fed = helpers.unequal_digits(sizes=(20, 35, 50, 30, 25))
  n = fed.num_clients
  sims = {name: firma_sim(fed, name, rounds=6) for name in
          ("fedavg", "rdfl", "fedrep", "fibfl", "fibfl_plus", "fibfl_pp")}
  params = sims["fedavg"].init(0).server["params"]
  p = 4 * sum(x.size for x in jax.tree.leaves(params))
  p_e = 4 * sum(x.size for x in jax.tree.leaves(params["extractor"]))
  k_g = math.ceil(n / 2)
  want = {"fedavg": 2 * n * p, "rdfl": 2 * n * p, "fedrep": 2 * n * p_e,
          "fibfl": 2 * n * p_e, "fibfl_plus": 2 * n * p_e, "fibfl_pp": 2 * k_g * n * p_e}
  for name, sim in sims.items():
    payload, message = sim.communication_bytes(sim.init(0))
    comm = runner.round_communication(sim.algorithm.comm)
    up, down = comm(payload, message, n, 5)
    assert up + down == want[name], name
  # FibFL++ warm-up rounds are star rounds of the full model (paper mode).
  payload, message = sims["fibfl_pp"].communication_bytes(sims["fibfl_pp"].init(0))
  comm = runner.round_communication(sims["fibfl_pp"].algorithm.comm)
  assert comm(payload, message, n, 0) == (n * p, n * p)


# ---------------------------------------------------------------- options, metrics


def test_compat_resolves_the_reference_code_choices():
  hp = algorithms.hparams("fibfl_pp", {"compat": "reference_code"})
  o = fibfl_pp_lib.resolved_options(hp, num_clients=5, rounds=5)
  assert o == {"passes": 3, "warmup": 1, "sweep": "synchronous", "ring_cost": "dot",
               "warmup_heads": True, "warmup_optimizer": "keep", "per_client_init": True}
  o = fibfl_pp_lib.resolved_options(algorithms.hparams("fibfl_pp"), 5, 5)
  assert (o["warmup"], o["sweep"], o["ring_cost"], o["warmup_heads"]) == (
      0, "sequential", "cosine", True)
  o = fibfl_pp_lib.resolved_options(algorithms.hparams("fibfl_pp", {"warmup_heads": False}),
                                    5, 12)
  assert (o["warmup"], o["warmup_heads"]) == (2, False)
  with pytest.raises(ValueError, match="compat"):
    algorithms.hparams("fibfl", {"compat": "pytorch"})


def test_per_client_init_and_ring_order_from_the_partition():
  fed = helpers.unequal_digits(sizes=(20, 35, 50, 30, 25))
  sim = firma_sim(fed, "fibfl_pp", compat="reference_code")
  state = sim.init(0)
  kernels = [x for x in jax.tree.leaves(state.clients["params"]) if x.ndim == 3]
  assert kernels and all(not np.array_equal(x[0], x[1]) for x in kernels)
  summary = fibfl_pp_lib.ring_summary(fed.class_counts, cost="dot")
  np.testing.assert_array_equal(state.server["order"], summary["order"])
  assert summary["cost_after"] <= summary["cost_before"]
  np.testing.assert_allclose(float(state.server["ring_saving_pct"]),
                             summary["saving_pct"], rtol=1e-5)


def test_spectral_gap_metric_matches_numpy():
  for gates in (None, jnp.asarray([0.9, 0.5, 0.7, 0.2, 0.8])):
    m = ring.fibonacci_mixing_matrix(5, 0.4, order=[2, 0, 4, 1, 3], gates=gates,
                                     passes=3, sweep="sequential")
    np.testing.assert_allclose(float(jax.jit(firma.spectral_gap)(m)),
                               ring.spectral_gap(m), atol=1e-5)


def test_batched_runs_take_ring_order_from_their_own_partition():
  feds = [helpers.unequal_digits(sizes=(20, 35, 50, 30, 25), seed=s) for s in (0, 1)]
  sim = firma_sim(feds[0], "fibfl_pp")
  batch = sim_lib.BatchedSimulation(sim, feds)
  states = batch.init([0, 1])
  assert np.ndim(states.round) == 0
  for i, fed in enumerate(feds):
    np.testing.assert_array_equal(states.server["order"][i],
                                  fibfl_pp_lib.ring_summary(fed.class_counts)["order"])


def test_ring_algorithms_reject_step_mode_and_tiny_rings():
  fed = helpers.unequal_digits(sizes=SIZES)
  with pytest.raises(ValueError, match="local_steps"):
    firma_sim(fed, "fibfl", client={"local_steps": 3})
  with pytest.raises(ValueError, match="at least 2 clients"):
    firma_sim(helpers.unequal_digits(sizes=(30,)), "rdfl")


def test_config_rejects_partial_participation_for_ring_methods():
  from fedfrac import config as config_lib
  c = helpers.tiny_config()
  c.methods.ring = type(c.methods)(dict(name="fibfl_pp"))
  c.participation = 0.5
  with pytest.raises(config_lib.ConfigError, match="participation=0.5"):
    config_lib.validate(c)


@pytest.mark.parametrize("name", ["digits", "cifar10", "fashion_mnist", "mnist"])
def test_firma_configs_validate_in_both_modes(name):
  import importlib.util
  import os
  from fedfrac import config as config_lib
  path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "configs", "firma", f"{name}.py")
  spec = importlib.util.spec_from_file_location(f"firma_{name}", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  for arg in ("paper,ls3", "reference_code,dir0.1"):
    c = module.get_config(arg)
    config_lib.validate(c)
    assert set(c.methods.keys()) == {"fedavg", "rdfl", "fedrep", "fibfl", "fibfl_plus",
                                     "fibfl_pp"}
    assert c.data.compat == arg.split(",")[0]


def test_torch_style_init_bounds_and_untouched_layer_norm():
  params = {"extractor": {"Dense_0": {"kernel": jnp.zeros((64, 256)), "bias": jnp.zeros(256)},
                          "LayerNorm_0": {"scale": jnp.ones(256), "bias": jnp.zeros(256)}},
            "head": {"Dense_0": {"kernel": jnp.zeros((128, 10)), "bias": jnp.zeros(10)}}}
  out = firma.torch_style_init(params, jax.random.PRNGKey(0))
  for layer, fan_in in ((out["extractor"]["Dense_0"], 64), (out["head"]["Dense_0"], 128)):
    for x in (layer["kernel"], layer["bias"]):
      bound = 1 / math.sqrt(fan_in)
      assert float(jnp.max(jnp.abs(x))) <= bound
      assert float(jnp.max(jnp.abs(x))) > 0.9 * bound          # fills the range
      assert abs(float(jnp.var(x)) - bound ** 2 / 3) < 0.25 * bound ** 2 / 3
  assert leaves_equal(out["extractor"]["LayerNorm_0"], params["extractor"]["LayerNorm_0"])


def test_map_and_vmap_cohorts_agree_for_fibfl_pp():
  fed = helpers.unequal_digits(sizes=SIZES)
  out = []
  for parallelism in ("vmap", "map"):
    sim = firma_sim(fed, "fibfl_pp", rounds=6, dynamic=True, head_epochs=1,
                    extractor_epochs=1)
    sim.parallelism = parallelism
    state, _ = sim.run_chunk(sim.init(0), 2)
    out.append(state.clients["params"])
  for a, b in zip(jax.tree.leaves(out[0]), jax.tree.leaves(out[1])):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_zero_step_slot_trains_nothing_in_either_phase(dynamic):
  # Pad slots of a sharded or step-bucketed cohort get num_steps = 0; the two-phase
  # training must leave them untouched instead of running E epochs of the copied
  # client (wasted work, and a wrong executed-steps count).
  fed = helpers.unequal_digits(sizes=SIZES)
  sim = firma_sim(fed, "fibfl", dynamic=dynamic, head_epochs=2, extractor_epochs=2)
  state = sim.init(0)
  params = jax.tree.map(lambda x: x[1], state.clients["params"])
  opt = sim.training.optimizer
  view = contract.ClientView(sim.arrays["x"], sim.arrays["y"],
                             sim.arrays["client_index"][1],
                             sim.arrays["client_size"][1], jnp.asarray(0, jnp.int32),
                             jnp.asarray(1))
  run = jax.jit(lambda p, v: firma.two_phase_train(
      p, opt.init(p["head"]), opt.init(p["extractor"]), v, jax.random.PRNGKey(0), 0.01,
      sim.model, sim.task, sim.training, 2, 2))
  out, _, _, metrics = run(params, view)
  assert leaves_equal(out, params) and float(metrics["steps"]) == 0.0
  active = view._replace(num_steps=jnp.asarray(3, jnp.int32))
  out, _, _, metrics = run(params, active)
  assert not leaves_equal(out, params) and float(metrics["steps"]) == 4 * 3
