"""BEV sources in the experiment pipeline: vehicle = client adapter, physical-unit
metrics inside the jitted evaluation, a short regression run, config validation and
asymmetric churn."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fedfrac as ff
from fedfrac import config as config_lib
from fedfrac import data as data_lib
from fedfrac import runner
from fedfrac import sim as sim_lib
from fedfrac import models
from fedfrac.data import federated, sources
from fedfrac.metrics.regression import regression_metrics
from tests.data import test_ved as test_data_ved


def bev_config(**overrides):
  """A tiny synthetic fleet (4 vehicles, 1.5 h each) and a small window MLP."""
  c = config_lib.base_config()
  c.progress = False
  c.rounds = 6
  c.eval_every = 3
  c.seeds = (0,)
  c.data.source = "synthetic_bev"
  c.data.partition = "natural"
  c.data.num_clients = 4
  c.data.seed = 0
  c.data.bev.hours_per_vehicle = 1.5
  c.data.bev.class_mix = (0.5, 0.25, 0.25)
  c.data.bev.stride = 20
  c.model.name = "window_mlp"
  c.model.hidden = (16,)
  c.task.loss = "mse"
  c.task.mape_eps = 5.0
  c.client.optimizer = "adam"
  c.client.lr = 3e-4
  c.client.batch_size = 32
  c.client.local_epochs = 1
  c.engine.unroll = 1             # fast compiles
  for key, value in overrides.items():
    target = c
    parts = key.split(".")
    for p in parts[:-1]:
      target = target[p]
    target[parts[-1]] = value
  return c


@functools.lru_cache(maxsize=None)
def _fleet(eval_split="test"):
  c = bev_config(**{"data.bev.eval_split": eval_split})
  raw = sources.load_bev(c.data, 0)
  return raw, data_lib.build(c.data, 0)


def test_adapter_one_client_per_vehicle_and_trip_disjoint_splits():
  raw, fed = _fleet()
  nb = raw.normalized()
  assert fed.task == "regression" and fed.num_clients == raw.num_clients == 4
  assert fed.input_shape == (60, 6)
  assert list(fed.client_group) == list(raw.vehicle_class)
  for k in range(fed.num_clients):
    rows = fed.client_index[k, :fed.client_size[k]]
    # Client k owns exactly vehicle k's train windows (normalised by its stats).
    np.testing.assert_array_equal(np.sort(rows), np.flatnonzero(raw.client_train == k))
    test_rows = fed.client_test_index[k, :fed.client_test_size[k]]
    np.testing.assert_array_equal(np.sort(test_rows),
                                  np.flatnonzero(raw.client_test == k))
    val_rows = fed.client_val_index[k, :fed.client_val_size[k]]
    np.testing.assert_array_equal(np.sort(val_rows), np.flatnonzero(raw.client_val == k))
  assert fed.client_size.sum() == len(raw.y_train)
  np.testing.assert_array_equal(fed.x_train, nb.x_train)
  np.testing.assert_array_equal(fed.y_test, nb.y_test)
  # No window (no trip) in two splits.
  trips = [set(raw.trip_train), set(raw.trip_val), set(raw.trip_test)]
  assert not (trips[0] & trips[1]) and not (trips[0] & trips[2]) and not (
      trips[1] & trips[2])
  assert len(raw.y_val) > 0 and len(raw.y_test) > 0
  # The per-sample inverse transform recovers the physical labels (Wh).
  np.testing.assert_allclose(fed.y_test * fed.y_test_scale + fed.y_test_center,
                             raw.y_test, rtol=1e-4, atol=1e-2)
  np.testing.assert_allclose(fed.y_val * fed.y_val_scale + fed.y_val_center,
                             raw.y_val, rtol=1e-4, atol=1e-2)
  # Train-only statistics: the scale of a test sample is its vehicle's train IQR.
  c = raw.client_test
  q75, q25 = np.percentile(raw.y_train[raw.client_train == c[0]], [75, 25])
  assert np.isclose(fed.y_test_scale[0], q75 - q25, rtol=1e-5)


def test_input_clip_winsorises_inputs_only():
  raw, fed = _fleet()
  clipped = federated.federate_bev(raw, input_clip=2.0)
  assert np.abs(fed.x_train).max() > 2.0
  assert np.abs(clipped.x_train).max() <= 2.0 and np.abs(clipped.x_test).max() <= 2.0
  np.testing.assert_array_equal(clipped.x_train, np.clip(fed.x_train, -2.0, 2.0))
  np.testing.assert_array_equal(clipped.y_train, fed.y_train)
  np.testing.assert_array_equal(clipped.y_test_scale, fed.y_test_scale)
  with pytest.raises(ValueError, match="input_clip"):
    federated.federate_bev(raw, input_clip=-1.0)
  with pytest.raises(ValueError, match="eval_split"):
    federated.federate_bev(raw, eval_split="train")


def test_eval_split_val_puts_validation_windows_in_the_test_slot():
  raw, fed = _fleet("val")
  np.testing.assert_array_equal(fed.x_test, raw.normalized().x_val)
  assert fed.meta["eval_split"] == "val"
  assert fed.client_test_size.sum() == len(raw.y_val)


def _numpy_metrics(sim, state, raw, eps):
  params = sim.algorithm.eval_params(state.server, None)
  pred = np.asarray(sim.model.apply(params, jnp.asarray(sim.data.x_test)))
  pred_phys = raw.denormalize_y(pred, raw.client_test)
  return regression_metrics(pred_phys, raw.y_test, raw.client_test, eps_y=eps)


def test_physical_unit_metrics_equal_numpy_on_denormalised_predictions():
  raw, fed = _fleet()
  c = bev_config()
  sim = runner.build_simulation(c, "fedavg", fed)
  state = sim.init(0)
  ev = jax.tree.map(np.asarray, sim.evaluate(state))
  ref = _numpy_metrics(sim, state, raw, c.task.mape_eps)
  for name in ("rmse", "mae", "mape", "rmse_macro", "mae_macro", "mape_macro"):
    np.testing.assert_allclose(ev[name], ref[name], rtol=2e-4, err_msg=name)
  np.testing.assert_allclose(ev["client_rmse_mean"], ref["rmse_macro"], rtol=2e-4)
  # Normalised-unit RMSE is on the scale the model trains on, not Wh.
  params = sim.algorithm.eval_params(state.server, None)
  pred = np.asarray(sim.model.apply(params, jnp.asarray(fed.x_test)))
  np.testing.assert_allclose(ev["rmse_norm"], np.sqrt(np.mean((pred - fed.y_test) ** 2)),
                             rtol=2e-4)


def test_short_regression_run_learns_and_reports_physical_metrics():
  c = bev_config(rounds=6, eval_every=2, target_rmse=1e9)
  res = ff.run(c)
  rmse = [r["rmse"] for r in res.rows]
  assert rmse[-1] < 0.85 * rmse[0], rmse
  last = res.rows[-1]
  for name in ("mae", "mape", "rmse_macro", "mae_macro", "mape_macro", "rmse_norm"):
    assert np.isfinite(last[name]) and last[name] > 0
  summary = res.summary()["methods"]["fedavg"]
  assert summary["seeds"]["0"]["rounds_to_target"] == 2   # target_rmse: any RMSE
  assert "final RMSE" in res.table()


def test_window_models_registered_and_bev_dataset_view():
  raw, fed = _fleet()
  c = bev_config()
  for name in ("window_mlp", "window_gru", "window_lstm"):
    c.model.name = name
    c.model.rnn_hidden = 8
    model = models.build(c.model, fed.input_shape, 1)
    params = jax.eval_shape(model.init, jax.random.PRNGKey(0))
    assert set(params) == {"extractor", "head"}
    out = jax.eval_shape(model.apply, params, jnp.asarray(fed.x_test[:5]))
    assert out.shape == (5,) and model.name == name
  with pytest.raises(ValueError, match="one output"):
    models.build(c.model, fed.input_shape, 10)
  ds = sources.load(c.data, 0)
  assert ds.task == "regression" and ds.num_classes == 0
  np.testing.assert_array_equal(ds.train_groups, raw.client_train)
  np.testing.assert_array_equal(ds.y_test, fed.y_test)


def test_ved_csv_source_through_the_config(tmp_path):
  w1, w2 = test_data_ved.fleet_rows()
  test_data_ved.write_csv(tmp_path / "VED_171101_week.csv", w1)
  test_data_ved.write_csv(tmp_path / "VED_171108_week.csv", w2)
  c = bev_config(**{"data.source": "ved_csv", "data.num_clients": 0,
                    "data.bev.ved_path": str(tmp_path), "data.bev.stride": 5})
  config_lib.validate(c)
  fed = data_lib.build(c.data, 0)
  assert fed.num_clients == 2 and list(fed.client_group) == ["ev", "phev"]
  assert fed.client_test_size.min() > 0
  c.data.num_clients = 3
  with pytest.raises(ValueError, match="2 usable vehicles"):
    data_lib.build(c.data, 0)
  c.data.bev.ved_path = str(tmp_path / "missing")
  with pytest.raises(FileNotFoundError, match="missing"):
    data_lib.build(c.data, 0)


@pytest.mark.parametrize("key,value,match", [
    ("data.partition", "dirichlet", "config.data.partition='dirichlet'"),
    ("task.loss", "cross_entropy", "config.task.loss='cross_entropy'"),
    ("data.bev.eval_split", "train", "config.data.bev.eval_split='train'"),
    ("data.bev.fractions", (0.5, 0.1, 0.1), "config.data.bev.fractions"),
    ("data.bev.window", 0, "config.data.bev.window=0"),
    ("data.bev.hours_per_vehicle", -1.0, "config.data.bev.hours_per_vehicle=-1.0"),
    ("data.bev.class_mix", (1.0, 0.0), "config.data.bev.class_mix"),
    ("data.num_clients", 0, "config.data.num_clients=0"),
    ("model.rnn_hidden", 0, "config.model.rnn_hidden=0"),
    ("task.mape_eps", -1.0, "config.task.mape_eps=-1.0"),
    ("task.mape_rule", "drop", "config.task.mape_rule='drop'"),
    ("target_rmse", -2.0, "config.target_rmse=-2.0"),
    ("data.bev.input_clip", -1.0, "config.data.bev.input_clip=-1.0"),
    ("data.source", "ved_csv", "config.data.bev.ved_path=''"),
])
def test_bev_config_validation_names_key_and_value(key, value, match):
  c = bev_config()
  config_lib.validate(c)
  target = c
  parts = key.split(".")
  for p in parts[:-1]:
    target = target[p]
  target[parts[-1]] = value
  with pytest.raises(config_lib.ConfigError, match=match.replace("(", r"\(").replace(
      ")", r"\)").replace("[", r"\[")):
    config_lib.validate(c)


def test_per_class_churn_validation():
  c = bev_config()
  c.churn.per_class.bus = (0.5, 0.5)
  config_lib.validate(c)
  c.churn.per_class.tram = (0.1, 0.9)
  with pytest.raises(config_lib.ConfigError, match="churn.per_class.tram"):
    config_lib.validate(c)
  c = bev_config()
  c.churn.per_class.bus = (0.5, 1.5)
  with pytest.raises(config_lib.ConfigError, match="churn.per_class.bus"):
    config_lib.validate(c)
  d = config_lib.base_config()
  d.churn.per_class.bus = (0.1, 0.9)
  with pytest.raises(config_lib.ConfigError, match="needs a source with client groups"):
    config_lib.validate(d)
  d.churn.per_class = type(d.churn)()
  d.model.name = "window_gru"     # a regressor on a classification task
  with pytest.raises(config_lib.ConfigError, match="config.task.loss='cross_entropy'"):
    config_lib.validate(d)


def test_asymmetric_churn_by_vehicle_class():
  _, fed = _fleet()
  c = bev_config(participation=1.0, rounds=5, **{"client.local_steps": 1})
  c.churn.p_leave, c.churn.p_join = 0.0, 1.0
  c.churn.per_class.bus = (1.0, 0.0)     # buses leave after round 0 and never return
  p_leave, p_join = runner.churn_rates(c, fed)
  is_bus = np.asarray(fed.client_group) == "bus"
  np.testing.assert_array_equal(p_leave, np.where(is_bus, 1.0, 0.0))
  np.testing.assert_array_equal(p_join, np.where(is_bus, 0.0, 1.0))
  sim = runner.build_simulation(c, "fedavg", fed)
  _, metrics = sim.run_chunk(sim.init(0), 5)
  mask = np.asarray(metrics["clients/mask"])      # [rounds, S]; S = K (C = 1)
  ids = np.asarray(metrics["clients/ids"])
  assert mask[0].all()
  for t in range(1, 5):
    np.testing.assert_array_equal(mask[t], ~is_bus[ids[t]])
  # Symmetric churn keeps scalar rates; no churn gives None.
  c.churn.per_class = type(c.churn)()
  assert runner.churn_rates(c, fed) is None
  c.churn.p_leave = 0.1
  assert runner.churn_rates(c, fed) == (0.1, 1.0)
  with pytest.raises(ValueError, match="one rate per client"):
    sim_lib.Simulation(
        sim.algorithm, fed, sim.model, sim.task, sim.training,
        sim_lib.EngineConfig(availability=(np.zeros(3), 1.0)))
