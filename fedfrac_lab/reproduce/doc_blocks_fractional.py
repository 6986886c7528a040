"""Generated doc blocks of FOFedAvg, the fractional family on digits and the
learning-rate-tuned studies (FO-RI-FedAvg's are in
:mod:`fedfrac_lab.reproduce.doc_blocks_fo_ri`); see
:mod:`fedfrac_lab.reproduce.docs` for the mechanism and :mod:`fedfrac_lab.reproduce.doc_blocks`
for the shared helpers."""
from __future__ import annotations



from fedfrac_lab.reproduce import (common, fofedavg_mnist, published_ours, published_tables,
                                   tuned_studies, tuned_tables, verdicts)
from fedfrac_lab.reproduce.doc_blocks import REPRODUCING, R, acc, listing, ms
from fedfrac_lab.reproduce.doc_registry import block, result_table

METHODS_JSON = "results/fofedavg_methods_digits.json"
ALPHA_JSON = "results/fofedavg_alpha_digits.json"
ALPHA_FMNIST_JSON = "results/fofedavg_alpha_fashion_mnist.json"
FRACTIONAL_JSON = "results/fractional_digits.json"
MNIST_JSONS = (fofedavg_mnist.IID_JSON, fofedavg_mnist.ALPHA_JSON, fofedavg_mnist.SEVERE_JSON)


def _summary(path):
  return common.load_results_json(path)[0]["summary"]


def _compared(d, h, unit="pp", scale=100.0):
  where = ("above" if d - h > 0 else "below" if d + h < 0 else
           "not distinguishable from")
  return (f"{d * scale:+.1f} {unit}, 90 % interval [{(d - h) * scale:+.1f}, "
          f"{(d + h) * scale:+.1f}]: {where}")


# ------------------------------------------------------------------ FOFedAvg


@result_table(fofedavg_mnist.MD, *MNIST_JSONS)
def fofedavg_mnist_table():
  return fofedavg_mnist.markdown()


# REPRODUCTION.md's FOFedAvg rows show the counts; the cells in full, with what
# differs and the commands, are under the table in this section.
FULL = "[in full below](#fofedavg-tables-iiv)"


@block("fofedavg_t2_row", R, *MNIST_JSONS, inline=True)
def fofedavg_t2_row():
  tally = fofedavg_mnist.t2_tally_text()
  return (f"MNIST, Table II cells: {tally}" if tally else "MNIST: none finished yet") + \
      f"; {FULL}"


@block("fofedavg_t3_row", R, fofedavg_mnist.IID_JSON, inline=True)
def fofedavg_t3_row():
  return f"no verdict (*{verdicts.NOT_DEFINED}*: n is not stated); {FULL}"


@block("fofedavg_t4_row", R, ALPHA_JSON, ALPHA_FMNIST_JSON, *MNIST_JSONS, inline=True)
def fofedavg_t4_row():
  tally = fofedavg_mnist.t4_tally_text()
  paper = common.published("fofedavg")["Table IV"]
  p_best = max(paper, key=lambda r: paper[r]["mean"]).split("=")[1]
  d_best = _alpha_text(ALPHA_JSON, ("0.5", "0.97", "1.5"))[2]
  f_best = _alpha_text(ALPHA_FMNIST_JSON, ("0.5", "0.8", "0.97", "1.0", "1.2", "1.5"))[2]
  return ((f"MNIST α means: {tally}" if tally else "MNIST: none finished yet")
          + f"; best α on digits {d_best}, on Fashion-MNIST {f_best}, the paper's "
          f"{p_best}; {FULL}")


@block("fofedavg_t5_row", R, fofedavg_mnist.SEVERE_JSON, inline=True)
def fofedavg_t5_row():
  doc = fofedavg_mnist.load("severe_10")
  if not doc.get("cells"):
    return f"MNIST K = 10: none finished yet; {FULL}"
  done, every = len(doc["cells"]), len(fofedavg_mnist.labels("severe_10"))
  return (f"MNIST K = 10: {done} of {every} methods, *{verdicts.NOT_DEFINED}* (no margin "
          f"for rounds or bytes); {FULL}")


@block("fofedavg_t5", R, fofedavg_mnist.SEVERE_JSON)
def fofedavg_t5():
  return fofedavg_mnist.t56_text()


@block("fofedavg_t3", R, fofedavg_mnist.IID_JSON)
def fofedavg_t3():
  return fofedavg_mnist.t3_text()


