"""Kuramoto-FedAvg on the offline digits stand-in: FedAvg vs the three weightings.

  fedfrac-reproduce kuramoto                 # writes results/kuramoto_digits.md
  fedfrac-reproduce kuramoto --rounds=20 --shards=3 --out=/tmp/k.md   # quick look

From a notebook: ``stats, timing = ff.reproduce.kuramoto.run(shards=(3,))`` and
``print(ff.reproduce.kuramoto.table(stats))``. Beside ``--out=X.md`` the command
writes ``X_rounds.png`` (accuracy per round, one panel per setting) and
``X_kappa0.png`` (final accuracy vs κ0 per weighting), see :func:`figures`.

Setup: configs/kuramoto/digits.py (scikit-learn digits, K clients with s label
shards each, 2 local epochs, batch 64, SGD momentum 0.9, lr 0.01 cosine, MLP
64-128-64-10) for the paper's grid (Kuramoto-FedAvg §5.1): K ∈ {10, 20} clients
(``--clients``) × s ∈ {3, 5, 10} shards (``--shards``), with FedAvg and SCAFFOLD as
the baselines. β = 0.01 (κ_t = κ0·exp(−β t)) has no source in the paper; it is our
choice. The headline accuracy is the paper's: test accuracy averaged over clients
(each client's test split follows its own class mix), with the accuracy on the
global test set beside it. For each (K, s), every method runs all seeds
(each seed has its own initial model and its own shard partition) and, for the
Kuramoto weightings, every κ0 of ``--kappas``, as one compiled program per method
(``ff.run_many`` with a κ0 grid). The table reports, as mean ± std over seeds:
final test accuracy, best test accuracy and the round it was first reached, the
mean over rounds of the variance of the clients' train losses (the paper's
synchronisation measure, ``train_loss_var``) and, for ``paper``, the number of
rounds that fell back to FedAvg weights. Each Kuramoto row is compared with
FedAvg seed by seed (same seed = same partition and initial model).

The runs go through ``fedfrac.sweep``'s point runner
(:mod:`fedfrac_lab.reproduce.jobs`): each (setting, method, κ0, seed) is one point,
the points of one (setting, method) one batch, batches a work queue over
``--workers`` processes (default one per CPU core or device). ``--dir=D`` (or
``--resume``) keeps every finished run as a JSON file, so an interrupted command
rerun the same way runs only what is missing; a directory of other code or
another grid is refused unless ``--overwrite``.


Its settings, verdicts, table and figures are
:mod:`fedfrac_lab.reproduce.kuramoto_tables` (re-exported here); this module runs it.
"""
from __future__ import annotations


import argparse
import datetime
import platform
import time

import jax
import numpy as np

from fedfrac import runner
from fedfrac_lab.reproduce import common, jobs
from fedfrac.runner import points as points_lib
from fedfrac_lab.reproduce.kuramoto_tables import (  # noqa: F401  (re-exported)
    BASELINE_LABELS, BETA, CHANGE_NOTE, CLIENTS, KAPPAS, MARGIN, ROUNDS, RULE, SEEDS,
    SHARDS, TIE, VERDICTS, WEIGHTINGS, ms, figures, label_of, method_names, notes,
    paired_verdict, summary_lines, table, table_for, verdict)



def load_digits_config():
  return common.config_module("kuramoto/digits.py")


def run_record_stats(rec):
  """Per-run numbers for the table (NaN where a run diverged)."""
  ok = rec.status == "ok"
  rounds, acc = rec.curve("client_accuracy_mean")   # the paper's: mean over clients
  _, acc_global = rec.curve("accuracy")
  loss_var = np.asarray([r.get("train_loss_var", np.nan) for r in rec.round_rows])
  fallback = np.asarray([r.get("server/fallback", 0.0) for r in rec.round_rows])
  wmax = np.asarray([max(abs(r.get("server/weight_min", np.nan)),
                         abs(r.get("server/weight_max", np.nan))) for r in rec.round_rows])
  best = int(np.nanargmax(acc)) if acc.size else 0
  return {
      "ok": ok,
      "final": float(acc[-1]) if ok and acc.size else np.nan,
      "final_global": float(acc_global[-1]) if ok and acc_global.size else np.nan,
      "best": float(acc[best]) if acc.size else np.nan,
      "best_round": int(rounds[best]) if acc.size else 0,
      "loss_var": float(np.mean(loss_var)) if ok and loss_var.size else np.nan,
      "fallbacks": float(np.sum(fallback)),
      "max_weight": float(np.nanmedian(wmax)) if np.any(np.isfinite(wmax)) else np.nan,
      "rounds": len(rec.round_rows),
      "status": rec.status,
      "curve": (np.asarray(rounds).tolist(), np.asarray(acc, np.float64).tolist()),
  }


