"""A sweep's table: mean ± std over seeds of each metric's final value per
(sweep point, method), as markdown, CSV, JSON and figures."""
from __future__ import annotations

import csv
import io
import json
import os

from fedfrac import metrics as metrics_lib
from fedfrac.runner.checkpoint import atomic_write
from fedfrac.sweep.batches import point_record


def summarize_points(points, records, metric_names):
  """[(config point, summary)] in table order; a summary maps each run label to
  ``{metric: seed_stats, "best_accuracy": ..., "n", "statuses"}`` over seeds.
  Runs that stopped at their target (``config.stop_at_target``) have the status
  ``ok, stopped at target`` and their label ``rounds_to_target`` and
  ``bytes_up_to_target`` (seed_stats over the runs that stopped)."""
  out = {}
  for p in points:
    rec = records[p["id"]]
    axes_entry = out.setdefault(p["axes_index"], (p["axes"], {}))
    axes_entry[1].setdefault(p["run_label"], []).append(rec)
  table = []
  for _, (point, by_label) in sorted(out.items()):
    summary = {}
    for label, recs in by_label.items():
      entry = {"n": len(recs), "statuses": sorted({
          r["status"] + (", stopped at target" if r.get("stopped") else "") for r in recs})}
      stopped = [r["stopped"] for r in recs if r.get("stopped")]
      if stopped:
        for key in ("rounds_to_target", "bytes_up_to_target"):
          entry[key] = metrics_lib.seed_stats([s[key] for s in stopped])
      names = list(metric_names) + (["best_accuracy"] if "accuracy" in metric_names else [])
      for name in names:
        entry[name] = metrics_lib.seed_stats([r["metrics"].get(name) for r in recs
                                              if r["metrics"].get(name) is not None])
      summary[label] = entry
    table.append((point, summary))
  return table


def summarize(records, metric_names):
  """Ordered rows of RunRecords: method label -> {metric: seed_stats, status}."""
  spec = {"axes": {}, "label": None}
  recs = [point_record(r, metric_names, spec, None) for r in records]
  points = [{"id": i, "axes": {}, "axes_index": 0, "run_label": r.method}
            for i, r in enumerate(records)]
  return summarize_points(points, dict(enumerate(recs)), metric_names)[0][1]


def fmt(stats, digits=4):
  if not stats or stats["mean"] is None:
    return "n/a"
  if stats["n"] > 1:
    return f"{stats['mean']:.{digits}f} ± {stats['std']:.{digits}f}"
  return f"{stats['mean']:.{digits}f}"


def table_cell(value):
  return value if isinstance(value, str) else repr(value)


def table_columns(metric_names):
  out = []
  for name in metric_names:
    out.append(name.replace("mean:", "mean over rounds of ") if name.startswith("mean:")
               else f"final {name}")
    if name == "accuracy":
      out.append("best accuracy")
  return out


def markdown(points, sweep_keys, metric_names, title, command, notes):
  """The sweep's markdown table: one row per (config point, method label)."""
  columns = list(sweep_keys) + ["method"] + table_columns(metric_names) + ["seeds", "status"]
  lines = [f"# {title}", "", f"Command: `{command}`", ""] + notes + [
      "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
  for point, summary in points:
    for label, entry in summary.items():
      cells = [table_cell(point[k]) for k in sweep_keys] + [label]
      for name in metric_names:
        cells.append(fmt(entry[name]))
        if name == "accuracy":
          cells.append(fmt(entry["best_accuracy"]))
      cells += [str(entry["n"]), ", ".join(entry["statuses"])]
      lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def csv_table(points, sweep_keys, metric_names):
  """The same rows as CSV: mean and std of each metric (full precision)."""
  names = list(metric_names) + (["best_accuracy"] if "accuracy" in metric_names else [])
  header = list(sweep_keys) + ["method"] + [f"{n} {s}" for n in names
                                            for s in ("mean", "std")] + ["seeds", "status"]
  buf = io.StringIO()
  writer = csv.writer(buf, lineterminator="\n")
  writer.writerow(header)
  for point, summary in points:
    for label, entry in summary.items():
      row = [table_cell(point[k]) for k in sweep_keys] + [label]
      for n in names:
        row += ["" if entry[n]["mean"] is None else repr(entry[n][s]) for s in ("mean", "std")]
      writer.writerow(row + [entry["n"], "; ".join(entry["statuses"])])
  return buf.getvalue()


def plot(points, sweep_keys, metric_names, path):
  """One panel per metric: mean ± std over seeds of every (config point,
  method) row, one series per method label."""
  from fedfrac.runner.plots import Figure  # own Agg canvas: the backend is untouched
  names = [n for n in metric_names]
  xlabels = [", ".join(f"{k}={table_cell(p[k])}" for k in sweep_keys) or "all"
             for p, _ in points]
  fig = Figure(figsize=(max(5, 1.2 * len(points) + 2), 3 * len(names)))
  axs = fig.subplots(len(names), 1, squeeze=False)
  labels = list(dict.fromkeys(l for _, s in points for l in s))
  for ax, name in zip(axs[:, 0], names):
    for j, label in enumerate(labels):
      xs, ms, ss = [], [], []
      for i, (_, summary) in enumerate(points):
        stats = summary.get(label, {}).get(name)
        if stats and stats["mean"] is not None:
          xs.append(i + 0.06 * (j - (len(labels) - 1) / 2))
          ms.append(stats["mean"])
          ss.append(stats["std"])
      ax.errorbar(xs, ms, yerr=ss, fmt="o-" if len(xs) > 1 else "o", capsize=3,
                  label=label)
    ax.set_xticks(range(len(points)), xlabels, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(name)
    ax.grid(alpha=0.3)
  axs[0, 0].legend(fontsize=7)
  fig.tight_layout()
  fig.save(path, dpi=110, bbox_inches=None)   # atomic: shards finishing together


def write_tables(out, points, sweep_keys, metric_names, title, command, notes,
                 records=()):
  """``out`` (markdown), and the CSV, JSON and PNG next to it, and with the
  point ``records`` the two figures of a run, ``_rounds.png`` and ``_ranking.png``
  (:func:`fedfrac.runner.overview.save_sweep_figures`); returns the markdown."""
  text = markdown(points, sweep_keys, metric_names, title, command, notes)
  os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
  stem = os.path.splitext(out)[0]
  for path, body in ((out, text), (stem + ".csv", csv_table(points, sweep_keys,
                                                            metric_names)),
                     (stem + ".json", json.dumps([{"point": p, "summary": s}
                                                  for p, s in points], indent=2,
                                                 default=str) + "\n")):
    atomic_write(path, body)
  plot(points, sweep_keys, metric_names, stem + ".png")
  if records:
    from fedfrac.runner import overview
    overview.save_sweep_figures(points, list(records), sweep_keys, metric_names[0], title,
                                stem)
  return text


# ------------------------------------------------------------------- sweeps