@block("fofedavg_t2", R, METHODS_JSON, *MNIST_JSONS)
def fofedavg_t2():
  summary = _summary(METHODS_JSON)
  rows = published_ours.fofedavg_method_rows()
  ranked = sorted(rows.items(), key=lambda kv: -summary[kv[1]]["accuracy"]["mean"])
  listed = ", ".join(f"{name} {acc(summary[label]['accuracy']['mean'])}"
                     for name, label in ranked)
  d, h = verdicts.difference(summary["fofedavg"]["accuracy"], summary["fedavg"]["accuracy"])
  paper = common.published("fofedavg")["Table II"]
  cells, with_ours, _ = published_tables.counts("fofedavg")
  n = summary["fedavg"]["accuracy"]["n"]
  return (f"{fofedavg_mnist.t2_text()}. Digits stand-in of all eleven methods "
          f"(`configs/fofedavg/digits_methods.py`: {published_ours.DIGITS_SETTING}; "
          f"`results/fofedavg_methods_digits.md`), final test accuracy over {n} seeds: "
          f"{listed}. FOFedAvg − FedAvg {_compared(d, h)} FedAvg, where the paper's "
          f"MNIST Table II has {paper['FOFedAvg']['Mean']} against "
          f"{paper['FedAvg']['Mean']}. `results/published_fofedavg.md` sets ours beside "
          f"{with_ours} of the {cells} published cells of Tables II–VI, each with its "
          f"setting")


def _alpha_text(path, alphas):
  s = _summary(path)
  cells = [(a, s[f"fofedavg[alpha={a}]"]) for a in alphas if f"fofedavg[alpha={a}]" in s]
  best = max(cells, key=lambda c: c[1]["accuracy"]["mean"])[0]
  accs = ", ".join(f"α {a} {ms(e['accuracy']['mean'], e['accuracy']['std'])}"
                   for a, e in cells)
  factors = " / ".join(f"{e['mean:train_fractional_factor']['mean']:.3g}" for _, e in cells)
  return accs, factors, best, [a for a, _ in cells]


@block("fofedavg_t4", R, ALPHA_JSON, FRACTIONAL_JSON, ALPHA_FMNIST_JSON, *MNIST_JSONS)
def fofedavg_t4():
  paper = common.published("fofedavg")["Table IV"]
  p_best = max(paper, key=lambda r: paper[r]["mean"]).split("=")[1]
  published = " / ".join(f"{paper[f'alpha={a}']['mean']}" for a in ("0.5", "0.97", "1.5"))
  d_acc, d_fac, d_best, d_alphas = _alpha_text(ALPHA_JSON, ("0.5", "0.97", "1.5"))
  f_acc, f_fac, f_best, f_alphas = _alpha_text(
      ALPHA_FMNIST_JSON, ("0.5", "0.8", "0.97", "1.0", "1.2", "1.5"))
  n = _summary(ALPHA_JSON)["fofedavg[alpha=0.5]"]["accuracy"]["n"]
  six = _summary(FRACTIONAL_JSON)["fofedavg[alpha=0.6]"]["accuracy"]
  return (f"{fofedavg_mnist.t4_text()}. Stand-ins: digits, {n} seeds: {d_acc} "
          f"(published {published} on MNIST; the paper's "
          f"best is α = {p_best}, ours α = {d_best}), α 0.6 {ms(six['mean'], six['std'])} "
          f"in the fractional family's grid of the same setting "
          f"(`results/fractional_digits.md`; published {paper['alpha=0.6']['mean']}); "
          f"mean fractional factor "
          f"{d_fac} at α {' / '.join(d_alphas)} (`results/fofedavg_alpha_digits.md`): α "
          f"mostly rescales the step. On the real Fashion-MNIST "
          f"({published_ours.FMNIST_SETTING}; `results/fofedavg_alpha_fashion_mnist.md`): "
          f"{f_acc}, best α = {f_best}; mean fractional factor {f_fac} at α "
          f"{' / '.join(f_alphas)}")


# ------------------------------------------------------------------ fractional family


def _alphas(summary):
  """[(α, accuracy summary)] of the FOFedAvg α grid in a sweep summary, by α."""
  return sorted((float(k.split("=")[1][:-1]), v["accuracy"]) for k, v in summary.items()
                if k.startswith("fofedavg[alpha="))


def tuned_alphas():
  """The FOFedAvg α values of the learning-rate-tuned fractional study (its
  labels ``fofedavg_a05`` … carry them)."""
  labels = _tuned("fractional")["methods"]
  return sorted(float(f"{d[0]}.{d[1:]}") for d in
                (label.split("_a", 1)[1] for label in labels if label.startswith("fofedavg_a")))


@block("readme_fractional", REPRODUCING, FRACTIONAL_JSON, ALPHA_JSON, ALPHA_FMNIST_JSON,
       "results/tuned_fractional_digits.json")
