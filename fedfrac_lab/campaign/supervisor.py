"""``fedfrac-campaign run``: one budgeted window of the campaign.

The supervisor never touches the accelerator: it reads the plan, forks the
worker (:mod:`fedfrac_lab.campaign.worker`), learns the device from it, and sends it
what is not committed yet (stage a: measurements no accelerator's
``benchmarks/results_<device>.json`` holds, or with ``--remeasure`` not this
device's; stage b: plan items without a verified file under
``results/campaign/``, each FIRMA item without the cells that committed files
hold, :func:`fedfrac_lab.campaign.plan.coverage`) with the deadline, the estimates
and the context of stage b (the compilation cache carried from the last window,
the device's memory, its measured step-time curve). On an accelerator a second
process compiles stage b's programs ahead (:mod:`fedfrac_lab.campaign.precompile`).
The archive is repacked after every finished item and every finished program of
a FIRMA column. At the deadline (``--budget`` minus ``--reserve``, counted from
``--started-at``) it stops both processes; on SIGTERM or Ctrl-C at once.
``OUT`` gets ``campaign.tar.gz``, ``campaign.log``, ``timings.md`` and
``xla_cache.tar`` (:mod:`fedfrac_lab.campaign.carried_cache`).

Exit status: 0 when every item it started finished, 1 when some failed, 2 when
nothing could run (plan or device), 143 after SIGTERM. (Missing wheels are
caught before this module is imported: ``benchmarks/gpu/campaign.sh``.)
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import signal
import sys
import tempfile
import threading
import time

from fedfrac_lab.campaign import carried_cache, files, plan as plan_lib, processes
from fedfrac_lab.reproduce import item_files
from fedfrac_lab.campaign.window_report import (accelerator_measurements, committed,
                                            committed_measurements, peak_tflops,
                                            step_points, timings_markdown)

__all__ = ["accelerator_measurements", "committed_measurements", "main", "to_do"]


class Terminated(Exception):
  """SIGTERM or SIGINT arrived."""


class Log:
  """Timestamped lines (seconds since the window started) to a file and stderr."""

  def __init__(self, path, t0):
    self.path, self.t0 = path, t0
    self.f = open(path, "a", buffering=1)

  def __call__(self, msg):
    line = f"[{time.time() - self.t0:6.1f}s] {msg}"
    self.f.write(line + "\n")
    print(line, file=sys.stderr, flush=True)

  def raw(self, line):
    self.f.write(line)
    sys.stderr.write(line)


def parse_args(argv):
  p = argparse.ArgumentParser(prog="fedfrac-campaign run", description=__doc__.split("\n")[0])
  p.add_argument("--out", required=True, help="folder for the archive, log and timings")
  p.add_argument("--budget", type=float, default=540.0,
                 help="seconds the whole command may take (default 540)")
  p.add_argument("--reserve", type=float, default=10.0,
                 help="seconds kept at the end for packing (default 10)")
  p.add_argument("--started-at", type=float, default=0.0,
                 help="epoch seconds the command started (the shell script passes it, "
                 "so the wheel install counts against the budget)")
  p.add_argument("--plan", default=os.path.join("benchmarks", "gpu", "plan.json"))
  p.add_argument("--root", default=".", help="checkout whose results/ and benchmarks/ "
                 "hold what is already committed")
  p.add_argument("--data", default=".gpu-data", help="data folder ({data} in the plan)")
  p.add_argument("--stages", default="a,b", help="a: measurements, b: plan points")
  p.add_argument("--remeasure", action="store_true",
                 help="stage a on this accelerator even where another one has the "
                 "measurement (default: once on any accelerator, the window's time "
                 "going to the plan's points)")
  p.add_argument("--rerun-covered", action="store_true",
                 help="stage b also runs the FIRMA items whose cell a file the table "
                 "includes already holds with as many seeds and rounds (default: "
                 "skipped, e.g. cells the CPU campaign has committed)")
  p.add_argument("--cache-dir", default="",
                 help="the persistent compilation cache of stage b (default "
                 "ROOT/.gpu-cache/xla, the cache the last window carried)")
  p.add_argument("--cache-cap-mb", type=float, default=carried_cache.CAP_BYTES / 2 ** 20,
                 help="most MiB of cache entries packed into OUT/xla_cache.tar for the "
                 "next window (a window carries 64 MiB in all)")
  p.add_argument("--compile-ahead", default="auto", choices=("auto", "on", "off"),
                 help="compile stage b's FIRMA programs in a second process while the "
                 "worker runs (auto: on an accelerator)")
  args = p.parse_args(argv)
  if args.cache_cap_mb < 0:
    p.error(f"--cache-cap-mb={args.cache_cap_mb:g}: must be >= 0")
  if args.budget <= args.reserve:
    p.error(f"--budget={args.budget:g}: must exceed --reserve={args.reserve:g}")
  bad = [s for s in args.stages.split(",") if s not in ("a", "b")]
  if bad:
    p.error(f"--stages={args.stages}: {bad[0]!r} unknown; allowed: a, b")
  try:   # the archive, log and timings go there: one line when it cannot be made
    os.makedirs(args.out, exist_ok=True)
  except OSError as e:
    print(f"error: --out={args.out}: cannot make that folder ({e.strerror}); give a "
          f"folder that can be created", file=sys.stderr)
    sys.exit(2)
  return args


def to_do(plan, args, device, covered=None) -> list:
  """The items of the chosen stages not yet committed, in plan order: stage a's
  measurements, stage b's items, then the ``late`` measurements. A measurement
  one accelerator has is not repeated on another unless ``--remeasure`` (the
  GPU windows are short; the plan's points need them); a FIRMA item whose
  cells the table's files already hold with its seeds and rounds (``covered``,
  default :func:`fedfrac_lab.campaign.plan.covered_items`) is not run unless
  ``--rerun-covered``."""
  stages = args.stages.split(",")
  measurements, points = [], []
  if "a" in stages:
    have = committed_measurements(args.root, device["slug"])
    if device["slug"] != "cpu" and not getattr(args, "remeasure", False):
      have = {**accelerator_measurements(args.root), **have}
    measurements = [m for m in plan.measurements if m.table not in have]
  if "b" in stages:
    done = item_files.done_items(os.path.join(args.root, "results", "campaign"))
    if getattr(args, "rerun_covered", False):
      covered = {}
    elif covered is None:
      covered = plan_lib.covered_items(plan, args.root)
    points = [i for i in plan.items if i.id not in done and i.id not in covered]
  return ([m for m in measurements if not m.late] + points
          + [m for m in measurements if m.late])


class Window:
  """One run of the campaign: the worker, its events, the archive."""

  def __init__(self, args, log, t0):
    self.args, self.log, self.t0 = args, log, t0
    self.deadline = t0 + args.budget - args.reserve
    self.staging = tempfile.mkdtemp(prefix="fedfrac_campaign_")
    self.events: queue.Queue = queue.Queue()
    self.worker = None
    self.request = None
    self.device = None
    self.rows = []          # one per item reached: status, seconds, estimate
    self.timing_rows = []   # measured seconds of finished items
    self.plan_digest = None
    self.modules = None     # third-party modules the worker imported
    self.precompiler = None
    self.sync_dir = tempfile.mkdtemp(prefix="fedfrac_compile_sync_")
    self.cache_dir = args.cache_dir or carried_cache.directory(args.root)
    self.peak = None        # the device's float32 peak, TFLOP/s
    self.todo_ids = []      # stage b's items in plan order
    self.finished = set()

  # ------------------------------------------------------------ worker
  def start_worker(self):
    """Fork the worker (:func:`fedfrac_lab.campaign.worker.serve`): the package is
    already imported here, and nothing here has touched the accelerator."""
    self.worker, self.request, events, errors = processes.fork_worker(self.staging,
                                                                      self.args.data)
    threading.Thread(target=self._read_events, args=(events,), daemon=True).start()
    threading.Thread(target=self._copy_stderr, args=(errors,), daemon=True).start()

  def _read_events(self, stream):
    for line in stream:
      try:
        self.events.put(json.loads(line))
      except ValueError:
        self.log(f"worker: {line.rstrip()}")
    self.events.put({"event": "exit"})

  def _copy_stderr(self, stream):
    for line in stream:
      self.log.raw("  | " + line)

  def next_event(self, until):
    while True:
      left = until - time.time()
      if left <= 0:
        return None
      try:
        return self.events.get(timeout=min(left, 1.0))
      except queue.Empty:
        continue

  def start_precompiler(self, request_line):
    """Fork the compile-ahead process; its lines go to the log marked ``~``."""
    self.precompiler, stream = processes.fork_precompiler(request_line, self.args.data)
    threading.Thread(target=lambda: [self.log.raw("  ~ " + line) for line in stream],
                     daemon=True).start()

  def stop_worker(self):
    processes.stop(self.worker, self.precompiler)

  def pack_cache(self):
    """``OUT/xla_cache.tar`` for the next window: the entries of the stage-b
    items this window compiled but did not finish first (plan order)."""
    from fedfrac_lab.campaign import precompile
    if not self.device or not os.path.isdir(self.cache_dir):
      return None
    entries = precompile.item_entries(self.sync_dir)
    first = [f for i in self.todo_ids if i not in self.finished for f in entries.get(i, [])]
    manifest = {"jax": self.device.get("jax"), "device": self.device["device"],
                "platform": self.device["platform"],
                "window": time.strftime("%Y-%m-%dT%H:%M", time.localtime(self.t0))}
    return carried_cache.pack(self.cache_dir, os.path.join(self.args.out, carried_cache.TAR),
                              manifest, first, int(self.args.cache_cap_mb * 2 ** 20))

  # ------------------------------------------------------------ archive
  def pack(self):
    out = self.args.out
    shutil.copyfile(self.log.path, os.path.join(self.staging, "campaign.log"))
    item_files.write_json_atomic(os.path.join(self.staging, "timings.json"), self.timing_rows)
    label = self.device["device"] if self.device else "an unknown device"
    md = timings_markdown(self.rows, label, self.args.budget, time.time() - self.t0,
                          self.peak)
    with open(os.path.join(self.staging, "timings.md"), "w") as f:
      f.write(md)
    shutil.copyfile(os.path.join(self.staging, "timings.md"), os.path.join(out, "timings.md"))
    manifest = {"device": self.device, "dry_run": bool(self.device and
                                                       self.device["platform"] == "cpu"),
                "budget_s": self.args.budget, "plan_digest": self.plan_digest,
                "modules": self.modules,
                "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self.t0))}
    files.pack(self.staging, os.path.join(out, files.ARCHIVE), manifest)

  def _timing_row(self, ev, item, seconds, killed=False):
    row = {"key": ev["key"], "device": self.device["device"], "seconds": seconds,
           "item": ev["item"], "label": ev["label"], "stage": item.stage,
           "date": time.strftime("%Y-%m-%d")}
    return dict(row, killed=True) if killed else row

  # ------------------------------------------------------------ the run
  def run(self) -> int:
    args, log = self.args, self.log
    plan = plan_lib.load(args.plan)
    self.plan_digest = plan.digest
    self.start_worker()
    hello = self.next_event(min(self.deadline, time.time() + 120))
    device = hello and self.next_event(min(self.deadline, time.time() + 120))
    if not device or device.get("event") != "device":
      log(f"error: the worker did not report a device ({device or hello}); see the "
          "lines above")
      return 2
    self.device = device
    log(f"device: {device['device']} ({device['platform']}; {len(device['devices'])} "
        f"device(s); jax {device['jax']}; torch {device['torch']}, cuda "
        f"{device['torch_cuda']}), checked in {device['seconds']:.1f} s")
    if device["platform"] == "cpu":
      log("DRY RUN ON THE CPU: no accelerator found; every figure of this window is a "
          "CPU figure and is labelled so")
    log(carried_cache.describe(args.root, device.get("jax"), device["device"]))
    rerun = args.rerun_covered or "b" not in args.stages.split(",")
    cov = {} if rerun else plan_lib.coverage(plan, args.root)
    covered = {} if rerun else plan_lib.covered_items(plan, args.root)
    todo = to_do(plan, args, device, covered)
    self.todo_ids = [i.id for i in todo if i.stage == "b"]
    self.peak = peak_tflops(committed(args.root, device["slug"], "peaks"))
    timings = plan_lib.load_timings(os.path.join(args.root, "results", "campaign",
                                                 "timings.json"))
    estimates = {i.id: plan_lib.estimate(i, device["device"], timings, {}) for i in todo}
    log(f"to do: {len(todo)} items ({sum(i.stage == 'a' for i in todo)} measurements), "
        f"{self.deadline - time.time():.0f} s left for them")
    if covered:
      log(f"not run: {len(covered)} FIRMA items whose cells committed files already "
          f"hold with their seeds ({', '.join(sorted(set(covered.values())))}); "
          f"--rerun-covered runs them")
    items = {i.id: i for i in todo}
    resume = {} if rerun else item_files.partial_items(args.root)
    context = {"root": os.path.abspath(args.root), "cache_dir": self.cache_dir,
               "sync_dir": self.sync_dir, "memory_bytes": device.get("memory_bytes"),
               "step_time": step_points(committed(args.root, device["slug"],
                                                  "step_scaling"))}
    line = json.dumps({"items": [i.request(cov.get(i.id, {}).get("cells"),
                                           resume.get(i.id)) for i in todo],
                       "estimates": estimates, "deadline": self.deadline,
                       "window": self.deadline - self.t0, "context": context}) + "\n"
    self.request.write(line)
    self.request.flush()
    ahead = args.compile_ahead == "on" or (args.compile_ahead == "auto"
                                           and device["platform"] != "cpu")
    if ahead and any(i.column for i in todo):
      log("compile-ahead: a second process compiles stage b's FIRMA programs into "
          f"{self.cache_dir}")
      self.start_precompiler(line)
    failed, running = 0, None
    while True:
      ev = self.next_event(self.deadline)
      if ev is None:
        log(f"budget: {args.reserve:.0f} s left, stopping the worker mid-item")
        if running:     # a lower bound for the next window's estimate of such items
          ev, t_start = running
          self.timing_rows.append(self._timing_row(ev, items[ev["item"]],
                                                   time.time() - t_start, killed=True))
        break
      kind = ev["event"]
      item = items.get(ev.get("item"))
      if kind == "start":
        running = (ev, time.time())
        log(f"start  {ev['label']} (estimate {ev['estimate']:.0f} s)")
        self.rows.append({"stage": item.stage, "label": item.label, "status": "running",
                          "seconds": None, "estimate": ev["estimate"]})
      elif kind == "progress":
        log(f"part   {items[ev['item']].label}: finished cells written")
        self.pack()
      elif kind == "done":
        log(f"done   {ev['label']} in {ev['seconds']:.1f} s")
        running = None
        self.finished.add(ev["item"])
        self.rows[-1].update(status="done", seconds=ev["seconds"], stats=ev.get("stats"))
        if item.stage == "a" and item.table == "peaks":
          self.peak = peak_tflops((item_files.read_verified(ev["path"]) or {}).get("result"))
        self.timing_rows.append(self._timing_row(ev, item, ev["seconds"]))
        self.pack()
      elif kind == "failed":
        running = None
        failed += 1
        log(f"FAILED {ev['label']} after {ev['seconds']:.1f} s: {ev['error']}")
        self.rows[-1].update(status=f"failed: {ev['error']}", seconds=ev["seconds"])
      elif kind == "skip":
        log(f"skip: {ev['label']} needs about {ev['estimate']:.0f} s, more than a whole "
            "window: split it in the plan")
        self.rows.append({"stage": item.stage, "label": item.label,
                          "status": "skipped (longer than a window)", "seconds": None,
                          "estimate": ev["estimate"]})
      elif kind == "stop":
        log(f"stop: the next item, {ev['label']}, needs about {ev['estimate']:.0f} s and "
            f"{ev['left']:.0f} s are left")
        self.rows.append({"stage": item.stage, "label": item.label,
                          "status": "not started (budget)", "seconds": None,
                          "estimate": ev["estimate"]})
      elif kind == "end":
        self.modules = ev.get("modules", [])
        break
      elif kind == "exit":
        log("error: the worker exited before it finished (see above)")
        failed += 1
        break
    for r in self.rows:
      if r["status"] == "running":
        r["status"] = "stopped at the deadline"
    return 1 if failed else 0


def main(argv=None) -> int:
  args = parse_args(sys.argv[1:] if argv is None else argv)
  t0 = args.started_at or time.time()
  os.makedirs(args.out, exist_ok=True)
  log = Log(os.path.join(args.out, "campaign.log"), t0)
  window = Window(args, log, t0)

  def on_signal(signum, frame):
    raise Terminated(signal.Signals(signum).name)
  old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
  code = 2
  try:
    log(f"campaign window: budget {args.budget:.0f} s, plan {args.plan}, stages "
        f"{args.stages}, out {args.out}")
    code = window.run()
  except Terminated as e:
    log(f"{e}: stopping; packing what finished")
    code = 143
  except plan_lib.PlanError as e:
    log(f"error: {e}")
  finally:
    for s in old:       # a second signal must not cut the packing short
      signal.signal(s, signal.SIG_IGN)
    window.stop_worker()
    cache = window.pack_cache()
    if cache:
      log(f"compile cache for the next window: {cache['files']} files, "
          f"{cache['bytes'] / 2 ** 20:.1f} MiB in {carried_cache.TAR} "
          f"({cache['left_out']} left out: --cache-cap-mb)")
    n = sum(r["status"] == "done" for r in window.rows)
    log(f"finished {n} items in {time.time() - t0:.0f} s of {args.budget:.0f} s; "
        f"archive {os.path.join(args.out, files.ARCHIVE)}")
    window.pack()
    log.f.close()
    for s, h in old.items():
      signal.signal(s, h)
    shutil.rmtree(window.staging, ignore_errors=True)
    shutil.rmtree(window.sync_dir, ignore_errors=True)
  return code
