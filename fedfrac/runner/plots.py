"""Figures of runs and reproduction tables, drawn without touching pyplot.

Every figure is a :class:`Figure` (a ``matplotlib.figure.Figure`` on its own Agg
canvas), so drawing or saving one never changes the matplotlib backend of the
calling process (a notebook's inline backend keeps working), and in Jupyter a
returned figure displays inline as a PNG.

* the two figures of a run or a sweep (one panel per method family; the
  ranking of final values) are in :mod:`fedfrac.runner.overview`, built from
  :func:`draw_mean_band`, :func:`line_style` and :func:`group_coinciding` here.
* :func:`scenarios_figure`: small multiples, one panel per scenario, of
  accuracy (or any metric) per round per method (reproduction tables).
* :func:`sweep_figure`: a metric vs a swept option (α, κ0, ...) as lines with
  error bars, one line per method.
* :func:`describe_config`: the title of a run's figures from its resolved config.
"""
from __future__ import annotations

import contextlib
import io
import os
from typing import Any, Mapping, Optional, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as _MplFigure

# A qualitative palette (matplotlib's tab10) crossed with line styles: entry i is
# (COLORS[i % 10], LINESTYLES[i // 10 % 4], MARKERS[i // 40]) so the first 40
# lines differ in colour-and-style pair, and later ones in their marker too.
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
          "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
LINESTYLES = ("-", "--", "-.", ":")
MARKERS = (None, "o", "s", "^", "v", "D", "x", "+")

# The space a figure is said to need when the disk is full (each is well under it).
FIGURE_BYTES = 2**20

# Curves whose mean values differ by at most this everywhere count as coinciding.
COINCIDE_ATOL = 1e-6


class Figure(_MplFigure):
  """A matplotlib Figure on an Agg canvas that shows itself as a PNG in Jupyter."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    FigureCanvasAgg(self)

  def _repr_png_(self) -> bytes:
    buf = io.BytesIO()
    self.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()

  def save(self, path: str, dpi: int = 120, bbox_inches: Optional[str] = "tight") -> None:
    """Write the figure to ``path`` atomically (format from the extension),
    creating its folder when it is missing; a full disk raises
    :class:`fedfrac.runner.checkpoint.DiskFullError` naming ``path`` (one line;
    ``path`` is left as it was)."""
    from fedfrac.runner.checkpoint import disk_full_as_error, unique_tmp
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    root, ext = os.path.splitext(path)
    tmp = unique_tmp(root, ext or ".png")   # its own: other processes may write path too
    try:
      with disk_full_as_error(path, [FIGURE_BYTES]):
        self.savefig(tmp, dpi=dpi, bbox_inches=bbox_inches)
    except BaseException:
      with contextlib.suppress(OSError):
        os.remove(tmp)
      raise
    os.replace(tmp, path)


def line_style(i: int) -> dict:
  """``plot`` keywords (color, linestyle, marker) of the ``i``-th line."""
  style = {"color": COLORS[i % len(COLORS)],
           "linestyle": LINESTYLES[(i // len(COLORS)) % len(LINESTYLES)]}
  marker = MARKERS[(i // (len(COLORS) * len(LINESTYLES))) % len(MARKERS)]
  if marker is not None:
    style["marker"] = marker
  return style


_DATASETS = {"sklearn_digits": "digits"}


def dataset_name(data) -> str:
  """The data source as a reader knows it (tfds / files: the dataset itself)."""
  if data.source == "tfds":
    return str(data.tfds.name)
  if data.source == "files":
    fmt = data.files.format
    return (os.path.basename(str(data.dir).rstrip("/")) or "files") + (
        "" if fmt == "auto" else f" ({fmt})")
  return _DATASETS.get(data.source, str(data.source))


def partition_name(data) -> str:
  """``data.partition`` with the parameter that shapes it (e.g. Dirichlet α=0.1)."""
  p = data.partition
  if p == "dirichlet":
    return f"Dirichlet α={data.alpha:g}"
  if p == "shards":
    return f"shards, {data.shards_per_client} per client"
  if p == "shards_reference":
    return f"the Kuramoto authors' shards, {data.shards_per_client} per client"
  if p == "label_skew":
    return f"label skew, {data.classes_per_client} classes per client"
  return str(p)


def describe_config(config) -> str:
  """One-line title from the resolved config: dataset, partition and its
  parameter, clients, participation, rounds and seeds (overrides included)."""
  from fedfrac.sim.state import cohort_size
  d = config.data
  clients = int(d.num_clients)
  cohort = cohort_size(config.participation, clients)
  seeds = (config.seeds,) if isinstance(config.seeds, int) else tuple(config.seeds)
  parts = [dataset_name(d), partition_name(d), f"{clients} clients",
           f"participation {config.participation:g} ({cohort}/round)",
           f"{config.rounds} rounds",
           f"{len(seeds)} seed" + ("s" if len(seeds) != 1 else "")]
  return ", ".join(parts)


def group_coinciding(curves: Mapping[str, tuple], atol: float = COINCIDE_ATOL):
  """Groups of labels whose ``(x, y)`` curves are equal within ``atol``.

  Args:
    curves: label -> (x [n], y [n]) in drawing order.
  Returns:
    list of label lists, in order of each group's first label.
  """
  groups: list = []
  for label, (x, y) in curves.items():
    for g in groups:
      gx, gy = curves[g[0]]
      if (len(gx) == len(x) and np.array_equal(gx, x)
          and np.allclose(gy, y, rtol=0.0, atol=atol, equal_nan=True)):
        g.append(label)
        break
    else:
      groups.append([label])
  return groups


def _legend_outside(ax, fig, n: int) -> None:
  if n:
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
              fontsize=8, ncol=1 if n <= 24 else 2, frameon=False)


def draw_mean_band(ax, x, values: np.ndarray, label: str, style: dict) -> None:
  """The mean of ``values`` [seeds, n] over seeds, with a ±1 std band when
  there is more than one seed."""
  values = np.atleast_2d(np.asarray(values, np.float64))
  mean = values.mean(0)
  ax.plot(x, mean, label=label, linewidth=1.6,
          markevery=max(len(x) // 10, 1), markersize=4, **style)
  if values.shape[0] > 1:
    std = values.std(0)
    ax.fill_between(x, mean - std, mean + std, color=style["color"], alpha=0.15,
                    linewidth=0)


def default_metric(config) -> str:
  """The metric a run's figures show: accuracy, or RMSE for regression."""
  return "accuracy" if config.task.loss == "cross_entropy" else "rmse"


