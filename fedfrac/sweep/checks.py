"""``fedfrac-sweep``'s input checks: everything its flags name is checked before
any point runs, and a fault is one line (``error: ...``, exit status 2), as
``fedfrac-run`` reports bad input.

* :func:`parse_seeds`: ``--seeds`` are distinct integers >= 0;
* :func:`parse_shard`: ``--shard`` is ``I/N`` with ``0 <= I < N``, or ``auto`` in a
  SLURM job array; :func:`check_sharding`: a sharded sweep names its shared point
  directory and does not ``--overwrite`` it;
* :func:`check_output`: ``--out`` / ``--dir`` can be written (no file in the way);
* :func:`check_axes`: no key is both ``--set`` twice, swept twice, or set and swept;
* :func:`set_key`: ``--set`` / ``--sweep`` keys exist (or are method options the
  schema accepts; "did you mean" otherwise) and their values have the field's type;
* :func:`check_grid`: the ``--grid`` option belongs to a method and every value is
  a number the option accepts;
* :func:`check_metrics`: every ``--metrics`` name is a column some method of the
  sweep writes (:func:`metric_names`, found from shapes, without running a round).

More checks (every point's data, flags given twice or for a mode not in use)
are in :mod:`fedfrac.sweep.inputs`.
"""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

from fedfrac import _validation, config_base
from fedfrac import config_keys
from fedfrac._validation import ConfigError


class UsageError(ValueError):
  """A ``fedfrac-sweep`` flag is malformed or names something that does not exist."""


# Columns of every metrics.csv row (fedfrac.runner.log.RunLog), whatever the method.
ROW_COLUMNS = ("method", "algorithm", "seed", "round", "bytes_up", "bytes_down",
               "cum_bytes_up", "cum_bytes_down")


def parse_seeds(text: str) -> list:
  """``--seeds=0,1,2`` -> [0, 1, 2]: distinct integers >= 0."""
  seeds = []
  for part in text.split(","):
    part = part.strip()
    if not part:
      continue
    try:
      seed = int(part)
    except ValueError:
      seed = None
    if seed is None or seed < 0:
      raise UsageError(f"--seeds={text}: {part!r} is not a seed; seeds are integers "
                       f">= 0, comma-separated (e.g. --seeds=0,1,2)")
    if seed >= 2**63:
      raise UsageError(f"--seeds={text}: seed {seed} is too large; seeds are integers "
                       f"in 0..{2**63 - 1} (2**63 - 1)")
    if seed in seeds:
      raise UsageError(f"--seeds={text}: seed {seed} is listed twice; each seed is one "
                       f"independent run")
    seeds.append(seed)
  if not seeds:
    raise UsageError(f"--seeds={text!r}: no seeds; give integers >= 0, e.g. --seeds=0,1,2")
  return seeds


SHARD_FORM = "give I/N with 0 <= I < N (shard I of N, e.g. --shard=0/4)"
SHARD_HELP = SHARD_FORM + ", or auto in a SLURM job array"


def parse_shard(text: str, environ=None) -> tuple:
  """``--shard=I/N`` -> ``(I, N)``; ``--shard=auto``: from a SLURM job array,
  ``I = (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP``
  (the minimum and step default to 0 and 1) and ``N = SLURM_ARRAY_TASK_COUNT``."""
  environ = os.environ if environ is None else environ
  if text.strip() == "auto":
    names = ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT")
    missing = [n for n in names if not environ.get(n)]
    if missing:
      raise UsageError(f"--shard=auto: {' and '.join(missing)} not set (not a SLURM job "
                       f"array task); {SHARD_FORM}")
    values = {}
    for name, default in (*((n, None) for n in names), ("SLURM_ARRAY_TASK_MIN", "0"),
                          ("SLURM_ARRAY_TASK_STEP", "1")):
      raw = environ.get(name) or default
      try:
        values[name] = int(raw)
      except ValueError:
        raise UsageError(f"--shard=auto: {name}={raw!r} is not an integer") from None
    offset = values["SLURM_ARRAY_TASK_ID"] - values["SLURM_ARRAY_TASK_MIN"]
    step = max(values["SLURM_ARRAY_TASK_STEP"], 1)
    index, count = offset // step, values["SLURM_ARRAY_TASK_COUNT"]
    if offset % step or not 0 <= index < count:
      raise UsageError(f"--shard=auto: task {values['SLURM_ARRAY_TASK_ID']} of an array "
                       f"of {count} is not one of 0..{count - 1} after its minimum and "
                       f"step (an irregular --array list?); {SHARD_FORM}")
    return index, count
  parts = text.split("/")
  try:
    index, count = (int(p) for p in parts) if len(parts) == 2 else (None, None)
  except ValueError:
    index = count = None
  if index is None or count is None:
    raise UsageError(f"--shard={text}: not I/N or auto; {SHARD_HELP}")
  if count < 1 or not 0 <= index < count:
    raise UsageError(f"--shard={text}: shard {index} of {count} does not exist; "
                     f"{SHARD_HELP}")
  return index, count


