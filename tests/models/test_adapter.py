"""A plain flax module as a fedfrac model (:mod:`fedfrac.models.adapter`): no
``train=`` argument, no extractor/head split, the head named for personalised
methods."""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedfrac import models


class TinyMLP(nn.Module):
  """What a user writes: no train argument, parameters not split."""
  @nn.compact
  def __call__(self, x):
    x = nn.relu(nn.Dense(8)(x.reshape((x.shape[0], -1))))
    return nn.Dense(3, name="head")(x)


class WithDropout(nn.Module):
  @nn.compact
  def __call__(self, x, deterministic: bool = True):
    x = nn.Dropout(0.5, deterministic=deterministic)(nn.Dense(8)(x))
    return nn.Dense(3)(x)


class AlwaysDropout(nn.Module):
  """Dropout switched on for good: draws randomness when evaluated too."""
  @nn.compact
  def __call__(self, x):
    return nn.Dense(3)(nn.Dropout(0.5, deterministic=False)(nn.Dense(8)(x)))


class WithBatchNorm(nn.Module):
  @nn.compact
  def __call__(self, x, train: bool = False):
    return nn.Dense(3)(nn.BatchNorm(use_running_average=not train)(x))


def _model(module, head=None, outputs=3):
  return models.adapted_model(models.flax_model(module, head=head), (5,), outputs)


def test_parameters_split_at_the_named_head_and_outputs_match_the_module():
  model = _model(TinyMLP(), head="head")
  params = model.init(jax.random.PRNGKey(0))
  assert set(params) == {"extractor", "head"}
  assert set(params["extractor"]) == {"Dense_0"} and set(params["head"]) == {"kernel", "bias"}
  x = jnp.asarray(np.random.default_rng(0).normal(size=(4, 5)), jnp.float32)
  inner = models.flax_model(TinyMLP(), head="head").module_params(params)
  np.testing.assert_allclose(model.apply(params, x), TinyMLP().apply({"params": inner}, x),
                             rtol=1e-6)
  out, features = model.apply(params, x, return_features=True)
  hidden = nn.relu(x @ inner["Dense_0"]["kernel"] + inner["Dense_0"]["bias"])
  np.testing.assert_allclose(features, hidden, rtol=1e-5, atol=1e-6)   # the head's input
  assert out.shape == (4, 3)


class NoHead(nn.Module):
  @nn.compact
  def __call__(self, x):
    return nn.Dense(3)(nn.relu(nn.Dense(8)(x)))


def test_without_a_head_everything_is_extractor_and_features_are_refused():
  model = _model(NoHead())
  params = model.init(jax.random.PRNGKey(0))
  assert params["head"] == {} and set(params["extractor"]) == {"Dense_0", "Dense_1"}
  with pytest.raises(ValueError, match=r"model.head=None: .*flax_model\(module, head="):
    model.apply(params, jnp.ones((2, 5)), return_features=True)


def test_a_submodule_named_head_is_the_head_of_a_module_given_as_it_is():
  """``model=Net()`` whose last layer is ``name="head"`` left every parameter in
  the extractor, so FedRep and the FIRMA ring crashed ("vmap wrapped function
  must be passed at least one argument")."""
  plain, named = _model(TinyMLP()), _model(TinyMLP(), head="head")
  params = plain.init(jax.random.PRNGKey(0))
  assert jax.tree.map(np.shape, params) == jax.tree.map(np.shape,
                                                        named.init(jax.random.PRNGKey(0)))
  assert set(params["extractor"]) == {"Dense_0"} and set(params["head"]) == {"kernel", "bias"}
  x = jnp.ones((2, 5))
  inner = models.flax_model(TinyMLP()).module_params(params)
  assert set(inner) == {"Dense_0", "head"}
  np.testing.assert_allclose(plain.apply(params, x), TinyMLP().apply({"params": inner}, x))
  assert plain.apply(params, x, return_features=True)[1].shape == (2, 8)


def test_a_deterministic_argument_follows_train():
  model = _model(WithDropout())
  params = model.init(jax.random.PRNGKey(0))
  x = jnp.ones((64, 5))
  np.testing.assert_allclose(model.apply(params, x), model.apply(params, x))
  a = model.apply(params, x, train=True, key=jax.random.PRNGKey(1))
  b = model.apply(params, x, train=True, key=jax.random.PRNGKey(2))
  assert not np.allclose(a, b)   # dropout on while training


@pytest.mark.parametrize("module,head,outputs,match", [
    (WithBatchNorm(), None, 3, "variable collections batch_stats"),
    (TinyMLP(), "classifier", 3, r"model.head='classifier': .*submodules are 'Dense_0', "
                                 r"'head'"),
    (TinyMLP(), None, 10, r"outputs of shape \(2, 3\) .*expected \(2, 10\)"),
    (AlwaysDropout(), None, 3, r"^model: AlwaysDropout draws randomness when evaluated "
                               r"\(Dropout_0 needs PRNG for \"dropout\"\): fedfrac calls its "
                               r"__call__\(x, train=...\) .*nn.Dropout\(rate, "
                               r"deterministic=not train\)$"),
])
def test_modules_fedfrac_cannot_run_are_refused_in_one_line(module, head, outputs, match):
  with pytest.raises(ValueError, match=match):
    _model(module, head, outputs)


def test_register_makes_a_module_a_model_name():
  try:
    models.register("tiny_mlp", models.flax_model(TinyMLP(), head="head"))
    assert "tiny_mlp" in models.names()
    with pytest.raises(ValueError, match="built-in model"):
      models.register("mlp", TinyMLP())
  finally:
    models.USER_MODELS.pop("tiny_mlp", None)
  with pytest.raises(TypeError, match="expected a flax.linen Module"):
    models.flax_model(lambda x: x)
  with pytest.raises(TypeError, match=r"^model: TinyMLP is a flax.linen Module class; pass "
                                      r"an instance, e.g. TinyMLP\(\)$"):
    models.register("tiny_mlp", TinyMLP)   # ff.run(config, model=TinyMLP)
