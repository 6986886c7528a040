"""Learning-rate-tuned comparisons: "paper setting" beside "each method at its own
best learning rate".

The fractional factor (‖Δw‖+δ)^(1−α)/Γ(2−α) and the Kuramoto weights rescale the
client step, so a method can win or lose by its effective step size alone. Here
every method of a study gets the same learning-rate grid and the same budget
(rounds, seeds), and its rate is chosen on a validation split, never on test:

1. ``data.validation_fraction`` carves each client's validation rows out of its
   train rows with the data seed (``fedfrac.data.federated.carve_validation``);
   the test set is not touched.
2. For every rate of the grid, every method runs all seeds with
   ``data.eval_split="val"`` (``ff.run_many``: the seeds of one method and rate
   are one vmapped program) and scores the mean over seeds of its final
   validation accuracy; the best rate wins (ties: the smaller rate).
3. The chosen rate and the paper setting (the config's own rate) are each run
   once more with ``data.eval_split="test"``: same seeds, same train rows, the
   test accuracy is what the table reports.

  fedfrac-reproduce tuned --study=fractional          # digits, writes results/
  fedfrac-reproduce tuned --study=kuramoto --rounds=2 --out=/tmp/k.md   # quick look

The real-data variants (``--study=fractional_mnist`` etc.) take the same flags
plus ``--data_dir``; they are meant for an accelerator (see REPRODUCTION.md).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

import fedfrac as ff
from fedfrac.reproduce import common

VALIDATION_FRACTION = 0.2


def _fractional(c):
  """configs/fofedavg/digits.py methods plus FedProx, SCAFFOLD and FOFedAvg's α
  grid as separate methods (each α is tuned on its own)."""
  import ml_collections
  m = ml_collections.ConfigDict()
  m.fedavg = dict(name="fedavg")
  m.fedprox = dict(name="fedprox")
  m.scaffold = dict(name="scaffold")
  for a in (0.5, 0.8, 0.97):
    m["fofedavg_a" + f"{a}".replace(".", "")] = dict(name="fofedavg", alpha=a)
  m.fo_fedavg = dict(name="fo_fedavg")
  m.ri_fedavg = dict(name="ri_fedavg")
  m.fo_ri_fedavg = dict(name="fo_ri_fedavg")
  c.methods = m
  return c


def _kuramoto(c):
  import ml_collections
  m = c.methods
  m.scaffold = ml_collections.ConfigDict(dict(name="scaffold"))
  return c


def _firma(c):
  for label in list(c.methods.keys()):
    if label not in ("fedavg", "fedrep", "fibfl_pp"):
      del c.methods[label]
  return c


# Study -> (config, config argument, method edit, lr grid, paper-setting text,
#           stand-in note). Every method of a study gets the same grid.
STUDIES = {
    "fractional": ("fofedavg/digits.py", None, _fractional, (0.03, 0.1, 0.3),
                   "client lr 0.1 with μ_t = 0.1/sqrt(t+1) for every method "
                   "(configs/fofedavg/digits.py)",
                   "digits (offline stand-in for MNIST), Dirichlet 0.3, 10 clients, "
                   "30 rounds"),
    "kuramoto": ("kuramoto/digits.py", "s=3", _kuramoto, (0.003, 0.01, 0.03),
                 "SGD momentum 0.9, lr 0.01 cosine (the paper's Section 5.1)",
                 "digits (offline stand-in for MNIST), 3 label shards per client, "
                 "K = 10"),
    "firma": ("firma/digits.py", "paper,dir0.5", _firma, (0.003, 0.01, 0.03),
              "FIRMA Table 4: FedAvg/FedRep SGD momentum 0.9 lr 0.01, FibFL++ Adam "
              "lr 0.01",
              "MNIST-1797 (the paper's digits), Dir 0.5, N = 5, R = 10"),
}
# Real-data variants: the same studies on local files (data.source="files").
REAL = {"fractional_mnist": ("fractional", "configs/fofedavg/mnist_cnn.py"),
        "kuramoto_fmnist": ("kuramoto", None), "firma_fmnist": ("firma", None)}


def study_config(study, rounds=None, data_dir=None, file_format=None):
  """The config of ``study`` (methods edited, ``rounds`` overridden when given;
  ``data_dir`` switches the data to ``data.source="files"``)."""
  path, arg, edit, *_ = STUDIES[study]
  module = common.config_module(path)
  cfg = module.get_config(arg) if arg is not None else module.get_config()
  cfg = edit(cfg)
  if rounds:
    cfg.rounds = int(rounds)
  if data_dir:
    cfg.data.source = "files"
    cfg.data.dir = data_dir
    if file_format:
      cfg.data.files.format = file_format
  cfg.eval_every = cfg.rounds
  cfg.checkpoint_every = 0
  cfg.progress = False
  return cfg


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


def final_accuracies(results, label):
  """Final-round accuracy of every seed of ``label`` (NaN for a diverged run)."""
  out = []
  for rec in sorted(results.records, key=lambda r: r.seed):
    if rec.method != label:
      continue
    _, acc = rec.curve("accuracy")
    out.append(float(acc[-1]) if rec.status == "ok" and acc.size else np.nan)
  return out


def run_study(study, seeds=(0, 1, 2), rounds=None, lrs=None, methods=None,
              data_dir=None, file_format=None, log=print, on_method=None):
  """Tune and evaluate every method of ``study``; returns a JSON-able dict:
  ``{"methods": {label: {"paper_lr", "val": {lr: [acc per seed]}, "chosen_lr",
  "paper_test": [...], "tuned_test": [...]}}, ...}``. ``on_method(out)`` is
  called after each method (to save partial results). When the chosen rate is
  the paper's, its test run is shared."""
  cfg = study_config(study, rounds, data_dir, file_format)
  lrs = tuple(lrs or STUDIES[study][3])
  labels = [m for m in cfg.methods.keys() if not methods or m in methods]
  out = {"study": study, "seeds": list(seeds), "lrs": list(lrs), "rounds": cfg.rounds,
         "validation_fraction": VALIDATION_FRACTION, "methods": {}}
  cache = {}
  t0 = time.perf_counter()
  for label in labels:
    entry = {"name": cfg.methods[label].name, "paper_lr": method_lr(cfg, label),
             "val": {}}
    for lr in lrs:
      res = ff.run_many(with_lr(cfg, label, lr, "val"), seeds=seeds, data_cache=cache)
      entry["val"][repr(lr)] = final_accuracies(res, label)
      log(f"{study} {label} lr={lr}: val {np.nanmean(entry['val'][repr(lr)]):.4f}")
    scores = {lr: np.nanmean(entry["val"][repr(lr)]) if np.any(np.isfinite(
        entry["val"][repr(lr)])) else -np.inf for lr in lrs}
    chosen = max(lrs, key=lambda lr: (scores[lr], -lr))
    entry["chosen_lr"] = chosen
    res = ff.run_many(with_lr(cfg, label, entry["paper_lr"], "test"), seeds=seeds,
                      data_cache=cache)
    entry["paper_test"] = final_accuracies(res, label)
    if np.isclose(chosen, entry["paper_lr"]):
      entry["tuned_test"] = list(entry["paper_test"])
    else:
      res = ff.run_many(with_lr(cfg, label, chosen, "test"), seeds=seeds,
                        data_cache=cache)
      entry["tuned_test"] = final_accuracies(res, label)
    log(f"{study} {label}: chosen lr {chosen}, test {np.nanmean(entry['tuned_test']):.4f}"
        f" (paper setting {np.nanmean(entry['paper_test']):.4f})")
    out["methods"][label] = entry
    out["wall_s"] = time.perf_counter() - t0
    if on_method:
      on_method(out)
  return out


