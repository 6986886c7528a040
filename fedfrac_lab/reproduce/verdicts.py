"""The verdict rule: one published cell against ours, never kinder than the seeds allow.

Every comparison table of ``fedfrac_lab.reproduce`` (FIRMA Tables 2, 7, 8, 11–13 and the
``published_*`` tables) judges a cell with :func:`compare`, and REPRODUCTION.md and
every table quote :data:`RULE` (the statement) word for word. How the verdicts
move under another margin (accuracy at 1, 2 and 3 pp; the Gini coefficient at
absolute margins beside the relative one) is :func:`sensitivity`, from the same Δ
and interval (:func:`rejudge`); what a cell's n seeds cover is :func:`n_covers`.

The rule, for our per-seed values x_1 … x_n (mean x̄, sample std s) against a
published value p:

1. ``n < 3`` → *too few seeds*: Δ = x̄ − p is shown, no verdict. With two seeds the
   std has one degree of freedom (t_{0.95, 1} = 6.3) and with one there is none.
2. u = sqrt(s² / n + s_p² / n_p) is the standard error of Δ: ours over n seeds,
   plus the paper's spread where it prints one (s_p over its n_p runs; n_p = 1
   when the run count is not stated, the widest reading). A single printed value
   has no known spread and is taken as exact. h = t_{0.95, n−1} · u is the
   half-width of the two-sided 90 % interval of Δ (n − 1 degrees of freedom even
   when the paper's spread is added, which can only widen it).
3. m is the margin within which two numbers count as the same result: 2
   percentage points for an accuracy (and for a difference of two accuracies);
   max(25 % of p, 0.005) for a Gini coefficient.
4. *agrees* when the whole interval lies inside ±m (|Δ| + h ≤ m: two one-sided
   tests at 5 %, an equivalence test); *differs* when it lies wholly outside
   (|Δ| − h > m); *inconclusive* otherwise: the seeds cannot tell.
5. A derived number (FIRMA Table 13's Δsel, Δring, Δtotal) *agrees* only when
   its own interval agrees and every cell it is made of agrees; otherwise it takes
   the least favourable of those verdicts (collapsed, differs, then too few
   seeds, then inconclusive).
6. *collapsed: k of n at chance*: k ≥ 1 of our runs ended at chance (final
   accuracy ≤ chance + 2 pp, :func:`at_chance`; a run record says so in its own
   ``at_chance`` flag). Such a run is a model that stopped learning, not a spread
   of accuracies: its number still counts in the mean and the std shown, but the
   cell gets no *agrees* / *differs* / *inconclusive* and is counted apart.
7. *by construction*: a cell equal on both sides because both compute the same
   formula (FIRMA Table 2's bytes per round) — shown, not counted.
   *stand-in*: our data only stands in for the paper's — Δ shown, no verdict.
   *not run*: no number of ours.

Why this rule (the one before it called a cell agreeing when |Δ| ≤ max(2 pp,
2 × our std)):

- The question is whether our *mean* matches the published number, and the
  uncertainty of a mean of n seeds is s / √n, not s. A bound that grows with s
  rewards noise: FibFL+ at Dir 0.8 on Fashion-MNIST "agreed" at −12 pp because
  its two seeds were 6.5 pp apart. Here more noise widens h, which can only move
  a cell from agrees or differs to inconclusive, never the other way.
- *Agrees* is a claim of equality and needs positive evidence: the data must
  bound the difference within the margin (an equivalence test), not merely fail
  to show it. The mirror test keeps *differs* equally honest.
- A margin proportional to the value for the Gini coefficient: its published
  values span 0.004 (IID) to 0.5 (Dir 0.1), so a fixed 2 points is five times an
  IID value and every small Gini agreed (RDFL LS K=2: 0.011 against 0.031). 25 %
  of the published value is the resolution a reader of a fairness ranking needs;
  the floor 0.005 is about the Gini change that two test samples of one client
  make (N = 5 clients of about 70 test samples at accuracy 0.95).
- A difference of two accuracies can agree while both accuracies are tens of
  points off (FIRMA Table 13 in `paper` mode: Δs within 2 pp over cells 62–67 pp
  away); it is only a reproduction when the cells beneath it are.
"""
from __future__ import annotations

import math
from typing import Dict, Iterable, NamedTuple, Optional, Sequence, Tuple

import numpy as np