def readme_fractional():
  s = _summary(FRACTIONAL_JSON)
  grid = _alphas(s)
  fedavg = s["fedavg"]["accuracy"]
  below = [a for a, e in grid if a < 1 and e["mean"] > fedavg["mean"]]
  means = [e["mean"] for _, e in grid]
  monotone = all(x < y for x, y in zip(means, means[1:]))
  factor = _summary(ALPHA_JSON)
  base = factor["fedavg"]["accuracy"]
  above = [(a, e) for a, e in _alphas(factor) if a > 1 and e["mean"] > base["mean"]]
  fm = dict(_alphas(_summary(ALPHA_FMNIST_JSON)))
  fm_above = [a for a in fm if a > 1 and fm[a]["mean"] > fm.get(1.0, {"mean": 1})["mean"]]
  tuned_grid = tuned_alphas()
  over = ", ".join(f"α {a:g} {acc(e['mean'])} ({_compared(*verdicts.difference(e, base))} "
                   f"FedAvg)" for a, e in above)
  big = max(a for a, _ in _alphas(factor))
  return (f"- **Fractional family** (digits, Dirichlet 0.3, {fedavg['n']} seeds; "
          f"`results/fractional.md`): "
          + ("no fractional order α < 1 beat FedAvg here" if not below else
             f"α ∈ {{{', '.join(map(str, below))}}} beat FedAvg's mean here") +
          f" — accuracy {'falls monotonically' if monotone else 'does not fall monotonically'}"
          f" as α drops (FOFedAvg α = {grid[0][0]:g}: {acc(grid[0][1]['mean'])} vs "
          f"α = 1: {acc(grid[-1][1]['mean'])} with the same μ_t = 0.1/√(t+1)). Orders above "
          + (f"1 lie above FedAvg's mean ({acc(base['mean'])}) in the α-factor table "
             f"(`results/fofedavg_alpha_digits.md`): {over}, where α mostly scales the "
             f"step (mean fractional factor "
             f"{factor[f'fofedavg[alpha={big}]']['mean:train_fractional_factor']['mean']:.3g} "
             f"at α {big:g})" if above else "1 do not lie above FedAvg's mean in the α-factor "
             "table (`results/fofedavg_alpha_digits.md`)")
          + (f", and on the real Fashion-MNIST (reduced) α "
             f"{' and '.join(f'{a:g}' for a in fm_above)} lie above α = 1, FedAvg's step"
             if fm_above else "")
          + f"; the learning-rate-tuned study has no α > 1 (its grid: α "
          f"{', '.join(f'{a:g}' for a in tuned_grid)}). FO-FedAvg / FO-RI-FedAvg with the "
          f"BEV paper's defaults reach {acc(s['fo_fedavg']['accuracy']['mean'])} / "
          f"{acc(s['fo_ri_fedavg']['accuracy']['mean'])}.")


# ------------------------------------------------------------------ tuned studies


def _tuned(study):
  return common.load_results_json(f"results/tuned_{study}_digits.json")


def _ms_or(values):
  mean, std = common.seed_mean_std(values)
  return "diverged" if mean is None else ms(mean, std)


def _gap(x, fedavg):
  return "diverged" if x is None or fedavg is None else f"{100 * (x - fedavg):+.1f} pp"


@block("tuned_results", R, *(f"results/tuned_{s}_digits.json" for s in
                            ("fractional", "kuramoto", "firma")))
def tuned_results():
  lines = []
  for study in ("fractional", "kuramoto", "firma"):
    r = _tuned(study)
    st = tuned_studies.STUDIES[study]
    rows = tuned_tables.tuned_rows(r)
    chosen = {}
    for _, label, e, _ in rows:
      chosen.setdefault(f"{e['chosen_lr']:g}", []).append(label)
    scores = "; ".join(f"{label} {_ms_or(e['paper_test'])} → {_ms_or(e['tuned_test'])}"
                       for _, label, e, _ in rows)
    means = {label: (common.seed_mean_std(e["paper_test"])[0],
                     common.seed_mean_std(e["tuned_test"])[0])
             for _, label, e, _ in rows}
    base = means["fedavg"]
    gaps = "; ".join(
        f"{label} {_gap(p, base[0])} → {_gap(t, base[1])}"
        for label, (p, t) in means.items() if label != "fedavg")
    lines.append(
        f"- **{study}** ({st.data_text}; score `{r['metric']}`; grid "
        f"{min(r['lrs']):g} … {max(r['lrs']):g}; paper setting: {st.paper_text}; "
        f"{len(r['seeds'])} seeds, {r['wall_s']:.0f} s wall on the shared 2-core CPU): "
        f"chosen rates " + ", ".join(f"{lr} ({listing(m)})" for lr, m in chosen.items()) +
        f". Test score, paper setting → own best rate: {scores}. "
        f"Gap to FedAvg, paper setting → own best rate: {gaps}. "
        f"{tuned_tables.verdict_text(rows)} {tuned_tables.edge_text(r)}")
  k = _tuned("kuramoto")["methods"]["fedavg"]
  main = next(rows for heading, rows in common.markdown_tables("results/kuramoto_digits.md")
              if heading.startswith("K = 10 clients, s = 3"))
  fedavg = next(row for row in main if row["method"] == "FedAvg")
  lines.append(
      "\nThe validation rows come out of the training rows, so paper-setting scores "
      f"here sit below the main tables' (e.g. Kuramoto FedAvg "
      f"{acc(common.seed_mean_std(k['paper_test'])[0])} here against "
      f"{fedavg['final accuracy (mean over clients)'].split(' ')[0]} in "
      "`results/kuramoto_digits.md`, which trains on 25 % more rows). All the "
      "validation scores per rate are in `results/tuned_{fractional,kuramoto,firma}_digits.md`.")
  return "\n".join(lines)
