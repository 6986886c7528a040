"""Drawing the reproduction figures (:mod:`fedfrac_lab.reproduce.figure_data` has
their data and kinds) with matplotlib's Agg canvas, no pyplot and no global
state: matplotlib's defaults with this module's :data:`STYLE` on top (a
``matplotlibrc`` of the machine does not reach them), DejaVu Sans (shipped with
matplotlib), fixed sizes and dpi, and no software name or time in the PNG, so
the same data and the same matplotlib give the same bytes.

``delta`` panels: one row per table row; the grey band is ±margin around Δ = 0,
the bar Δ's 90 % interval, the marker's colour and shape its verdict; a row
beyond the axis is drawn at its edge as a triangle with its Δ written beside.
``values`` panels: the published value (open diamond) and ours (dot, bar ± std
over seeds), joined by a thin line. ``curves``: one line per run, the published
value dashed.
"""
from __future__ import annotations

import hashlib
import io
import os
import textwrap
from typing import Any, Dict, List, Tuple, cast

import numpy as np

from fedfrac_lab.reproduce import verdicts
from fedfrac_lab.reproduce.figure_data import CURVES, DELTA, Figure, Panel

DPI = 100
WIDTH = 11.0           # inches: a figure is at most 1,100 px wide
ROW = 0.165            # inches per table row
LABEL_CHARS = 52       # a longer row label is cut with "…"
STYLE: Dict[str, Any] = {"font.family": "DejaVu Sans", "font.size": 7.5, "axes.titlesize": 7.5,
         "axes.labelsize": 7.5, "xtick.labelsize": 7, "ytick.labelsize": 6.8,
         "legend.fontsize": 7, "figure.titlesize": 8.5, "axes.linewidth": 0.6,
         "svg.hashsalt": "fedfrac", "path.simplify": False}
# Okabe–Ito colours (told apart with colour-blindness) and a shape per verdict.
VERDICT_STYLE: Dict[str, Tuple[str, str]] = {
    verdicts.AGREES: ("#009E73", "o"), verdicts.DIFFERS: ("#D55E00", "s"),
    verdicts.INCONCLUSIVE: ("#E69F00", "D"), verdicts.COLLAPSED: ("#CC79A7", "v"),
    verdicts.TOO_FEW: ("#7F7F7F", "^"), verdicts.STAND_IN: ("#0072B2", "o"),
}
BAND = "#D9D9D9"
CURVE_COLOURS = ("#0072B2", "#56B4E9", "#009E73", "#CC79A7")
PNG_KEY = "fedfrac data sha256"


def code_digest() -> str:
  """sha256 of this module's source (line ends normalised): a change to how the
  figures are drawn makes every figure stale, as a change to its data does."""
  with open(os.path.abspath(__file__), "rb") as f:
    return hashlib.sha256(f.read().replace(b"\r\n", b"\n")).hexdigest()


def _cut(label: str) -> str:
  return label if len(label) <= LABEL_CHARS else label[:LABEL_CHARS - 1] + "…"


def _separators(ax, labels: List[str], y) -> None:
  """A faint line between rows of different methods (the label before " · ")."""
  heads = [label.split(" · ")[0] for label in labels]
  for i in range(1, len(heads)):
    if heads[i] != heads[i - 1]:
      ax.axhline((y[i] + y[i - 1]) / 2, color="#EEEEEE", lw=0.6, zorder=0)


def _rows(ax, panel: Panel, y, rows: int, labels: bool) -> None:
  """The row axis of a panel: its rows from the top at the same spacing in every
  panel of the figure (``rows``: the most any panel has), labelled when
  ``labels`` (the first panel, or every panel when their rows differ)."""
  names = [c.label for c in panel.cells]
  _separators(ax, names, y)
  ax.set_yticks(y, [_cut(n) for n in names] if labels else [])
  ax.set_ylim(len(names) - 0.4 - rows - 0.2, len(names) - 0.4)
  ax.tick_params(axis="y", length=0)
  ax.grid(axis="x", color="#F0F0F0", lw=0.5, zorder=0)


