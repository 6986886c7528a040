"""Learning-rate-tuned comparisons: "paper setting" beside "each method at its own
best learning rate".

The fractional factor (‖Δw‖+δ)^(1−α)/Γ(2−α) and the Kuramoto weights rescale the
client step, so a method can win or lose by its effective step size alone. Here
every method of a study gets the same learning-rate grid and the same budget
(rounds, seeds), and its rate is chosen on a validation split, never on test:

1. ``data.validation_fraction`` carves each client's validation rows out of its
   train rows with the data seed (``fedfrac.data.federated.carve_validation``);
   the test set is not touched.
2. Every seed × every rate of the grid (and the paper rate) of one method is ONE
   vmapped program: the client learning rate η0 is a traced override
   (``fedfrac.runner.factories.CLIENT_LR``), so a method compiles once. The
   validation and the test split hold the same train rows, so each run trains
   once and its final model is evaluated on both.
3. A method's rate is the one with the best mean over seeds of its final
   VALIDATION score (ties: the smaller rate). The table reports the TEST score
   of that rate and of the paper setting (the config's own rate).

The score is the study's paper metric: global test-set accuracy (fractional),
accuracy averaged over clients on their own splits (Kuramoto §5.1, FIRMA
Table 11).

  fedfrac-reproduce tuned --study=fractional          # digits, writes results/
  fedfrac-reproduce tuned --study=kuramoto --rounds=2 --out=/tmp/k.md   # quick look

``--data_dir`` (with ``--format``) runs a study on local files
(``data.source="files"``); that is meant for an accelerator (see REPRODUCTION.md).


The studies are :mod:`fedfrac_lab.reproduce.tuned_studies` and their tables
:mod:`fedfrac_lab.reproduce.tuned_tables` (both re-exported here); this module tunes
and runs them.
"""
from __future__ import annotations


import argparse
import json
import os
import sys
import time
import warnings

import jax
import numpy as np

from fedfrac import config as config_lib
from fedfrac import data as data_lib
from fedfrac_lab.reproduce import common
from fedfrac.runner import factories
from fedfrac.runner.log import RunLog
from fedfrac.sim.batched import BatchedSimulation
from fedfrac_lab.reproduce.tuned_studies import (  # noqa: F401  (re-exported)
    STUDIES, VALIDATION_FRACTION, Study, study_config)
from fedfrac_lab.reproduce.tuned_tables import (  # noqa: F401  (re-exported)
    METRIC_TEXT, ms, val_cell, edge_text, grid_edge, markdown, verdict_text)



def method_lr(cfg, label):
  """The client learning rate method ``label`` runs with in ``cfg``."""
  client = cfg.methods[label].get("client", None)
  if client is not None and "lr" in client:
    return float(client.lr)
  return float(cfg.client.lr)


def with_lr(cfg, label, lr, eval_split):
  """``cfg`` reduced to method ``label`` at client learning rate ``lr``,
  evaluated on ``eval_split`` of a validation split carved from the train rows."""
  import ml_collections
  c = cfg.copy_and_resolve_references()
  method = c.methods[label]
  for other in list(c.methods.keys()):
    if other != label:
      del c.methods[other]
  if "client" not in method:
    method.client = ml_collections.ConfigDict()
  method.client.lr = float(lr)
  c.data.validation_fraction = VALIDATION_FRACTION
  c.data.eval_split = eval_split
  return c


def final_accuracies(results, label, metric="accuracy"):
  """Final-round ``metric`` of every seed of ``label`` in ``ff.run_many`` results
  (NaN for a diverged run)."""
  out = []
  for rec in sorted(results.records, key=lambda r: r.seed):
    if rec.method != label:
      continue
    _, acc = rec.curve(metric)
    out.append(float(acc[-1]) if rec.status == "ok" and acc.size else np.nan)
  return out


def _dataset(cfg, seed, cache):
  """The federated data of ``cfg`` for run ``seed`` (memoised in ``cache`` by data
  config and data seed, as ``ff.run_many`` does)."""
  data_seed = seed if cfg.data.seed < 0 else cfg.data.seed
  key = (cfg.data.to_json_best_effort(sort_keys=True), data_seed)
  if key not in cache:
    cache[key] = data_lib.build(cfg.data, data_seed)
  return cache[key]


def _run(tree, i):
  """Run ``i`` of a batched tree (0-d leaves, e.g. the shared round, are kept)."""
  return jax.tree.map(lambda x: x[i] if np.ndim(x) else x, tree)


