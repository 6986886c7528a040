"""Kuramoto-FedAvg as an algorithm in the engine (the op itself: test_ops_kuramoto)."""
from __future__ import annotations

import glob
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac import algorithms
from fedfrac import config as config_lib
from fedfrac import data as data_lib
from fedfrac.algorithms import kuramoto_fedavg
from fedfrac.ops import kuramoto
from tests import helpers

CLIENT = {"optimizer": "momentum", "momentum": 0.9, "lr": 0.05, "batch_size": 32,
          "local_epochs": 1}


def _builder(name, **options):
  return lambda ctx: algorithms.make(name, ctx, **options)


def test_kappa_zero_equals_fedavg_through_the_engine():
  # Unequal client sizes (p_k not uniform) and partial participation (the sampled
  # cohorts vary); momentum SGD clients as in the paper.
  fed = helpers.unequal_digits(sizes=(13, 40, 75, 22, 31))
  kw = dict(rounds=2, participation=0.6, parallelism="vmap")
  ref = helpers.simulation(fed, _builder("fedavg"), CLIENT, **kw)
  s_ref, m_ref = ref.run_chunk(ref.init(4), 2)
  for weighting in ("coupled", "reference_code"):
    sim = helpers.simulation(
        fed, _builder("kuramoto_fedavg", kappa0=0.0, weighting=weighting), CLIENT, **kw)
    s_k, m_k = sim.run_chunk(sim.init(4), 2)
    for a, b in zip(jax.tree.leaves(s_ref.server["params"]),
                    jax.tree.leaves(s_k.server["params"])):
      np.testing.assert_array_equal(a, b)
    for name in ("train_loss", "train_loss_var", "clients/ids"):
      np.testing.assert_array_equal(m_ref[name], m_k[name])
    np.testing.assert_array_equal(m_k["server/kappa"], 0.0)
    np.testing.assert_array_equal(m_k["server/fallback"], 0.0)


def _identical_clients(weighting, kappa0=0.3, beta=0.5):
  """Every client holds the same data and trains with the same key, so all
  uploaded updates are bit-identical."""
  ds = data_lib.sklearn_digits()
  same = np.arange(40)
  fed = data_lib.federate(ds, [same] * 4, data_lib.split_iid(len(ds.y_test), 4, 0))

  def builder(ctx):
    alg = algorithms.make("kuramoto_fedavg", ctx, weighting=weighting, kappa0=kappa0,
                          beta=beta)
    fixed = jax.random.PRNGKey(7)
    return alg._replace(client_update=lambda p, c, v, k, t: alg.client_update(
        p, c, v._replace(client_id=jnp.zeros_like(v.client_id)), fixed, t))
  return helpers.simulation(fed, builder, CLIENT, rounds=3)


@pytest.mark.parametrize("weighting", ["coupled", "paper", "reference_code"])
def test_identical_client_updates_no_nan_and_paper_falls_back(weighting):
  sim = _identical_clients(weighting)
  state, steps = sim.init(0), []
  for _ in range(3):            # one compiled 1-round chunk, three times
    new, m = sim.run_chunk(state, 1)
    steps.append((state, new, m))
    state = new
  m = jax.tree.map(lambda *xs: np.concatenate([np.asarray(x) for x in xs]),
                   *[s[2] for s in steps])
  for leaf in jax.tree.leaves((state.server, m)):
    assert np.all(np.isfinite(np.asarray(leaf, np.float64)))
  phases = np.asarray(m["server/phases"])
  assert phases.shape == (3, 4)
  np.testing.assert_allclose(phases, 0.0, atol=1e-3)
  assert np.all(phases == phases[:, :1])                    # equal phases
  np.testing.assert_allclose(m["server/order_parameter"], 1.0, atol=1e-6)
  kappa = 0.3 * np.exp(-0.5 * np.arange(3))
  np.testing.assert_allclose(m["server/kappa"], kappa, rtol=1e-6)
  np.testing.assert_allclose(m["train_loss_var"], 0.0, atol=1e-10)
  if weighting == "paper":
    np.testing.assert_array_equal(m["server/fallback"], 1.0)   # every round
    assert float(np.sum(m["server/fallback"])) == 3.0
    np.testing.assert_allclose(m["server/weights"], 0.25, rtol=1e-6)
    scale = kappa                # fallback: w + κ_t Δ̄
  else:
    np.testing.assert_array_equal(m["server/fallback"], 0.0)
    scale = np.ones(3)           # w + Δ
  # The server moved by scale·Δ each round: compare norms (directions agree
  # since every phase is 0).
  for t, (before, after, mt) in enumerate(steps):
    moved = [np.asarray(a, np.float64) - np.asarray(b, np.float64) for a, b in
             zip(jax.tree.leaves(after.server["params"]),
                 jax.tree.leaves(before.server["params"]))]
    norm = np.sqrt(sum(float(np.sum(d * d)) for d in moved))
    np.testing.assert_allclose(norm, scale[t] * float(mt["clients/update_norm"][0, 0]),
                               rtol=1e-4)


