"""Results at a glance: the two figures of a run (``ff.run(...).plot()``, a
workdir's ``accuracy.png`` and ``ranking.png``) and of a sweep (``fedfrac-sweep
--out=X.md``: ``X_rounds.png`` and ``X_ranking.png``, :func:`save_sweep_figures`).

* :func:`rounds_figure`: small multiples, one panel per method family
  (:data:`fedfrac.algorithms.families.FAMILIES`), a metric per round (mean over seeds, ±1 std
  band when there are several), the reference method (FedAvg) dashed in every
  panel, shared axes. Curves that coincide are drawn once and named together.
* :func:`ranking_figure`: the final value of every method, ranked best first,
  with ±1 std over seeds as error bars when there are several, coloured by
  family, FedAvg's value as a dashed line; diverged, partial and stand-in
  methods are marked beside their name.

Both take groups (title -> rows): one group for a run, one per config point for a
sweep, drawn as one row (or panel) each. A method's family comes from its
registered algorithm name through :func:`fedfrac.algorithms.families.family`.
"""
from __future__ import annotations

import os
from typing import Mapping, NamedTuple, Optional, Sequence

import numpy as np
from matplotlib.ticker import MaxNLocator

from fedfrac.algorithms import families as catalog
from fedfrac.runner.finals import (Curve, Final, larger_is_better, ranked,
                                   reference_label, results_curves, summary_finals,
                                   tagged)
from fedfrac.runner.plots import (COLORS, Figure, default_metric, describe_config,
                                  draw_mean_band, group_coinciding, line_style)

# Files a workdir gets (fedfrac.runner.outputs): the per-round small multiples
# and the ranking.
FIGURE_FILES = ("accuracy.png", "ranking.png")
REFERENCE_STYLE = {"color": "black", "linestyle": "--"}


def _families(curves: Sequence[Curve]) -> list:
  fams = [catalog.family(c.algorithm) for c in curves]
  order = list(catalog.FAMILIES) + [catalog.OTHER]
  return [f for f in order if f in fams]


def _draw_panel(ax, members: Sequence[Curve], reference: Optional[Curve]) -> None:
  """A family's curves, the reference dashed; coinciding means drawn once."""
  curves = ([reference] if reference is not None else []) + [
      c for c in members if reference is None or c.label != reference.label]
  means = {c.label: (c.rounds, np.asarray(c.values, np.float64).mean(0)) for c in curves}
  by_label = {c.label: c for c in curves}
  styled = 0
  for group in group_coinciding(means):
    head = by_label[group[0]]
    name = " = ".join(tagged(by_label[label]) for label in group)
    if reference is not None and group[0] == reference.label:
      # On top of the family's lines, so a method that coincides with it leaves
      # the dashes visible.
      draw_mean_band(ax, head.rounds, head.values, f"{name} (reference)",
                     dict(REFERENCE_STYLE, zorder=3))
    else:
      draw_mean_band(ax, head.rounds, head.values, name, line_style(styled))
      styled += 1
  if curves:
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=7, ncol=2,
              frameon=False)