def tune_method(cfg, label, lrs, seeds, metric="accuracy", data_cache=None):
  """Method ``label`` of ``cfg`` at every client learning rate of ``lrs`` for every
  seed, as ONE compiled program, each final model scored on validation and test.

  The R = len(seeds) · len(lrs) runs are vmapped (:class:`BatchedSimulation`) with
  η0 as a traced per-run scalar (override ``"client.lr"``, whose schedule is the
  method's own: :func:`fedfrac.runner.factories.with_client_lr`). All rounds run
  in one chunk (``eval_every = rounds``); a run whose training metrics or final
  evaluation are not finite counts as diverged (NaN), by the rule of
  ``ff.run_many`` (:class:`fedfrac.runner.log.RunLog`). Same numbers, to float
  rounding, as one ``ff.run_many`` per rate and split (``with_lr``).

  Returns:
    ``{"val": [[score per seed] per rate], "test": [...], "compile_s", "run_s"}``.
  """
  cache = {} if data_cache is None else data_cache
  seeds, lrs = list(seeds), [float(lr) for lr in lrs]
  cfgs = {split: with_lr(cfg, label, lrs[0], split) for split in ("val", "test")}
  config_lib.validate(cfgs["test"])
  feds = {split: [_dataset(c, seed, cache) for seed in seeds] for split, c in cfgs.items()}
  factories.check_methods(cfgs["val"], feds["val"][0])
  sizes = np.concatenate([f.client_size for f in feds["val"]])
  sim = factories.build_simulation(cfgs["val"], label, feds["val"][0],
                                   all_client_sizes=sizes, traced_options=True)
  runs = [(i, seed, lr) for i, seed in enumerate(seeds) for lr in lrs]
  hps = [{factories.CLIENT_LR: lr} for _, _, lr in runs]
  batch = {split: BatchedSimulation(sim, [feds[split][i] for i, _, _ in runs], hps)
           for split in ("val", "test")}
  states = batch["val"].init([seed for _, seed, _ in runs])
  payload_bytes, message_bytes = sim.communication_bytes(_run(states, 0))
  t0 = time.perf_counter()
  batch["val"].compile(cfg.rounds, states)
  for b in batch.values():
    b.compile_eval(states)
  t1 = time.perf_counter()
  states, round_metrics = batch["val"].run_chunk(states, cfg.rounds)
  evaluation = {split: b.evaluate(states) for split, b in batch.items()}
  round_metrics, evaluation = jax.device_get((round_metrics, evaluation))
  run_s = time.perf_counter() - t1
  method = cfg.methods[label]
  out = {"compile_s": t1 - t0, "run_s": run_s}
  for split in ("val", "test"):
    scores = np.full((len(seeds), len(lrs)), np.nan)
    for j, (i, seed, lr) in enumerate(runs):
      log = RunLog(f"{label}[{factories.CLIENT_LR}={lr}]", method.name, seed,
                   sim.algorithm.comm, payload_bytes, message_bytes, "stop",
                   host_metrics=sim.algorithm_fn(hps[j]).host_metrics)
      with warnings.catch_warnings():
        if split == "test":   # the validation log has already warned
          warnings.simplefilter("ignore")
        row = log.add_chunk(0, _run(round_metrics, j), _run(evaluation[split], j),
                            run_s / len(runs))
      if log.status == "ok" and row is not None and metric in row:
        scores[i, j % len(lrs)] = row[metric]
    out[split] = [[float(v) for v in scores[:, k]] for k in range(len(lrs))]
  return out


def choose_lr(val):
  """The rate of ``val`` = ``{repr(lr): [validation score per seed]}`` with the
  fewest diverged seeds (NaN), then the best mean score over the seeds that
  finished, then the smaller rate: a rate where some seed diverged does not win
  on its survivors alone."""
  def key(item):
    lr, v = float(item[0]), np.asarray(item[1], np.float64)
    ok = np.isfinite(v)
    return (-int((~ok).sum()), float(v[ok].mean()) if ok.any() else -np.inf, -lr)
  return float(max(val.items(), key=key)[0])