AGREES, DIFFERS, INCONCLUSIVE = "agrees", "differs", "inconclusive"
TOO_FEW, BY_CONSTRUCTION = "too few seeds", "by construction"
STAND_IN, NOT_RUN = "stand-in", "not run"
COLLAPSED = "collapsed"
# A statistic the paper does not define well enough to compare (an interval whose
# n it does not state) or one the rule gives no interval (one std over seeds).
NOT_DEFINED = "not defined"
# The verdicts a summary counts, in the order it lists them; the others are tallied
# apart (collapsed cells are named when there are any; the rest are no claim either
# way).
JUDGED = (AGREES, DIFFERS, INCONCLUSIVE, TOO_FEW)
ORDER = JUDGED + (COLLAPSED, BY_CONSTRUCTION, NOT_DEFINED, STAND_IN, NOT_RUN)
MIN_SEEDS = 3
ONE_SIDED_LEVEL = 0.95    # each side of the equivalence test: the 90 % interval
# A run whose final accuracy is at most chance (1 / classes) + this margin ended
# at chance (FIRMA FibFL++ `reference_code`: docs/design.md §3.3, "FibFL++ runs
# that stay at chance").
CHANCE_MARGIN = 0.02

RULE = (
    "**Verdict rule** (`fedfrac_lab.reproduce.verdicts`). For our n seeds (mean x̄, "
    "sample std s) against a published p: Δ = x̄ − p; u = sqrt(s²/n + s_p²/n_p) "
    "with the paper's spread s_p over its n_p runs only where it prints one "
    "(n_p = 1 when not stated; a single printed value is taken as exact); "
    "h = t₀.₉₅,ₙ₋₁ · u, the half-width of the 90 % interval of Δ; margin m = 2 pp "
    "for an accuracy or a difference of accuracies, max(25 % of p, 0.005) for a "
    "Gini coefficient. *agrees*: |Δ| + h ≤ m (the interval lies inside ±m); "
    "*differs*: |Δ| − h > m (it lies outside); *inconclusive*: neither; *too few "
    "seeds*: n < 3 (Δ shown, no verdict). A derived difference agrees only when its "
    "own interval and every cell it is made of agree, else it takes the least "
    "favourable of their verdicts. *collapsed: k of n at chance*: k of our runs "
    "ended at chance (final accuracy ≤ chance + 2 pp); the cell gets no other "
    "verdict and is counted apart. *by construction*: equal because both sides "
    "compute the same formula (not counted); *not defined*: the paper leaves the "
    "statistic undefined (an interval whose n it does not state) or the rule gives "
    "it no interval (one std over our seeds): ours and Δ shown, no verdict; "
    "*stand-in*: our data only stands in "
    "for the paper's (Δ shown, no verdict); *not run*: no number of ours. Each "
    "verdict is counted separately.")


def n_covers(data_seed: int) -> str:
  """What the n seeds of a cell (and so its interval) cover, from the ``data.seed``
  of the config that made its runs: -1 draws each seed its own partition, a fixed
  value puts every seed on one partition."""
  if int(data_seed) < 0:
    return ("each seed draws its own partition (`data.seed = -1`): n covers the "
            "partition, the initial model and the batch order")
  return (f"every seed shares one partition (`data.seed = {int(data_seed)}`): n covers "
          f"the initial model and the batch order only, not the partition")


class Margin(NamedTuple):
  """How far ours may sit from a published value p and still be the same result:
  max(``absolute``, ``relative`` × |p|), in the metric's own units."""
  name: str
  absolute: float
  relative: float = 0.0

  def of(self, published: float) -> float:
    return max(self.absolute, self.relative * abs(published))


ACCURACY = Margin("accuracy (fraction)", 0.02)
ACCURACY_PERCENT = Margin("accuracy (%)", 2.0)
GINI = Margin("Gini coefficient", 0.005, 0.25)
GAIN_PP = Margin("difference of two accuracies (pp)", 2.0)


class Published(NamedTuple):
  """A published number with the spread the paper prints for it (``std`` over
  ``runs`` runs; ``runs`` None when not stated; std 0 when none is printed)."""
  value: float
  std: float = 0.0
  runs: Optional[int] = None


def published_number(cell, runs: Optional[int] = None) -> Optional[Published]:
  """The published value and spread of a transcribed cell (a number or
  ``{"mean", "std"}``); None for a cell with no number ("NR", text, None)."""
  std = 0.0
  if isinstance(cell, dict):
    std = cell.get("std") or 0.0
    cell = cell.get("mean")
  if isinstance(cell, bool) or not isinstance(cell, (int, float)):
    return None
  if not math.isfinite(float(cell)):
    return None
  return Published(float(cell), float(std), runs)


