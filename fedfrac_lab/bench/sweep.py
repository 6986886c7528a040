"""Sweep throughput: points per hour with ``fedfrac.sweep`` against one process
per point (``python -m fedfrac.main`` per point), the same sweep in the same run.

  fedfrac-bench sweep                                # the default small sweep
  fedfrac-bench sweep --sweep=client.lr=0.05,0.1,0.2 --seeds=0,1,2,3,4 --rounds=20
  python -m fedfrac_lab.bench sweep --help               # the same

Both sides run every point of ``--config`` (with ``--set`` overrides) ×
``--sweep`` axes × ``--seeds`` from a cold start in fresh processes, so the
figures include Python and JAX start-up and compilation, as a user's sweep
does:

- runner: one ``python -m fedfrac.sweep`` command (its worker processes, one
  per device or CPU core unless ``--workers``, vmapped batches of seeds);
- per point: one ``python -m fedfrac.main --config=... --config.seeds=(s,)``
  process per point, ``--parallel`` of them at a time (default: as many as the
  runner has workers, so both sides may fill the machine).

The final accuracy of every point is compared between the two sides (same
seeds, same programs up to batching: the largest difference is reported).
Writes ``--json`` and replaces the "Sweep throughput" section of ``--out``
(``benchmarks/results.md``; ``fedfrac-bench`` keeps that section when it
rewrites the file) and prints a short table.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import itertools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from fedfrac_lab.reproduce.item_files import unique_tmp

START = "<!-- sweep-throughput:start -->"
END = "<!-- sweep-throughput:end -->"

DEFAULT_SETS = ("only=fedavg", "data.num_clients=10", "model.hidden=(32,)")
DEFAULT_AXES = ("client.lr=0.05,0.2", "client.local_epochs=1,2")


def _literal(text):
  import ast
  try:
    return ast.literal_eval(text)
  except (ValueError, SyntaxError):
    return text


def parse_axis(text):
  """``KEY=V1,V2`` (``;`` between values that hold commas) -> (key, [values])."""
  if "=" not in text:
    raise SystemExit(f"--sweep={text!r}: expected KEY=V1,V2")
  key, raw = text.split("=", 1)
  parts = raw.split(";") if ";" in raw else raw.split(",")
  values = [_literal(p.strip()) for p in parts if p.strip()]
  if not key.strip() or not values:
    raise SystemExit(f"--sweep={text!r}: expected KEY=V1,V2")
  return key.strip(), values


def per_point_commands(python, config, sets, axes, seeds, workroot):
  """``[(point, seed, argv, workdir)]``: one ``fedfrac.main`` command per point."""
  out = []
  for i, combo in enumerate(itertools.product(*[v for _, v in axes])):
    point = dict(zip([k for k, _ in axes], combo))
    for seed in seeds:
      workdir = os.path.join(workroot, f"p{i}_s{seed}")
      argv = [python, "-m", "fedfrac.main", f"--config={config}",
              "--config.progress=False", "--config.checkpoint_every=0",
              f"--config.seeds=({seed},)", f"--workdir={workdir}"]
      argv += [f"--config.{s}" for s in sets]
      argv += [f"--config.{k}={v!r}" for k, v in point.items()]
      out.append((point, seed, argv, workdir))
  return out


def run_parallel(commands, parallel, env):
  """Run ``commands`` (argv lists), ``parallel`` at a time; wall seconds."""
  t0 = time.perf_counter()
  pending, running = list(commands), []
  while pending or running:
    while pending and len(running) < parallel:
      argv = pending.pop(0)
      running.append((argv, subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                                             stderr=subprocess.PIPE, text=True)))
    for item in list(running):
      argv, proc = item
      if proc.poll() is not None:
        err = proc.stderr.read()
        if proc.returncode != 0:
          raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}):\n"
                             f"{err[-2000:]}")
        running.remove(item)
    time.sleep(0.05)
  return time.perf_counter() - t0


def final_value(workdir, metric):
  """Last row's ``metric`` in ``workdir/metrics.csv`` (one method, one seed)."""
  with open(os.path.join(workdir, "metrics.csv")) as f:
    rows = list(csv.DictReader(f))
  return float(rows[-1][metric])