def _stacked_messages(seed, k=5, with_phase=True):
  r = np.random.default_rng(seed)
  delta = {"w": jnp.asarray(r.normal(size=(k, 3, 4)) + 1.0, jnp.float32),
           "b": jnp.asarray(r.normal(size=(k, 4)), jnp.float32)}
  msg = {"delta": delta}
  if with_phase:
    msg["phase_signal"] = jnp.asarray(r.uniform(0, 2, size=k), jnp.float32)
  return msg


def _ctx():
  """A BuildContext (model, task, training) for calling an algorithm directly."""
  from fedfrac.algorithms.contract import BuildContext
  sim = helpers.simulation(helpers.unequal_digits(), _builder("fedavg"))
  return BuildContext(sim.model, sim.task, sim.training, sim.data.info(), 3)


@pytest.mark.parametrize("weighting", ["coupled", "paper", "reference_code"])
def test_aggregate_uses_decayed_kappa_and_the_op(weighting):
  ctx = _ctx()
  alg = algorithms.make("kuramoto_fedavg", ctx, kappa0=0.3, beta=0.2, weighting=weighting)
  msg = _stacked_messages(1, with_phase=weighting == "reference_code")
  params = jax.tree.map(lambda x: jnp.zeros(x.shape[1:], x.dtype), msg["delta"])
  weights = jnp.asarray([10.0, 20.0, 5.0, 0.0, 40.0])
  mask = jnp.asarray([True, True, True, False, True])
  server = {"params": params, "round": jnp.asarray(4, jnp.int32)}
  new, _, m = jax.jit(alg.aggregate)(server, None, msg, weights, mask, jax.random.PRNGKey(0))
  kappa = 0.3 * np.exp(-0.2 * 4)
  assert float(m["kappa"]) == pytest.approx(kappa, rel=1e-6)
  assert int(new["round"]) == 5
  want, info = kuramoto.kuramoto_update(msg["delta"], weights, kappa, weighting,
                                        phase_signal=msg.get("phase_signal"), mask=mask)
  for a, b in zip(jax.tree.leaves(new["params"]), jax.tree.leaves(want)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  assert float(m["weights"][3]) == 0.0 and float(m["phases"][3]) == 0.0
  w = np.asarray(info["weights"])[np.asarray(mask)]
  assert float(m["weight_min"]) == pytest.approx(w.min(), rel=1e-6)
  assert float(m["weight_max"]) == pytest.approx(w.max(), rel=1e-6)


def test_kappa0_and_beta_may_be_traced_for_grids():
  ctx = _ctx()
  msg = _stacked_messages(2, with_phase=False)
  params = jax.tree.map(lambda x: jnp.zeros(x.shape[1:], x.dtype), msg["delta"])
  weights, mask = jnp.ones(5), jnp.ones(5, bool)

  def step(kappa0, beta):
    alg = algorithms.make("kuramoto_fedavg", ctx, kappa0=kappa0, beta=beta)
    server = {"params": params, "round": jnp.asarray(2, jnp.int32)}
    return alg.aggregate(server, None, msg, weights, mask, None)[0]["params"]
  k0 = jnp.asarray([0.0, 0.1, 0.3])
  out = jax.jit(jax.vmap(step, in_axes=(0, None)))(k0, 0.1)
  for i, v in enumerate([0.0, 0.1, 0.3]):
    one = step(v, 0.1)
    for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(one)):
      np.testing.assert_allclose(a[i], b, rtol=1e-5, atol=1e-6)


def test_options_are_validated():
  with pytest.raises(ValueError, match="weighting"):
    algorithms.hparams("kuramoto_fedavg", {"weighting": "sine"})
  with pytest.raises(ValueError, match="kappa0"):
    algorithms.hparams("kuramoto_fedavg", {"kappa0": -0.1})
  with pytest.raises(ValueError, match="beta"):
    algorithms.hparams("kuramoto_fedavg", {"beta": -1.0})
  hp = algorithms.hparams("kuramoto_fedavg")
  assert hp["weighting"] == "coupled"
  assert "kuramoto_fedavg" in algorithms.quickstart_methods()