class Comparison(NamedTuple):
  """One published cell against ours: Δ = ours − published, the interval
  half-width h, the margin m (both in the metric's units) and the verdict."""
  published: Optional[Published]
  mean: Optional[float]
  std: Optional[float]
  n: int
  delta: Optional[float]
  half_width: Optional[float]
  margin: Optional[float]
  verdict: str
  note: str = ""
  at_chance: int = 0        # runs of ours that ended at chance (verdict collapsed)


def seed_summary(values: Iterable) -> Tuple[Optional[float], Optional[float], int]:
  """(mean, sample std, n) of the finite values; (None, None, 0) when none."""
  v = np.asarray([x for x in values if x is not None], np.float64)
  v = v[np.isfinite(v)]
  if v.size == 0:
    return None, None, 0
  return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0, int(v.size)


def t_one_sided(dof: int) -> float:
  """Student-t quantile t_{0.95, dof} (one side of the equivalence test)."""
  from scipy import stats
  return float(stats.t.ppf(ONE_SIDED_LEVEL, dof))


def difference(a: dict, b: dict) -> Tuple[float, float]:
  """(Δ = a − b, the half-width of its 90 % interval) of two independent means
  ``{"mean", "std", "n"}`` (Welch's standard error, t at the smaller n − 1)."""
  n = min(a["n"], b["n"])
  h = t_one_sided(n - 1) * math.sqrt(a["std"] ** 2 / a["n"] + b["std"] ** 2 / b["n"])
  return a["mean"] - b["mean"], h


def judge(published, mean: Optional[float], std: Optional[float], n: int,
          margin: Margin, *, stand_in: bool = False,
          runs: Optional[int] = None) -> Comparison:
  """:func:`compare` for a cell of which only the mean, std and seed count are
  kept (``published`` as transcribed; ``runs`` = the paper's run count where it
  states one)."""
  pub = published if isinstance(published, Published) else published_number(
      published, runs)
  if pub is None or mean is None or not math.isfinite(mean):
    return Comparison(pub, mean, std, n, None, None, None, NOT_RUN)
  delta = mean - pub.value
  if stand_in:
    return Comparison(pub, mean, std, n, delta, None, None, STAND_IN)
  m = margin.of(pub.value)
  if n < MIN_SEEDS:
    return Comparison(pub, mean, std, n, delta, None, m, TOO_FEW)
  u = math.sqrt((std or 0.0) ** 2 / n + pub.std ** 2 / (pub.runs or 1))
  h = t_one_sided(n - 1) * u
  if abs(delta) + h <= m:
    what = AGREES
  elif abs(delta) - h > m:
    what = DIFFERS
  else:
    what = INCONCLUSIVE
  return Comparison(pub, mean, std, n, delta, h, m, what)


def compare(published, values: Sequence, margin: Margin, *, stand_in: bool = False,
            runs: Optional[int] = None) -> Comparison:
  """The verdict of one published cell against our per-seed ``values`` (the rule
  of :data:`RULE`; non-finite values are left out, as a diverged run has no
  final number)."""
  mean, std, n = seed_summary(values)
  return judge(published, mean, std, n, margin, stand_in=stand_in, runs=runs)


def at_chance(accuracy: float, num_classes: int = 10) -> bool:
  """Whether a run's final ``accuracy`` is at chance: ≤ 1 / ``num_classes`` +
  :data:`CHANCE_MARGIN` (a non-finite accuracy is not: that run diverged)."""
  return bool(math.isfinite(accuracy) and accuracy <= 1.0 / num_classes + CHANCE_MARGIN)


def runs_at_chance(runs, num_classes: int = 10) -> int:
  """How many run records (dicts with ``accuracy``) ended at chance: each record's
  own ``at_chance`` flag where it has one (records written since it was added),
  else :func:`at_chance` of its final accuracy (older files)."""
  return sum(1 for r in runs if (r["at_chance"] if "at_chance" in r
                                 else at_chance(r["accuracy"], num_classes)))


def collapsed(c: Comparison, stuck: int) -> Comparison:
  """``c`` as *collapsed* when ``stuck`` ≥ 1 of its runs ended at chance (the
  mean and spread stay as they are; the verdict says what they are made of)."""
  if not stuck or c.verdict in (NOT_RUN, BY_CONSTRUCTION):
    return c
  return c._replace(verdict=COLLAPSED, at_chance=int(stuck))


