"""Generated doc blocks of Kuramoto-FedAvg, robust aggregation and the
asynchronous study. These runs keep no results JSON, so their committed markdown
tables are the source (read with :func:`fedfrac_lab.reproduce.common.markdown_tables`).
See :mod:`fedfrac_lab.reproduce.docs`."""
from __future__ import annotations

import re

from fedfrac_lab.reproduce import common
from fedfrac_lab.reproduce.doc_blocks import REPRODUCING, R, listing
from fedfrac_lab.reproduce.doc_registry import block

KURAMOTO_MD = "results/kuramoto_digits.md"
ROBUST_MD = ("results/robust_digits.md", "results/robust_digits_dirichlet.md")
ASYNC_MD = "results/async_fashion_mnist_cpu.md"
ASYNC_GUIDE = "docs/api/guide/asynchronous.md"
ASYNC_NAMES = {"fedavg": "FedAvg", "fedavg_deadline": "FedAvg with the deadline",
               "fedbuff": "FedBuff", "fedasync": "FedAsync"}
DROPPED = re.compile(r"- (\w+) \(`clock.deadline` = [\d.]+\): of the (\d+) clients "
                     r"sampled a round, ([\d.]+) missed the deadline")
SETTING = re.compile(r"K = (\d+) clients, s = (\d+) shards per client")


def kuramoto_sections():
  """{(K, s): rows} of the per-setting tables of results/kuramoto_digits.md."""
  out = {}
  for heading, rows in common.markdown_tables(KURAMOTO_MD):
    m = SETTING.match(heading)
    if m:
      out[(int(m.group(1)), int(m.group(2)))] = rows
  return out


def _seeds():
  text = open(common.find_file(KURAMOTO_MD), encoding="utf-8").read()
  m = re.search(r"Seeds ([\d, ]+);", text)
  return len(m.group(1).split(","))


def tie_verdict(row, seeds=None):
  """One weighting's verdict against FedAvg as the table states it (its verdict
  column, written under :func:`fedfrac_lab.reproduce.kuramoto.paired_verdict`, the one
  rule for these runs): "ties", "helps", "hurts", "inconclusive" or "diverged"."""
  v = row["verdict (final)"]
  return "ties" if v == "tie" else v


def kuramoto_verdicts():
  """{weighting: {verdict: count}} over every (K, s, κ0) setting."""
  seeds, out = _seeds(), {}
  for rows in kuramoto_sections().values():
    for row in rows:
      if row["method"] in ("coupled", "paper", "reference_code"):
        v = tie_verdict(row, seeds)
        counts = out.setdefault(row["method"], {})
        counts[v] = counts.get(v, 0) + 1
  return out


def _counts_text(counts):
  order = ("ties", "helps", "hurts", "inconclusive", "diverged")
  names = {"diverged": "diverged in a seed or more (too few seeds left)"}
  return ", ".join(f"{names.get(k, k)} {counts[k]}" for k in order if counts.get(k))


def _scaffold_range():
  deltas = [common.parse_mean_std(row["Δ final vs FedAvg"])[0]
            for rows in kuramoto_sections().values() for row in rows
            if row["method"] == "SCAFFOLD"]
  return min(deltas), max(deltas), len(deltas)


@block("kuramoto_t1_row", R, KURAMOTO_MD, inline=True)
def kuramoto_t1_row():
  """The Table 1 row's cell: the verdicts against FedAvg, counted; the accuracies
  are under the table (:func:`kuramoto_t1`)."""
  v = kuramoto_verdicts()
  return (f"vs FedAvg in {sum(v['coupled'].values())} (K, s, κ0) settings: `coupled` "
          f"{_counts_text(v['coupled'])}; `paper` "
          f"{_counts_text(v['paper'])}; `reference_code` "
          f"{_counts_text(v['reference_code'])} ([below](#kuramoto-fedavg-table-1))")


@block("kuramoto_t1", R, KURAMOTO_MD)
def kuramoto_t1():
  rows = common.published("kuramoto")["Table 1"]
  published = " / ".join(f"{rows[r]['MNIST']['max_accuracy']:.2f}" for r in rows)
  first = kuramoto_sections()[(10, 3)]
  best = {(r["method"], r["κ0"]): r["best accuracy"].split(" ")[0] for r in first}
  kappas = [r["κ0"] for r in first if r["method"] == "coupled"]
  per = "; ".join(f"`{w}` {' / '.join(best[(w, k)] for k in kappas)}"
                  for w in ("coupled", "paper", "reference_code"))
  lo, hi, n = _scaffold_range()
  v = kuramoto_verdicts()
  total = sum(v["coupled"].values())
  return (f"published {published} % (MNIST, κ0 = {' / '.join(kappas)} / no sync); ours "
          f"on digits, K = 10, s = 3, best accuracy over rounds: FedAvg "
          f"{best[('FedAvg', '–')]}, {per} (κ0 = {' / '.join(kappas)}). Against FedAvg "
          f"over the {total} (K, s, κ0) settings (a tie: the 90 % interval of the "
          f"paired final-accuracy difference within ±0.5 points): `coupled` "
          f"{_counts_text(v['coupled'])}; `paper` {_counts_text(v['paper'])}; "
          f"`reference_code` {_counts_text(v['reference_code'])}; SCAFFOLD − FedAvg "
          f"{lo:+.3f} … {hi:+.3f} over the {n} K × s settings (`{KURAMOTO_MD}`, "
          f"`results/published_kuramoto.md`)")


