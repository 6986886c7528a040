"""How each kind of campaign item runs (in the worker process) and what file it
leaves: ``items/<table>/<id>.json`` for points, ``measurements/<name>.json``
for a stage-a measurement, each a checksummed item file
(:func:`fedfrac_lab.campaign.files.write_item`).

* ``firma``: one (mode, scenario, method) cell of FIRMA on the real data with
  its seeds vmapped, through ``fedfrac-reproduce firma_files``
  (:func:`fedfrac_lab.reproduce.firma_files.run_scenarios`); or a column of cells
  (every scenario of one or more methods) in shared programs
  (:func:`run_firma_column`); the file is that command's ``--json`` format (so
  its ``--table`` reads it) plus the ``campaign`` entry.
* ``jobs``: one method label of a config file over its seeds (and grid values)
  through the point runner (:func:`fedfrac_lab.reproduce.jobs.run_jobs`); the file
  holds every run's whole record (:func:`fedfrac_lab.reproduce.jobs.encode_record`).
* ``bench``: one of :data:`fedfrac_lab.bench.accelerator.MEASUREMENTS`.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time

from fedfrac_lab.campaign import plan as plan_lib
from fedfrac_lab.reproduce import item_files


def device_label() -> str:
  """What the tables call the device: the GPU's name, or ``CPU, <n> cores``
  (as ``fedfrac-reproduce firma_files`` does)."""
  import jax
  d = jax.devices()[0]
  return f"CPU, {os.cpu_count()} cores" if d.platform == "cpu" else d.device_kind


def device_slug(label: str) -> str:
  """``benchmarks/results_<slug>.md``'s slug of a device label: ``cpu`` for a CPU,
  else the model word of the GPU's name (``NVIDIA H100 80GB HBM3`` -> ``h100``)."""
  if label.lower().startswith("cpu"):
    return "cpu"
  words = [w for w in re.split(r"[^a-z0-9]+", label.lower())
           if w and w not in ("nvidia", "tesla", "geforce", "rtx", "amd", "instinct")]
  return words[0] if words else "device"


def item_path(staging, item) -> str:
  if item["kind"] == "bench":
    return os.path.join(staging, "measurements", f"{item['table']}.json")
  return os.path.join(staging, "items", item["table"], f"{item['id']}.json")


# A FIRMA item's compiled program is shared with the next items of the same
# method in the window: every scenario is padded to the widths of all seven
# (computed once per dataset, mode, inputs and seeds) and runs its clients in one
# step bucket, so the programs of the N = 10 scenarios are identical, and they
# go through one compilation cache for the window's stage b (stage a times
# compilation, so it runs without one).
_WIDTHS: dict = {}
_CACHE: dict = {}


def firma_compile_cache(directory=None) -> str:
  """The window's compilation cache for FIRMA items (``directory``: the
  window's, which the compile-ahead process fills and the next window gets;
  else a temporary one): turned on at first use, and JAX's once-per-process
  check of whether a cache is in use reset, since stage a has already compiled
  without one."""
  if "dir" not in _CACHE:
    from jax.experimental.compilation_cache import compilation_cache
    from fedfrac_lab.reproduce.firma_points import enable_compile_cache
    from fedfrac.runner.compile_cache import verify_entries
    _CACHE["dir"] = directory or tempfile.mkdtemp(prefix="campaign_xla_cache_")
    os.makedirs(_CACHE["dir"], exist_ok=True)
    bad, _ = verify_entries(_CACHE["dir"])   # a damaged carried entry: compile afresh
    for name in bad:
      os.remove(os.path.join(_CACHE["dir"], name))
    if bad:
      print(f"compile cache: {len(bad)} damaged entries removed from {_CACHE['dir']}",
            file=sys.stderr)
    compilation_cache.reset_cache()
    enable_compile_cache(_CACHE["dir"])
  return _CACHE["dir"]


