"""``fedfrac-reproduce firma_authors``: fedfrac's FIRMA FibFL / FibFL+
(``compat="reference_code"``) beside the authors' own PyTorch code
(github.com/Hedjrachid/FIRMA, ``fibfl/fibfl.py`` run unchanged); docs/design.md
§3.3, "FibFL / FibFL+ below Tables 7–8".

Needs a checkout of the authors' repository (``--authors=DIR``) and PyTorch.

``parity``: a tiny synthetic problem (3 clients x 64 samples, 20 features, 4
classes) where every epoch is one full batch of 64, so the batch order cannot
differ; both codes start from the same shared initial model (fedfrac's, copied
into the torch modules; the torch LayerNorm epsilon set to flax's 1e-6) and run
R rounds of FibFL or FibFL+ with E_h = 1, E_e = 3, persistent Adam lr 0.01.
Prints both per-round accuracy curves and the largest extractor difference.

``fedfrac``: fedfrac's run of the same protocol (``configs/firma/digits.py`` with
N = 10 on the ``files`` source, the authors' inputs unless ``--set=inputs=unit``),
one run without batch padding, with method options set by ``--set=key=value``
(``init=shared``, ``gamma=1.0``, ...; ``mode=paper`` for the paper mode), printing
the mean per-client test accuracy after each round; ``--live-units`` also counts,
from each client's params after every round (the training program unchanged),
the units of the extractor's last ReLU layer active on at least one of the
training images.

``fmnist``: the authors' FibFL / FibFL+ / FibFL++ on the real Fashion-MNIST IDX
files (``--data``, Debian's ``dataset-fashion-mnist``), their partition and
their torchvision normalisation ((x/255 - 0.5) / 0.5), Table 4 settings, printing
the mean per-client test accuracy after each round (compare with
``fedfrac-reproduce firma_files --modes=reference_code``).

  fedfrac-reproduce firma_authors parity --authors=DIR --method=fibfl --rounds=4
  fedfrac-reproduce firma_authors fmnist --authors=DIR --method=fibfl --rounds=6
  fedfrac-reproduce firma_authors fedfrac --method=fibfl --rounds=3 --set=gamma=1.0
  fedfrac-reproduce firma_authors fedfrac --method=fibfl_pp --rounds=3 \\
      --set=warmup_rounds=5 --set=warmup_optimizer=reset --live-units
"""
from __future__ import annotations

import argparse
import ast
import gzip
import json
import sys
import time
import warnings

import numpy as np


def authors_modules(path):
  sys.path.insert(0, path)
  import torch
  from fibfl import common, data, fibfl
  return torch, common, data, fibfl


# ----------------------------------------------------------------------- parity


def copy_into_torch(torch, ext, head, params, k):
  """Client ``k`` of fedfrac's stacked firma_mlp params into the authors' modules."""
  e, h = params["extractor"], params["head"]
  e = e.get("params", e)
  h = h.get("params", h)
  h = h if "kernel" in h else h[next(iter(h))]
  with torch.no_grad():
    for i, layer in enumerate((ext.net[0], ext.net[3], ext.net[6])):
      layer.weight.copy_(torch.tensor(np.asarray(e[f"Dense_{i}"]["kernel"][k]).T))
      layer.bias.copy_(torch.tensor(np.asarray(e[f"Dense_{i}"]["bias"][k])))
    for i, norm in enumerate((ext.net[1], ext.net[4])):
      norm.weight.copy_(torch.tensor(np.asarray(e[f"LayerNorm_{i}"]["scale"][k])))
      norm.bias.copy_(torch.tensor(np.asarray(e[f"LayerNorm_{i}"]["bias"][k])))
      norm.eps = 1e-6
    head.fc.weight.copy_(torch.tensor(np.asarray(h["kernel"][k]).T))
    head.fc.bias.copy_(torch.tensor(np.asarray(h["bias"][k])))


