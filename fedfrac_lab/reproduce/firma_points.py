"""FIRMA's runs as ``fedfrac.sweep`` points (:mod:`fedfrac.runner.points`): one
point per (mode, scenario, method, seed), one batch per method, the work queue's
task and its cost, the point directory named after the code and the sweep.
"""
from __future__ import annotations

import os
import sys
import tempfile
import warnings

import jax

from fedfrac_lab.reproduce import common
from fedfrac.runner import points as points_lib

from fedfrac_lab.reproduce.firma_groups import run_method
from fedfrac_lab.reproduce.firma_program import (build_feds, common_shapes, config_module,
                                             load_digits_config)


def log_stderr(msg):
  print(msg, file=sys.stderr, flush=True)


def method_task(task):
  """One method in the given modes, scenarios and seeds, in one process (so a
  program that does not depend on the mode is compiled once and found in the
  compilation cache for the second mode). Returns ``(method, {mode: (results,
  timing)})`` as :func:`run_method` gives them. ``files``: the data
  (:func:`~fedfrac_lab.reproduce.firma_program.config_module`; None: digits)."""
  method, modes, scenarios, seeds, batch_runs, cache_dir, *rest = task
  files = rest[0] if rest else None
  widths = rest[1] if len(rest) > 1 else None
  if cache_dir:
    enable_compile_cache(cache_dir)
  cfg_module = config_module(files)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    all_feds = common_shapes({mode: build_feds(cfg_module, mode, scenarios, seeds)
                              for mode in modes}, widths)
  out = {}
  for mode in modes:
    out[mode] = run_method(all_feds[mode], mode, method, scenarios, seeds, log_stderr,
                           batch_runs)
  return method, out


def point_key(mode, scenario, method, seed, files=None):
  """What defines one FIRMA point (one run); its id is the digest of this. A
  run on local files (``files``, :func:`~fedfrac_lab.reproduce.firma_program.config_module`)
  is another point than the digits run of the same cell."""
  key = {"reproduce": "firma", "mode": mode, "scenario": scenario, "method": method,
         "seed": int(seed)}
  if files is not None:
    key["files"] = dict(files)
  return key


def sweep_batch(spec):
  """``fedfrac.sweep`` executor: every point of one method (all its modes,
  scenarios and seeds, run as :func:`method_task` runs them); yields ``(point
  id, record)``, the record holding the run's summary, its number of clients
  and the (method, mode) timing."""
  files = spec.get("files")
  method, out = method_task((spec["method"], spec["modes"], spec["scenarios"],
                             spec["seeds"], spec["batch_runs"], spec["cache_dir"], files,
                             spec.get("widths")))
  for mode, (results, timing) in out.items():
    for (scen, _), result in results.items():
      for seed, run_summary in zip(spec["seeds"], result["runs"]):
        yield (points_lib.point_id(point_key(mode, scen, method, seed, files)),
               {"mode": mode, "scenario": scen, "method": method, "seed": int(seed),
                "run": run_summary, "num_clients": result["num_clients"],
                "timing": timing})


def code_digest():
  """Hash of the code that produces the numbers (fedfrac/, which holds this
  module, and configs/firma/)."""
  import hashlib
  h = hashlib.sha256()
  for folder in (common.PACKAGE_DIR, os.path.dirname(load_digits_config().__file__)):
    for dirpath, _, files in sorted(os.walk(folder)):
      for name in sorted(files):
        if name.endswith(".py"):
          with open(os.path.join(dirpath, name), "rb") as f:
            h.update(f.read())
  return h.hexdigest()[:16]


def sweep_fingerprint(batch_runs, modes, scenarios, seeds, files=None):
  """What every point depends on besides its own key: the code, the data and the
  batch layout (which runs share a vmapped batch follows from the scenarios and
  seeds)."""
  out = {"reproduce": "firma", "code": code_digest(), "batch_runs": batch_runs,
         "modes": list(modes), "scenarios": list(scenarios), "seeds": list(seeds)}
  if files is not None:
    out["files"] = dict(files)
  return out


def parts_directory(batch_runs, modes, scenarios, seeds, files=None):
  """Where ``--resume`` keeps finished points: keyed by the fingerprint."""
  return os.path.join(tempfile.gettempdir(), "firma_tables_parts",
                      points_lib.digest(sweep_fingerprint(batch_runs, modes, scenarios,
                                                          seeds, files)))


def enable_compile_cache(cache_dir):
  jax.config.update("jax_compilation_cache_dir", cache_dir)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


# Relative cost, to start the longest tasks first.
TASK_COST = {"fibfl_pp": 6, "fibfl_plus": 5, "fibfl": 5, "rdfl": 2, "fedavg": 2,
              "fedrep": 1}