def verdict_text(c: Comparison) -> str:
  """The verdict as a table prints it: "collapsed: 2 of 3 at chance" for a
  collapsed cell, else the verdict itself."""
  if c.verdict == COLLAPSED and c.at_chance:
    return f"{COLLAPSED}: {c.at_chance} of {c.n} at chance"
  return c.verdict


# Least favourable first: what a derived number takes from the cells beneath it,
# and what a cell run more than once counts as (:func:`least_favourable`).
_RANK = {COLLAPSED: -1, DIFFERS: 0, TOO_FEW: 1, NOT_RUN: 1, INCONCLUSIVE: 2, AGREES: 3}


def least_favourable(found: Iterable[str]) -> str:
  """The least favourable of several verdicts of one cell (one per run of it on
  another device or in another file): collapsed, differs, inconclusive, agrees;
  *too few seeds* only when no run of it has the seeds for a verdict (a 1-seed
  run beside a 3-seed one adds no verdict of its own)."""
  found = list(found)
  judged = [v for v in found if v in (COLLAPSED, DIFFERS, INCONCLUSIVE, AGREES)]
  if judged:
    return min(judged, key=_RANK.__getitem__)
  return TOO_FEW if TOO_FEW in found else (found[0] if found else NOT_RUN)


def inherit(own: Comparison, beneath: Sequence[Tuple[str, Comparison]]) -> Comparison:
  """A derived difference (e.g. FibFL+ − FibFL) against its published value: its
  own verdict when every cell it is made of (``beneath`` = [(label,
  comparison)]) agrees, else the least favourable verdict among its own and
  theirs, with a note naming the cells it came from."""
  if own.verdict not in _RANK:
    return own
  worst = min([own.verdict] + [c.verdict for _, c in beneath], key=_RANK.__getitem__)
  if worst == NOT_RUN:
    worst = INCONCLUSIVE
  if worst == own.verdict:
    return own
  names = [label for label, c in beneath if _RANK[c.verdict] <= _RANK[worst]]
  return own._replace(verdict=worst, note=(f"own interval: {own.verdict}; "
                                           f"{worst} inherited from "
                                           f"{', '.join(names)}"))


def by_construction(published: float, ours: float) -> Comparison:
  """A cell both sides compute with the same formula: *by construction* when the
  numbers are equal (not counted), *differs* when they are not (then our
  accounting does not follow the formula)."""
  pub = Published(float(published))
  delta = float(ours) - pub.value
  return Comparison(pub, float(ours), 0.0, 1, delta, None, None,
                    BY_CONSTRUCTION if delta == 0 else DIFFERS)


def tally(verdicts: Iterable[str]) -> dict:
  """{verdict: count} over :data:`ORDER` (every verdict, zero included)."""
  counts = {v: 0 for v in ORDER}
  for v in verdicts:
    counts[v] = counts.get(v, 0) + 1
  return counts


def tally_text(counts: dict) -> str:
  """"agrees 13 · differs 20 · inconclusive 9 · too few seeds 0" (the judged
  verdicts always, the others when present)."""
  return " · ".join(f"{v} {counts.get(v, 0)}" for v in ORDER
                    if v in JUDGED or counts.get(v, 0))


def _num(x: Optional[float], digits: int, scale: float, sign: bool = False) -> str:
  if x is None:
    return "–"
  return f"{x * scale:+.{digits}f}" if sign else f"{x * scale:.{digits}f}"


def ours_text(c: Comparison, digits: int) -> str:
  """"0.9100 ± 0.0141 (n = 2)"; "–" without a number of ours."""
  if c.mean is None:
    return "–"
  return f"{c.mean:.{digits}f} ± {c.std or 0.0:.{digits}f} (n = {c.n})"


def interval_text(c: Comparison, digits: int, scale: float) -> str:
  """"[−1.2, +0.8]" (Δ ± h, scaled) or "–" when no interval applies."""
  if c.delta is None or c.half_width is None:
    return "–"
  lo, hi = c.delta - c.half_width, c.delta + c.half_width
  return f"[{lo * scale:+.{digits}f}, {hi * scale:+.{digits}f}]"


def published_text(c: Comparison, digits: int) -> str:
  if c.published is None:
    return "–"
  p = c.published
  return f"{p.value:.{digits}f}" + (f" ± {p.std:.{digits}f}" if p.std else "")


