"""``fedfrac-reproduce kuramoto_authors``: the Kuramoto-FedAvg authors' own code
(github.com/amuhebwa/Kuramoto-FedAvg, ``src/``, run unchanged from a local checkout)
beside fedfrac's ``reference_code`` mode at the same setting: the global model's
test accuracy after every round, per method and seed; docs/design.md §3.4.

The setting is their default (shipped JSONs, ``main.py`` flags): Fashion-MNIST
(their ``mnist`` loader reads torchvision's FashionMNIST), K = 10 clients with s = 3
shards dealt by their ``sharding_partition`` from seed 19940817, 2 local epochs
(their JSON's 1 plus the one ``BaseServer`` adds; ``--local-epochs`` is the number
trained), batch 64, SGD lr 0.01, momentum 0.9, weight decay 1e-5, lr × 0.99 per
round, their augmentation and normalisation, ``FedAvgNetMNIST`` (fedfrac ``cnn4``
SAME, torch's initialisation), full participation; 20 rounds, seeds 0, 1, 2.

Methods (``--methods``), each the authors' run and fedfrac's method of that label:

  fedavg                   their fedavg.json                fedfrac fedavg
  kuramoto_reference_code  their fedavg.json, sync 1        (BaseServer: κ 0.3, ±1e3)
  kuramoto_scaffold        their kuramoto.json, sync 1      (main.py runs it on the
                                                              SCAFFOLD server: κ 0.2, ±10)
  scaffold                 their scaffold.json              fedfrac scaffold

Authors' side (``--authors=DIR``, a checkout holding ``src/main.py``; torch and
torchvision needed): every (method, seed) is a process of its own running their
``main.py`` through :mod:`fedfrac_lab.reproduce.kuramoto_authors_driver` (a ``wandb``
stub, their JSON with the data root and ``sync`` set, their CSV writer replaced by
a record of the same numbers), ``--parallel`` at once. Their data: the four IDX
files of ``--data`` unpacked into torchvision's layout under ``--work``.
fedfrac's side: ``configs/kuramoto/fashion_mnist.py:K=..,s=..,mode=reference_code``
on the ``files`` source, every seed of a method in one program
(``runner.run_many``), in this process while the authors' runs go on.

``--out=DIR`` gets four files, rewritten after every finished run:
``kuramoto_authors.json`` (both sides' curves per method and seed, the per-round
comparison), ``kuramoto_authors.md`` (the tables), ``kuramoto_authors_runs.tar.gz``
(every run's own file and log) and ``kuramoto_authors.log``. ``report`` rebuilds
the first two from the run archives of several calls (a window per side, say).
The target: fedfrac's mean curve inside the authors' seed range, round by round.

  fedfrac-reproduce kuramoto_authors run --authors=.authors/kuramoto \\
      --data=.gpu-data/fashion-mnist --out=$OUT --budget=540
  fedfrac-reproduce kuramoto_authors report --runs=A.tar.gz --runs=B.tar.gz --out=results
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

from fedfrac_lab.reproduce import common
from fedfrac_lab.reproduce import kuramoto_authors_report as report_lib
from fedfrac_lab.reproduce.kuramoto_authors_driver import (IDX_FILES, authors_commit,
                                                       authors_src, idx_path,
                                                       torchvision_root)

DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "kuramoto_authors_driver.py")
# fedfrac label -> (the authors' JSON in src/config, their ``sync``)
METHODS = {"fedavg": ("fedavg.json", 0), "kuramoto_reference_code": ("fedavg.json", 1),
           "kuramoto_scaffold": ("kuramoto.json", 1), "scaffold": ("scaffold.json", 0)}
SIDES = ("authors", "fedfrac")


class Log:
  """Progress lines ``[  12.3 s] text`` to stderr and to ``OUT/kuramoto_authors.log``."""

  def __init__(self, path):
    self.path, self.t0, self.lock = path, time.time(), threading.Lock()

  def __call__(self, text):
    line = f"[{time.time() - self.t0:7.1f} s] {text}"
    with self.lock:
      print(line, file=sys.stderr, flush=True)
      with open(self.path, "a") as f:
        f.write(line + "\n")


def authors_specs(args, src, root, runs_dir):
  """One driver spec per (method, seed) of the authors' side."""
  commit = authors_commit(args.authors)
  specs = []
  for method in args.methods:
    config, sync = METHODS[method]
    for seed in args.seeds:
      flags = ["--dataset_name", "mnist", "--model_name", "fedavg_mnist",
               "--n_clients", args.clients, "--partition_method", "sharding",
               "--partition_s", args.shards, "--batch_size", 64, "--sample_ratio", 1.0,
               "--n_rounds", args.rounds, "--local_epochs", args.local_epochs - 1,
               "--seed", seed]
      specs.append({"src": src, "config": config, "sync": sync, "root": root,
                    "args": flags, "device": args.device, "method": method, "seed": seed,
                    "commit": commit,
                    "out": os.path.join(runs_dir, f"authors_{method}_seed{seed}.json")})
  return specs