def check_sharding(args) -> None:
  """A sharded sweep (``--shard``) or its table (``--table``) reads and writes a
  point directory every shard shares, so it needs ``--dir`` or ``--out``; shards
  never ``--overwrite`` it (one would delete the others' points)."""
  flag = f"--shard={args.shard}" if args.shard else "--table"
  if not (args.dir or args.out):
    raise UsageError(f"{flag}: needs --dir=DIR or --out=FILE.md (points in FILE.points/): "
                     f"the point directory every shard shares")
  if args.shard and args.overwrite:
    raise UsageError(f"{flag} with --overwrite: a shard would delete the points other "
                     f"shards wrote; clear the directory once, before the shards start")
  if args.claim_timeout <= 0:
    raise UsageError(f"--claim_timeout={args.claim_timeout}: need seconds > 0")


def check_output(flag: str, path: str, directory: bool = False) -> None:
  """Refuse an output path that cannot be written: a file (or, for a file, a
  directory) already in the way, a parent that is a file, or no write permission."""
  if not path:
    raise UsageError(f"{flag}=: empty path")
  target = os.path.abspath(path)
  if directory and os.path.exists(target) and not os.path.isdir(target):
    raise UsageError(f"{flag}={path}: is a file; give a directory")
  if not directory and os.path.isdir(target):
    raise UsageError(f"{flag}={path}: is a directory; give a file name (e.g. table.md)")
  parent = target if directory else os.path.dirname(target)
  existing = parent
  while not os.path.exists(existing):
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing):
    raise UsageError(f"{flag}={path}: {existing} is a file, so nothing can be written "
                     f"under it")
  if not os.access(existing, os.W_OK | os.X_OK):
    raise UsageError(f"{flag}={path}: cannot write there ({existing} is not writable)")
  if directory and existing != target:
    _check_creatable(flag, path, target, existing)


def _check_creatable(flag: str, path: str, target: str, existing: str) -> None:
  """Create the folders from ``existing`` down to ``target`` and remove them
  again: a folder that cannot be made (a read-only or virtual file system, where
  permissions alone do not tell) is refused before compute."""
  try:
    os.makedirs(target)
  except OSError as e:
    raise UsageError(f"{flag}={path}: cannot be created ({e.strerror or e})") from None
  folder = target
  while folder != existing:
    try:
      os.rmdir(folder)
    except OSError:
      break
    folder = os.path.dirname(folder)


def check_point_directory(flag: str, directory: str) -> None:
  """Refuse a point directory whose layout is in the way, before compute: its
  ``points`` or ``claims`` a file, or a folder where a point file goes (they
  failed only when the sweep wrote there, with a traceback)."""
  from fedfrac.runner.claims import CLAIMS
  from fedfrac.runner.points import POINTS
  for name in (POINTS, CLAIMS):
    inner = os.path.join(directory, name)
    if os.path.exists(inner) and not os.path.isdir(inner):
      raise UsageError(f"{flag}: {inner} is a file where the sweep keeps its {name} "
                       f"folder; move it away")
  points = os.path.join(directory, POINTS)
  if os.path.isdir(points):
    in_way = sorted(n for n in os.listdir(points)
                    if n.endswith(".json") and os.path.isdir(os.path.join(points, n)))
    if in_way:
      more = f" (and {len(in_way) - 1} more)" if len(in_way) > 1 else ""
      raise UsageError(f"{flag}: {os.path.join(points, in_way[0])} is a folder where a "
                       f"point file goes{more}; move it away")


