"""How each kind of campaign item runs (in the worker process) and what file it
leaves: ``items/<table>/<id>.json`` for points, ``measurements/<name>.json``
for a stage-a measurement, each a checksummed item file
(:func:`fedfrac.campaign.files.write_item`).

* ``firma``: one (mode, scenario, method) cell of FIRMA on the real data with
  its seeds vmapped, through ``fedfrac-reproduce firma_files``
  (:func:`fedfrac.reproduce.firma_files.run_scenarios`); the file is that
  command's ``--json`` (so its ``--table`` reads it) plus the ``campaign`` entry.
* ``jobs``: one method label of a config file over its seeds (and grid values)
  through the point runner (:func:`fedfrac.reproduce.jobs.run_jobs`); the file
  holds every run's whole record (:func:`fedfrac.reproduce.jobs.encode_record`).
* ``bench``: one of :data:`fedfrac.bench.accelerator.MEASUREMENTS`.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time

from fedfrac.campaign import files, plan as plan_lib


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


def firma_compile_cache() -> str:
  """The window's compilation cache for FIRMA items: made on first use, and JAX's
  once-per-process check of whether a cache is in use reset, since stage a has
  already compiled without one."""
  if "dir" not in _CACHE:
    from jax.experimental.compilation_cache import compilation_cache
    _CACHE["dir"] = tempfile.mkdtemp(prefix="campaign_xla_cache_")
    compilation_cache.reset_cache()
  return _CACHE["dir"]


def run_firma(spec, data_dir, log) -> dict:
  from fedfrac.reproduce import firma_files
  with tempfile.TemporaryDirectory(prefix="campaign_firma_") as tmp:
    out = os.path.join(tmp, "cell.json")
    args = argparse.Namespace(
        dataset=spec["dataset"], dir=plan_lib.resolve(spec["data"], data_dir),
        modes=spec["mode"], scenarios=spec["scenario"], methods=spec["method"],
        seeds=spec["seeds"], rounds=spec["rounds"], parallelism="vmap", workers=1,
        step_buckets=1, inputs=spec["inputs"], note="", json=out, table="", out="",
        published=firma_files.PUBLISHED)
    key = (args.dataset, args.dir, args.modes, args.inputs, args.seeds, args.rounds)
    if key not in _WIDTHS:
      _WIDTHS[key] = firma_files.dataset_widths(args)
    firma_files.run_scenarios(args, log=log, cache_dir=firma_compile_cache(),
                              widths=_WIDTHS[key])
    with open(out) as f:
      return json.load(f)


def run_jobs(table, spec, data_dir, log) -> dict:
  from fedfrac import sweep
  from fedfrac.reproduce import common, jobs
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
  from fedfrac.bench import accelerator
  args = plan_lib.resolve(spec, data_dir)
  result = accelerator.MEASUREMENTS[name](**args)
  return {"result": result,
          "command": f"fedfrac-campaign run, measurement {name} "
                     f"{json.dumps(spec, sort_keys=True)}"}


def run_item(item: dict, data_dir: str, staging: str, code: str, log) -> str:
  """Run ``item`` (a dict of :class:`fedfrac.campaign.plan.Item` fields plus
  ``id``, ``label`` and ``timing_key``); write its item file under ``staging``
  and return the path."""
  t0 = time.perf_counter()
  if item["kind"] == "firma":
    payload = run_firma(item["spec"], data_dir, log)
  elif item["kind"] == "jobs":
    payload = run_jobs(item["table"], item["spec"], data_dir, log)
  elif item["kind"] == "bench":
    payload = run_bench(item["table"], item["spec"], data_dir)
  else:
    raise ValueError(f"item kind {item['kind']!r}: allowed values are firma, jobs, bench")
  label = device_label()
  payload["campaign"] = {
      "item": item["id"], "stage": item["stage"], "kind": item["kind"],
      "table": item["table"], "spec": item["spec"], "label": item["label"],
      "timing_key": item["timing_key"], "device": label, "slug": device_slug(label),
      "seconds": time.perf_counter() - t0, "code": code,
      "date": time.strftime("%Y-%m-%dT%H:%M")}
  path = item_path(staging, item)
  files.write_item(path, payload)
  return path
