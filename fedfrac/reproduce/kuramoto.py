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
(:mod:`fedfrac.reproduce.jobs`): each (setting, method, κ0, seed) is one point,
the points of one (setting, method) one batch, batches a work queue over
``--workers`` processes (default one per CPU core or device). ``--dir=D`` (or
``--resume``) keeps every finished run as a JSON file, so an interrupted command
rerun the same way runs only what is missing; a directory of other code or
another grid is refused unless ``--overwrite``.
"""
from __future__ import annotations

import argparse
import datetime
import platform
import time

import jax
import numpy as np

from fedfrac import runner
from fedfrac.reproduce import common, jobs, verdicts
from fedfrac.runner import plots
from fedfrac.runner import points as points_lib

WEIGHTINGS = ("coupled", "paper", "reference_code")
MARGIN = 0.005      # accuracy difference (0.5 points) below which we call it a tie
# The grid (Kuramoto-FedAvg §5.1): clients K x label shards per client s x seeds
# x κ0 of the three weightings.
CLIENTS = (10, 20)
SHARDS = (3, 5, 10)
SEEDS = (0, 1, 2)
KAPPAS = (0.005, 0.1, 0.3)
ROUNDS = 100
BETA = 0.01         # our choice: the paper gives no value for β
BASELINE_LABELS = {"fedavg": "FedAvg", "scaffold": "SCAFFOLD"}
# One line in the committed table saying what changed against its previous version.
CHANGE_NOTE = ""


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


def _ms(values, digits=3, scale=1.0):
  v = np.asarray(values, np.float64) * scale
  v = v[np.isfinite(v)]
  if v.size == 0:
    return "n/a"
  if v.size == 1:
    return f"{v[0]:.{digits}f}"
  return f"{v.mean():.{digits}f} ± {v.std(ddof=1):.{digits}f}"


# A weighting against FedAvg, paired by seed: the one rule of this table and of the
# docs that quote it (fedfrac.reproduce.verdicts's interval test on the paired
# differences, margin ±0.5 points).
TIE = verdicts.Margin("difference of two accuracies (fraction)", MARGIN)
VERDICTS = ("tie", "helps", "hurts", "inconclusive", "diverged", "too few seeds")
RULE = (f"*verdict*: the 90 % interval of the paired final-accuracy difference to "
        f"FedAvg (Δ ± t₀.₉₅,ₙ₋₁ · s/√n over the n seeds) within ±{100 * MARGIN:.1f} "
        f"points: `tie`; wholly above or below them: `helps` / `hurts`; neither: "
        f"`inconclusive`; a seed diverged, leaving fewer than "
        f"{verdicts.MIN_SEEDS}: `diverged` (`fedfrac.reproduce.verdicts`).")


def paired_verdict(mean, std, n, diverged=0):
  """The verdict of a weighting from its paired difference to FedAvg over ``n``
  finite seeds (mean, sample std) and the seeds that ``diverged``: one of
  :data:`VERDICTS`."""
  if n < verdicts.MIN_SEEDS or mean is None:
    return "diverged" if diverged else "too few seeds"
  c = verdicts.judge(0.0, mean, std or 0.0, n, TIE)
  if c.verdict == verdicts.AGREES:
    return "tie"
  if c.verdict == verdicts.INCONCLUSIVE:
    return "inconclusive"
  return "helps" if mean > 0 else "hurts"


def verdict(diffs):
  """:func:`paired_verdict` of per-seed accuracy differences vs FedAvg (a
  non-finite one is a seed that diverged)."""
  d = np.asarray(diffs, np.float64)
  finite = d[np.isfinite(d)]
  mean, std, n = verdicts.seed_summary(finite.tolist())
  return paired_verdict(mean, std, n, diverged=int(d.size - finite.size))


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


def label_of(weighting, kappa):
  return f"kuramoto_{weighting}[kappa0={kappa}]"


def table_for(stats, seeds, kappas, rounds):
  base = stats["fedavg"]
  lines = [
      "| method | κ0 | final accuracy (mean over clients) | final accuracy (global test "
      "set) | Δ final vs FedAvg | best accuracy | round of best "
      "| mean client-loss variance | median max_k abs(ρ_k) | `paper` fallback rounds "
      "| verdict (final) |",
      "|---|---|---|---|---|---|---|---|---|---|---|",
  ]

  def row(name, kappa, s):
    finals = [s[x]["final"] for x in seeds]
    diffs = [s[x]["final"] - base[x]["final"] for x in seeds]
    bad = sum(not s[x]["ok"] for x in seeds)
    diverged = f" ({bad}/{len(seeds)} diverged)" if bad else ""
    fb = ([s[x]["fallbacks"] for x in seeds] if name.startswith("paper") else None)
    fb_s = (f"{_ms(fb, 1)} of {rounds}" if fb is not None else "–")
    is_base = name in BASELINE_LABELS.values()
    return (f"| {name} | {kappa} | {_ms(finals)}{diverged} | "
            f"{_ms([s[x]['final_global'] for x in seeds])} | "
            f"{'–' if name == 'FedAvg' else _ms(diffs, 3)} | "
            f"{_ms([s[x]['best'] for x in seeds])} | "
            f"{_ms([s[x]['best_round'] for x in seeds], 1)} | "
            f"{_ms([s[x]['loss_var'] for x in seeds], 4)} | "
            f"{'–' if is_base else _ms([s[x]['max_weight'] for x in seeds], 3)} | {fb_s} | "
            f"{'–' if is_base else verdict(diffs)} |")
  for label, name in BASELINE_LABELS.items():
    if label in stats:
      lines.append(row(name, "–", stats[label]))
  for weighting in WEIGHTINGS:
    for kappa in kappas:
      lines.append(row(weighting, kappa, stats[label_of(weighting, kappa)]))
  return lines


def summary_lines(all_stats, seeds, kappas):
  """Verdict per (weighting, κ0) across shard settings, and fallback totals."""
  lines = ["| weighting | κ0 | " + " | ".join(f"K = {k}, s = {s}" for k, s in all_stats)
           + " |",
           "|---|---|" + "---|" * len(all_stats)]
  for weighting in WEIGHTINGS:
    for kappa in kappas:
      cells = []
      for stats in all_stats.values():
        s, base = stats[label_of(weighting, kappa)], stats["fedavg"]
        diffs = [s[x]["final"] - base[x]["final"] for x in seeds]
        best = [s[x]["best"] - base[x]["best"] for x in seeds]
        d = np.asarray(diffs)
        mean = f"{100 * np.nanmean(d):+.1f} pts" if np.any(np.isfinite(d)) else "n/a"
        cells.append(f"{verdict(diffs)} ({mean}; best {100 * np.nanmean(best):+.1f})")
      lines.append(f"| {weighting} | {kappa} | " + " | ".join(cells) + " |")
  fb_runs, fb_rounds, total_rounds = 0, 0.0, 0
  for stats in all_stats.values():
    for kappa in kappas:
      for x in seeds:
        r = stats[label_of("paper", kappa)][x]
        fb_runs += r["fallbacks"] > 0
        fb_rounds += r["fallbacks"]
        total_rounds += r["rounds"]
  n_runs = len(all_stats) * len(kappas) * len(seeds)
  return lines, (fb_runs, n_runs, fb_rounds, total_rounds)


def notes(all_stats, seeds, kappas):
  """Numbers that explain the verdicts, computed from the runs."""
  counts = {v: 0 for v in VERDICTS}
  weight = {w: [] for w in WEIGHTINGS}
  diverged = {w: 0 for w in WEIGHTINGS}
  for stats in all_stats.values():
    for w in WEIGHTINGS:
      for kappa in kappas:
        s, base = stats[label_of(w, kappa)], stats["fedavg"]
        counts[verdict([s[x]["final"] - base[x]["final"] for x in seeds])] += 1
        weight[w] += [s[x]["max_weight"] for x in seeds]
        diverged[w] += sum(not s[x]["ok"] for x in seeds)
  n = sum(counts.values())
  runs = len(all_stats) * len(kappas) * len(seeds)
  lines = ["## Notes", "",
           f"- Verdicts over the {n} (weighting, κ0, s) cells: " + ", ".join(
               f"{counts[v]} {v}" for v in VERDICTS if counts[v] or v in
               ("tie", "helps", "hurts")) + "."]
  for w in WEIGHTINGS:
    mw = np.asarray(weight[w], np.float64)
    mw = mw[np.isfinite(mw)]
    lines.append(
        f"- `{w}`: per-run median of the largest client weight between "
        f"{mw.min():.3f} and {mw.max():.3f} (FedAvg: 1/K with equal client sizes); "
        f"{diverged[w]} of {runs} runs diverged.")
  return lines


def run(shards=SHARDS, seeds=SEEDS, kappas=KAPPAS, rounds=ROUNDS, beta=BETA,
        clients=CLIENTS, workers=1, directory=None, resume=False, overwrite=False,
        only=""):
  """Every (K, s) setting of the grid: ``(all_stats, timing)`` with
  ``all_stats[(K, s)][label][seed]`` the numbers of ``run_record_stats`` and
  ``timing[(K, s)]`` the seconds its runs took (:func:`fedfrac.reproduce.jobs.run_seconds`).

  Each setting is one ``ff.run_many`` job with the κ0 grid, run as sweep
  points (:func:`fedfrac.reproduce.jobs.run_jobs`): one batch per (setting,
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
  """:func:`run`, and the :class:`fedfrac.reproduce.jobs.JobsOutcome` (points
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


def method_names(stats, kappas):
  """label -> legend name of every method of one setting, in table order."""
  names = {label: name for label, name in BASELINE_LABELS.items() if label in stats}
  for weighting in WEIGHTINGS:
    for kappa in kappas:
      if label_of(weighting, kappa) in stats:
        names[label_of(weighting, kappa)] = f"{weighting} κ0={kappa:g}"
  return names


def figures(all_stats, seeds, kappas, out):
  """Write the report's figures beside ``out`` (``X.md``) and return their paths:
  ``X_rounds.png``, the accuracy (mean over clients) per round of every method,
  one panel per (K, s) setting, mean ± std band over ``seeds``; ``X_kappa0.png``,
  the final accuracy vs κ0 of each weighting in each setting (error bars: sample
  std over seeds; diverged runs left out, as in the tables), FedAvg as a
  reference line."""
  scenarios = {}
  for (k, s), stats in all_stats.items():
    panel = {}
    for label, name in method_names(stats, kappas).items():
      curve = common.stack_curves([stats[label][x]["curve"] for x in seeds])
      if curve is not None:
        panel[name] = curve
    scenarios[f"K = {k}, s = {s}"] = panel
  rounds_path = common.figure_path(out, "rounds")
  plots.scenarios_figure(scenarios, ylabel="accuracy (mean over clients)",
                         title="Kuramoto-FedAvg on digits: accuracy per round",
                         path=rounds_path)
  lines = {}
  for (k, s), stats in all_stats.items():
    for weighting in WEIGHTINGS:
      lines[f"{weighting} (K = {k}, s = {s})"] = [
          (kappa, [stats[label_of(weighting, kappa)][x]["final"] for x in seeds])
          for kappa in kappas if label_of(weighting, kappa) in stats]
    if "fedavg" in stats:
      base = [stats["fedavg"][x]["final"] for x in seeds]
      lines[f"FedAvg (K = {k}, s = {s})"] = [(kappa, base) for kappa in kappas]
  kappa_path = common.figure_path(out, "kappa0")
  plots.sweep_figure(lines, xlabel="κ0", ylabel="final accuracy (mean over clients)",
                     title="Kuramoto-FedAvg on digits: final accuracy vs κ0 "
                           "(FedAvg: no κ0, drawn flat)",
                     log_x=common.wide_range(kappas), path=kappa_path)
  return [rounds_path, kappa_path]


def table(all_stats, seeds=SEEDS, kappas=KAPPAS, rounds=ROUNDS):
  """Markdown: one table per (K, s) setting of ``all_stats`` (from ``run``)."""
  out = []
  for (k, s), stats in all_stats.items():
    out += [f"### K = {k}, s = {s}", ""] + table_for(stats, seeds, kappas, rounds) + [""]
  return "\n".join(out)


def main(argv=None):
  p = argparse.ArgumentParser(prog="fedfrac-reproduce kuramoto",
                              description=__doc__.split("\n\n")[0])
  p.add_argument("--out", default="results/kuramoto_digits.md")
  p.add_argument("--rounds", type=int, default=100)
  p.add_argument("--seeds", default="0,1,2")
  p.add_argument("--shards", default="3,5,10")
  p.add_argument("--clients", default="10,20")
  p.add_argument("--kappas", default="0.005,0.1,0.3")
  p.add_argument("--beta", type=float, default=0.01)
  jobs.add_point_flags(p, "kuramoto")
  args = p.parse_args(argv)
  seeds = tuple(int(s) for s in args.seeds.split(","))
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