def _delta_panel(ax, panel: Panel, rows: int, labels: bool) -> Dict[str, int]:
  cells = panel.cells
  y = np.arange(len(cells))[::-1].astype(float)
  lim = panel.limit
  seen: Dict[str, int] = {}
  for yi, c in zip(y, cells):
    s = c.scale
    if c.margin is not None:
      m = min(c.margin * s, lim)
      ax.fill_between([-m, m], yi - 0.5, yi + 0.5, color=BAND, lw=0, zorder=1)
    if c.delta is None:
      continue
    colour, marker = VERDICT_STYLE.get(c.verdict, ("#000000", "x"))
    seen[c.verdict] = seen.get(c.verdict, 0) + 1
    d, h = c.delta * s, (c.half_width or 0.0) * s
    if abs(d) > lim:
      edge = np.sign(d) * lim * 0.985
      ax.plot([edge], [yi], marker=">" if d > 0 else "<", color=colour, ms=5, lw=0,
              zorder=3, clip_on=False)
      ax.text(edge - np.sign(d) * lim * 0.04, yi, f"{d:+.1f}" if s != 1 or abs(d) >= 1
              else f"{d:+.3f}", ha="right" if d > 0 else "left", va="center",
              fontsize=6, color=colour)
      continue
    if h:
      ax.plot([max(d - h, -lim), min(d + h, lim)], [yi, yi], color=colour, lw=1.1,
              zorder=2, solid_capstyle="butt")
    ax.plot([d], [yi], marker=marker, color=colour, ms=3.6, lw=0, zorder=3,
            mfc="white" if c.verdict == verdicts.TOO_FEW else colour)
  ax.axvline(0, color="#333333", lw=0.6, zorder=1)
  _rows(ax, panel, y, rows, labels)
  ax.set_xlim(-lim, lim)
  ax.set_xlabel(f"Δ = ours − published ({panel.unit})")
  return seen


def _values_panel(ax, panel: Panel, rows: int, labels: bool) -> Dict[str, int]:
  cells = panel.cells
  y = np.arange(len(cells))[::-1].astype(float)
  colour, marker = VERDICT_STYLE[verdicts.STAND_IN]
  for yi, c in zip(y, cells):
    ours = float("nan") if c.ours is None else c.ours
    ax.plot([c.published, ours], [yi, yi], color="#BBBBBB", lw=0.8, zorder=1)
    if c.std:
      ax.plot([ours - c.std, ours + c.std], [yi, yi], color=colour, lw=1.1, zorder=2)
    ax.plot([ours], [yi], marker=marker, color=colour, ms=3.6, lw=0, zorder=3)
    ax.plot([c.published], [yi], marker="D", mfc="white", mec="#222222", ms=3.8,
            lw=0, zorder=4)
  _rows(ax, panel, y, rows, labels)
  ax.set_xlabel(panel.unit)
  ax.margins(x=0.08)
  return {verdicts.STAND_IN: len(cells)}


def _curves_panel(ax, panel: Panel) -> None:
  groups = list(dict.fromkeys(c.group for c in panel.curves))
  shown = set()
  for c in panel.curves:
    theirs = c.group.startswith("the authors")
    colour = "#000000" if theirs else CURVE_COLOURS[groups.index(c.group) % len(CURVE_COLOURS)]
    label = c.group if c.group not in shown else None
    shown.add(c.group)
    ax.plot(c.rounds, c.values, color=colour, lw=2.0 if theirs else 0.9,
            marker="o" if theirs else None, ms=3.5, alpha=1.0 if theirs else 0.85,
            zorder=3 if theirs else 2, label=(c.label if theirs else label))
  for label, value in panel.references:
    ax.axhline(value, color="#D55E00", lw=1.0, ls="--", label=label, zorder=1)
  ax.set_xlabel("round")
  ax.set_ylabel(panel.unit)
  ax.grid(color="#F0F0F0", lw=0.5)
  ax.figure.legend(loc="outside lower center", ncol=2, frameon=False)