def test_coupling_schedule():
  t = np.arange(5)
  np.testing.assert_allclose(kuramoto_fedavg.coupling(0.3, 0.1, t), 0.3 * np.exp(-0.1 * t),
                             rtol=1e-6)
  np.testing.assert_array_equal(kuramoto_fedavg.coupling(0.1, 0.0, t), np.float32(0.1))


def test_shards_partition_as_in_the_paper():
  # Sort by label, K*s equal shards (remainder left out), s distinct shards per
  # client, no sample in two clients.
  r = np.random.default_rng(0)
  y = r.integers(0, 10, size=997)
  k, s = 10, 3
  parts = data_lib.partition(y, k, "shards", seed=3, shards_per_client=s)
  size = len(y) // (k * s)
  assert all(len(p) == s * size for p in parts)
  allidx = np.concatenate(parts)
  assert len(np.unique(allidx)) == len(allidx)
  # Each client's labels are s runs of the label-sorted sequence, so its label
  # histogram is the sum of s shard histograms of sorted(y).
  sorted_y = np.sort(y)[: k * s * size]
  shard_hist = np.stack([np.bincount(sorted_y[j * size:(j + 1) * size], minlength=10)
                         for j in range(k * s)])
  np.testing.assert_array_equal(
      np.bincount(y[allidx], minlength=10), np.bincount(sorted_y, minlength=10))
  for p in parts:
    hist = np.bincount(y[p], minlength=10)
    assert len(np.flatnonzero(hist)) <= 2 * s
    # Some set of s distinct shards adds up to this client's histogram.
    found = _subset_sum(shard_hist, hist, s)
    assert found, hist
  again = data_lib.partition(y, k, "shards", seed=3, shards_per_client=s)
  assert all(np.array_equal(a, b) for a, b in zip(parts, again))


def _subset_sum(rows, target, n, start=0):
  if n == 0:
    return not np.any(target)
  for j in range(start, len(rows)):
    rest = target - rows[j]
    if np.all(rest >= 0) and _subset_sum(rows, rest, n - 1, j + 1):
      return True
  return False


CONFIG_DIR = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "configs", "kuramoto")


@pytest.mark.parametrize("path", sorted(p for p in glob.glob(os.path.join(CONFIG_DIR, "*.py"))
                                         if not p.endswith("__init__.py")))
def test_configs_validate(path):
  c = config_lib.import_config_file(path).get_config()
  config_lib.validate(c)
  assert c.data.partition == "shards" and c.client.batch_size == 64
  assert c.client.local_epochs == 2 and c.client.schedule == "cosine"
  assert c.client.optimizer == "momentum" and c.client.momentum == 0.9
  names = {m.name for m in c.methods.values()}
  assert names == {"fedavg", "scaffold", "kuramoto_fedavg"}   # §5.1: two baselines
  assert {m.get("weighting") for m in c.methods.values()} >= {
      "coupled", "paper", "reference_code"}


def test_config_dir_has_every_dataset():
  names = {os.path.basename(p) for p in glob.glob(os.path.join(CONFIG_DIR, "*.py"))}
  assert {"mnist.py", "fashion_mnist.py", "cifar10.py", "digits.py"} <= names


def test_reproduction_grid_baselines_and_metric_follow_the_paper():
  """Kuramoto-FedAvg §5.1: K ∈ {10, 20}, s ∈ {3, 5, 10}, FedAvg and SCAFFOLD, and
  the headline number is test accuracy averaged over clients (global beside it)."""
  from fedfrac_lab.reproduce import kuramoto as reproduce_kuramoto
  assert reproduce_kuramoto.CLIENTS == (10, 20)
  assert reproduce_kuramoto.SHARDS == (3, 5, 10)
  assert set(reproduce_kuramoto.BASELINE_LABELS) == {"fedavg", "scaffold"}

  class Record:
    status = "ok"
    round_rows = [{"train_loss_var": 0.1}, {"train_loss_var": 0.3}]

    def curve(self, name):
      values = {"client_accuracy_mean": [0.5, 0.7], "accuracy": [0.6, 0.8]}[name]
      return np.asarray([1, 2]), np.asarray(values)
  stats = reproduce_kuramoto.run_record_stats(Record())
  assert stats["final"] == 0.7 and stats["final_global"] == 0.8
  assert stats["best"] == 0.7 and stats["best_round"] == 2