def setting_config(module, shards, kappas, rounds, beta, clients=10, only=""):
  """The config of one (K, s) setting: every method (``only``: those labels),
  the Kuramoto weightings at κ0 = ``kappas[0]`` (the grid sets the others)."""
  config = module.get_config()
  config.progress = False
  config.rounds = rounds
  config.eval_every = 1
  config.data.num_clients = clients
  config.data.shards_per_client = shards
  config.methods = module.kuramoto_methods(kappa0=kappas[0], beta=beta)
  config.only = only
  return config


def setting_stats(results):
  """``{label: {seed: run_record_stats}}`` of one setting's results."""
  stats = {}
  for rec in results.records:
    stats.setdefault(rec.method, {})[rec.seed] = run_record_stats(rec)
  return stats


def run_setting(module, shards, seeds, kappas, rounds, beta, clients=10, only=""):
  """One setting in this process with ``runner.run_many`` (no point directory)."""
  config = setting_config(module, shards, kappas, rounds, beta, clients, only)
  return setting_stats(runner.run_many(config, seeds=seeds, grid={"kappa0": list(kappas)}))


def run(shards=SHARDS, seeds=SEEDS, kappas=KAPPAS, rounds=ROUNDS, beta=BETA,
        clients=CLIENTS, workers=1, directory=None, resume=False, overwrite=False,
        only=""):
  """Every (K, s) setting of the grid: ``(all_stats, timing)`` with
  ``all_stats[(K, s)][label][seed]`` the numbers of ``run_record_stats`` and
  ``timing[(K, s)]`` the seconds its runs took (:func:`fedfrac_lab.reproduce.jobs.run_seconds`).

  Each setting is one ``ff.run_many`` job with the κ0 grid, run as sweep
  points (:func:`fedfrac_lab.reproduce.jobs.run_jobs`): one batch per (setting,
  method), ``workers`` processes (None: one per CPU core or device; 1: this
  process), points kept in ``directory`` (or, with ``resume``, under
  ``$TMPDIR/fedfrac_points/kuramoto``) and skipped when the same code runs the
  same grid again; ``overwrite`` replaces a directory's points of other code
  or another grid. ``only``: comma-separated method labels (default all)."""
  all_stats, timing, _ = run_points(shards, seeds, kappas, rounds, beta, clients, workers,
                                    directory, resume, overwrite, only)
  return all_stats, timing


def run_points(shards=SHARDS, seeds=SEEDS, kappas=KAPPAS, rounds=ROUNDS, beta=BETA,
               clients=CLIENTS, workers=1, directory=None, resume=False, overwrite=False,
               only=""):
  """:func:`run`, and the :class:`fedfrac_lab.reproduce.jobs.JobsOutcome` (points
  run now and found from an earlier run)."""
  module = load_digits_config()
  settings = [(k, s) for k in clients for s in shards]
  grid = {"kappa0": list(kappas)}
  job_list = [jobs.Job(setting_config(module, s, kappas, rounds, beta, k, only),
                       seeds=tuple(seeds), grid=grid) for k, s in settings]
  outcome = jobs.run_jobs("kuramoto", job_list, workers=workers, directory=directory,
                          resume=resume, overwrite=overwrite)
  all_stats, timing = {}, {}
  for (k, s), results in zip(settings, outcome.results):
    all_stats[(k, s)] = setting_stats(results)
    timing[(k, s)] = jobs.run_seconds(results)
    print(f"K={k}, s={s}: {timing[(k, s)]:.0f} s of runs", flush=True)
  return all_stats, timing, outcome