def mark_stopped(path, code):
  """A run file its process left ``running`` (killed): status ``stopped (exit N)``."""
  try:
    with open(path) as f:
      result = json.load(f)
  except (OSError, ValueError):
    return
  if result.get("status") == "running":
    report_lib.write_json(path, dict(result, status=f"stopped (exit {code})"))


def run_authors(specs, parallel, python, deadline, log, on_done, every=60.0):
  """The specs' processes, ``parallel`` at a time; none started after
  ``deadline`` (seconds since the epoch, 0 = none), the running ones stopped at
  it (their files keep the rounds they finished). ``on_done()`` after each run
  and every ``every`` seconds (the report then holds the rounds so far)."""
  pending, running, published = list(specs), [], time.time()
  while pending or running:
    if time.time() - published > every:
      on_done()
      published = time.time()
    while pending and len(running) < parallel and not (deadline and time.time() > deadline):
      spec = pending.pop(0)
      with open(spec["out"] + ".spec.json", "w") as f:
        json.dump(spec, f)
      logf = open(spec["out"][:-5] + ".log", "w")
      proc = subprocess.Popen([python, DRIVER, spec["out"] + ".spec.json"], stdout=logf,
                              stderr=subprocess.STDOUT, cwd=spec["src"])
      running.append((spec, proc, logf, time.time()))
      log(f"authors {spec['method']} seed {spec['seed']}: started (pid {proc.pid})")
    if deadline and time.time() > deadline:
      for spec, proc, _, _ in running:
        proc.terminate()
      for spec in pending:
        log(f"authors {spec['method']} seed {spec['seed']}: not started (budget)")
      pending = []
    time.sleep(0.5)
    for entry in list(running):
      spec, proc, logf, t0 = entry
      if proc.poll() is None:
        continue
      logf.close()
      running.remove(entry)
      log(f"authors {spec['method']} seed {spec['seed']}: exit {proc.returncode} after "
          f"{time.time() - t0:.1f} s, {report_lib.rounds_in(spec['out'])} rounds")
      if proc.returncode:
        mark_stopped(spec["out"], proc.returncode)
        with open(spec["out"][:-5] + ".log") as f:
          for line in f.read().splitlines()[-8:]:
            log(f"  | {line}")
      on_done()


def fedfrac_config(args):
  """fedfrac's side of the setting (``--set`` applied, validated)."""
  from fedfrac import config as config_lib
  from fedfrac import config_base
  from fedfrac.sweep import checks as sweep_checks
  from fedfrac_lab.reproduce import common
  module = common.config_module("kuramoto/fashion_mnist.py")
  config = module.get_config(f"K={args.clients},s={args.shards},mode=reference_code")
  config_base.files_source(config, os.path.abspath(args.data))
  config.rounds, config.eval_every, config.progress = args.rounds, 1, False
  config.checkpoint_every = 0
  config.client.local_epochs = args.local_epochs
  config.seeds = tuple(args.seeds)
  config.only = ",".join(args.methods)
  for key, value in args.sets:
    sweep_checks.set_key(config, key, value, "--set")
  config_lib.validate(config)
  return config