def _ms(values):
  mean, std = common.seed_mean_std(values)
  return "diverged" if mean is None else f"{mean:.4f} ± {std:.4f}"


def markdown(result, command):
  """The side-by-side table of ``run_study`` output, best tuned method first, and a
  plain verdict."""
  study = result["study"]
  _, _, _, _, paper_text, data_text = STUDIES[study]
  rows = []
  for label, e in result["methods"].items():
    paper_mean = common.seed_mean_std(e["paper_test"])[0]
    tuned_mean = common.seed_mean_std(e["tuned_test"])[0]
    rows.append((tuned_mean if tuned_mean is not None else -1, label, e, paper_mean))
  rows.sort(key=lambda r: -r[0])
  lines = [f"# Learning-rate-tuned comparison: {study} ({data_text})", "",
           f"Produced by `{result.get('command', command)}`; "
           f"{result['wall_s']:.0f} s wall" +
           (f"; rendered by `{command}`." if result.get("command", command) != command
            else "."), "",
           f"Protocol: each client's train rows are split {1 - result['validation_fraction']:.0%}"
           f" / {result['validation_fraction']:.0%} into train / validation with the "
           "data seed (`data.validation_fraction`); every method runs the same "
           f"learning-rate grid {result['lrs']} for {result['rounds']} rounds on seeds "
           f"{result['seeds']}; its rate is the one with the best mean final "
           "VALIDATION accuracy (ties: the smaller rate). The table reports TEST "
           "accuracy (mean ± std over seeds) of the paper setting and of the chosen "
           "rate, both trained on the same train rows. Paper setting: "
           f"{paper_text}.", "",
           "| method | paper-setting lr | test acc, paper setting | chosen lr | "
           "test acc, own best lr | Δ tuned − paper (pp) | val acc per lr |",
           "|---|---|---|---|---|---|---|"]
  for _, label, e, paper_mean in rows:
    tuned_mean = common.seed_mean_std(e["tuned_test"])[0]
    d = ("–" if tuned_mean is None or paper_mean is None
         else f"{100 * (tuned_mean - paper_mean):+.1f}")
    val = ", ".join(f"{lr}: {np.nanmean(v):.3f}" if np.any(np.isfinite(v)) else
                    f"{lr}: diverged" for lr, v in e["val"].items())
    lines.append(f"| {label} | {e['paper_lr']:g} | {_ms(e['paper_test'])} | "
                 f"{e['chosen_lr']:g} | {_ms(e['tuned_test'])} | {d} | {val} |")
  missing = [m for m in study_config(study).methods.keys()
             if m not in result["methods"]]
  lines += ["", "## Verdict", ""]
  if missing:
    lines += [f"**Partial**: not run yet: {', '.join(missing)} (the verdict covers "
              "only the methods above).", ""]
  lines += [verdict_text(rows), ""]
  return "\n".join(lines)


