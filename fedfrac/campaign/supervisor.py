"""``fedfrac-campaign run``: one budgeted window of the campaign.

The supervisor never touches the accelerator: it reads the plan, starts the
worker (:mod:`fedfrac.campaign.worker`), learns the device from it within its
first seconds, sends it what is not committed yet (stage a: measurements no
accelerator's ``benchmarks/results_<device>.json`` holds, or with
``--remeasure`` not this device's; on a CPU, not ``results_cpu.json``'s;
stage b: plan items without a verified
file under ``results/campaign/``, and unless ``--rerun-covered`` without a
cell of theirs in a committed file the table includes, such as the CPU
campaign's) with the deadline and each item's estimate,
and repacks the archive after every finished item. At the deadline
(``--budget`` minus ``--reserve`` for packing, counted from ``--started-at``)
it stops the worker; on SIGTERM or Ctrl-C it does the same at once. Whatever
finished is in ``OUT/campaign.tar.gz``; ``OUT/campaign.log`` and
``OUT/timings.md`` are beside it.

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

from fedfrac.campaign import files, plan as plan_lib


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
  args = p.parse_args(argv)
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


def committed_measurements(root, slug) -> dict:
  path = os.path.join(root, "benchmarks", f"results_{slug}.json")
  if not os.path.exists(path):
    return {}
  with open(path) as f:
    return json.load(f).get("accelerator", {})


def accelerator_measurements(root) -> dict:
  """The measurements of every accelerator's ``benchmarks/results_<slug>.json``
  (not the CPU's), as :func:`committed_measurements` gives one device's."""
  import glob
  have = {}
  for path in sorted(glob.glob(os.path.join(root, "benchmarks", "results_*.json"))):
    slug = os.path.basename(path)[len("results_"):-len(".json")]
    if slug != "cpu":
      have.update(committed_measurements(root, slug))
  return have


def to_do(plan, args, device, covered=None) -> list:
  """The items of the chosen stages not yet committed, in plan order. A
  measurement one accelerator has is not repeated on another unless
  ``--remeasure`` (the GPU windows are short; the plan's points need them);
  a FIRMA item whose cell a table's included file already holds with its seeds
  and rounds (``covered``, default :func:`fedfrac.campaign.plan.covered_items`)
  is not run unless ``--rerun-covered``."""
  stages = args.stages.split(",")
  todo = []
  if "a" in stages:
    have = committed_measurements(args.root, device["slug"])
    if device["slug"] != "cpu" and not getattr(args, "remeasure", False):
      have = {**accelerator_measurements(args.root), **have}
    todo += [m for m in plan.measurements if m.table not in have]
  if "b" in stages:
    done = files.done_items(os.path.join(args.root, "results", "campaign"))
    if getattr(args, "rerun_covered", False):
      covered = {}
    elif covered is None:
      covered = plan_lib.covered_items(plan, args.root)
    todo += [i for i in plan.items if i.id not in done and i.id not in covered]
  return todo


def _as_dict(item):
  return {"id": item.id, "stage": item.stage, "kind": item.kind, "table": item.table,
          "spec": item.spec, "label": item.label, "timing_key": item.timing_key}


def timings_markdown(rows, device, budget, wall) -> str:
  lines = [f"# Campaign window on {device}", "",
           f"Budget {budget:.0f} s, wall {wall:.0f} s.", "",
           "| # | stage | item | status | seconds | estimate s |", "|---|---|---|---|---|---|"]
  for i, r in enumerate(rows, 1):
    sec = "" if r.get("seconds") is None else f"{r['seconds']:.1f}"
    est = "" if r.get("estimate") is None else f"{r['estimate']:.0f}"
    lines.append(f"| {i} | {r['stage']} | {r['label']} | {r['status']} | {sec} | {est} |")
  return "\n".join(lines) + "\n"


def _child(ev_w, req_r, err_w, parent_fds, staging, data_dir):
  """The forked worker: default signal handling, its prints into the
  supervisor's log pipe, then :func:`fedfrac.campaign.worker.serve`."""
  for s in (signal.SIGTERM, signal.SIGINT):
    signal.signal(s, signal.SIG_DFL)
  for fd in parent_fds:
    os.close(fd)
  os.dup2(err_w, 1)
  os.dup2(err_w, 2)
  os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.6")   # room for PyTorch
  from fedfrac.campaign import worker
  code = worker.serve(os.fdopen(ev_w, "w"), os.fdopen(req_r), staging, data_dir)
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(code)


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

  # ------------------------------------------------------------ worker
  def start_worker(self):
    """Fork the worker (:func:`fedfrac.campaign.worker.serve`): the package is
    already imported here, and nothing here has touched the accelerator."""
    import multiprocessing as mp
    ev_r, ev_w = os.pipe()
    req_r, req_w = os.pipe()
    err_r, err_w = os.pipe()
    self.worker = mp.get_context("fork").Process(
        target=_child, args=(ev_w, req_r, err_w, (ev_r, req_w, err_r), self.staging,
                             self.args.data), name="fedfrac-campaign-worker")
    self.worker.start()
    for fd in (ev_w, req_r, err_w):
      os.close(fd)
    self.request = os.fdopen(req_w, "w", buffering=1)
    events, errors = os.fdopen(ev_r), os.fdopen(err_r, errors="replace")
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

  def stop_worker(self):
    w = self.worker
    if w is None or not w.is_alive():
      return
    w.terminate()
    w.join(5)
    if w.is_alive():
      w.kill()
      w.join()

  # ------------------------------------------------------------ archive
  def pack(self):
    out = self.args.out
    shutil.copyfile(self.log.path, os.path.join(self.staging, "campaign.log"))
    files.write_json_atomic(os.path.join(self.staging, "timings.json"), self.timing_rows)
    label = self.device["device"] if self.device else "an unknown device"
    md = timings_markdown(self.rows, label, self.args.budget, time.time() - self.t0)
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
    rerun = args.rerun_covered or "b" not in args.stages.split(",")
    covered = {} if rerun else plan_lib.covered_items(plan, args.root)
    todo = to_do(plan, args, device, covered)
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
    self.request.write(json.dumps({"items": [_as_dict(i) for i in todo],
                                   "estimates": estimates, "deadline": self.deadline,
                                   "window": self.deadline - self.t0}) + "\n")
    self.request.flush()
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
      elif kind == "done":
        log(f"done   {ev['label']} in {ev['seconds']:.1f} s")
        running = None
        self.rows[-1].update(status="done", seconds=ev["seconds"])
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
    n = sum(r["status"] == "done" for r in window.rows)
    log(f"finished {n} items in {time.time() - t0:.0f} s of {args.budget:.0f} s; "
        f"archive {os.path.join(args.out, files.ARCHIVE)}")
    window.pack()
    log.f.close()
    for s, h in old.items():
      signal.signal(s, h)
    shutil.rmtree(window.staging, ignore_errors=True)
  return code