def run_fedfrac(config, seeds, overrides, runs_dir, log, on_done):
  """fedfrac's runs, one method at a time (its seeds in one program); one file
  per (method, seed) in ``runs_dir``."""
  import jax

  from fedfrac import config_base
  from fedfrac import runner
  device = jax.devices()[0].device_kind
  for label in config_base.method_labels(config):
    config.only = label
    t0 = time.time()
    results = runner.run_many(config, seeds=seeds)
    wall = round(time.time() - t0, 1)
    for rec in results.records:
      rounds, acc = rec.curve("accuracy")
      report_lib.write_json(os.path.join(runs_dir, f"fedfrac_{label}_seed{rec.seed}.json"), {
          "curve": [round(float(a), 6) for a in acc], "rounds": [int(r) for r in rounds],
          "status": rec.status, "wall_s": wall, "device_name": device,
          "method": label, "seed": int(rec.seed), "overrides": overrides})
    log(f"fedfrac {label}: seeds {list(seeds)} in {wall} s, final accuracy "
        f"{[round(float(r.curve('accuracy')[1][-1]), 4) for r in results.records]}")
    on_done()


def parse_args(argv):
  p = argparse.ArgumentParser(prog="fedfrac-reproduce kuramoto_authors",
                              description=__doc__.split("\n\n")[0])
  sub = p.add_subparsers(dest="command", required=True)
  r = sub.add_parser("run", help="run the authors' code and fedfrac, write the report")
  r.add_argument("--authors", help="checkout of amuhebwa/Kuramoto-FedAvg (src/main.py)")
  r.add_argument("--data", default="/usr/share/datasets/fashion-mnist",
                 help="Fashion-MNIST's four IDX files (.gz or not)")
  r.add_argument("--out", type=common.output_path("--out", directory=True), required=True)
  r.add_argument("--work", default="", help="scratch folder (default: a temporary one)")
  r.add_argument("--methods", default="fedavg,kuramoto_reference_code")
  r.add_argument("--seeds", default="0,1,2")
  r.add_argument("--rounds", type=int, default=20)
  r.add_argument("--clients", type=int, default=10)
  r.add_argument("--shards", type=int, default=3)
  r.add_argument("--local-epochs", type=int, default=2)
  r.add_argument("--sides", default="authors,fedfrac")
  r.add_argument("--parallel", type=int, default=3, help="authors' runs at once")
  r.add_argument("--device", default="auto", help="the authors' torch device (auto: "
                 "cuda:0 when torch sees a GPU)")
  r.add_argument("--python", default=sys.executable, help="interpreter of their runs")
  r.add_argument("--budget", type=float, default=0.0, help="seconds; authors' runs "
                 "still going then are stopped (0 = none)")
  r.add_argument("--set", action="append", default=[], dest="set_items",
                 help="a fedfrac config override KEY=VALUE")
  g = sub.add_parser("report", help="the report from the run archives of earlier calls")
  g.add_argument("--runs", action="append", required=True,
                 help="a kuramoto_authors_runs.tar.gz (or its unpacked folder)")
  g.add_argument("--out", type=common.output_path("--out", directory=True), required=True)
  args = p.parse_args(argv)
  if args.command == "report":
    for path in args.runs:
      if not os.path.exists(path):
        p.error(f"--runs={path!r}: does not exist")
    return p, args
  check_run_args(p, args)
  return p, args


