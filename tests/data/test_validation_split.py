"""data.validation_fraction / data.eval_split: a per-client validation split carved
from the clients' train rows with the data seed (for learning-rate tuning)."""
import numpy as np
import pytest

from fedfrac import config as config_lib
from fedfrac import data as data_lib


def _cfg(**data):
  c = config_lib.base_config()
  c.data.num_clients = 4
  for k, v in data.items():
    c.data[k] = v
  return c


def test_validation_rows_come_out_of_each_clients_train_rows_disjointly():
  full = data_lib.build(_cfg().data, 0)
  fed = data_lib.build(_cfg(validation_fraction=0.25).data, 0)
  for k in range(full.num_clients):
    before = set(full.client_index[k, :full.client_size[k]].tolist())
    train = set(fed.client_index[k, :fed.client_size[k]].tolist())
    val_pos = fed.client_val_index[k, :fed.client_val_size[k]]
    assert train <= before
    assert abs(fed.client_val_size[k] - 0.25 * len(before)) < 1
    assert len(train) == len(before) - fed.client_val_size[k]
    # The validation rows are the client's own rows that left its train split.
    val_x = fed.x_val[val_pos]
    left = sorted(before - train)
    np.testing.assert_array_equal(val_x, full.x_train[left])
  # The test set is untouched by default.
  np.testing.assert_array_equal(fed.x_test, full.x_test)
  assert fed.class_counts.sum() == fed.client_size.sum()


def test_eval_split_val_puts_the_validation_split_in_the_test_slot_same_training():
  tune = data_lib.build(_cfg(validation_fraction=0.2, eval_split="val").data, 3)
  final = data_lib.build(_cfg(validation_fraction=0.2).data, 3)
  np.testing.assert_array_equal(tune.client_index, final.client_index)
  np.testing.assert_array_equal(tune.x_test, final.x_val)
  np.testing.assert_array_equal(tune.client_test_index, final.client_val_index)
  other = data_lib.build(_cfg(validation_fraction=0.2).data, 4)
  # The data seed draws it; its size is the same for every seed (seeds batch).
  assert other.x_val.shape == final.x_val.shape
  assert other.x_val.shape[0] == round(0.2 * final.client_size.sum() / 0.8)
  assert not np.array_equal(other.x_val, final.x_val)


@pytest.mark.parametrize("data, match", [
    (dict(validation_fraction=1.0), "data.validation_fraction"),
    (dict(validation_fraction=-0.1), "data.validation_fraction"),
    (dict(eval_split="train"), "data.eval_split"),
    (dict(eval_split="val"), "validation_fraction > 0"),
])
def test_bad_validation_options_name_the_key(data, match):
  from fedfrac.data import validate
  with pytest.raises(ValueError, match=match):
    validate.validate_data(_cfg(**data))