def scenarios_figure(scenarios: Mapping[str, Mapping[str, tuple]], *,
                     ylabel: str = "accuracy", title: str = "",
                     path: Optional[str] = None, columns: int = 3) -> Figure:
  """Small multiples: one panel per scenario, one line per method.

  Args:
    scenarios: scenario -> {method -> (rounds [n], values [seeds, n])}; a method
      keeps its colour and style in every panel.
    path: also write the figure there.
  """
  methods = list(dict.fromkeys(m for curves in scenarios.values() for m in curves))
  styles = {m: line_style(i) for i, m in enumerate(methods)}
  n = max(len(scenarios), 1)
  cols = min(columns, n)
  rows = -(-n // cols)
  fig = Figure(figsize=(3.6 * cols + 2.0, 3.0 * rows))
  axes = [fig.add_subplot(rows, cols, i + 1) for i in range(n)]
  for ax, (scenario, curves) in zip(axes, scenarios.items()):
    for method, (x, values) in curves.items():
      draw_mean_band(ax, np.asarray(x), values, method, styles[method])
    ax.set_title(str(scenario), fontsize=9)
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
  handles, labels = axes[0].get_legend_handles_labels() if axes else ([], [])
  for ax in axes[1:]:
    for h, lab in zip(*ax.get_legend_handles_labels()):
      if lab not in labels:
        handles.append(h)
        labels.append(lab)
  if labels:
    fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 0.95),
               fontsize=8, frameon=False)
  if title:
    fig.suptitle(title, fontsize=10)
  fig.tight_layout()
  if path:
    fig.save(path)
  return fig


def _mean_std(values: Any) -> tuple[float, float]:
  """(mean, sample std) of one swept value's seeds; NaN mean when none is finite."""
  if isinstance(values, Mapping):
    mean, std = values.get("mean"), values.get("std")
    return (np.nan if mean is None else float(mean), 0.0 if std is None else float(std))
  v = np.atleast_1d(np.asarray(values, np.float64))
  v = v[np.isfinite(v)]
  if v.size == 0:
    return np.nan, 0.0
  return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0


def sweep_figure(lines: Mapping[str, Sequence[tuple]], *, xlabel: str,
                 ylabel: str = "accuracy", title: str = "", log_x: bool = False,
                 path: Optional[str] = None) -> Figure:
  """A metric vs a swept option (e.g. α or κ0) with ±1 std error bars.

  Args:
    lines: method -> [(x, values over seeds), ...] (one entry per swept value;
      ``values`` a number, a sequence of per-seed numbers, or a mapping with
      ``mean`` and ``std`` such as ``fedfrac.metrics.seed_stats`` gives).
      Non-finite per-seed values (diverged runs) are left out, as the tables
      leave them out; the bar is the sample std over the remaining seeds.
    log_x: logarithmic x axis (e.g. δ or κ0 grids spanning decades).
    path: also write the figure there.
  """
  fig = Figure(figsize=(7.5, 4.2))
  ax = fig.add_subplot(1, 1, 1)
  for i, (method, points) in enumerate(lines.items()):
    points = sorted(points, key=lambda p: p[0])
    xs = np.asarray([float(p[0]) for p in points])
    stats = [_mean_std(p[1]) for p in points]
    mean = np.asarray([m for m, _ in stats])
    std = np.asarray([s for _, s in stats])
    style = line_style(i)
    ax.errorbar(xs, mean, yerr=std, label=method, capsize=3, linewidth=1.5,
                marker=style.pop("marker", "o"), markersize=4, **style)
  if log_x:
    ax.set_xscale("log")
  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  if title:
    ax.set_title(title, fontsize=9)
  ax.grid(alpha=0.3)
  _legend_outside(ax, fig, len(lines))
  if path:
    fig.save(path)
  return fig


def figure_lines(fig: Any) -> list:
  """``(label, color, linestyle, marker)`` of every labelled line in ``fig``."""
  from matplotlib.colors import to_hex
  out = []
  for ax in fig.axes:
    for line in ax.get_lines():
      label = line.get_label()
      if not label.startswith("_"):
        out.append((label, to_hex(line.get_color()), line.get_linestyle(),
                    line.get_marker()))
  return out