def check_axes(sets, axes) -> None:
  """``sets``: [(key, value)] of ``--set``; ``axes``: [(key, values)] of ``--sweep``.
  A key given twice would silently keep only one of its values."""
  seen = {}
  for key, value in sets:
    if key in seen:
      raise UsageError(f"--set={key}={value!r}: {key} is already set by "
                       f"--set={key}={seen[key]!r}; give it once")
    seen[key] = value
  swept = {}
  for key, values in axes:
    if key in swept:
      raise UsageError(f"--sweep={key}={','.join(map(repr, values))}: {key} is already "
                       f"an axis (--sweep={key}={','.join(map(repr, swept[key]))}); "
                       f"give all its values in one --sweep")
    if key in seen:
      raise UsageError(f"--sweep={key}=...: {key} is also fixed by --set={key}="
                       f"{seen[key]!r}; drop one of them")
    swept[key] = values


def set_key(config, dotted, value, flag="--set") -> None:
  """Set ``config.<dotted>`` to ``value``, the key and the value's type checked
  as ``--config.<key>=<value>`` is (:func:`fedfrac.config_keys.set_key`)."""
  config_keys.set_key(config, dotted, value, where=f"{flag}={dotted}={value!r}")


def _has(config, parts) -> bool:
  node = config
  for p in parts:
    if not hasattr(node, "keys") or p not in node:
      return False
    node = node[p]
  return True


def check_grid(config, grid, grid_methods) -> None:
  """``--grid OPTION=V1,V2``: one option, of at least one method (of those named
  by ``--grid_methods``), every value a number that each such method accepts."""
  from fedfrac import algorithms
  from fedfrac.runner.validate import validate_methods
  if not grid:
    if grid_methods:
      raise UsageError("--grid_methods needs --grid")
    return
  (option, values), = grid.items()
  text = f"--grid={option}={','.join(map(str, values))}"
  labels = config_base.method_labels(config)
  for label in grid_methods:
    if label not in labels:
      raise UsageError(f"--grid_methods: unknown method label {label!r}; "
                       f"{config_keys.did_you_mean(label, labels)}labels are "
                       f"{', '.join(labels)}")
  from fedfrac.runner.factories import CLIENT_LR   # every method's client lr
  options = {l: {**algorithms.hparams(config.methods[l].name,
                                      config_base.method_options(config.methods[l])),
                 CLIENT_LR: None} for l in labels}
  targets = list(grid_methods) or [l for l in labels if option in options[l]]
  if not targets:
    every = sorted({o for opts in options.values() for o in opts})
    raise UsageError(f"{text}: no method of the sweep ({', '.join(labels)}) has option "
                     f"{option!r}; {config_keys.did_you_mean(option, every)}their options "
                     f"are {', '.join(every)}")
  for label in targets:
    if option not in options[label]:
      raise UsageError(f"{text}: method {label!r} ({config.methods[label].name}) has no "
                       f"option {option!r}")
  for value in values:
    if not _validation.is_num(value):
      raise UsageError(f"{text}: {value!r} is not a number (finite in float32); grid "
                       f"values run as one compiled program, so they are numbers")
    for label in targets:
      trial = config.copy_and_resolve_references()
      trial.only = label
      if option == CLIENT_LR:
        set_key(trial, f"methods.{label}.client.lr", float(value), "--grid")
      else:
        with trial.unlocked():
          trial.methods[label][option] = value
      try:
        validate_methods(trial)
      except ConfigError as e:
        raise UsageError(f"{text}: {e}") from None


# ---------------------------------------------------------------- metrics


def metric_names(config, label, data_cache=None) -> tuple:
  """``(final, per_round)``: the columns of method ``label``'s final metrics.csv
  row and of its rounds.csv rows, from the shapes of one round and one
  evaluation (``jax.eval_shape``: nothing is compiled or run). Builds the data
  (kept in ``data_cache`` by data config and seed)."""
  import functools

  import jax

  from fedfrac import data as data_lib
  from fedfrac.runner import factories
  single = config.copy_and_resolve_references()
  single.only = label
  seeds = single.seeds if isinstance(single.seeds, (tuple, list)) else (single.seeds,)
  data_seed = single.data.seed if single.data.seed >= 0 else int(seeds[0])
  data_cache = {} if data_cache is None else data_cache
  key = (single.data.to_json_best_effort(sort_keys=True), data_seed)
  if key not in data_cache:
    data_cache[key] = data_lib.build(single.data, data_seed)
  sim = factories.build_simulation(single, label, data_cache[key])
  state = jax.eval_shape(sim.init, 0)
  chunk = functools.partial(sim._run_chunk, hp=None, num_rounds=1)
  _, round_metrics = jax.eval_shape(chunk, sim.arrays, state)
  evaluation = jax.eval_shape(sim._evaluate, sim.arrays, state)
  per_round = set(ROW_COLUMNS) | {k for k in round_metrics if not k.startswith("clients/")}
  host = sim.algorithm.host_metrics
  if host is not None:
    per_round |= set(host(1))
  final = per_round | {k for k in evaluation if not k.startswith("clients/")} | {"wall_s"}
  return sorted(final), sorted(per_round)