def main(argv=None):
  p = argparse.ArgumentParser(prog="fedfrac-reproduce kuramoto",
                              description=__doc__.split("\n\n")[0])
  p.add_argument("--out", type=common.output_path("--out"), default="results/kuramoto_digits.md")
  p.add_argument("--rounds", type=int, default=100)
  p.add_argument("--seeds", default="0,1,2")
  p.add_argument("--shards", default="3,5,10")
  p.add_argument("--clients", default="10,20")
  p.add_argument("--kappas", default="0.005,0.1,0.3")
  p.add_argument("--beta", type=float, default=0.01)
  jobs.add_point_flags(p, "kuramoto")
  args = p.parse_args(argv)
  seeds = common.parse_seeds(args.seeds)
  shards = tuple(int(s) for s in args.shards.split(","))
  clients = tuple(int(k) for k in args.clients.split(","))
  kappas = tuple(float(k) for k in args.kappas.split(","))

  wall0, cpu0 = time.perf_counter(), jobs.cpu_seconds()
  try:
    all_stats, timing, outcome = run_points(shards, seeds, kappas, args.rounds, args.beta,
                                            clients, workers=args.workers,
                                            directory=args.dir, resume=args.resume,
                                            overwrite=args.overwrite)
  except points_lib.SweepMismatch as e:
    raise SystemExit(str(e)) from None
  wall, cpu = time.perf_counter() - wall0, jobs.cpu_seconds() - cpu0

  cmd = "fedfrac-reproduce kuramoto" + "".join(
      f" --{k}={v}" for k, v, d in (("rounds", args.rounds, 100),
                                    ("seeds", args.seeds, "0,1,2"),
                                    ("shards", args.shards, "3,5,10"),
                                    ("clients", args.clients, "10,20"),
                                    ("kappas", args.kappas, "0.005,0.1,0.3"),
                                    ("beta", args.beta, 0.01)) if v != d)
  out = [
      "# Kuramoto-FedAvg on scikit-learn digits (offline stand-in for MNIST)",
      "",
      f"Generated by `{cmd}` on {datetime.date.today().isoformat()} "
      f"(jax {jax.__version__}, {jax.default_backend()}, {platform.machine()}); "
      f"{wall:.0f} s wall, {cpu:.0f} s CPU in total (worker processes included)" +
      (f"; {outcome.skipped} of the {outcome.total} runs came from an earlier "
       "run of the same code (the point directory)." if outcome.skipped else "."),
      "",
      "Setup (configs/kuramoto/digits.py): 1,437 train / 360 test digits, K ∈ "
      f"{{{', '.join(map(str, clients))}}} clients, s ∈ {{{', '.join(map(str, shards))}}} "
      "label shards per client (sort by label, K·s equal shards, dealt "
      "without replacement; each seed draws its own partition), full participation, "
      f"{args.rounds} rounds, 2 local epochs, batch 64, SGD momentum 0.9, lr 0.01 "
      "cosine decay, MLP 64-128-64-10; baselines FedAvg and SCAFFOLD (the paper's "
      "two). Kuramoto-FedAvg uses "
      f"κ_t = κ0·exp(−{args.beta}·t); β = {args.beta} is our choice (the paper gives "
      f"no β). Seeds {', '.join(map(str, seeds))}; every cell is mean ± std over seeds.",
      "",
      "- *final accuracy (mean over clients)*: after the last round, the global "
      "model's accuracy on each client's own test split (the test set divided with "
      "each client's train class mix), averaged over clients — the paper's metric; "
      "*global test set*: the same model on the whole test set. *Δ final vs FedAvg*: "
      "of the mean over clients, paired by seed (same partition and initial model); "
      "best accuracy, round of best and the verdicts use the mean over clients too.",
      "- *best accuracy* and *round of best*: maximum over the rounds (evaluated every "
      "round) and the first round reaching it.",
      "- *mean client-loss variance*: mean over rounds of the variance across clients "
      "of their mean local train loss in the round (the paper's synchronisation "
      "measure; lower = more synchronised).",
      "- *median max_k abs(ρ_k)*: median over rounds of the largest absolute client "
      "weight (FedAvg's is 1/K here: equal client sizes). `paper` weights are "
      "applied times κ_t; `reference_code` shows its effective coefficients.",
      "- *`paper` fallback rounds*: rounds in which the literal paper weights were "
      "rejected (|Σ_j sin(θ̄ − θ_j)| < 1e-8 or a non-finite weight) and the round "
      "used FedAvg weights, scaled by κ_t (a diverged run counts the rounds up to "
      "its divergence).",
      "- *diverged*: the run's test loss or client losses stopped being finite; its "
      "final accuracy, loss variance and Δ are left out (n/a), best accuracy is over "
      "the rounds before.",
      f"- {RULE}",
      "",
  ]
  if CHANGE_NOTE:
    out += [f"**Changes from the previous version of this table:** {CHANGE_NOTE}", ""]
  for (k, s), stats in all_stats.items():
    out += [f"## K = {k} clients, s = {s} shards per client "
            f"({timing[(k, s)]:.0f} s of runs: compile + rounds)", ""]
    out += table_for(stats, seeds, kappas, args.rounds) + [""]
  lines, (fb_runs, n_runs, fb_rounds, total_rounds) = summary_lines(all_stats, seeds,
                                                                    kappas)
  out += ["## Summary: final accuracy vs FedAvg (mean difference; best-accuracy "
          "difference in brackets)", ""] + lines + [""]
  out += [f"`paper` fell back in {fb_runs} of {n_runs} runs, in {fb_rounds:.0f} of "
          f"{total_rounds} rounds in total ({100 * fb_rounds / max(total_rounds, 1):.1f}%).",
          ""]
  out += notes(all_stats, seeds, kappas) + [""]
  common.write_text(args.out, "\n".join(out))
  print("\n".join(out))
  print(f"\nwrote {args.out}")
  for path in figures(all_stats, seeds, kappas, args.out):
    print(f"wrote {path}")


if __name__ == "__main__":
  main()
