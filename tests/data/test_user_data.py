"""Your own data: ``ff.run(config, data=...)`` checked like the files source
before any compute, tabular ``.npz`` files, and what a run that is not finite
from its first round says."""
from __future__ import annotations

import numpy as np
import pytest

import fedfrac as ff
from fedfrac import data as data_lib
from fedfrac.algorithms.contract import star_communication
from fedfrac.data import arrays, files
from fedfrac.data.validate import DataError
from fedfrac.runner.log import RunLog
from tests import helpers


def _table(n=120, d=5, classes=3, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, d)).astype(np.float32)
  return x, np.arange(n) % classes


def test_arrays_forms_and_held_out_test_set():
  x, y = _table()
  ds = arrays.user_data((x, y), test_fraction=0.25)
  assert isinstance(ds, data_lib.Dataset)
  assert ds.x_train.shape == (90, 5) and ds.x_test.shape == (30, 5)
  assert ds.num_classes == 3 and ds.x_train.dtype == np.float32
  given = arrays.user_data({"x_train": x[:100], "y_train": y[:100], "x_test": x[100:],
                            "y_test": y[100:]})
  assert given.x_test.shape == (20, 5)
  same = arrays.user_data(((x[:100], y[:100]), (x[100:], y[100:])))
  np.testing.assert_array_equal(same.y_test, given.y_test)


@pytest.mark.parametrize("mutate,match", [
    (lambda x, y: (np.where(np.arange(x.size).reshape(x.shape) == 7, np.nan, x), y),
     r"^data:x_train: .*NaN"),
    (lambda x, y: (x, np.where(np.arange(len(y)) == 3, 9, y)), r"^data:y_train: labels"),
    (lambda x, y: (x, y.astype(np.float32)), r"^data:y_train: "),
    (lambda x, y: (x, y[:-1]), r"^data:y_train: "),
])
def test_bad_arrays_are_refused_in_one_line_naming_the_array(mutate, match):
  x, y = _table()
  x2, y2 = mutate(x, y)
  parts = {"x_train": x2, "y_train": y2, "x_test": x[:20], "y_test": y[:20],
           "num_classes": 3}
  with pytest.raises(DataError, match=match) as info:
    arrays.user_data(parts)
  assert "\n" not in str(info.value)


def test_data_keys_and_shapes_of_the_container_are_checked():
  x, y = _table()
  with pytest.raises(DataError, match=r"data\['ytrain'\]: unknown key; did you mean "
                                      r"'y_train'\?"):
    arrays.user_data({"x_train": x, "ytrain": y})
  with pytest.raises(DataError, match="y_test is missing"):
    arrays.user_data({"x_train": x, "y_train": y, "x_test": x})
  with pytest.raises(DataError, match="a tuple of 3 items"):
    arrays.user_data((x, y, x))


def test_one_based_labels_are_pointed_out():
  x, y = _table()
  with pytest.warns(UserWarning, match="no example has label 0.*give y - 1"):
    arrays.user_data((x, y + 1))


def test_a_federated_dataset_with_an_empty_client_is_refused():
  fed = helpers.unequal_digits(sizes=(13, 40, 75, 22))
  arrays.user_data(fed)   # as it is
  empty = fed.client_size.copy()
  empty[2] = 0
  bad = fed.__class__(**{**fed.__dict__, "client_size": empty})
  with pytest.raises(DataError, match="data:clients"):
    arrays.user_data(bad)


def test_run_refuses_bad_data_before_any_compute():
  """The old ``run`` had no ``data=``; NaN inputs must not reach training."""
  x, y = _table()
  x[5, 2] = np.inf
  c = helpers.tiny_config(rounds=2)
  with pytest.raises(DataError, match=r"^data:x_train: "):
    ff.run(c, data=(x, y))


def test_npz_files_source_accepts_tabular_features(tmp_path):
  """The old ``npz`` loader refused ``[N, D]`` ("uint8 or float images")."""
  x, y = _table()
  np.savez(tmp_path / "t.npz", x_train=x[:100], y_train=y[:100], x_test=x[100:],
           y_test=y[100:])
  ds = files.load_files(str(tmp_path / "t.npz"), format="npz")
  assert ds.x_train.shape == (100, 5) and ds.x_train.dtype == np.float32
  assert ds.input_scale == 1.0 and ds.num_classes == 3
  counts = (np.arange(40).reshape(8, 5) % 7).astype(np.int64)   # integer features
  np.savez(tmp_path / "c.npz", x_train=counts, y_train=np.arange(8) % 2,
           x_test=counts[:3], y_test=np.arange(3) % 2)
  assert files.load_files(str(tmp_path / "c.npz")).x_train.dtype == np.float32
  np.savez(tmp_path / "b.npz", x_train=x[:, :, None, None, None], y_train=y,
           x_test=x[:, :, None, None, None], y_test=y)
  with pytest.raises(files.DataFileError, match=r"b.npz:x_train: has shape "
                                                r"\(120, 5, 1, 1, 1\).*tabular features"):
    files.load_files(str(tmp_path / "b.npz"))


