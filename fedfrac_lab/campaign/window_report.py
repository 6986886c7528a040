"""What a window knows of earlier ones and reports of itself: the measurements
committed per device (``benchmarks/results_<slug>.json``), the measured peak
and step-time curve the planner and the timing table use, and the timing table
(``timings.md``: per item its status, runs, compiled programs, seconds, compile
seconds, TFLOP/s counted from layer shapes and its share of the measured
float32 peak). No JAX here: the supervisor imports it.
"""
from __future__ import annotations

import glob
import json
import os


def committed_measurements(root, slug) -> dict:
  path = os.path.join(root, "benchmarks", f"results_{slug}.json")
  if not os.path.exists(path):
    return {}
  with open(path) as f:
    return json.load(f).get("accelerator", {})


def accelerator_measurements(root) -> dict:
  """The measurements of every accelerator's ``benchmarks/results_<slug>.json``
  (not the CPU's), as :func:`committed_measurements` gives one device's."""
  have = {}
  for path in sorted(glob.glob(os.path.join(root, "benchmarks", "results_*.json"))):
    slug = os.path.basename(path)[len("results_"):-len(".json")]
    if slug != "cpu":
      have.update(committed_measurements(root, slug))
  return have


def peak_tflops(result) -> float | None:
  """The float32 matrix-product peak (``highest`` precision) of a ``peaks``
  measurement's result, TFLOP/s."""
  for row in (result or {}).get("rows", []):
    if row.get("name") == "float32_highest":
      return float(row["tflops"])
  return None


def step_points(result) -> list:
  """``[[lanes, seconds]]`` of a ``step_scaling`` measurement's result."""
  return [[r["lanes"], r["step_s"]] for r in (result or {}).get("rows", [])]


def committed(root, slug, name):
  """The result of measurement ``name`` committed for device ``slug``, or None."""
  return committed_measurements(root, slug).get(name, {}).get("result")


def _num(value, fmt):
  return "" if value is None else format(value, fmt)


def timings_markdown(rows, device, budget, wall, peak=None) -> str:
  """The window's timing table; ``peak``: the device's measured float32 peak
  (TFLOP/s), for each item's share."""
  lines = [f"# Campaign window on {device}", "",
           f"Budget {budget:.0f} s, wall {wall:.0f} s."
           + (f" Measured float32 matrix-product peak (`highest`): {peak:.1f} TFLOP/s."
              if peak else ""), "",
           "TFLOP/s: the matrix products of the item's local steps, counted from layer "
           "shapes (`fedfrac_lab.bench.flops`), over the seconds its programs ran "
           "(compilation not included).", "",
           "| # | stage | item | status | runs | programs | seconds | compile s | "
           "TFLOP/s | % of peak | estimate s |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
  for i, r in enumerate(rows, 1):
    st = r.get("stats") or {}
    tflops = (st["flops"] / st["run_s"] / 1e12 if st.get("flops") and st.get("run_s")
              else None)
    share = 100 * tflops / peak if tflops and peak else None
    lines.append(f"| {i} | {r['stage']} | {r['label']} | {r['status']} | "
                 f"{st.get('runs', '')} | {st.get('programs', '')} | "
                 f"{_num(r.get('seconds'), '.1f')} | {_num(st.get('compile_s'), '.1f')} | "
                 f"{_num(tflops, '.2f')} | {_num(share, '.0f')} | "
                 f"{_num(r.get('estimate'), '.0f')} |")
  return "\n".join(lines) + "\n"