def device_description(python, env):
  """Platform and device kinds, from a separate process (this one keeps JAX
  uninitialised, so on a GPU it does not hold memory the workers need)."""
  code = ("import jax; print(jax.__version__, jax.default_backend(), "
          "', '.join(sorted({d.device_kind for d in jax.devices()})), len(jax.devices()))")
  out = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300).stdout.split()
  return {"jax": out[0], "backend": out[1], "devices": " ".join(out[2:-1]),
          "device_count": int(out[-1])} if len(out) >= 4 else {}


def write_section(path, text):
  """Replace (or append) the marked sweep section of ``path``."""
  old = open(path).read() if os.path.exists(path) else "# fedfrac benchmarks\n"
  block = f"{START}\n{text.rstrip()}\n{END}\n"
  if START in old and END in old:
    new = old[:old.index(START)] + block + old[old.index(END) + len(END):].lstrip("\n")
  else:
    new = old.rstrip("\n") + "\n\n" + block
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  tmp = unique_tmp(path)
  with open(tmp, "w") as f:
    f.write(new)
  os.replace(tmp, path)


def section_text(r):
  """The markdown section of one measurement ``r``."""
  m = r["machine"]
  lines = [
      "## Sweep throughput: fedfrac.sweep vs one process per point", "",
      f"Command: `{r['command']}`", "",
      f"Machine: {m['cpu']}, {m['cores']} cores, {m.get('backend', '?')} "
      f"({m.get('devices', '?')}), jax {m.get('jax', '?')}, {m['date']}. Load average "
      f"(1/5/15 min) at start {r['load'][0]}, at end {r['load'][1]} (other jobs share "
      "the machine).", "",
      f"Sweep: `{r['config']}` with {', '.join(r['sets']) or 'no overrides'}; axes "
      f"{', '.join(r['axes'])}; seeds {r['seeds']}; {r['points']} points. Both sides "
      "start cold (fresh processes: start-up and compilation included) and run "
      "every point; the runner vmaps each config point's seeds into one batch "
      f"(batch size {r['batch_size'] or 'from the bytes model'}).", "",
      "| how | processes at a time | wall s | points/hour |", "|---|---|---|---|",
      f"| `fedfrac.sweep` | {r['runner']['workers']} workers | "
      f"{r['runner']['wall_s']:.1f} | {r['runner']['points_per_hour']:.0f} |"]
  if r.get("per_point"):
    p = r["per_point"]
    lines.append(f"| `fedfrac.main` per point | {p['parallel']} | {p['wall_s']:.1f} | "
                 f"{p['points_per_hour']:.0f} |")
    lines += ["", f"Runner / per point: **{r['speedup']:.2f}×** the points per hour. "
              f"Largest difference of a point's final {r['metric']} between the two: "
              f"{r['max_abs_diff']:.2e}."]
  return "\n".join(lines) + "\n"