def flat_extractor(params, k):
  """Client ``k``'s extractor in the torch parameter order, flattened."""
  e = params["extractor"]
  e = e.get("params", e)
  out = []
  for i in range(3):
    out += [np.asarray(e[f"Dense_{i}"]["kernel"][k]).T.ravel(),
            np.asarray(e[f"Dense_{i}"]["bias"][k]).ravel()]
    if i < 2:
      out += [np.asarray(e[f"LayerNorm_{i}"]["scale"][k]).ravel(),
              np.asarray(e[f"LayerNorm_{i}"]["bias"][k]).ravel()]
  return np.concatenate(out)


def parity(args):
  torch, common, data, fibfl = authors_modules(args.authors)
  from fedfrac import algorithms, models, runner
  from fedfrac import data as data_lib
  from fedfrac import sim as sim_lib
  from fedfrac.algorithms import contract, tasks
  from fedfrac.config_base import base_config

  n, d, c, nk, batch = 3, 20, 4, 64, 64
  rng = np.random.default_rng(0)
  centres = rng.normal(size=(c, d)).astype(np.float32)

  def draw(m):
    y = rng.integers(0, c, m)
    return (centres[y] + 1.5 * rng.normal(size=(m, d))).astype(np.float32), y.astype(np.int32)
  xtr, ytr = draw(n * nk)
  xte, yte = draw(n * 50)
  parts = [np.arange(k * nk, (k + 1) * nk) for k in range(n)]
  tparts = [np.arange(k * 50, (k + 1) * 50) for k in range(n)]
  fed = data_lib.federate(data_lib.Dataset("toy", xtr, ytr, xte, yte, c), parts, tparts)
  cfg = base_config()
  cfg.client.optimizer, cfg.client.lr, cfg.client.batch_size = "adam", 0.01, batch
  cfg.model.name = "firma_mlp"
  task = tasks.classification_task()
  model = models.build(cfg.model, fed.input_shape, fed.num_classes, fed.input_scale)
  training = runner.make_training(cfg.client, fed.client_size, args.rounds, 1, True)
  ctx = contract.BuildContext(model, task, training, fed.info(), args.rounds, cfg.client)
  alg = algorithms.make(args.method, ctx, compat="reference_code", init="shared",
                        head_epochs=1, extractor_epochs=3)
  sim = sim_lib.Simulation(alg, fed, model, task, training,
                           sim_lib.EngineConfig())
  state = sim.init(0)

  pairs = common.build_models(d, n, 128, c)
  exts, heads = [e for e, _ in pairs], [h for _, h in pairs]
  for k in range(n):
    copy_into_torch(torch, exts[k], heads[k], state.clients["params"], k)
  trl = [data.make_loader(xtr, ytr.astype(np.int64), i, batch) for i in parts]
  tel = [data.make_loader(xte, yte.astype(np.int64), i, batch, False) for i in tparts]
  run_cfg = dict(R=args.rounds, Eh=1, Ee=3, lr=0.01, gamma=0.5, tau=0.35, log_every=10**6)
  run = fibfl.run_fibfl_basic if args.method == "fibfl" else fibfl.run_fibflp
  history = run(exts, heads, trl, tel, run_cfg)

  ours = []
  for _ in range(args.rounds):
    state, _ = sim.run_chunk(state, 1)
    ours.append(round(float(sim.evaluate(state)["client_accuracy_mean"]), 4))
  torch_ext = [np.concatenate([p.detach().numpy().ravel() for p in e.parameters()])
               for e in exts]
  diff = max(float(np.max(np.abs(flat_extractor(state.clients["params"], k) - torch_ext[k])))
             for k in range(n))
  print(json.dumps({"method": args.method, "rounds": args.rounds,
                    "authors_curve": [round(float(np.mean(h)), 4) for h in history],
                    "fedfrac_curve": ours, "max_extractor_diff": diff}))


# ------------------------------------------------------------------ Fashion-MNIST


def idx_file(path, offset):
  with gzip.open(path, "rb") as f:
    return np.frombuffer(f.read(), np.uint8, offset=offset)