def markdown_table(rows: Sequence[Tuple[str, Comparison, str]], digits: int,
                   delta_scale: float = 1.0, delta_digits: int = 1,
                   delta_unit: str = "pp") -> str:
  """Markdown ``| cell | published | ours | Δ | 90 % interval | margin | verdict |
  note |`` for ``rows`` = [(label, comparison, note)]; Δ, the interval and the
  margin are printed times ``delta_scale`` (100 for fractions shown in pp)."""
  lines = [f"| cell | published | ours: mean ± std (n seeds) | Δ ({delta_unit}) | "
           f"90 % interval of Δ | margin | verdict | note |",
           "|---|---|---|---|---|---|---|---|"]
  for label, c, note in rows:
    notes = "; ".join(x for x in (c.note, note) if x)
    margin = "–" if c.margin is None else f"±{c.margin * delta_scale:.{delta_digits}f}"
    lines.append(f"| {label} | {published_text(c, digits)} | {ours_text(c, digits)} | "
                 f"{_num(c.delta, delta_digits, delta_scale, sign=True)} | "
                 f"{interval_text(c, delta_digits, delta_scale)} | {margin} | "
                 f"{verdict_text(c)} | {notes} |")
  return "\n".join(lines)


# ------------------------------------------------------------------ sensitivity

# The margins the sensitivity view judges every cell at again: accuracy (and a
# difference of accuracies) at 1, 2 and 3 points, the rule's 2 among them; the Gini
# coefficient at the rule's relative margin and at absolute ones beside it (the
# relative margin lets a gap of 0.1 agree where the published value is 0.5).
ACCURACY_MARGINS_PP = (1.0, 2.0, 3.0)
GINI_ABSOLUTE = (0.01, 0.02, 0.03)
# An accuracy margin -> the size of one percentage point in its units.
POINT = {ACCURACY: 0.01, ACCURACY_PERCENT: 1.0, GAIN_PP: 1.0}
# What the view tallies: the verdicts a margin can move between.
MOVABLE = (AGREES, DIFFERS, INCONCLUSIVE)


def rejudge(c: Comparison, margin: Margin) -> str:
  """The verdict of ``c`` had its margin been ``margin`` (the same Δ and interval
  half-width h, rule 4 of :data:`RULE`): only *agrees*, *differs* and *inconclusive*
  move; every other verdict (too few seeds, collapsed, not run, ...) is kept."""
  if c.verdict not in MOVABLE or c.delta is None or c.half_width is None:
    return c.verdict
  if c.published is None:
    return c.verdict
  m = margin.of(c.published.value)
  if abs(c.delta) + c.half_width <= m:
    return AGREES
  if abs(c.delta) - c.half_width > m:
    return DIFFERS
  return INCONCLUSIVE


def margin_variants() -> Tuple[Tuple[str, Margin, Margin], ...]:
  """[(column label, the rule's margin it replaces, the margin it judges at)]: the
  accuracy margins at :data:`ACCURACY_MARGINS_PP` for each accuracy unit, then the
  Gini rule and :data:`GINI_ABSOLUTE`."""
  out = []
  for pp in ACCURACY_MARGINS_PP:
    label = f"accuracy ±{pp:g} pp" + (" (the rule)" if pp == ACCURACY.absolute * 100 else "")
    out += [(label, rule, Margin(rule.name, pp * point)) for rule, point in POINT.items()]
  out.append(("Gini max(25 % of p, 0.005) (the rule)", GINI, GINI))
  out += [(f"Gini ±{g:g}", GINI, Margin(GINI.name, g)) for g in GINI_ABSOLUTE]
  return tuple(out)


def sensitivity(cells: Iterable[Tuple[Margin, Sequence[Comparison]]]) -> Dict[str, dict]:
  """The verdict tallies of ``cells`` at every margin of :func:`margin_variants`:
  {column label: {verdict: cells}}. A cell is (the rule's margin it was judged at,
  its comparisons: one per run of it); it counts once per column whose rule margin
  is its own, with the least favourable verdict of its runs at that margin
  (:func:`least_favourable`, as the pages count a cell run more than once). Cells
  with no comparison are not counted (not run)."""
  cells = [(rule, list(cs)) for rule, cs in cells]
  out: Dict[str, dict] = {}
  for label, rule, margin in margin_variants():
    counts = out.setdefault(label, tally([]))
    for own, cs in cells:
      if own == rule and cs:
        counts[least_favourable(rejudge(c, margin) for c in cs)] += 1
  return out