def verdict_text(rows):
  """Who wins at the paper setting and who wins when every method is tuned."""
  def best(key):
    scored = [(common.seed_mean_std(e[key]), label) for _, label, e, _ in rows]
    scored = [((m, s), label) for (m, s), label in scored if m is not None]
    scored.sort(key=lambda x: -x[0][0])
    return scored
  paper, tuned = best("paper_test"), best("tuned_test")
  if not paper or not tuned:
    return "No method finished."
  (pm, ps), pl = paper[0]
  (tm, ts), tl = tuned[0]
  ties = [label for (m, s), label in tuned[1:] if tm - m <= max(0.005, ts, s)]
  text = (f"At the paper setting the best is **{pl}** ({pm:.4f}). With every method "
          f"at its own best learning rate the best is **{tl}** ({tm:.4f} ± {ts:.4f})")
  text += (f"; within one std (or 0.5 pp) of it: {', '.join(ties)}." if ties else
           "; no other method is within one std (or 0.5 pp) of it.")
  return text


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
  p.add_argument("--out", default="")
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
        args.study, tuple(int(s) for s in args.seeds.split(",") if s), args.rounds,
        tuple(float(x) for x in args.lrs.split(",") if x) or None,
        [m for m in args.methods.split(",") if m] or None, args.data_dir or None,
        args.format or None, log=lambda m: print(m, file=sys.stderr, flush=True),
        on_method=save)
  with open(out, "w") as f:
    f.write(markdown(result, command))
  print(f"wrote {out}", file=sys.stderr)