def fmnist(args):
  torch, common, data, fibfl = authors_modules(args.authors)
  torch.set_num_threads(1)
  norm = lambda x: ((x.astype(np.float32) / 255.0 - 0.5) / 0.5).astype(np.float32)
  xtr = norm(idx_file(f"{args.data}/train-images-idx3-ubyte.gz", 16).reshape(-1, 784))
  ytr = idx_file(f"{args.data}/train-labels-idx1-ubyte.gz", 8).astype(np.int64)
  xte = norm(idx_file(f"{args.data}/t10k-images-idx3-ubyte.gz", 16).reshape(-1, 784))
  yte = idx_file(f"{args.data}/t10k-labels-idx1-ubyte.gz", 8).astype(np.int64)
  split = dict(n_clients=10, n_classes=10, batch_size=64)
  if args.scenario == "iid":
    split.update(split="iid")
  elif args.scenario.startswith("dir"):
    split.update(split="dirichlet", alpha=float(args.scenario[3:]))
  else:
    split.update(split="label-skew", K_skew=int(args.scenario[2:]))
  tr_idx, te_idx = data.partition(ytr, yte, split)
  torch.manual_seed(args.seed)
  trl = [data.make_loader(xtr, ytr, i, 64) for i in tr_idx]
  tel = [data.make_loader(xte, yte, i, 64, False) for i in te_idx]
  pairs = common.build_models(784, len(tr_idx), 128, 10)
  exts, heads = [e for e, _ in pairs], [h for _, h in pairs]
  cfg = dict(R=args.rounds, Eh=1, Ee=20, lr=0.01, gamma=0.5, gamma_start=0.4,
             gamma_end=0.05, tau=0.35, log_every=1)
  t0 = time.time()
  if args.method == "fibfl":
    history = fibfl.run_fibfl_basic(exts, heads, trl, tel, cfg)
  elif args.method == "fibfl_plus":
    history = fibfl.run_fibflp(exts, heads, trl, tel, cfg)
  else:
    q = np.array([data.class_props(ytr, i, 10) for i in tr_idx])
    history = fibfl.run_fibflpp(exts, heads, trl, tel, q, cfg)[0]
  print(json.dumps({"method": args.method, "scenario": args.scenario, "seed": args.seed,
                    "curve": [round(float(np.mean(h)), 4) for h in history],
                    "wall_s": round(time.time() - t0, 1)}))


# ------------------------------------------------------------ fedfrac, one run


def set_options(items):
  """``--set`` items ``key=value`` -> dict (values read as Python literals when
  they parse as one, else kept as strings)."""
  opts = {}
  for item in items:
    key, _, value = item.partition("=")
    try:
      opts[key] = ast.literal_eval(value)
    except (ValueError, SyntaxError):
      opts[key] = value
  return opts