def _authors_aggregation(deltas, sizes, phi, kappa, clip):
  """NumPy transcription of the arithmetic of the authors'
  ``_aggregation_with_kuramoto`` on flat updates (w_j − w_avg = Δ_j − Δ̄)."""
  p = sizes / sizes.sum()
  avg = (p[:, None] * deltas).sum(0)
  k = len(deltas)
  sync = np.zeros_like(avg)
  for i in range(k):
    for j in range(k):
      if i != j:
        sync += np.cos(phi[j] - phi[i]) * (deltas[j] - avg)
  return avg + kappa * np.clip(sync / max(1, k - 1), -clip, clip)


@pytest.mark.parametrize("clip", [1e3, 0.05])
def test_reference_code_sync_clip_is_the_authors_clamp(clip):
  r = np.random.default_rng(0)
  deltas = r.normal(size=(4, 30)).astype(np.float32)
  sizes = np.asarray([10.0, 20.0, 5.0, 40.0], np.float32)
  phi = r.uniform(0, 3, size=4).astype(np.float32)
  got, _ = kuramoto.kuramoto_update(jnp.asarray(deltas), sizes, 0.3, "reference_code",
                                    phase_signal=phi, sync_clip=clip)
  want = _authors_aggregation(deltas.astype(np.float64), sizes, phi, 0.3, clip)
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
  unclipped, _ = kuramoto.kuramoto_update(jnp.asarray(deltas), sizes, 0.3, "reference_code",
                                          phase_signal=phi)
  if clip == 1e3:   # inactive clamp: the unclamped update to float rounding
    np.testing.assert_allclose(np.asarray(got), np.asarray(unclipped), rtol=1e-5, atol=1e-6)
  else:             # an active clamp moves it (and the test above pins where)
    assert np.abs(np.asarray(got) - np.asarray(unclipped)).max() > 1e-2


def test_scaffold_clients_with_kappa_zero_are_scaffold_and_sync_moves_them():
  # As the authors' SCAFFOLD server: the model step weighted by n_k (kappa = 0 leaves
  # the sample weights), the control-variate update the plain mean over clients
  # (SCAFFOLD's default, uniform). With equal client sizes both weightings agree, so
  # the reference is plain SCAFFOLD.
  fed = helpers.unequal_digits(sizes=(31, 31, 31, 31, 31))
  kw = dict(rounds=2, participation=1.0, parallelism="vmap")
  ref = helpers.simulation(fed, _builder("scaffold"), CLIENT, **kw)
  s_ref, _ = ref.run_chunk(ref.init(4), 2)
  sim = helpers.simulation(fed, _builder("kuramoto_fedavg", kappa0=0.0, beta=0.0,
                                         weighting="reference_code", clients="scaffold"),
                           CLIENT, **kw)
  s_k, m_k = sim.run_chunk(sim.init(4), 2)
  for a, b in zip(jax.tree.leaves((s_ref.server["params"], s_ref.server["c"],
                                   s_ref.clients["c"])),
                  jax.tree.leaves((s_k.server["params"], s_k.server["c"], s_k.clients["c"]))):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
  assert np.all(np.asarray(m_k["server/control_norm"]) > 0)
  # The synchronisation (kappa 0.2, the authors' +-10 clamp) moves the model, on
  # clients of unequal sizes.
  unequal = helpers.unequal_digits(sizes=(13, 40, 75, 22, 31))

  def final(kappa):
    sim = helpers.simulation(unequal, _builder(
        "kuramoto_fedavg", kappa0=kappa, beta=0.0, weighting="reference_code",
        clients="scaffold", sync_clip=10.0), CLIENT, **kw)
    return sim.run_chunk(sim.init(4), 2)[0]

  s_0, s_s = final(0.0), final(0.2)
  diff = max(float(np.abs(np.asarray(a) - np.asarray(b)).max()) for a, b in zip(
      jax.tree.leaves(s_0.server["params"]), jax.tree.leaves(s_s.server["params"])))
  assert diff > 1e-4


def _config_module(name):
  return config_lib.import_config_file(os.path.join(CONFIG_DIR, name))


@pytest.mark.parametrize("name, kind", [("mnist.py", "grey"), ("fashion_mnist.py", "grey"),
                                        ("cifar10.py", "colour"), ("digits.py", "digits")])
