"""A column of FIRMA Tables 7–10 in one call: every scenario of one or more
methods on the real data, the runs in as few compiled programs as the methods
allow (:func:`fedfrac_lab.reproduce.firma_groups.run_group`), written in the
``fedfrac-reproduce firma_files --json`` format so that its tables read it.

The GPU campaign's column items run through :func:`run_column`
(:mod:`fedfrac_lab.campaign.items`); ``note`` in the result's ``args`` says which
runs shared a program, and the table prints it with the runs.
"""
from __future__ import annotations

import json
import os
import time
import warnings

from fedfrac_lab.reproduce import firma_files, firma_groups, firma_program
from fedfrac_lab.reproduce import firma_files_table

SCENARIO_NAMES = firma_files_table.COLUMNS
METHOD_NAMES = firma_files_table.ROWS


def programs_note(programs) -> str:
  """One line: which runs shared which compiled program."""
  parts = []
  for p in programs:
    if "runs" not in p:
      continue
    scen = "/".join(SCENARIO_NAMES.get(s, s) for s in p["scenarios"])
    what = " and ".join(METHOD_NAMES.get(m, m) for m in p["methods"])
    pad = f" + {p['padding_runs']} repeated" if p["padding_runs"] else ""
    parts.append(f"{what} at N = {p['num_clients']} ({scen}): {p['runs']} runs{pad} in "
                 f"{p['batches']} batch{'es' if p['batches'] > 1 else ''} of "
                 f"{p['batch_runs']}")
  return "one compiled program each: " + "; ".join(parts) if parts else ""


def earlier_cells(path, mode, inputs) -> dict:
  """``{(scenario, method): cell}`` of ``mode`` and ``inputs`` in an earlier
  result file of the same column (a window that stopped inside it)."""
  out = {}
  if not path or not os.path.exists(path):
    return out
  with open(path) as f:
    d = json.load(f)
  for m, inp, scen, method, cell in firma_files_table.json_cells(d):
    if m == mode and inp == inputs:
      out[(scen, method)] = cell
  return out


def result(args, device, results, timing=None, earlier=None, partial=False) -> dict:
  """The ``firma_files --json`` dict of a column's ``results``
  ({(scenario, method): cell}) and ``earlier`` cells kept from another run."""
  flags = {k: v for k, v in vars(args).items()
           if k not in ("json", "table", "out", "published", "workers")}
  cells = {**(earlier or {}), **results}
  note = programs_note((timing or {}).get("programs", []))
  if earlier:
    kept = ", ".join(f"{METHOD_NAMES.get(m, m)} {SCENARIO_NAMES.get(s, s)}"
                     for s, m in earlier)
    note = (note + "; " if note else "") + f"from an earlier window of this item: {kept}"
  out = {"args": {**flags, "note": note, "device": device}, "scenarios": {},
         "column": {"partial": partial, "timing": timing or {}}}
  for scen in args.scenarios.split(","):
    here = {f"{scen}/{m}": cells[(scen, m)] for m in args.methods.split(",")
            if (scen, m) in cells}
    if here:
      out["scenarios"][scen] = {"wall_s": None, "timings": {}, "workers": 1,
                                "results": {args.modes: here}}
  return out


def run_column(args, device, log=print, skip=(), resume=None, widths=None,
               memory_bytes=None, step_time=None, on_progress=None, compile_only=False,
               before_compile=None, after_compile=None, count=None):
  """Run the cells of ``args`` (``firma_files`` arguments: one mode, its
  scenarios and methods, seeds, rounds, inputs) that are not in ``skip``
  ([(scenario, method)]), in shared programs; returns the result dict
  (:func:`result`) with the cells of ``resume`` (an earlier partial result file
  of the same column) kept. ``on_progress(result)`` gets the result so far
  after each program. ``widths``: the dataset's padded widths
  (:func:`fedfrac_lab.reproduce.firma_files.dataset_widths`), so every column's
  programs have the same shapes; ``memory_bytes`` and ``step_time``: the batch
  planner's (:func:`fedfrac_lab.reproduce.firma_groups.plan_batches`);
  ``count(config, method, fed)``: a run's FLOPs, summed over the runs that ran
  into ``column.timing.flops``."""
  mode, methods = args.modes, args.methods.split(",")
  scenarios = args.scenarios.split(",")
  skip = {tuple(c) for c in skip}
  earlier = earlier_cells(resume, mode, args.inputs)
  todo = [s for s in scenarios if any((s, m) not in skip for m in methods)]
  seeds = tuple(range(args.seeds))
  t0 = time.perf_counter()
  if not todo:
    return result(args, device, {}, {"wall_s": 0.0, "programs": []}, earlier)
  module = firma_files.files_config_module(args)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")     # expected label-skew drops (K = 3)
    feds = firma_program.common_shapes(
        {mode: firma_program.build_feds(module, mode, todo, seeds)}, widths)[mode]

  def progress(results, programs):
    if on_progress is not None:
      on_progress(result(args, device, results, {"programs": programs}, earlier,
                         partial=True))
  results, timing = firma_groups.run_group(
      feds, mode, methods, todo, seeds, log, memory_bytes=memory_bytes,
      step_time=step_time, skip=skip, on_cells=progress, compile_only=compile_only,
      before_compile=before_compile, after_compile=after_compile)
  timing["wall_s"] = time.perf_counter() - t0
  if count is not None:
    timing["flops"] = float(sum(count(feds[s][0], m, fed) for s, m in results
                                for fed in feds[s][1]))
  return result(args, device, results, timing, earlier)
