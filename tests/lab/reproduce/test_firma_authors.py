"""``fedfrac-reproduce firma_authors``: fedfrac's FibFL / FibFL+ beside the authors'
PyTorch code (docs/design.md §3.3). The checks themselves need the authors'
repository and PyTorch, so here only what the command refuses before any work:
one ``error:`` line naming the flag, exit status 2."""
from __future__ import annotations

import numpy as np
import pytest

from fedfrac_lab.reproduce import PAPERS, firma_authors


@pytest.mark.parametrize("argv,message", [
    (["parity"], "--authors: parity needs a checkout of the authors' code"),
    (["fmnist", "--method=fibfl"], "--authors: fmnist needs a checkout"),
    (["parity", "--authors=/nowhere", "--method=fibfl_pp"],
     "--method: parity covers fibfl and fibfl_plus"),
    (["fedfrac", "--set=gama=1.0"], "--set: gama: unknown option for algorithm 'fibfl'"),
    (["fedfrac", "--method=fibfl_plus", "--set=tau=1.5"], "--set: tau=1.5"),
    (["fedfrac", "--set=mode=papers"], "--set: mode='papers'; allowed values are"),
])
def test_bad_input_is_one_error_line_before_any_work(argv, message, capsys):
  with pytest.raises(SystemExit) as e:
    firma_authors.main(argv)
  assert e.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()[-1]
  assert err.startswith("fedfrac-reproduce firma_authors: error: ") and message in err


def test_set_options_reads_literals_and_keeps_words():
  assert firma_authors.set_options(["gamma=1.0", "init=shared", "extractor_epochs=2"]) == {
      "gamma": 1.0, "init": "shared", "extractor_epochs": 2}
  assert PAPERS["firma_authors"] is firma_authors


def firma_model_and_images(n=50):
  import jax

  from fedfrac import models
  from fedfrac.config_base import base_config
  cfg = base_config().model
  cfg.name = "firma_mlp"
  model = models.build(cfg, (28, 28), 10, 1.0 / 255.0)
  x = np.asarray(jax.random.randint(jax.random.PRNGKey(3), (n, 28, 28), 0, 256), np.uint8)
  return model, x


def test_live_units_counts_last_relu_units_active_on_some_image():
  """Two clients: one as drawn, one whose last layer has 10 units killed (kernel
  column 0, bias -1000) and 5 units forced on (kernel column 0, bias +1): the
  counts equal a direct ``any(features > 0)`` over every image, also when the
  chunk (16) does not divide the 50 images."""
  import jax
  import jax.numpy as jnp

  model, x = firma_model_and_images()
  p0 = model.init(jax.random.PRNGKey(0))
  p1 = model.init(jax.random.PRNGKey(1))
  last = p1["extractor"]["Dense_2"]
  kernel, bias = np.array(last["kernel"]), np.array(last["bias"])
  kernel[:, :15] = 0.0
  bias[:10], bias[10:15] = -1000.0, 1.0
  p1["extractor"]["Dense_2"] = {"kernel": jnp.asarray(kernel), "bias": jnp.asarray(bias)}
  stacked = jax.tree.map(lambda a, b: jnp.stack([a, b]), p0, p1)
  want = [int(np.sum(np.any(np.asarray(model.apply(p, x, return_features=True)[1]) > 0,
                            axis=0))) for p in (p0, p1)]
  got = firma_authors.live_units(firma_authors.live_units_program(model, x, chunk=16),
                                 stacked)
  assert got == want
  assert want[1] <= 118 and want[1] != want[0]
  # Every client the same params (after a warm-up average): counted once, repeated.
  same = jax.tree.map(lambda a: jnp.stack([a, a, a]), p1)
  assert firma_authors.live_units(firma_authors.live_units_program(model, x), same) == \
      [want[1]] * 3


def test_warmup_optimizer_value_is_checked_before_any_work(capsys):
  with pytest.raises(SystemExit) as e:
    firma_authors.main(["fedfrac", "--method=fibfl_pp", "--set=warmup_optimizer=zero",
                        "--live-units"])
  assert e.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()[-1]
  assert "--set: warmup_optimizer" in err and "'keep', 'reset', 'average'" in err
