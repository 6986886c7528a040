"""Convolution forms: under vmap over per-client parameters, ``xla`` and
``im2col`` give CNNMnist, CNN4 and CNNCifar the same logits, loss and gradients
(float rounding); ``auto`` picks a form per backend from its table; the config
key ``model.conv_impl`` reaches the model and a bad value gets one line."""
from __future__ import annotations

import pytest

from fedfrac import config as config_lib
from fedfrac import models
from fedfrac_lab.bench import convs
from fedfrac.models import cnn
from tests import helpers

import jax
import jax.numpy as jnp
import numpy as np

SMALL = {"cnn_mnist": (16, 16, 1)}


@pytest.mark.parametrize("padding, channels", [("VALID", 1), ("SAME", 3)])
def test_vmapped_forms_agree_on_outputs_and_gradients(padding, channels):
  """The layers of CNNMnist (VALID, 1 and 10 input channels), CNN4 (SAME) and
  CNNCifar (3 channels), vmapped over 3 clients' own kernels."""
  kx, kw = jax.random.split(jax.random.PRNGKey(0))
  x = jax.random.normal(kx, (3, 2, 9, 8, channels))      # [clients, B, H, W, C]
  w = jax.random.normal(kw, (3, 5, 5, channels, 4))      # [clients, kh, kw, C, O]

  def loss(form):
    one = lambda xc, wc: jnp.sum(jnp.sin(cnn.conv2d(xc, wc, padding, form)))
    return jax.jit(jax.vmap(jax.value_and_grad(one, (0, 1))))
  got = {form: jax.tree.leaves(loss(form)(x, w)) for form in convs.FORMS}
  for a, b in zip(got["xla"], got["im2col"]):
    np.testing.assert_allclose(a, b, atol=1e-4, rtol=1e-4)


def test_the_conv_forms_benchmark_times_both_forms_and_compares_them():
  result = convs.run(("cnn_mnist",), clients=2, batch=3, repeats=1, shape=SMALL["cnn_mnist"])
  rows = result["rows"]
  assert [r["form"] for r in rows] == ["xla", "im2col"] and result["auto"] == "im2col"
  assert rows[0]["max_abs_diff_vs_xla"] == 0.0 and rows[1]["max_abs_diff_vs_xla"] < 1e-4
  assert all(r["forward_backward_s"] > 0 for r in rows)
  assert "| cnn_mnist | im2col | 2 x 3 |" in convs.markdown(result)


def test_auto_picks_the_form_of_each_backend_from_its_table():
  assert cnn.resolve_conv_impl("auto", "cpu") == "im2col" == cnn.AUTO_CONV_IMPL["cpu"]
  assert cnn.resolve_conv_impl("auto", "gpu") == cnn.AUTO_CONV_IMPL["gpu"]
  assert cnn.resolve_conv_impl("auto", "some_new_backend") == "xla"
  assert cnn.resolve_conv_impl("xla", "cpu") == "xla"


def test_model_conv_impl_reaches_the_model_and_is_checked():
  c = helpers.tiny_config(**{"model.name": "cnn4", "model.padding": "SAME",
                             "model.conv_impl": "xla"})
  m = models.build(c.model, (8, 8, 1), 10)
  assert m.module.extractor.conv_impl == "xla"
  c.model.conv_impl = "fft"
  with pytest.raises(config_lib.ConfigError) as e:
    config_lib.validate(c)
  assert str(e.value) == ("config.model.conv_impl='fft': allowed values are auto, im2col, "
                          "xla")


def test_patch_matmul_gradients_are_autodiffs_to_float_rounding():
  """The im2col product's custom gradient (kernel gradient as ``(gᵀ cols)ᵀ``)
  equals autodiff of the plain product, vmapped over clients as the engine runs it."""
  kc, kw = jax.random.split(jax.random.PRNGKey(3))
  cols = jax.random.normal(kc, (2, 300, 40))
  w = jax.random.normal(kw, (2, 40, 6))
  loss = lambda mm: jax.jit(jax.vmap(jax.grad(lambda c, k: jnp.sum(jnp.sin(mm(c, k))),
                                              (0, 1))))
  got = loss(cnn._patch_matmul)(cols, w)
  want = loss(lambda c, k: c @ k)(cols, w)
  for a, b in zip(got, want):
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