def firma_args(spec, data_dir, out=""):
  """The ``fedfrac-reproduce firma_files`` arguments of a FIRMA item (accelerator
  form: clients and runs vmapped, one step bucket so every scenario of one
  number of clients has the same program)."""
  from fedfrac_lab.reproduce import firma_files_table
  scenarios = spec.get("scenarios") or [spec["scenario"]]
  methods = spec.get("methods") or [spec["method"]]
  return argparse.Namespace(
      dataset=spec["dataset"], dir=plan_lib.resolve(spec["data"], data_dir),
      modes=spec["mode"], scenarios=",".join(scenarios), methods=",".join(methods),
      seeds=spec["seeds"], rounds=spec["rounds"], parallelism="vmap", workers=1,
      step_buckets=1, inputs=spec["inputs"], init=spec.get("init"), note="", json=out,
      table="", out="", published=firma_files_table.PUBLISHED)


def firma_widths(args) -> dict:
  """:func:`fedfrac_lab.reproduce.firma_files.dataset_widths` of ``args``, computed
  once per dataset, mode, inputs and seeds in this process."""
  from fedfrac_lab.reproduce import firma_files
  key = (args.dataset, args.dir, args.modes, args.inputs, args.seeds, args.rounds)
  if key not in _WIDTHS:
    _WIDTHS[key] = firma_files.dataset_widths(args)
  return _WIDTHS[key]


def run_firma(spec, data_dir, log) -> dict:
  from fedfrac_lab.reproduce import firma_files
  with tempfile.TemporaryDirectory(prefix="campaign_firma_") as tmp:
    out = os.path.join(tmp, "cell.json")
    args = firma_args(spec, data_dir, out)
    firma_widths(args)
    firma_files.run_scenarios(args, log=log, cache_dir=firma_compile_cache(),
                              widths=firma_widths(args))
    with open(out) as f:
      return json.load(f)


def firma_flops(config, method, fed) -> float:
  """Product FLOPs of one FIRMA run (:func:`fedfrac_lab.bench.flops.firma_run_flops`)."""
  import jax
  from fedfrac import config_base
  from fedfrac_lab.bench import flops
  from fedfrac.runner import factories
  ctx = factories.build_context(config, method, fed)
  client = config_base.client_config(config, method)
  options = {k: v for k, v in config.methods[method].items() if k not in ("name", "client")}
  params = jax.eval_shape(ctx.model.init, jax.random.PRNGKey(0))
  return flops.firma_run_flops(method, options, fed.client_size, int(client.batch_size),
                               int(config.rounds), params, int(client.local_epochs or 1))


def step_time_curve(points):
  """``lanes -> seconds`` of one local step from measured ``[[lanes, seconds]]``
  (the ``step_scaling`` measurement): linear between the points, flat below the
  first, proportional to the lanes beyond the last; None without points."""
  if not points:
    return None
  pts = sorted((float(a), float(b)) for a, b in points)

  def curve(lanes):
    if lanes <= pts[0][0]:
      return pts[0][1]
    for (a0, b0), (a1, b1) in zip(pts, pts[1:]):
      if lanes <= a1:
        return b0 + (b1 - b0) * (lanes - a0) / (a1 - a0)
    return pts[-1][1] * lanes / pts[-1][0]
  return curve


def run_firma_column(item, data_dir, log, context) -> dict:
  """A column item (:func:`fedfrac_lab.reproduce.firma_column.run_column`): its cells
  but ``item["skip"]`` (held by committed files), the cells of its own earlier
  partial file (``item["resume"]``, under ``context["root"]``) kept; after each
  compiled program ``context["progress"](payload)`` gets the partial result."""
  from fedfrac_lab.reproduce import firma_column
  args = firma_args(item["spec"], data_dir)
  resume = item.get("resume")
  if resume:
    resume = os.path.join(context.get("root", "."), resume)
  firma_compile_cache(context.get("cache_dir"))
  return firma_column.run_column(
      args, device_label(), log, skip=item.get("skip", ()), resume=resume,
      widths=firma_widths(args), memory_bytes=context.get("memory_bytes"),
      step_time=step_time_curve(context.get("step_time")),
      on_progress=context.get("progress"), compile_only=context.get("compile_only", False),
      before_compile=context.get("before_compile"),
      after_compile=context.get("after_compile"), count=firma_flops)