def test_a_run_not_finite_from_its_first_round_points_at_the_data():
  log = RunLog("mine", "fedavg", 0, star_communication, 0.0, 0.0)
  nan = {"cohort": np.ones(2), "train_loss": np.array([np.nan, np.nan])}
  with pytest.warns(UserWarning) as caught:
    log.add_chunk(0, nan, {"accuracy": 0.1}, 0.0)
  first = str(caught[0].message)
  assert "diverged at round 1" in first and "check the data" in first
  assert "labels in 0..C-1" in first
  later = RunLog("mine", "fedavg", 0, star_communication, 0.0, 0.0)
  with pytest.warns(UserWarning) as caught:
    later.add_chunk(0, {"cohort": np.ones(2), "train_loss": np.array([1.0, np.nan])},
                    {"accuracy": 0.1}, 0.0)
  assert "round 2" in str(caught[0].message)
  assert "check the data" not in str(caught[0].message)


@pytest.mark.parametrize("case", ["empty arrays", "scalar arrays", "one class",
                                  "float64 beyond float32", "npz beyond float32"])
def test_degenerate_data_is_refused_in_one_line_before_any_compute(tmp_path, case):
  # Before: a bare NumPy error (empty), accuracy 1.0 reported as "ok" (every label
  # 0), a run that diverged at round 1 (1e300 became inf in float32).
  x, y = _table(n=60)
  if case == "empty arrays":
    data, match = (np.zeros((0, 5)), np.zeros((0,), int)), \
        r"^data:x_train: holds no examples \(shape \(0, 5\)\)"
  elif case == "scalar arrays":
    data, match = (np.float32(1.0), np.int64(0)), r"^data:x_train: holds no examples"
  elif case == "one class":
    data, match = (x, np.zeros(60, int)), \
        r"^data:y_train: every label is 0 \(one class\); expected at least two classes"
  elif case == "float64 beyond float32":
    x64 = x.astype(np.float64)
    x64[7, 2] = 1e300
    data, match = (x64, y), (r"^data:x_train: holds 1 value beyond float32 "
                             r"\(\|x\| > 3.4028235e\+38, first at index \[\d+, 2\]\)")
  else:
    x64 = x.astype(np.float64)
    x64[3, 1] = -1e300
    np.savez(tmp_path / "d.npz", x_train=x64[:48], y_train=y[:48], x_test=x64[48:],
             y_test=y[48:])
    with pytest.raises(DataError, match="holds 1 value beyond float32"):
      files.load_files(str(tmp_path / "d.npz"))
    return
  with pytest.raises(DataError, match=match):
    ff.run(helpers.tiny_config(rounds=1), data=data)


def test_test_labels_the_training_data_never_holds_are_said_in_one_line(capsys):
  # Before: accuracy 0.0 on them, reported as "ok" without a word.
  x, y = _table(n=90, classes=3)
  arrays.user_data((x[:60], y[:60], x[60:], y[60:] + 2))
  err = [l for l in capsys.readouterr().err.splitlines() if l.strip()]
  assert err == ["warning: data:y_test: 20 of 30 examples have labels data:y_train "
                 "never holds (3, 4), so no client learns them and they count as "
                 "errors"], err


def test_own_test_groups_with_a_natural_partition_are_used_or_refused():
  """Natural clients with their own test rows: a split that would re-sample other
  users' rows is refused before compute; ``test_split='natural'`` uses them."""
  from fedfrac._validation import ConfigError
  x, y = _table(n=120)
  groups = np.arange(120) % 4
  data = {"x_train": x[:80], "y_train": y[:80], "train_groups": groups[:80],
          "x_test": x[80:], "y_test": y[80:], "test_groups": groups[80:]}
  c = helpers.tiny_config(rounds=1)
  c.data.partition, c.data.num_clients = "natural", 4
  with pytest.raises(ConfigError, match=r"^config.data.test_split='like_train' with "
                     r"config.data.partition='natural': data= has test_groups"):
    ff.run(c, data=data)
  ds = arrays.user_data(data)
  c.data.test_split = "iid"
  with pytest.raises(ConfigError, match="config.data.test_split='iid'"):
    data_lib.build(c.data, seed=0, dataset=ds)
  c.data.test_split = "natural"
  fed = data_lib.build(c.data, seed=0, dataset=ds)
  for k in range(4):
    rows = fed.client_test_index[k, :fed.client_test_size[k]]
    assert set(groups[80:][rows]) == {k}


def test_a_vector_client_metric_left_out_of_the_table_is_said_once():
  log = RunLog("mine", "fedavg", 0, star_communication, 0.0, 0.0)
  rounds = {"cohort": np.ones(2), "train_loss": np.ones(2),
            "clients/loss": np.ones((2, 3)), "clients/grad": np.ones((2, 3, 4)),
            "server/spectrum": np.ones((2, 5))}
  with pytest.warns(UserWarning) as caught:
    log.add_chunk(0, rounds, {"accuracy": 0.1}, 0.0)
    log.add_chunk(2, rounds, {"accuracy": 0.1}, 0.0)
  assert sorted(str(w.message) for w in caught) == [
      "method 'mine' seed 0: metric 'grad' holds (4,) values per client, not one number, "
      "so it is left out of the per-round table; report a scalar (e.g. its mean or norm) "
      "to tabulate it"]
  assert "grad" not in log.round_rows[0] and log.round_rows[0]["train_loss"] == 1.0


def test_train_groups_of_the_wrong_length_without_test_arrays_is_one_line():
  """Without x_test the test set is split off x_train's rows, so train_groups must
  hold one id per row before that split (not an IndexError inside it)."""
  x, y = _table(n=120)
  with pytest.raises(DataError, match=r"^data:train_groups: has shape \(100,\); expected "
                                      r"one client id per row of data:x_train \(120,\)"):
    arrays.user_data({"x_train": x, "y_train": y, "train_groups": np.arange(100) % 4})