def rounds_figure(groups: Mapping[str, Sequence[Curve]], *, ylabel: str,
                  title: str = "") -> Figure:
  """Small multiples of a metric per round: one panel per family and group.

  Args:
    groups: group title ("" for a single run) -> the :class:`Curve` of every
      method; one group is laid out in up to three columns, several groups one
      row each (a family's panels stay in one column).
  """
  every = [c for curves in groups.values() for c in curves]
  families = _families(every)
  several = len(groups) > 1
  cols = len(families) if several else min(3, max(len(families), 1))
  rows = len(groups) if several else -(-max(len(families), 1) // cols)
  fig = Figure(figsize=(4.3 * cols, 4.4 * rows), layout="constrained")
  axes = fig.subplots(rows, cols, squeeze=False, sharex=True, sharey=True)
  used = set()
  for g, (group, curves) in enumerate(groups.items()):
    ref_label = reference_label(curves)
    reference = next((c for c in curves if c.label == ref_label), None)
    for k, fam in enumerate(families):
      r, col = (g, k) if several else divmod(k, cols)
      ax = axes[r][col]
      used.add((r, col))
      members = [c for c in curves if catalog.family(c.algorithm) == fam]
      _draw_panel(ax, members, reference)
      ax.set_title(f"{group}: {fam.title}" if group else fam.title, fontsize=9)
      ax.grid(alpha=0.3)
      ax.tick_params(labelbottom=True, labelleft=True, labelsize=8)
      ax.set_xlabel("round", fontsize=8)
      ax.xaxis.set_major_locator(MaxNLocator(integer=True))
      ax.set_ylabel(ylabel, fontsize=8)
  for r in range(rows):
    for col in range(cols):
      if (r, col) not in used:
        axes[r][col].set_axis_off()
  if title:
    fig.suptitle(title, fontsize=10)
  return fig


def ranking_figure(groups: Mapping[str, Sequence[Final]], *, xlabel: str,
                   title: str = "", higher_is_better: bool = True) -> Figure:
  """Final value per method, ranked best first, ±1 std over seeds when there are
  several, one panel per group (shared x axis); colour = family, the reference's
  value dashed; ``[diverged]``, ``[partial]``, ``[stand-in]`` beside a name."""
  fig = Figure(figsize=(7.5, sum(0.6 + 0.26 * max(len(f), 1) for f in groups.values())
                        + 0.6), layout="constrained")
  axes = fig.subplots(len(groups), 1, squeeze=False, sharex=True,
                      height_ratios=[max(len(f), 1) + 2 for f in groups.values()])[:, 0]
  family_colour = {fam: COLORS[i % len(COLORS)]
                   for i, fam in enumerate(list(catalog.FAMILIES) + [catalog.OTHER])}
  shown = {}
  for ax, (group, finals) in zip(axes, groups.items()):
    order = ranked(finals, higher_is_better)
    ref = reference_label(order)
    names = []
    for y, f in enumerate(order):
      fam = catalog.family(f.algorithm)
      names.append(tagged(f))
      if f.mean is None:
        ax.text(0.01, y, "no finite value", transform=ax.get_yaxis_transform(),
                va="center", fontsize=7, color="0.4")
        continue
      err = f.std if f.n > 1 else None
      ax.errorbar([f.mean], [y], xerr=None if err is None else [err], fmt="o",
                  color=family_colour[fam], ecolor=family_colour[fam], capsize=3,
                  markersize=5, label=None if fam in shown else fam.title)
      shown[fam] = True
      if f.label == ref:
        ax.axvline(f.mean, **REFERENCE_STYLE, linewidth=1.0,
                   label=f"{ref} (reference)" if "ref" not in shown else None)
        shown["ref"] = True
    ax.set_yticks(range(len(order)), names, fontsize=7)
    ax.set_ylim(len(order) - 0.5, -0.5)   # best at the top
    ax.grid(axis="x", alpha=0.3)
    if group:
      ax.set_title(group, fontsize=9)
  axes[-1].set_xlabel(xlabel)
  found = {}
  for ax in axes:
    for h, lab in zip(*ax.get_legend_handles_labels()):
      found.setdefault(lab, h)
  # The reference first, then the families in catalog order.
  order = [lab for lab in found if lab.endswith("(reference)")] + [
      fam.title for fam in list(catalog.FAMILIES) + [catalog.OTHER] if fam.title in found]
  if order:
    fig.legend([found[lab] for lab in order], order, loc="outside lower center",
               ncol=min(len(order), 3), fontsize=8, frameon=False)
  if title:
    fig.suptitle(title, fontsize=10)
  return fig


# ------------------------------------------------------------------ a run


class ResultFigures(NamedTuple):
  """The two figures of a run; in Jupyter both display inline, one after the other."""
  rounds: Figure
  ranking: Figure

  def _ipython_display_(self):
    from IPython.display import display
    display(self.rounds, self.ranking)

  def save(self, directory: str, names: Sequence[str] = FIGURE_FILES) -> None:
    """Write both figures into ``directory`` (default ``accuracy.png``, ``ranking.png``)."""
    for fig, name in zip(self, names):
      fig.save(os.path.join(directory, name))


def results_figures(results, metric: Optional[str] = None) -> ResultFigures:
  """The two figures of ``results`` for ``metric`` (default accuracy, RMSE for
  regression), titled with the resolved config."""
  metric = metric or default_metric(results.config)
  title = describe_config(results.config)
  rounds = rounds_figure({"": results_curves(results, metric)}, ylabel=metric,
                         title=title)
  finals = summary_finals(results.summary(), metric)
  spread = " (mean ± std over seeds)" if any(f.n > 1 for f in finals) else ""
  ranking = ranking_figure({"": finals}, xlabel=f"final {metric}{spread}", title=title,
                           higher_is_better=larger_is_better(metric))
  return ResultFigures(rounds, ranking)


# ------------------------------------------------------------------ a sweep


def sweep_groups(points, records, sweep_keys, metric):
  """The curves and final values of a sweep (``fedfrac.sweep``: its table rows
  ``points`` [(config point, summary)] and its point ``records``):
  ({group: [Curve]}, {group: [Final]}), one group per config point (titled by
  its axes), one entry per run label."""
  curves, finals = {}, {}
  for index, (point, summary) in enumerate(points):
    group = ", ".join(f"{k}={v if isinstance(v, str) else repr(v)}"
                      for k, v in ((k, point[k]) for k in sweep_keys))
    mine = [r for r in records if r.get("axes_index") == index]
    curves[group], finals[group] = [], []
    for label, entry in summary.items():
      runs = [r for r in mine if r["run_label"] == label]
      algorithm = next((r.get("algorithm") for r in runs if r.get("algorithm")), label)
      stats = entry.get(metric) or {}
      finals[group].append(Final(label, algorithm, stats.get("mean"),
                                 stats.get("std") or 0.0, stats.get("n", 0),
                                 tuple(entry["statuses"])))
      stored = [r["curves"][metric] for r in runs if metric in r.get("curves", {})]
      length = min((len(c["round"]) for c in stored), default=0)
      if length:
        values = np.asarray([[np.nan if v is None else v for v in c["value"][:length]]
                             for c in stored], np.float64)
        curves[group].append(Curve(label, algorithm,
                                   np.asarray(stored[0]["round"][:length]),
                                   values, tuple(entry["statuses"])))
  return curves, finals


def save_sweep_figures(points, records, sweep_keys, metric, title, stem):
  """``stem_rounds.png`` (one panel per method family and config point, FedAvg
  dashed) and ``stem_ranking.png`` (final ``metric`` per method, ranked), the
  figures ``ff.run(...).plot()`` draws for a run; the first is left out when the
  points hold no per-round values (``mean:`` metrics, points of an older sweep)."""
  curves, finals = sweep_groups(points, records, sweep_keys, metric)
  if any(curves.values()):
    rounds_figure(curves, ylabel=metric, title=title).save(stem + "_rounds.png")
  spread = " (mean ± std over seeds)" if any(f.n > 1 for fs in finals.values()
                                             for f in fs) else ""
  ranking_figure(finals, xlabel=f"final {metric}{spread}", title=title,
                 higher_is_better=larger_is_better(metric)).save(stem + "_ranking.png")