def main(argv=None):
  p = argparse.ArgumentParser(prog="fedfrac-bench sweep", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--config", default=os.path.join("configs", "quickstart.py"))
  p.add_argument("--set", action="append", default=None, dest="sets",
                 help=f"KEY=VALUE override (repeatable; default {' '.join(DEFAULT_SETS)})")
  p.add_argument("--sweep", action="append", default=None, dest="axes",
                 help=f"KEY=V1,V2 axis (repeatable; default {' '.join(DEFAULT_AXES)})")
  p.add_argument("--seeds", default="0,1,2")
  p.add_argument("--rounds", type=int, default=5)
  p.add_argument("--metric", default="accuracy")
  p.add_argument("--workers", type=int, default=None,
                 help="runner workers (default: one per device or CPU core)")
  p.add_argument("--batch_size", type=int, default=0, help="runner --batch_size")
  p.add_argument("--parallel", type=int, default=None,
                 help="per-point processes at a time (default: the runner's workers)")
  p.add_argument("--skip_per_point", action="store_true")
  p.add_argument("--out", default=os.path.join("benchmarks", "results.md"))
  p.add_argument("--json", default=os.path.join("benchmarks", "sweep.json"))
  argv = sys.argv[1:] if argv is None else list(argv)
  args = p.parse_args(argv)
  sets = list(args.sets if args.sets is not None else DEFAULT_SETS) + [
      f"rounds={args.rounds}"]
  axes_text = list(args.axes if args.axes is not None else DEFAULT_AXES)
  axes = [parse_axis(a) for a in axes_text]
  seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
  if not seeds:
    raise SystemExit(f"--seeds={args.seeds!r}: no seeds")
  config = os.path.abspath(args.config)
  if not os.path.isfile(config):
    raise SystemExit(f"--config={args.config!r}: no such file")
  python = sys.executable
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      [root] + [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x]))
  from fedfrac.runner import local_devices
  workers = args.workers or len(local_devices.local_workers())
  parallel = args.parallel or workers
  n_points = len(seeds) * len(list(itertools.product(*[v for _, v in axes])))

  load_start = os.getloadavg()
  machine = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
             "date": datetime.datetime.now().isoformat(timespec="minutes")}
  try:
    with open("/proc/cpuinfo") as f:
      machine["cpu"] = next(l.split(":", 1)[1].strip() for l in f
                            if l.startswith("model name"))
  except (OSError, StopIteration):
    pass
  machine.update(device_description(python, env))
  work = tempfile.mkdtemp(prefix="fedfrac_bench_sweep_")

  sweep_argv = [python, "-m", "fedfrac.sweep", f"--config={config}",
                *[f"--set={s}" for s in sets], *[f"--sweep={a}" for a in axes_text],
                f"--seeds={','.join(map(str, seeds))}", f"--workers={workers}",
                f"--batch_size={args.batch_size}", "--no_progress",
                f"--metrics={args.metric}", f"--out={os.path.join(work, 'sweep.md')}"]
  print(f"runner: {n_points} points, {workers} workers ...", flush=True)
  runner_s = run_parallel([sweep_argv], 1, env)
  with open(os.path.join(work, "sweep.points", "sweep.json")) as f:
    json.load(f)
  runner_values = {}
  points_dir = os.path.join(work, "sweep.points", "points")
  for name in os.listdir(points_dir):
    with open(os.path.join(points_dir, name)) as f:
      rec = json.load(f)["record"]
    key = (json.dumps(rec["axes"], sort_keys=True), rec["seed"])
    runner_values[key] = rec["metrics"][args.metric]
  result = {"command": ("fedfrac-bench sweep " + " ".join(argv)).strip(),
            "machine": machine, "config": os.path.relpath(config, root), "sets": sets,
            "axes": axes_text, "seeds": seeds, "points": n_points, "metric": args.metric,
            "batch_size": args.batch_size,
            "runner": {"workers": workers, "wall_s": runner_s,
                       "points_per_hour": 3600 * n_points / runner_s}}
  rows = [("fedfrac.sweep", f"{workers} workers", runner_s)]
  if not args.skip_per_point:
    commands = per_point_commands(python, config, sets, axes, seeds,
                                  os.path.join(work, "per_point"))
    print(f"per point: {len(commands)} processes, {parallel} at a time ...", flush=True)
    per_s = run_parallel([c[2] for c in commands], parallel, env)
    diffs = [abs(final_value(wd, args.metric)
                 - runner_values[(json.dumps(point, sort_keys=True), seed)])
             for point, seed, _, wd in commands]
    result["per_point"] = {"parallel": parallel, "wall_s": per_s,
                           "points_per_hour": 3600 * n_points / per_s}
    result["speedup"] = per_s / runner_s
    result["max_abs_diff"] = max(diffs)
    rows.append(("fedfrac.main per point", f"{parallel} at a time", per_s))
  result["load"] = [", ".join(f"{x:.2f}" for x in l) for l in (load_start,
                                                              os.getloadavg())]
  if args.json:
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
      json.dump(result, f, indent=1)
  if args.out:
    write_section(args.out, section_text(result))
  print(f"\n{n_points} points on {machine.get('backend', '?')} "
        f"({machine.get('devices', '?')}); load {result['load'][0]} -> {result['load'][1]}")
  print(f"{'how':24s} {'processes':>14s} {'wall s':>8s} {'points/h':>9s}")
  for how, procs, wall in rows:
    print(f"{how:24s} {procs:>14s} {wall:8.1f} {3600 * n_points / wall:9.0f}")
  if "speedup" in result:
    print(f"speed-up {result['speedup']:.2f}x; max |Δ {args.metric}| "
          f"{result['max_abs_diff']:.2e}")
  return result


if __name__ == "__main__":
  main()