def test_reference_code_mode_is_the_authors_run(name, kind):
  """The authors' settings (src/config/*.json, main.py, BaseServer.py and the
  loaders of github.com/amuhebwa/Kuramoto-FedAvg): docs/design.md §3.4."""
  module = _config_module(name)
  c = module.get_config("K=20,s=5,mode=reference_code")
  config_lib.validate(c)
  assert (c.data.num_clients, c.data.shards_per_client) == (20, 5)
  assert c.data.augment == {"grey": "crop:28:4,flip,cutout:16",
                            "colour": "crop:32:4,flip,cutout:16",
                            "digits": "crop:8:1,flip,cutout:4"}[kind]
  mean, std = (((0.49139968, 0.48215827, 0.44653124), (0.24703233, 0.24348505, 0.26158768))
               if kind == "colour" else ((0.1307,), (0.3081,)))
  assert tuple(c.data.input_mean) == mean and tuple(c.data.input_std) == std
  # their shard dealing from their fixed seed, one partition for every run seed,
  # and PyTorch's default initialisation of their modules
  assert (c.data.partition, c.data.seed) == ("shards_reference", 19940817)
  assert c.model.init == "torch"
  cc = c.client
  assert (cc.optimizer, cc.momentum, cc.lr, cc.weight_decay) == ("momentum", 0.9, 0.01, 1e-5)
  assert (cc.schedule, cc.lr_decay, cc.local_epochs, cc.batch_size) == (
      "exponential", 0.99, 2, 64)
  assert c.rounds == 100 and c.participation == 1.0
  m = c.methods
  assert set(m.keys()) == {"fedavg", "scaffold", "kuramoto_reference_code",
                           "kuramoto_scaffold"}
  k, ks = m.kuramoto_reference_code, m.kuramoto_scaffold
  assert (k.weighting, k.kappa0, k.beta, k.sync_clip, k.get("clients", "fedavg")) == (
      "reference_code", 0.3, 0.0, 1e3, "fedavg")
  assert (ks.weighting, ks.kappa0, ks.beta, ks.sync_clip, ks.clients) == (
      "reference_code", 0.2, 0.0, 10.0, "scaffold")
  paper = module.get_config("K=20,s=5")           # the paper mode is untouched
  assert paper.data.augment == "" and paper.data.input_mean == ()
  assert paper.client.schedule == "cosine" and paper.client.weight_decay == 0.0
  assert (paper.data.partition, paper.data.seed, paper.model.init) == ("shards", -1, "flax")
  with pytest.raises(ValueError, match="mode=<paper|reference_code>"):
    module.get_config("mode=authors")


def test_reference_code_mode_deals_the_authors_shards_for_every_seed():
  """configs/kuramoto/digits.py:mode=reference_code builds the clients of the
  authors' sharding_partition from 19940817 whatever the run's seed."""
  from fedfrac.data import shards_reference
  c = _config_module("digits.py").get_config("K=10,s=3,mode=reference_code")
  fed_0, fed_5 = data_lib.build(c.data, 0), data_lib.build(c.data, 5)
  parts, _ = shards_reference.deal(fed_0.y_train, 10, 19940817, 3)
  for k in range(10):
    rows = fed_0.client_index[k, :fed_0.client_size[k]]
    np.testing.assert_array_equal(rows, np.sort(parts[k]))
    np.testing.assert_array_equal(rows, fed_5.client_index[k, :fed_5.client_size[k]])
  assert fed_0.client_size.sum() == fed_0.y_train.size      # every sample dealt


def test_scaffold_clients_keep_uniform_control_averaging_whatever_scaffolds_default(
    monkeypatch):
  # The authors' server averages the control variates plainly; a change of
  # SCAFFOLD's own default weighting must not move Kuramoto's SCAFFOLD path.
  from fedfrac.algorithms import scaffold
  seen = []
  build = scaffold.build
  monkeypatch.setattr(scaffold, "build", lambda ctx, hp: seen.append(hp) or build(ctx, hp))
  monkeypatch.setitem(scaffold.HPARAMS.options, "weighting",
                      scaffold.HPARAMS.options["weighting"]._replace(default="samples"))
  assert scaffold.HPARAMS.defaults()["weighting"] == "samples"
  fed = helpers.unequal_digits(sizes=(13, 40, 75))
  helpers.simulation(fed, _builder("kuramoto_fedavg", clients="scaffold"), CLIENT,
                     rounds=1, participation=1.0)
  assert seen and seen[-1]["weighting"] == "uniform"
