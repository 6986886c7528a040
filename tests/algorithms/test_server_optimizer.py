"""Any optax optimizer as the server step (``server_optimizer``): the reductions
to FedAvg, FedAvgM and FedAdam, the option by name, its checks, and a stable
description for workdir fingerprints and sweep point ids."""
from __future__ import annotations

import jax
import ml_collections
import numpy as np
import optax
import pytest

from fedfrac import algorithms
from fedfrac.algorithms import server_optimizer as server_opt
from tests import helpers


_DONE: dict = {}   # (name, options) -> final parameters, shared by the tests here


def _final_params(name, **options):
  """The server's parameters after 3 rounds of ``name`` with ``options`` (4
  unequal digits clients, 3 sampled per round)."""
  key = (name, tuple(sorted(options.items(), key=lambda kv: kv[0])))
  if key not in _DONE:
    sim = helpers.simulation(helpers.unequal_digits(),
                             lambda ctx: algorithms.make(name, ctx, **options),
                             {"batch_size": 16, "lr": 0.1}, rounds=3, participation=0.75)
    final, _ = sim.run_chunk(sim.init(1), 3)
    _DONE[key] = jax.device_get(final.server["params"])
  return _DONE[key]


@pytest.mark.parametrize("reference,options,server", [
    (("fedavg", {}), {}, optax.sgd(1.0)),
    (("fedavgm", {"momentum": 0.8, "server_lr": 0.7}), {}, optax.sgd(0.7, momentum=0.8)),
    (("fedavgm", {"momentum": 0.8, "server_lr": 0.7, "nesterov": True}), {},
     optax.sgd(0.7, momentum=0.8, nesterov=True)),
    (("fedprox", {"mu": 0.1}), {"mu": 0.1}, optax.sgd(1.0)),
], ids=["sgd-is-fedavg", "momentum-is-fedavgm", "nesterov-is-fedavgm", "fedprox"])
def test_an_optax_server_equals_the_method_it_reduces_to_bit_for_bit(reference, options,
                                                                     server):
  name = "fedprox" if "mu" in options else "fedavg"
  want = _final_params(*reference[:1], **reference[1])
  got = _final_params(name, server_optimizer=server, **options)
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_array_equal(a, b)


def test_an_optax_adam_server_equals_bias_corrected_fedadam():
  """FedOpt is a preset of the same server step: FedAdam with Adam's bias
  correction is ``optax.adam`` with β1, β2 and eps = τ (to float rounding:
  the two compute 1 − β^t differently)."""
  want = _final_params("fedadam", bias_correction=True, server_lr=0.02, beta1=0.8,
                       beta2=0.95, tau=1e-3)
  got = _final_params("fedavg", server_optimizer=optax.adam(0.02, b1=0.8, b2=0.95,
                                                              eps=1e-3))
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("value,match", [
    ("adam", r"server_optimizer='adam': give optax\.adam its learning rate, e\.g\. "
             r"'adam\(0\.01\)'"),
    ("adm(0.01)", r"server_optimizer='adm\(0\.01\)': did you mean 'adam'\?"),
    ("adam(-1)", r"server_optimizer='adam\(-1\)': the learning rate -1 must be a number > 0"),
    ("adam(0.01, bb=2)", r"optax\.adam got an unexpected keyword argument 'bb'"),
    ("adam(lr)", r"its arguments must be numbers"),
    (3, r"server_optimizer=3: must be an optax GradientTransformation"),
])
def test_a_bad_server_optimizer_is_one_line(value, match):
  with pytest.raises(ValueError, match=match):
    algorithms.hparams("fedavg", {"server_optimizer": value})


@pytest.mark.parametrize("method", ["fedavg", "fedprox"])
def test_an_optax_server_optimizer_that_ascends_is_refused(method):
  """``optax.sgd(-0.5)`` ran "ok" and unlearned: one probe step moves up the gradient."""
  with pytest.raises(ValueError, match=r"^methods\.m\.server_optimizer=<optax "
                     r"GradientTransformation>: its first step on a probe gradient moves "
                     r"up the gradient, .* is its learning rate < 0\?"):
    algorithms.hparams(method, {"server_optimizer": optax.sgd(-0.5)}, prefix="methods.m.")
  for fine in (optax.sgd(0.5, momentum=0.9), optax.adam(1e-2), optax.lion(1e-3),
               optax.adamw(1e-2), optax.sgd(optax.linear_schedule(0.0, 1.0, 10)),
               optax.chain(optax.clip(1.0), optax.sgd(1.0))):
    algorithms.hparams(method, {"server_optimizer": fine})


def test_server_lr_beside_a_server_optimizer_is_refused():
  """The optimizer carries its own rate: a changed server_lr would be ignored."""
  with pytest.raises(ValueError, match=r"server_lr=0\.5: the rate of the plain server "
                                       r"step; with server_optimizer"):
    algorithms.hparams("fedavg", {"server_optimizer": optax.sgd(1.0), "server_lr": 0.5})
  assert algorithms.hparams("fedavg", {"server_optimizer": "sgd(0.5)"})["server_lr"] == 1.0


def test_a_server_optimizer_by_name_is_the_optax_one():
  """``"sgd(0.5, momentum=0.9)"`` in a config builds what optax.sgd(0.5,
  momentum=0.9) does, and runs it (momentum: FedAvgM's numbers)."""
  for text, tx in (("adam(0.01)", optax.adam(0.01)),
                   ("sgd(0.5, momentum=0.9)", optax.sgd(0.5, momentum=0.9)),
                   ("yogi(learning_rate=0.1, eps=1e-3)", optax.yogi(0.1, eps=1e-3))):
    assert server_opt.describe(server_opt.from_text(text)) == server_opt.describe(tx)
  got = _final_params("fedavg", server_optimizer="sgd(0.7, momentum=0.8)")
  want = _final_params("fedavgm", momentum=0.8, server_lr=0.7)
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_array_equal(a, b)


def test_the_description_is_stable_and_names_the_settings():
  a, b = optax.adam(1e-2), optax.adam(1e-2)
  assert server_opt.describe(a) == server_opt.describe(b)   # other objects, same text
  assert server_opt.describe(a) != server_opt.describe(optax.adam(1e-3))
  assert "step_size=-0.01" in server_opt.describe(a) and "0x" not in server_opt.describe(a)
  from fedfrac import sweep
  from fedfrac.runner import workdir
  configs = []
  for tx in (a, b, optax.adam(1e-3)):
    c = helpers.tiny_config()
    c.methods = ml_collections.ConfigDict({"m": {"name": "fedavg", "server_optimizer": tx}})
    configs.append(c)
  prints = [workdir.fingerprint(c) for c in configs]
  keys = [sweep.config_key(c) for c in configs]
  assert prints[0] == prints[1] != prints[2] and keys[0] == keys[1] != keys[2]
