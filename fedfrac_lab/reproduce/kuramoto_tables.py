"""Kuramoto-FedAvg Table 1 on the digits stand-in, as rendered: the settings of
the study, the verdict of a weighting against FedAvg (one rule, the interval
rule of :mod:`fedfrac_lab.reproduce.verdicts`), the table per (K, s) setting, its
summary and notes, and the figures."""
from __future__ import annotations



import numpy as np

from fedfrac_lab.reproduce import common, verdicts
from fedfrac.runner import plots



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


def ms(values, digits=3, scale=1.0):
  v = np.asarray(values, np.float64) * scale
  v = v[np.isfinite(v)]
  if v.size == 0:
    return "n/a"
  if v.size == 1:
    return f"{v[0]:.{digits}f}"
  return f"{v.mean():.{digits}f} ± {v.std(ddof=1):.{digits}f}"


# A weighting against FedAvg, paired by seed: the one rule of this table and of the
# docs that quote it (fedfrac_lab.reproduce.verdicts's interval test on the paired
# differences, margin ±0.5 points).
TIE = verdicts.Margin("difference of two accuracies (fraction)", MARGIN)
VERDICTS = ("tie", "helps", "hurts", "inconclusive", "diverged", "too few seeds")
RULE = (f"*verdict*: the 90 % interval of the paired final-accuracy difference to "
        f"FedAvg (Δ ± t₀.₉₅,ₙ₋₁ · s/√n over the n seeds) within ±{100 * MARGIN:.1f} "
        f"points: `tie`; wholly above or below them: `helps` / `hurts`; neither: "
        f"`inconclusive`; a seed diverged, leaving fewer than "
        f"{verdicts.MIN_SEEDS}: `diverged` (`fedfrac_lab.reproduce.verdicts`).")


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
    fb_s = (f"{ms(fb, 1)} of {rounds}" if fb is not None else "–")
    is_base = name in BASELINE_LABELS.values()
    return (f"| {name} | {kappa} | {ms(finals)}{diverged} | "
            f"{ms([s[x]['final_global'] for x in seeds])} | "
            f"{'–' if name == 'FedAvg' else ms(diffs, 3)} | "
            f"{ms([s[x]['best'] for x in seeds])} | "
            f"{ms([s[x]['best_round'] for x in seeds], 1)} | "
            f"{ms([s[x]['loss_var'] for x in seeds], 4)} | "
            f"{'–' if is_base else ms([s[x]['max_weight'] for x in seeds], 3)} | {fb_s} | "
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