def run_jobs(table, spec, data_dir, log) -> dict:
  from fedfrac import sweep
  from fedfrac_lab.reproduce import common, jobs
  module = common.load_module(spec["config"])
  config = module.get_config(spec["arg"]) if spec["arg"] else module.get_config()
  for key, value in plan_lib.resolve(spec["set"], data_dir).items():
    sweep.set_key(config, key, value)
  config.only = spec["label"]
  config.progress = False
  grid = {k: list(v) for k, v in spec["grid"].items()} if spec.get("grid") else None
  outcome = jobs.run_jobs(f"campaign_{table}", [jobs.Job(config, tuple(spec["seeds"]),
                                                        grid)], workers=1, log=log)
  records = outcome.results[0].records
  return {"config_name": config.name, "rounds": int(config.rounds),
          "records": [jobs.encode_record(r) for r in records]}


def run_bench(name, spec, data_dir) -> dict:
  from fedfrac_lab.bench import accelerator
  args = plan_lib.resolve(spec, data_dir)
  result = accelerator.MEASUREMENTS[name](**args)
  return {"result": result,
          "command": f"fedfrac-campaign run, measurement {name} "
                     f"{json.dumps(spec, sort_keys=True)}"}


def _campaign_entry(item, t0, code, partial=False) -> dict:
  label = device_label()
  entry = {"item": item["id"], "stage": item["stage"], "kind": item["kind"],
           "table": item["table"], "spec": item["spec"], "label": item["label"],
           "timing_key": item["timing_key"], "device": label, "slug": device_slug(label),
           "seconds": time.perf_counter() - t0, "code": code,
           "date": time.strftime("%Y-%m-%dT%H:%M")}
  return dict(entry, partial=True) if partial else entry


def item_stats(payload) -> dict:
  """What the window's timing table shows of a finished item: runs, compiled
  programs, compile seconds, product FLOPs (a FIRMA column; {} for others)."""
  timing = payload.get("column", {}).get("timing", {})
  programs = [p for p in timing.get("programs", []) if "runs" in p]
  if not programs:
    return {}
  return {"runs": sum(p["runs"] for p in programs), "programs": len(programs),
          "compile_s": float(timing.get("compile_s", 0.0)),
          "run_s": float(sum(p["run_s"] for p in programs)),
          "flops": float(timing.get("flops", 0.0))}


def run_item(item: dict, data_dir: str, staging: str, code: str, log,
             context=None) -> str:
  """Run ``item`` (a dict of :class:`fedfrac_lab.campaign.plan.Item` fields plus
  ``id``, ``label``, ``timing_key`` and, for a FIRMA column, ``skip`` and
  ``resume``); write its item file under ``staging`` and return the path.
  ``context``: ``root`` (the checkout), ``memory_bytes``, ``step_time``,
  ``cache_dir``, ``before_compile`` / ``after_compile`` (a column's compilation
  hooks), ``compile_only``, ``progress(path)`` (called after a column's partial
  item file is written)."""
  t0 = time.perf_counter()
  context = dict(context or {})
  path = item_path(staging, item)
  if item["kind"] == "firma" and "scenarios" in item["spec"]:
    report = context.get("progress")

    def partial(payload):
      item_files.write_item(path, {**payload, "campaign": _campaign_entry(item, t0, code,
                                                                     partial=True)})
      if report is not None:
        report(path)
    payload = run_firma_column(item, data_dir, log, dict(context, progress=partial))
  elif item["kind"] == "firma":
    payload = run_firma(item["spec"], data_dir, log)
  elif item["kind"] == "jobs":
    payload = run_jobs(item["table"], item["spec"], data_dir, log)
  elif item["kind"] == "bench":
    payload = run_bench(item["table"], item["spec"], data_dir)
  else:
    raise ValueError(f"item kind {item['kind']!r}: allowed values are firma, jobs, bench")
  payload["campaign"] = _campaign_entry(item, t0, code)
  item_files.write_item(path, payload)
  return path