def check_run_args(p, args):
  """Every ``run`` flag checked before any work: one ``error:`` line each."""
  from fedfrac.data.shards_reference import shards_per_class
  from fedfrac.sweep import parse_value
  args.methods = [m for m in args.methods.split(",") if m]
  bad = [m for m in args.methods if m not in METHODS] or ([""] if not args.methods else [])
  if bad:
    p.error(f"--methods: {bad[0]!r} is not one of {', '.join(METHODS)}")
  try:
    args.seeds = [int(s) for s in args.seeds.split(",")]
  except ValueError:
    p.error(f"--seeds={args.seeds!r}: comma-separated integers >= 0, e.g. 0,1,2")
  if any(s < 0 for s in args.seeds) or len(set(args.seeds)) != len(args.seeds):
    p.error(f"--seeds={args.seeds}: distinct integers >= 0")
  for flag, value, low in (("--rounds", args.rounds, 1), ("--clients", args.clients, 1),
                           ("--shards", args.shards, 1),
                           ("--local-epochs", args.local_epochs, 1),
                           ("--parallel", args.parallel, 1)):
    if value < low:
      p.error(f"{flag}={value}: must be an integer >= {low}")
  if not args.budget >= 0:
    p.error(f"--budget={args.budget}: must be >= 0 seconds (0 = none)")
  args.sides = [s for s in args.sides.split(",") if s]
  if not args.sides or any(s not in SIDES for s in args.sides):
    p.error(f"--sides={','.join(args.sides)!r}: one or both of authors, fedfrac")
  if set(args.sides) == set(SIDES):   # JAX shares the device with their processes
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
  try:
    shards_per_class(10, args.clients, args.shards)
  except ValueError as e:
    p.error(f"--clients/--shards: {e}")
  missing = [n for n in IDX_FILES if idx_path(args.data, n) is None]
  if missing:
    p.error(f"--data={args.data!r}: no {missing[0]}(.gz); give the folder of "
            f"Fashion-MNIST's four IDX files")
  args.src = None
  if "authors" in args.sides:
    if not args.authors:
      p.error("--authors: the authors' side needs a checkout of amuhebwa/Kuramoto-FedAvg "
              "(or --sides=fedfrac)")
    args.src = authors_src(args.authors)
    if args.src is None:
      p.error(f"--authors={args.authors!r}: no src/main.py there (a checkout of "
              f"amuhebwa/Kuramoto-FedAvg)")
    for method in args.methods:
      if not os.path.isfile(os.path.join(args.src, "config", METHODS[method][0])):
        p.error(f"--authors={args.authors!r}: no src/config/{METHODS[method][0]} for "
                f"--methods {method}")
  args.sets = []
  for item in args.set_items:
    key, eq, value = item.partition("=")
    if not eq or not key:
      p.error(f"--set={item!r}: expected KEY=VALUE, e.g. model.conv_impl=xla")
    args.sets.append((key, parse_value(value)))
  args.config = None
  if "fedfrac" in args.sides:
    from fedfrac._validation import ConfigError
    try:
      args.config = fedfrac_config(args)
    except (ConfigError, ValueError) as e:
      p.error(f"--set: {' '.join(str(e).split())}")


def setting(args) -> dict:
  return {"dataset": "Fashion-MNIST", "clients": args.clients, "shards": args.shards,
          "local_epochs": args.local_epochs, "rounds": args.rounds, "batch_size": 64,
          "partition": "the authors' sharding_partition from seed 19940817"}


def run(args) -> int:
  os.makedirs(args.out, exist_ok=True)
  log = Log(os.path.join(args.out, "kuramoto_authors.log"))
  work = args.work or tempfile.mkdtemp(prefix="kuramoto_authors_")
  runs_dir = os.path.join(work, "runs")
  os.makedirs(runs_dir, exist_ok=True)
  report_lib.write_json(os.path.join(runs_dir, "setting.json"), setting(args))
  deadline = time.time() + args.budget if args.budget else 0.0
  lock = threading.Lock()

  def publish():
    with lock:
      report_lib.write_outputs(args.out, [runs_dir], args.command_line)
  log(f"setting {setting(args)}; sides {args.sides}; methods {args.methods}; seeds "
      f"{args.seeds}; fedfrac overrides {args.set_items}; work {work}")
  thread = None
  if "authors" in args.sides:
    root = torchvision_root(args.data, work)
    specs = authors_specs(args, args.src, root, runs_dir)
    thread = threading.Thread(target=run_authors, args=(
        specs, args.parallel, args.python, deadline, log, publish), daemon=True)
    thread.start()
  status = 0
  if "fedfrac" in args.sides:
    try:
      run_fedfrac(args.config, args.seeds, [f"{k}={v!r}" for k, v in args.sets], runs_dir,
                  log, publish)
    except Exception as e:   # logged; the authors' runs go on
      log(f"fedfrac failed: {type(e).__name__}: {' '.join(str(e).split())[:500]}")
      status = 1
  if thread is not None:
    thread.join()
  publish()
  log(f"wrote {args.out}/kuramoto_authors.json, .md, _runs.tar.gz")
  return status


def main(argv=None) -> int:
  argv = sys.argv[1:] if argv is None else list(argv)
  p, args = parse_args(argv)
  args.command_line = " ".join(["fedfrac-reproduce kuramoto_authors"] + argv)
  if args.command == "report":
    dirs = [report_lib.unpack(path) for path in args.runs]
    data = report_lib.write_outputs(args.out, dirs, None, archive=False)
    print(f"{len(data['runs'])} runs -> {args.out}/kuramoto_authors.json, .md")
    return 0
  return run(args)


__all__ = ["main", "METHODS", "authors_specs", "torchvision_root", "fedfrac_config"]