@block("kuramoto_fig2", R, KURAMOTO_MD, inline=True)
def kuramoto_fig2():
  settings = kuramoto_sections()
  ks = sorted({k for k, _ in settings})
  ss = sorted({s for _, s in settings})
  return (f"K ∈ {{{', '.join(map(str, ks))}}}, s ∈ {{{', '.join(map(str, ss))}}} on "
          f"digits (`{KURAMOTO_MD}`)")


@block("readme_kuramoto", REPRODUCING, KURAMOTO_MD)
def readme_kuramoto():
  v = kuramoto_verdicts()
  total = sum(v["coupled"].values())
  by_kappa = {}
  seeds = _seeds()
  for rows in kuramoto_sections().values():
    for row in rows:
      if row["method"] == "reference_code":
        by_kappa.setdefault(row["κ0"], []).append(tie_verdict(row, seeds))
  ref = "; ".join(f"κ0 = {k}: {_counts_text({x: c.count(x) for x in set(c)})}"
                  for k, c in by_kappa.items())
  return (f"- **Kuramoto** (digits shards, {seeds} seeds, {total} (K, s, κ0) settings "
          f"per weighting; a tie = the 90 % interval of the paired difference to FedAvg "
          f"within ±0.5 points): `coupled` {_counts_text(v['coupled'])}; the literal "
          f"`paper` weighting is numerically unstable: {_counts_text(v['paper'])}; "
          f"`reference_code` {ref}.")


def _robust(path):
  """({method: mean final accuracy}, claim line) of a robust-aggregation table."""
  tables = common.markdown_tables(path)
  rows = tables[0][1]
  means = {r["method"]: common.parse_mean_std(r["final accuracy"])[0] for r in rows}
  text = open(common.find_file(path), encoding="utf-8").read()
  claim = re.search(r"^Claim [^:]*\): (.*)$", text, re.M).group(1)
  return means, claim


@block("readme_robust", REPRODUCING, *ROBUST_MD)
def readme_robust():
  (iid, iid_claim), (skew, skew_claim) = (_robust(p) for p in ROBUST_MD)
  names = {"median": "median", "trimmed_mean": "trimmed mean", "krum": "Krum",
           "multi_krum": "Multi-Krum"}

  def listed(means):
    return listing(f"{names[k]} {means[k]:.3f}" for k in names)
  failed = [names[m] for m in names if re.search(rf"\b{m}:", skew_claim)]
  held = [names[m] for m in names if m not in [k for k in names if names[k] in failed]]
  return (f"- **Robust aggregation** (digits, 20 % sign-flip ×10, "
          f"`results/robust_digits*.md`): IID, FedAvg collapses to {iid['fedavg']:.3f}; "
          f"{listed(iid)} (the claim — mean under attack < 0.5, every robust rule ≥ 0.85 "
          f"on every seed — {'holds' if iid_claim.startswith('holds') else 'fails'}). "
          f"Under Dirichlet 0.5: {listed(skew)}; the claim "
          + (f"fails for {listing(failed)}" if failed else "holds") +
          (f", {listing(held)} keep{'s' if len(held) == 1 else ''} it." if failed else "."))


@block("async_study_guide", ASYNC_GUIDE, ASYNC_MD, inline=True)
def async_study_guide():
  """Each method against synchronous FedAvg without a deadline, from the study's
  per-seed table and summary (``fedfrac-reproduce asynchronous --collect``)."""
  tables = common.markdown_tables(ASYNC_MD)
  per_seed = next(rows for h, rows in tables if h.startswith("Simulated time to"))
  summary = next(rows for h, rows in tables if h.startswith("Summary"))
  seeds = [c for c in per_seed[0] if c.startswith("seed ")]
  times = {r["method"]: [None if r[c] == "never" else float(r[c]) for c in seeds]
           for r in per_seed}
  final = {r["method"]: r["final accuracy"] for r in summary}
  to_target = {r["method"]: r["time to target"] for r in summary}
  with open(common.find_file(ASYNC_MD), encoding="utf-8") as f:
    dropped = {m: (n, d) for m, n, d in DROPPED.findall(f.read())}
  parts = []
  for r in summary:
    m = r["method"]
    part = f"{ASYNC_NAMES.get(m, m)} {to_target[m]}, {final[m]}"
    if m != "fedavg" and m in times:
      sooner = sum(a is not None and (b is None or a < b)
                   for a, b in zip(times[m], times["fedavg"]))
      part += f", sooner than FedAvg in {sooner} of {len(seeds)} seeds"
    if m in dropped:
      part += (f", {dropped[m][1]} of the {dropped[m][0]} clients sampled a round "
               "missing the deadline on average")
    parts.append(part)
  return ("time to 70 % (mean over the seeds that reached it) and final accuracy: "
          + "; ".join(parts) + ".")