def _legend(fig, seen: Dict[str, int], kind: str) -> None:
  from matplotlib.lines import Line2D
  from matplotlib.patches import Patch
  handles: List[Any] = []
  for v in verdicts.ORDER:
    if v in seen:
      colour, marker = VERDICT_STYLE[v]
      handles.append(Line2D([], [], color=colour, marker=marker, lw=0, ms=4,
                            mfc="white" if v == verdicts.TOO_FEW else colour,
                            label=f"{v} ({seen[v]})"))
  if kind == DELTA:
    handles += [Line2D([], [], color="#555555", lw=1.1, label="90 % interval of Δ"),
                Patch(color=BAND, label="±margin")]
  else:
    handles += [Line2D([], [], marker="D", mfc="white", mec="#222222", lw=0, ms=4,
                       label="published"),
                Line2D([], [], color=VERDICT_STYLE[verdicts.STAND_IN][0], lw=1.1,
                       label="ours ± std over seeds")]
  fig.legend(handles=handles, loc="outside lower center", ncol=len(handles),
             frameon=False)


def draw(fig_data: Figure, digest: str) -> bytes:
  """The PNG of ``fig_data``, with ``digest`` in its text chunk :data:`PNG_KEY`."""
  import matplotlib
  from matplotlib.backends.backend_agg import FigureCanvasAgg
  from matplotlib.figure import Figure as MplFigure
  panels = fig_data.panels
  with matplotlib.rc_context():
    matplotlib.rcdefaults()
    cast(Any, matplotlib.rcParams).update(STYLE)
    if fig_data.kind == CURVES:
      size, rows, same = (8.0, 5.0), 0, True
    else:
      rows = max(len(p.cells) for p in panels)
      label = 0.8 + 0.05 * max(min(len(c.label), LABEL_CHARS) for p in panels
                               for c in p.cells)
      plot = 3.6 if fig_data.kind == DELTA else 2.4
      same = len({tuple(c.label for c in p.cells) for p in panels}) == 1
      width = label + plot * len(panels) if same else (label + plot) * len(panels)
      size = (min(WIDTH, max(width, 7.0)), 1.7 + ROW * rows)
    fig = MplFigure(figsize=size, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    seen: Dict[str, int] = {}
    for i, (ax, panel) in enumerate(zip(axes, panels)):
      if fig_data.kind == CURVES:
        _curves_panel(ax, panel)
      else:
        drawn = (_delta_panel if fig_data.kind == DELTA else _values_panel)(
            ax, panel, rows, i == 0 or not same)
        for v, k in drawn.items():
          seen[v] = seen.get(v, 0) + k
      chars = int(size[0] / len(panels) * 13)
      ax.set_title("\n".join(textwrap.wrap(panel.title, chars)), loc="left")
    if fig_data.kind != CURVES:
      _legend(fig, seen, fig_data.kind)
    chars = int(size[0] * 15)
    fig.suptitle("\n".join(textwrap.wrap(fig_data.title, chars)), x=0.01, ha="left")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI,
                metadata={"Software": None, PNG_KEY: digest})
  return buf.getvalue()


def png_text(data: bytes) -> Dict[str, str]:
  """The tEXt chunks of a PNG (keyword -> text); {} for bytes that are not one."""
  if data[:8] != b"\x89PNG\r\n\x1a\n":
    return {}
  out, i = {}, 8
  while i + 8 <= len(data):
    length = int.from_bytes(data[i:i + 4], "big")
    kind = data[i + 4:i + 8]
    body = data[i + 8:i + 8 + length]
    if kind == b"tEXt" and b"\x00" in body:
      key, _, text = body.partition(b"\x00")
      out[key.decode("latin-1")] = text.decode("latin-1")
    if kind == b"IEND":
      break
    i += 12 + length
  return out
