"""Training-data augmentation on device (fedfrac.data.augment, ``data.augment``)."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac import config as config_lib
from fedfrac import runner
from fedfrac.algorithms import local_training
from fedfrac.algorithms.contract import ClientView
from fedfrac.data import augment
from tests.helpers import tiny_config

# A 6x6 one-channel image whose pixel (r, c) holds r*6 + c + 1: every value is
# unique and non-zero, so a crop's offset and a flip can be read off the result.
RAMP = (np.arange(36, dtype=np.float32) + 1).reshape(6, 6, 1)


def _draws(aug, n, image=RAMP, key=0):
  """``n`` augmentations of ``image`` (one batch of n copies)."""
  x = jnp.asarray(np.repeat(image[None], n, axis=0))
  return np.asarray(aug.batch(jax.random.PRNGKey(key), x))


@pytest.mark.parametrize("text, fragment", [
    ("flp", "unknown op 'flp'; allowed: crop:SIZE:PAD, flip, cutout:SIZE"),
    ("crop:6", "op 'crop:6' takes 2 integer argument(s)"),
    ("flip:1", "op 'flip:1' takes 0 integer argument(s)"),
    ("cutout:-2", "arguments must be integers >= 0"),
    ("cutout:0", "SIZE must be >= 1"),
    ("crop:7:1", "crop size 7 is larger than the 6x6 image"),
    ("crop:4:1", "crop size 4 is smaller than the 6x6 image"),
    ("crop:6:1,cutout:7", "Cutout size 7 is bigger than the 6x6 image"),
])
def test_bad_ops_and_sizes_are_one_line_config_errors(text, fragment):
  with pytest.raises(config_lib.ConfigError) as err:
    augment.build(text, (6, 6, 1))
  message = str(err.value)
  assert message.startswith(f"config.data.augment={text!r}: ") and fragment in message
  assert "\n" not in message


def test_ops_on_inputs_that_are_not_images_are_refused():
  with pytest.raises(config_lib.ConfigError, match=r"needs image inputs \[H, W, C\]; "
                     r"this data's inputs are \(60,\) per example"):
    augment.build("flip", (60,))
  assert augment.build("", (60,)) is None and augment.build(" , ", (6, 6, 1)) is None


def test_same_key_same_images_and_keys_differ_by_step_and_client():
  aug = augment.build("crop:6:2,flip,cutout:3", (6, 6, 1))
  x = jnp.asarray(np.repeat(RAMP[None], 16, axis=0))
  key = jax.random.PRNGKey(3)
  a = np.asarray(aug(key, 5, x))
  np.testing.assert_array_equal(a, np.asarray(aug(key, 5, x)))
  assert not np.array_equal(a, np.asarray(aug(key, 6, x)))                 # next step
  assert not np.array_equal(a, np.asarray(aug(jax.random.PRNGKey(4), 5, x)))  # client
  assert len({a[i].tobytes() for i in range(16)}) > 8   # each example draws its own


def test_crop_offsets_are_uniform_and_padding_is_zero():
  pad, n = 2, 5000
  out = _draws(augment.build("crop:6:2", (6, 6, 1)), n)[..., 0]
  offsets = []
  for image in out:
    r, c = np.argwhere(image > 0)[0]              # where the image's first row/col landed
    value = image[r, c] - 1                       # = source row*6 + col
    src_r, src_c = divmod(int(value), 6)
    dr, dc = r - src_r, c - src_c                 # shift of the image inside the window
    expected = np.zeros((6, 6), np.float32)
    for i in range(6):
      for j in range(6):
        si, sj = i - dr, j - dc
        if 0 <= si < 6 and 0 <= sj < 6:
          expected[i, j] = RAMP[si, sj, 0]
    np.testing.assert_array_equal(image, expected)   # a shifted copy, zeros elsewhere
    offsets.append((dr + pad, dc + pad))
  counts = np.zeros((2 * pad + 1, 2 * pad + 1))
  for r, c in offsets:
    counts[2 * pad - r, 2 * pad - c] += 1
  # 25 equally likely offsets (0..2·PAD on each axis): 200 expected per cell.
  assert counts.min() > 140 and counts.max() < 260, counts


def test_flip_mirrors_columns_half_of_the_time():
  out = _draws(augment.build("flip", (6, 6, 1)), 4000)
  flipped = np.array([np.array_equal(o, RAMP[:, ::-1]) for o in out])
  same = np.array([np.array_equal(o, RAMP) for o in out])
  assert np.all(flipped ^ same)
  assert 0.46 < flipped.mean() < 0.54


def test_cutout_fills_a_clipped_square_with_the_input_mean():
  # uint8-like image (scale 1/255) normalised with mean 0.2: Cutout writes the raw
  # value that normalises to 0, 0.2 * 255.
  size, n = 4, 6000
  aug = augment.build(f"cutout:{size}", (6, 6, 1), input_scale=1 / 255, input_mean=(0.2,))
  assert aug.fill == pytest.approx((0.2 * 255,))
  out = _draws(aug, n)[..., 0]
  covered = out != RAMP[..., 0]
  np.testing.assert_allclose(out[covered], 0.2 * 255, rtol=1e-6)
  np.testing.assert_array_equal(out[~covered], np.broadcast_to(RAMP[..., 0], out.shape)[~covered])
  for box in covered:                                   # one axis-aligned rectangle
    rows, cols = np.nonzero(box.any(1))[0], np.nonzero(box.any(0))[0]
    assert box[rows.min():rows.max() + 1, cols.min():cols.max() + 1].all()
    assert len(rows) <= size and len(cols) <= size
  # Each axis covers |[c − 2, c + 2) ∩ [0, 6)| for a centre c uniform on 0..5:
  # lengths 2, 3, 4, 4, 4, 3 -> mean 10/3; the area is the product of independent axes.
  assert covered.sum(axis=(1, 2)).mean() == pytest.approx((10 / 3) ** 2, rel=0.04)
  pixel_rate = covered.mean(axis=0)      # corners are covered least, the centre most
  assert pixel_rate[0, 0] < pixel_rate[2, 2]


def _views(num_clients=3, n=20, batch=8):
  rng = np.random.default_rng(0)
  x = rng.integers(0, 256, (num_clients * n, 6, 6, 1)).astype(np.uint8)
  y = rng.integers(0, 3, (num_clients * n,)).astype(np.int32)
  index = np.arange(num_clients * n, dtype=np.int32).reshape(num_clients, n)
  sizes = np.array([20, 13, 7], np.int32)
  steps = np.ceil(sizes / batch).astype(np.int32)
  return x, y, index, sizes, steps


def _training(augment_text, max_steps, batch=8, unroll=1, dynamic=False):
  import optax
  aug = augment.build(augment_text, (6, 6, 1), 1 / 255, (0.5,))
  return local_training.LocalTraining(
      optimizer=optax.sgd(1.0, momentum=0.9), lr_schedule=lambda t: 0.05 + 0.0 * t,
      batch_size=batch, local_epochs=1, local_steps=None, max_steps=max_steps,
      unroll=unroll, dynamic_steps=dynamic, augment=aug)


def _loss(params, x, y, mask, key):
  del key
  logits = x.reshape(x.shape[0], -1).astype(jnp.float32) / 255 @ params["w"] + params["b"]
  nll = -jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1)[:, 0]
  m = mask.astype(jnp.float32)
  return jnp.sum(nll * m) / jnp.maximum(jnp.sum(m), 1.0), None


def _train(training, view, key):
  params = {"w": jnp.zeros((36, 3)), "b": jnp.zeros((3,))}
  out, _, metrics = local_training.local_train(params, training.optimizer.init(params),
                                               view, key, 0.05, _loss, training)
  return out, metrics


def test_vmapped_clients_equal_a_per_client_loop():
  # The engine's two ways to run a cohort: vmap over clients, or one client after
  # another (lax.map, client_parallelism="map").
  x, y, index, sizes, steps = _views()
  training = _training("crop:6:2,flip,cutout:3", int(steps.max()))
  keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.PRNGKey(7), i))(jnp.arange(3))

  def one(args):
    idx, size, nsteps, key = args
    view = ClientView(jnp.asarray(x), jnp.asarray(y), idx, size, nsteps, jnp.int32(0))
    return _train(training, view, key)[0]
  args = (jnp.asarray(index), jnp.asarray(sizes), jnp.asarray(steps), keys)
  batched, looped = jax.jit(lambda a: (jax.vmap(one)(a), jax.lax.map(one, a)))(args)
  for a, b in zip(jax.tree.leaves(looped), jax.tree.leaves(batched)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-7)
  # the augmented batches themselves are bit-identical under vmap and alone
  aug = training.augment
  xb = jnp.asarray(x[index[:, :8]])
  together = jax.vmap(lambda k, xs: aug(k, 2, xs))(keys, xb)
  for k in range(3):
    np.testing.assert_array_equal(np.asarray(together[k]), np.asarray(aug(keys[k], 2, xb[k])))


@pytest.mark.parametrize("dynamic", [False, True])
def test_masked_padding_steps_stay_bit_exact_no_ops(dynamic):
  # A client with 1 step of 3 (scan) or run alone past its steps: extra masked
  # steps must not move params even though their batches are augmented.
  x, y, index, sizes, steps = _views()
  view = ClientView(jnp.asarray(x), jnp.asarray(y), jnp.asarray(index[2]), jnp.int32(7),
                    jnp.int32(1), jnp.int32(2))
  key = jax.random.PRNGKey(1)
  exact = jax.jit(lambda v: _train(_training("crop:6:2,flip,cutout:3", 1), v, key)[0])(view)
  longer = jax.jit(lambda v: _train(_training("crop:6:2,flip,cutout:3", 3, unroll=3,
                                              dynamic=dynamic), v, key)[0])(view)
  for a, b in zip(jax.tree.leaves(exact), jax.tree.leaves(longer)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_training_without_augment_is_todays_program():
  # augment=None (the default) traces the very program of a LocalTraining built
  # without the field; with ops set the program gains the augmentation.
  x, y, index, sizes, steps = _views()
  view = ClientView(jnp.asarray(x), jnp.asarray(y), jnp.asarray(index[0]), jnp.int32(20),
                    jnp.int32(3), jnp.int32(0))
  key = jax.random.PRNGKey(1)
  with_aug = _training("crop:6:2,flip", 3)
  fields = {f.name: getattr(with_aug, f.name) for f in dataclasses.fields(with_aug)
            if f.name != "augment"}
  today = local_training.LocalTraining(**fields)
  jaxpr = lambda t: str(jax.make_jaxpr(lambda v: _train(t, v, key))(view))
  assert today.augment is None
  assert jaxpr(dataclasses.replace(with_aug, augment=None)) == jaxpr(today)
  assert jaxpr(with_aug) != jaxpr(today)


def test_a_config_without_the_augment_key_is_refused_in_one_line():
  # A config built in Python is checked as the command line checks a file: one
  # that lost data.augment (a base field every run reads) is refused before any
  # compute instead of running with a value it did not choose.
  from fedfrac.config import ConfigError
  old = tiny_config(rounds=2, eval_every=1, only="fedavg")
  del old.data["augment"]
  with pytest.raises(ConfigError, match=r"the config lacks config\.data\.augment"):
    runner.run(old)


ROOT = __import__("os").path.dirname(__import__("os").path.dirname(
    __import__("os").path.dirname(__import__("os").path.abspath(__file__))))
CLI = ("--config=configs/quickstart.py", "--config.only=fedavg", "--config.rounds=1",
       "--config.progress=False", "--config.model.hidden=(16,)", "--config.workers=1")


def _cli(*args):
  from tests import helpers
  return helpers.run_cli_in_process([*CLI, *args])


def test_cli_run_with_augment_and_one_line_errors(tmp_path):
  import json
  out = _cli("--config.data.augment=crop:8:1,flip,cutout:4", f"--workdir={tmp_path}")
  assert out.returncode == 0, out.stderr[-3000:]
  assert json.loads((tmp_path / "config.json").read_text())["data"]["augment"] == (
      "crop:8:1,flip,cutout:4")
  assert (tmp_path / "metrics.csv").exists()
  # a size only the data can check: one line, exit 2, before any compute
  bad = _cli("--config.data.augment=flip,cutout:9")
  assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr[-3000:]
  assert bad.stderr.rstrip().splitlines()[-1].startswith(
      "error: config.data.augment='flip,cutout:9': Cutout size 9 is bigger than the 8x8 image")


def test_config_validation_checks_the_ops():
  config_lib.validate(tiny_config(**{"data.augment": "crop:8:1, flip"}))
  with pytest.raises(config_lib.ConfigError, match="unknown op 'rotate'"):
    config_lib.validate(tiny_config(**{"data.augment": "flip,rotate"}))
  with pytest.raises(config_lib.ConfigError, match="must be a string"):
    augment.parse(3)


def test_list_describes_data_augment():
  from fedfrac import catalog
  text = catalog.catalog_text()
  assert "config.data.augment" in text
  for op in ("crop:SIZE:PAD", "flip", "cutout:SIZE"):
    assert f"\n  {op}" in text
