"""FLOPs counted from layer shapes: the jaxpr count of one local step equals the
layer-shape formula of the CPU benchmark (FIRMA's MLP, CNNMnist); scans count
their length; a FIRMA run's count follows its local training."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac import models
from fedfrac_lab.bench import campaign, flops
from fedfrac.config import base_config


def _params(name, shape):
  c = base_config()
  c.model.name = name
  model = models.build(c.model, shape, 10, 1.0, (), ())
  return model, jax.eval_shape(model.init, jax.random.PRNGKey(0))


@pytest.mark.parametrize("name, shape, macs", [
    ("firma_mlp", (784,), campaign.FIRMA_MACS),
    ("cnn_mnist", (28, 28, 1), campaign.CNN_MNIST_MACS)])
def test_a_training_step_counts_what_the_layer_shapes_say(name, shape, macs):
  model, params = _params(name, shape)
  x = jax.ShapeDtypeStruct((64,) + shape, jnp.float32)
  y = jax.ShapeDtypeStruct((64,), jnp.int32)

  def loss(p, x, y):
    return -jnp.mean(jax.nn.log_softmax(model.apply(p, x))[jnp.arange(64), y])
  per_sample = flops.jaxpr_flops(jax.grad(loss), params, x, y) / 64
  assert per_sample == campaign.chain_flops(macs, (True,) * len(macs))
  # The forward pass alone: 2 FLOPs a multiply-add.
  assert flops.jaxpr_flops(model.apply, params, x) / 64 == 2 * sum(macs)


def test_scans_count_their_length_and_while_loops_are_refused():
  a = jax.ShapeDtypeStruct((8, 16), jnp.float32)
  b = jax.ShapeDtypeStruct((16, 4), jnp.float32)
  one = flops.jaxpr_flops(lambda a, b: a @ b, a, b)
  assert one == 2 * 8 * 16 * 4
  scanned = lambda a, b: jax.lax.scan(lambda c, _: (c, a @ b), 0.0, None, length=5)[1]
  assert flops.jaxpr_flops(scanned, a, b) == 5 * one
  looped = lambda a, b: jax.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, a @ b),
                                           (0, jnp.zeros((8, 4))))
  with pytest.raises(ValueError, match="while loop"):
    flops.jaxpr_flops(looped, a, b)


def test_a_firma_runs_count_follows_its_local_training():
  _, params = _params("firma_mlp", (784,))
  macs, head = flops.layer_macs(params)
  assert macs == campaign.FIRMA_MACS and head == (False, False, False, True)
  sizes = np.array([100, 64, 130])
  rows = (2 + 1 + 3) * 64                     # ceil(n / 64) steps of 64 rows
  opts = {"head_epochs": 1, "extractor_epochs": 20}
  h = campaign.chain_flops(macs, head)
  e = campaign.chain_flops(macs, tuple(not x for x in head))
  full = campaign.chain_flops(macs, (True,) * 4)
  gate = sizes.sum() * 2 * sum(macs)
  assert flops.firma_run_flops("fibfl", opts, sizes, 64, 3, params) == pytest.approx(
      3 * (rows * (h + 20 * e) + gate))
  assert flops.firma_run_flops("fedrep", opts, sizes, 64, 3, params) == pytest.approx(
      3 * rows * (h + 20 * e))
  assert flops.firma_run_flops("fedavg", {}, sizes, 64, 3, params, local_epochs=5) == \
      pytest.approx(3 * rows * 5 * full)
  # FibFL++: W = max(1, floor(R / 6)) FedAvg warm-up rounds of max(E_h, E_e) epochs.
  pp = flops.firma_run_flops("fibfl_pp", dict(opts, compat="reference_code"), sizes, 64,
                             12, params)
  assert pp == pytest.approx(2 * (rows * 20 * full + gate)
                             + 10 * (rows * (h + 20 * e) + gate))
  with pytest.raises(ValueError, match="method='moon'"):
    flops.firma_run_flops("moon", opts, sizes, 64, 3, params)
