"""FLOPs counted from layer shapes: matrix products and convolutions only, as
``benchmarks/results.md`` counts them (:func:`fedfrac_lab.bench.campaign.chain_flops`);
normalisation, activations, pooling, the loss and the optimizer are left out.

* :func:`jaxpr_flops`: the ``dot_general`` and ``conv_general_dilated``
  equations of a function's jaxpr, 2 FLOPs a multiply-add, inside scans times
  their length. This is what a backend must compute for the products, whatever
  it calls them: XLA's cost analysis on a GPU leaves out convolutions that
  become library calls (cuDNN), so it read CNNMnist's step as about a tenth of
  its products (docs/design.md §2.6).
* :func:`step_flops`: one local step of one client of a simulation (forward,
  backward, update on a batch of B rows).
* :func:`firma_run_flops`: one FIRMA run on the real data, per method's local
  training (two phases with the other part frozen, FibFL++'s warm-up, the
  gate's forward pass over the train set), from each client's size: the work
  a run's local steps execute (B rows a step, masked rows included; steps a
  client does not take are not counted), evaluation left out.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac_lab.bench.campaign import chain_flops


def _dot_flops(eqn) -> float:
  (lhs_c, rhs_c), (lhs_b, _) = eqn.params["dimension_numbers"]
  lhs, rhs = eqn.invars[0].aval.shape, eqn.invars[1].aval.shape
  contract = math.prod(lhs[i] for i in lhs_c)
  batch = math.prod(lhs[i] for i in lhs_b)
  lhs_free = math.prod(d for i, d in enumerate(lhs) if i not in lhs_c and i not in lhs_b)
  rhs_free = math.prod(d for i, d in enumerate(rhs) if i not in rhs_c
                       and i not in eqn.params["dimension_numbers"][1][1])
  return 2.0 * batch * lhs_free * rhs_free * contract


def _conv_flops(eqn) -> float:
  dn = eqn.params["dimension_numbers"]
  rhs = eqn.invars[1].aval.shape
  out = eqn.outvars[0].aval.shape
  # Per output element: the kernel's spatial size x its input features.
  kernel_in = rhs[dn.rhs_spec[1]] * math.prod(rhs[i] for i in dn.rhs_spec[2:])
  return 2.0 * math.prod(out) * kernel_in


def _jaxpr_flops(jaxpr) -> float:
  total = 0.0
  for eqn in jaxpr.eqns:
    name = eqn.primitive.name
    if name == "dot_general":
      total += _dot_flops(eqn)
    elif name == "conv_general_dilated":
      total += _conv_flops(eqn)
    elif name == "scan":
      total += eqn.params["length"] * _jaxpr_flops(eqn.params["jaxpr"].jaxpr)
    elif name == "cond":
      total += max(_jaxpr_flops(b.jaxpr) for b in eqn.params["branches"])
    elif name == "while":
      raise ValueError("jaxpr_flops: a while loop's trip count is not known from "
                       "shapes; count its body apart")
    else:
      for value in eqn.params.values():
        for sub in (value if isinstance(value, (list, tuple)) else (value,)):
          inner = getattr(sub, "jaxpr", None)
          if inner is not None:
            total += _jaxpr_flops(getattr(inner, "jaxpr", inner))
  return total


def jaxpr_flops(fn, *args) -> float:
  """FLOPs of the matrix products and convolutions of ``fn(*args)`` (arrays or
  ``jax.ShapeDtypeStruct``)."""
  return _jaxpr_flops(jax.make_jaxpr(fn)(*args).jaxpr)


def step_flops(sim) -> float:
  """Product FLOPs of one local step of one client of ``sim``: the loss's
  gradient with respect to every parameter on a batch of ``B`` rows (the
  optimizer's update has no products)."""
  from fedfrac.algorithms import tasks
  loss_fn = tasks.supervised_loss(sim.model, sim.task)
  params = jax.eval_shape(sim.model.init, jax.random.PRNGKey(0))
  b = sim.training.batch_size
  x = jax.ShapeDtypeStruct((b,) + tuple(sim.data.x_train.shape[1:]), sim.data.x_train.dtype)
  y = jax.ShapeDtypeStruct((b,) + tuple(sim.data.y_train.shape[1:]), sim.data.y_train.dtype)
  mask = jax.ShapeDtypeStruct((b,), jnp.bool_)
  key = jax.ShapeDtypeStruct((2,), jnp.uint32)
  grad = jax.grad(lambda p, x, y, m, k: loss_fn(p, x, y, m, k)[0])
  return jaxpr_flops(grad, params, x, y, mask, key)


def layer_macs(params) -> tuple:
  """``(macs per sample of each dense layer, input to output, and whether it is
  in the head)`` of a FIRMA-style ``{"extractor", "head"}`` (or plain) MLP's
  parameters: the ``kernel`` leaves in order."""
  out = []
  for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
    keys = [getattr(k, "key", getattr(k, "name", "")) for k in path]
    if keys and keys[-1] == "kernel" and len(np.shape(leaf)) == 2:
      out.append((int(np.shape(leaf)[0] * np.shape(leaf)[1]), "head" in keys))
  return tuple(m for m, _ in out), tuple(h for _, h in out)


def firma_run_flops(method, options, client_sizes, batch_size, rounds, params,
                    local_epochs=1) -> float:
  """Product FLOPs of one FIRMA run's local training (see the module docstring).

  ``options``: the method's config options (``head_epochs``, ``extractor_epochs``,
  FibFL++'s ``warmup_rounds`` / ``compat``); ``client_sizes``: each client's
  train samples; ``params``: the model's parameters (shapes); ``local_epochs``:
  FedAvg's and RDFL's E."""
  macs, head = layer_macs(params)
  full = chain_flops(macs, (True,) * len(macs))
  head_step = chain_flops(macs, head)
  ext_step = chain_flops(macs, tuple(not h for h in head))
  forward = 2.0 * sum(macs)
  sizes = np.asarray(client_sizes, np.int64)
  rows = float(np.sum(np.ceil(sizes / batch_size)) * batch_size)   # one epoch, all clients
  samples = float(np.sum(sizes))
  e_h, e_e = int(options.get("head_epochs", 1)), int(options.get("extractor_epochs", 1))
  two_phase = rows * (e_h * head_step + e_e * ext_step)
  if method in ("fedavg", "rdfl"):
    return rounds * rows * local_epochs * full
  if method == "fedrep":
    return rounds * two_phase
  gate = samples * forward            # the train accuracy of FibFL+'s gate
  if method in ("fibfl", "fibfl_plus"):
    return rounds * (two_phase + gate)
  if method == "fibfl_pp":
    from fedfrac.ops import fibfl_schedule
    w = options.get("warmup_rounds")
    if w is None:
      w = fibfl_schedule.fibfl_pp_warmup(rounds, min_rounds=1 if options.get("compat")
                               == "reference_code" else 0)
    w = min(int(w), rounds)
    warm = rows * max(e_h, e_e) * full
    return w * (warm + gate) + (rounds - w) * (two_phase + gate)
  raise ValueError(f"method={method!r}: allowed values are fedavg, rdfl, fedrep, fibfl, "
                   "fibfl_plus, fibfl_pp")
