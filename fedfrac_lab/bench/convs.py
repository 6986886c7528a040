"""Convolution forms under vmap: which ``model.conv_impl`` suits a device.

  fedfrac-bench convs                                   # CNNMnist, CNN4, CNNCifar
  fedfrac-bench convs --models=cnn_mnist --clients=10 --batch=50 --json=c.json

For each model and form (``xla``: ``lax.conv_general_dilated``, which a vmap over
per-client kernels turns into a grouped convolution and its weight gradient into
a ``batch_group_count`` convolution; ``im2col``: patches times the kernel, which
the same vmap turns into batched matrix products) it times one jitted call of

* forward: ``vmap`` over ``clients`` of the model's logits on a batch of ``batch``
  images per client (each client its own parameters), and
* forward + backward: ``vmap`` of ``value_and_grad`` of the mean cross-entropy,

the work of one vmapped local step without the optimizer. Times are medians of
``repeats`` calls after a warm-up; compile seconds separately. Each row also
gives the largest difference of the two forms' logits and gradients on the same
inputs (they compute the same function; float rounding only).

A vmapped im2col is already the "clients folded into the batch" form: an einsum
of every client's patches with that client's kernel, one batched matrix product
per layer, so no third form is timed.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac import models
from fedfrac.models import cnn

# model name -> (extractor class, input shape [H, W, C], padding)
MODELS = {"cnn_mnist": (cnn.CNNMnistExtractor, (28, 28, 1), "VALID"),
          "cnn4": (cnn.CNN4Extractor, (28, 28, 1), "SAME"),
          "cnn_cifar": (cnn.CNNCifarExtractor, (32, 32, 3), "VALID")}
FORMS = ("xla", "im2col")


def build(model, form, clients, batch, shape=None, seed=0):
  """``(forward, forward_backward, params, x, y)`` of ``model`` computed with conv
  form ``form``: params ``[clients, ...]``, x ``[clients, batch, H, W, C]``, y
  ``[clients, batch]``; both functions jitted and vmapped over clients."""
  cls, default_shape, padding = MODELS[model]
  shape = tuple(shape or default_shape)
  module = models.SplitModel(cls(padding=padding, conv_impl=form), models.LinearHead(10))
  kp, kx, ky = jax.random.split(jax.random.PRNGKey(seed), 3)
  x = jax.random.uniform(kx, (clients, batch) + shape)
  y = jax.random.randint(ky, (clients, batch), 0, 10)
  params = jax.vmap(lambda k: module.init(k, x[0, :1])["params"])(
      jax.random.split(kp, clients))

  def logits(p, xb):
    return module.apply({"params": p}, xb)

  def loss(p, xb, yb):
    out = logits(p, xb)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(out), yb[:, None], 1))

  forward = jax.jit(jax.vmap(logits))
  forward_backward = jax.jit(jax.vmap(jax.value_and_grad(loss)))
  return forward, forward_backward, params, x, y


def _timed(fn, args, repeats):
  t0 = time.perf_counter()
  compiled = fn.lower(*args).compile()
  compile_s = time.perf_counter() - t0
  jax.block_until_ready(compiled(*args))          # warm-up
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    times.append(time.perf_counter() - t0)
  return compile_s, times, compiled(*args)


def measure(model, clients, batch, repeats, shape=None):
  """One row per form of ``model``: compile and call seconds of forward and of
  forward + backward, and the largest difference from the first form."""
  rows, reference = [], None
  for form in FORMS:
    fwd, fwd_bwd, params, x, y = build(model, form, clients, batch, shape)
    c_f, t_f, out_f = _timed(fwd, (params, x), repeats)
    c_b, t_b, (value, grads) = _timed(fwd_bwd, (params, x, y), repeats)
    outputs = (np.asarray(out_f), np.asarray(value),
               [np.asarray(g) for g in jax.tree.leaves(grads)])
    if reference is None:
      reference, diff = outputs, 0.0
    else:
      diff = max(float(np.max(np.abs(outputs[0] - reference[0]))),
                 float(np.max(np.abs(outputs[1] - reference[1]))),
                 max(float(np.max(np.abs(a - b))) for a, b in zip(outputs[2], reference[2])))
    rows.append({"model": model, "form": form, "clients": clients, "batch": batch,
                 "compile_forward_s": c_f, "forward_s": statistics.median(t_f),
                 "compile_forward_backward_s": c_b,
                 "forward_backward_s": statistics.median(t_b),
                 "forward_times": t_f, "forward_backward_times": t_b,
                 "max_abs_diff_vs_xla": diff})
  return rows


def run(model_names=tuple(MODELS), clients=10, batch=50, repeats=10, shape=None):
  """Every model's rows, the backend, what ``auto`` runs there and the faster form
  of forward + backward per model."""
  rows = [r for m in model_names for r in measure(m, clients, batch, repeats, shape)]
  fastest = {}
  for m in model_names:
    mine = [r for r in rows if r["model"] == m]
    fastest[m] = min(mine, key=lambda r: r["forward_backward_s"])["form"]
  backend = jax.default_backend()
  return {"backend": backend, "device": jax.devices()[0].device_kind,
          "auto": cnn.resolve_conv_impl("auto", backend), "fastest": fastest,
          "rows": rows}


def markdown(result, command="fedfrac-bench convs") -> str:
  """The conv-forms table of ``run``'s result."""
  lines = [f"Command: `{command}`; backend {result['backend']} ({result['device']}); "
           f"`auto` runs `{result['auto']}` here "
           "(`fedfrac.models.cnn.AUTO_CONV_IMPL`).", "",
           "| model | form | clients x batch | forward ms | forward + backward ms | "
           "compile s (fwd / fwd+bwd) | max diff vs xla |",
           "|---|---|---|---|---|---|---|"]
  for r in result["rows"]:
    lines.append(f"| {r['model']} | {r['form']} | {r['clients']} x {r['batch']} | "
                 f"{1e3 * r['forward_s']:.2f} | {1e3 * r['forward_backward_s']:.2f} | "
                 f"{r['compile_forward_s']:.1f} / {r['compile_forward_backward_s']:.1f} | "
                 f"{r['max_abs_diff_vs_xla']:.1e} |")
  lines += ["", "Faster form (forward + backward): " + ", ".join(
      f"{m} {f}" for m, f in result["fastest"].items()) + "."]
  return "\n".join(lines)


def main(argv=None):
  p = argparse.ArgumentParser(prog="fedfrac-bench convs", description=__doc__.split("\n")[0])
  p.add_argument("--models", default=",".join(MODELS))
  p.add_argument("--clients", type=int, default=10)
  p.add_argument("--batch", type=int, default=50)
  p.add_argument("--repeats", type=int, default=10)
  p.add_argument("--json", default="")
  argv = sys.argv[1:] if argv is None else list(argv)
  args = p.parse_args(argv)
  names = [m for m in args.models.split(",") if m]
  for m in names:
    if m not in MODELS:
      p.error(f"--models: unknown {m!r}; known: {', '.join(MODELS)}")
  for key in ("clients", "batch", "repeats"):
    if getattr(args, key) < 1:
      p.error(f"--{key}={getattr(args, key)}: must be >= 1")
  result = run(names, args.clients, args.batch, args.repeats)
  print(markdown(result, ("fedfrac-bench convs " + " ".join(argv)).strip()))
  if args.json:
    with open(args.json, "w") as f:
      json.dump(result, f, indent=1)
  return 0