def _covers(names, final, per_round) -> bool:
  return all(n[5:] in per_round if n.startswith("mean:") else n in final for n in names)


def _find_names(jobs, wanted) -> tuple:
  """Union of :func:`metric_names` over ``jobs``, stopping once ``wanted`` are all
  found (most sweeps: at the first method)."""
  final, per_round, cache = set(), set(), {}
  for config, label in jobs:
    f, r = metric_names(config, label, cache)
    final |= set(f)
    per_round |= set(r)
    if _covers(wanted, final, per_round):
      break
  return sorted(final), sorted(per_round)


def _metric_names_child():
  """Entry point of the subprocess of :func:`discover_metric_names`."""
  jobs, wanted = pickle.load(sys.stdin.buffer)
  try:
    print(json.dumps({"names": _find_names(jobs, wanted)}))
  except ValueError as e:   # ConfigError, DataError: bad input, reported as such
    print(json.dumps({"error": " ".join(str(e).split()), "kind": type(e).__name__}))


def discover_metric_names(jobs, wanted, in_process) -> tuple:
  """``(final, per_round)`` column names of the ``(config, label)`` jobs (until
  ``wanted`` are found): here when the sweep runs in this process anyway, else in
  a CPU-only subprocess, so this process does not start JAX on an accelerator its
  worker processes need."""
  if in_process:
    return _find_names(jobs, wanted)
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env = dict(os.environ, JAX_PLATFORMS="cpu", CUDA_VISIBLE_DEVICES="",
             PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""),
             TF_CPP_MIN_LOG_LEVEL="3")
  proc = subprocess.run(
      [sys.executable, "-c",
       "from fedfrac.sweep.checks import _metric_names_child; _metric_names_child()"],
      input=pickle.dumps((jobs, wanted)), capture_output=True, env=env, timeout=900)
  lines = proc.stdout.decode(errors="replace").strip().splitlines()
  result = json.loads(lines[-1]) if proc.returncode == 0 and lines else None
  if result is None:
    tail = " ".join(proc.stderr.decode(errors="replace").split()[-40:])
    raise RuntimeError(f"finding the metric names failed (exit {proc.returncode}): {tail}")
  if "error" in result:
    from fedfrac.data.array_checks import DataError
    error = {"ConfigError": ConfigError, "DataError": DataError,
             "DataFileError": DataError}.get(result["kind"], ValueError)
    raise error(result["error"])
  final, per_round = result["names"]
  return final, per_round


def check_metrics(configs, names, always, in_process=True) -> None:
  """Refuse a ``--metrics`` name that no method of the sweep writes.

  ``configs``: the sweep's config points (each method label is looked at in the
  first point that has it); ``always``: names every run writes (no lookup needed
  when all names are among them). ``mean:<name>`` must be a per-round column.
  """
  wanted = [n for n in names if n not in always]
  if not wanted:
    return
  jobs, seen = [], set()
  for config in configs:
    for label in config_base.method_labels(config):
      if label not in seen:
        seen.add(label)
        jobs.append((config, label))
  from fedfrac.data.array_checks import DataError
  try:
    final, per_round = map(set, discover_metric_names(jobs, wanted, in_process))
  except (ConfigError, DataError):
    raise
  except ValueError as e:   # the data or a method cannot be built from the config
    raise ConfigError(" ".join(str(e).split())) from None
  except RuntimeError as e:  # the look-up itself failed: do not block the sweep
    print(f"warning: --metrics names not checked before the run ({e})",
          file=sys.stderr)
    return
  for name in wanted:
    if name.startswith("mean:"):
      if name[5:] not in per_round:
        raise UsageError(f"--metrics: {name!r}: no method of the sweep writes a "
                         f"per-round column {name[5:]!r}; "
                         f"{config_keys.did_you_mean(name[5:], per_round)}per-round "
                         f"columns are {', '.join(sorted(per_round))}")
    elif name not in final:
      raise UsageError(f"--metrics: {name!r}: no method of the sweep writes this "
                       f"column; {config_keys.did_you_mean(name, final)}columns are "
                       f"{', '.join(sorted(final))} (mean:<column> averages a "
                       f"per-round one)")