def live_units_program(model, x_train, chunk=2000):
  """A jitted ``stacked_params -> [K]`` int32: for each client's model, the
  number of units of the extractor's last ReLU layer (its output features) that
  are active (> 0) on at least one of the ``x_train`` images ``[N, ...]``,
  evaluated in chunks of ``chunk`` rows (the last chunk filled up with copies of
  the first rows, which cannot change an "on at least one image")."""
  import jax
  import jax.numpy as jnp

  n = x_train.shape[0]
  chunk = min(chunk, n)
  n_chunks = -(-n // chunk)
  padded = np.concatenate([x_train, x_train[:n_chunks * chunk - n]])
  rows = jnp.asarray(padded).reshape((n_chunks, chunk) + x_train.shape[1:])

  def one(params):
    def active(x):
      return jnp.any(model.apply(params, x, return_features=True)[1] > 0, axis=0)
    return jnp.sum(jnp.any(jax.lax.map(active, rows), axis=0)).astype(jnp.int32)

  return jax.jit(jax.vmap(one))


def live_units(count, stacked_params):
  """``count`` (:func:`live_units_program`) on K-stacked params, as a list of K
  ints; when every client holds the same params (the warm-up averages the full
  model) the count runs once, on client 0's, and is repeated."""
  import jax

  leaves = [np.asarray(x) for x in jax.tree.leaves(stacked_params)]
  k = leaves[0].shape[0]
  if all(np.array_equal(x[0], x[i]) for x in leaves for i in range(1, k)):
    return np.asarray(count(jax.tree.map(lambda x: x[:1], stacked_params))).tolist() * k
  return np.asarray(count(stacked_params)).tolist()


def fedfrac_run(args):
  from fedfrac import config_base
  from fedfrac import data as data_lib
  from fedfrac import runner
  from fedfrac_lab.reproduce import firma_program

  opts = set_options(args.set)
  mode, inputs = opts.pop("mode", "reference_code"), opts.pop("inputs", "authors")
  digits = firma_program.load_digits_config()
  cfg = digits.firma_config(mode, args.scenario, num_clients=10, rounds=args.rounds)
  config_base.files_source(cfg, args.data)
  if inputs == "authors":
    digits.authors_inputs(cfg, "grey")
  cfg.engine.client_parallelism = "vmap"
  for key, value in opts.items():
    cfg.methods[args.method][key] = value
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    fed = data_lib.build(cfg.data, args.seed if cfg.data.seed < 0 else cfg.data.seed)
  sim = runner.build_simulation(cfg, args.method, fed)
  count = live_units_program(sim.model, fed.x_train) if args.live_units else None
  state, curve, live, t0 = sim.init(args.seed), [], [], time.time()
  for r in range(args.rounds):
    state, _ = sim.run_chunk(state, 1)
    curve.append(round(float(sim.evaluate(state)["client_accuracy_mean"]), 4))
    line = f"round {r + 1}: {curve[-1]}"
    if count is not None:
      live.append(live_units(count, state.clients["params"]))
      line += f", live units per client {live[-1]}"
    print(line, file=sys.stderr, flush=True)
  record = {"method": args.method, "scenario": args.scenario, "seed": args.seed,
            "mode": mode, "inputs": inputs, "options": opts, "curve": curve}
  if count is not None:
    record["live_units"] = live
  print(json.dumps({**record, "wall_s": round(time.time() - t0, 1)}))


def main(argv=None):
  p = argparse.ArgumentParser(prog="fedfrac-reproduce firma_authors",
                              description=__doc__.split("\n\n")[0])
  p.add_argument("check", choices=("parity", "fmnist", "fedfrac"))
  p.add_argument("--authors", help="checkout of Hedjrachid/FIRMA (parity, fmnist)")
  p.add_argument("--method", default="fibfl", choices=("fibfl", "fibfl_plus", "fibfl_pp"))
  p.add_argument("--rounds", type=int, default=4)
  p.add_argument("--scenario", default="iid", help="fmnist: iid, dir0.8, ls1, ...")
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
  p.add_argument("--set", action="append", default=[],
                 help="fedfrac: a method option key=value (or mode=paper, inputs=unit)")
  p.add_argument("--live-units", action="store_true",
                 help="fedfrac: after each round, count for every client the units of "
                      "the extractor's last ReLU layer active on at least one "
                      "training image (recorded as live_units, one list a round)")
  args = p.parse_args(argv)
  if args.check == "parity" and args.method == "fibfl_pp":
    p.error("--method: parity covers fibfl and fibfl_plus")
  if args.check != "fedfrac" and not args.authors:
    p.error(f"--authors: {args.check} needs a checkout of the authors' code")
  if args.check == "fedfrac":
    from fedfrac import algorithms
    opts = set_options(args.set)
    if opts.get("mode", "reference_code") not in ("paper", "reference_code"):
      p.error(f"--set: mode={opts['mode']!r}; allowed values are 'paper', 'reference_code'")
    if opts.get("inputs", "authors") not in ("authors", "unit"):
      p.error(f"--set: inputs={opts['inputs']!r}; allowed values are 'authors', 'unit'")
    given = {k: v for k, v in opts.items() if k not in ("mode", "inputs")}
    try:
      algorithms.hparams(args.method, given)
    except ValueError as e:
      p.error(f"--set: {e}")
  {"parity": parity, "fmnist": fmnist, "fedfrac": fedfrac_run}[args.check](args)