def tune(cfg, lrs, seeds=(0, 1, 2), labels=None, metric="accuracy", log=print,
         on_method=None):
  """Tune and evaluate the methods ``labels`` (default all) of ``cfg`` on the grid
  ``lrs``; returns a JSON-able dict ``{"methods": {label: {"paper_lr", "val":
  {lr: [score per seed]}, "chosen_lr", "paper_test": [...], "tuned_test": [...],
  "compile_s", "run_s"}}, ...}``. The paper rate runs in the same program even
  when it is not on the grid (it is then not a candidate). ``on_method(out)`` is
  called after each method (to save partial results)."""
  lrs = tuple(float(x) for x in lrs)
  labels = [m for m in cfg.methods.keys() if not labels or m in labels]
  out = {"seeds": list(seeds), "lrs": list(lrs), "rounds": cfg.rounds, "metric": metric,
         "validation_fraction": VALIDATION_FRACTION, "methods": {}}
  cache: dict = {}
  t0 = time.perf_counter()
  for label in labels:
    paper = method_lr(cfg, label)
    grid = list(lrs) + ([] if np.any(np.isclose(paper, lrs)) else [paper])
    r = tune_method(cfg, label, grid, seeds, metric, cache)
    entry = {"name": cfg.methods[label].name, "paper_lr": paper,
             "val": {repr(lr): r["val"][k] for k, lr in enumerate(lrs)},
             "compile_s": r["compile_s"], "run_s": r["run_s"]}
    for lr in lrs:
      log(f"{label} lr={lr}: val {val_cell(entry['val'][repr(lr)])}")
    chosen = choose_lr(entry["val"])
    entry["chosen_lr"] = chosen
    entry["paper_test"] = r["test"][int(np.argmax(np.isclose(paper, grid)))]
    entry["tuned_test"] = r["test"][lrs.index(chosen)]
    log(f"{label}: chosen lr {chosen}, test {ms(entry['tuned_test'])} "
        f"(paper setting {ms(entry['paper_test'])}); compile "
        f"{r['compile_s']:.1f} s, {len(grid) * len(seeds)} runs {r['run_s']:.1f} s")
    out["methods"][label] = entry
    out["wall_s"] = time.perf_counter() - t0
    if on_method:
      on_method(out)
  return out


def run_study(study, seeds=(0, 1, 2), rounds=None, lrs=None, methods=None,
              data_dir=None, file_format=None, log=print, on_method=None):
  """:func:`tune` on the config of ``study`` with its grid (``lrs``: another) and
  its metric; the output dict also names the study."""
  cfg = study_config(study, rounds, data_dir, file_format)
  st = STUDIES[study]

  def named(out):
    out["study"] = study
    if on_method:
      on_method(out)
  out = tune(cfg, lrs or st.lrs, seeds, methods, st.metric,
             log=lambda m: log(f"{study} {m}"), on_method=named)
  out["study"] = study
  return out


def main(argv=None):
  p = argparse.ArgumentParser(prog="fedfrac-reproduce tuned",
                              description=__doc__.split("\n\n")[0])
  p.add_argument("--study", required=True, choices=sorted(STUDIES))
  p.add_argument("--seeds", default="0,1,2")
  p.add_argument("--rounds", type=int, default=None)
  p.add_argument("--lrs", default="", help="comma-separated grid (default: the study's)")
  p.add_argument("--methods", default="", help="comma-separated labels (default: all)")
  p.add_argument("--data_dir", default="", help="local files: data.source='files'")
  p.add_argument("--format", default="", help="data.files.format")
  p.add_argument("--out", type=common.output_path("--out"), default="")
  p.add_argument("--from-json", dest="from_json", default="",
                 help="re-render --out from this JSON without running")
  argv = sys.argv[1:] if argv is None else list(argv)
  args = p.parse_args(argv)
  out = args.out or f"results/tuned_{args.study}_digits.md"
  command = common.command_line("tuned", argv)
  if args.from_json:
    with open(args.from_json, encoding="utf-8") as f:
      result = json.load(f)
  else:
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)

    def save(partial):
      partial["command"] = command
      with open(os.path.splitext(out)[0] + ".json", "w") as f:
        json.dump(partial, f, default=float, indent=1)
      with open(out, "w") as f:
        f.write(markdown(partial, command))
    result = run_study(
        args.study, common.parse_seeds(args.seeds), args.rounds,
        tuple(float(x) for x in args.lrs.split(",") if x) or None,
        [m for m in args.methods.split(",") if m] or None, args.data_dir or None,
        args.format or None, log=lambda m: print(m, file=sys.stderr, flush=True),
        on_method=save)
  with open(out, "w") as f:
    f.write(markdown(result, command))
  print(f"wrote {out}", file=sys.stderr)
