"""Rerun, by hand, each defect the reliability trials reported, and count how they end now.

Every trial is one small reproduction of one item: a command line run with
``subprocess`` in a fresh temporary folder, or a short Python script run in a
subprocess, on the bundled digits data with tiny settings (a 16-unit MLP, four
clients, two to four rounds), under a timeout (a timeout is a *stall*). Its
outcome is read from the exit status and the output:

* ``one line before compute``: exit status 2 and exactly one ``error:`` line (a
  command), or an exception whose one-line message names the key or value (Python);
* ``completed``: the command did what it should, with the note the item asks for;
* ``fault kept with one line``: a fault struck mid-run, the finished work is kept
  and one line says so;
* ``traceback``: a Python traceback, or from Python a raw error that does not
  name what to change;
* ``stall``: the timeout struck;
* ``silent``: accepted without a word where a refusal or a note is due;
* ``lost`` / ``wrong``: finished work lost, or numbers that are not those of the
  data given (checked where the trial can check it).

Each row also says whether the item is still *open* (the outcome or message is
still the one the issue describes). Writes ``results/reliability_trials.md`` and
``results/reliability_trials.json`` (the counts, the command and the date)::

  nice -n 19 python scripts/reliability_trials.py [--only=SUBSTRING] [--jobs=2]

(the command recorded says the niceness it ran at).
"""
from __future__ import annotations

import argparse
import concurrent.futures as futures
import datetime
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = sys.executable
OUTCOMES = ("one line before compute", "completed", "fault kept with one line", "lost",
            "wrong", "traceback", "stall", "silent")

TINY = '''\
from fedfrac.config import base_config
def get_config():
  c = base_config()
  c.seeds = (0,)
  c.rounds = 2
  c.checkpoint_every = 0
  c.progress = False
  c.data.num_clients = 4
  c.model.hidden = (16,)
  c.client.lr = 0.1
  c.methods = {"fedavg": {"name": "fedavg"}}
  return c
'''

# Prelude of every Python trial: a tiny config and the digits arrays; an
# exception is printed as one line ``RAISED <type>: <message>`` (exit status 3).
PRELUDE = '''\
import sys, os, numpy as np
import fedfrac as ff
def tiny(**kw):
  c = ff.base_config()
  c.rounds = 2; c.progress = False; c.checkpoint_every = 0
  c.data.num_clients = 4; c.model.hidden = (16,); c.client.lr = 0.1
  c.methods = {"fedavg": {"name": "fedavg"}}
  return c
def digits():
  from sklearn.datasets import load_digits
  d = load_digits()
  return d.data.astype(np.float32) / 16.0, d.target.astype(np.int32)
'''


class Result:
  def __init__(self, rc, out, err, seconds, timed_out=False):
    self.rc, self.out, self.err, self.seconds, self.timed_out = rc, out, err, seconds, timed_out

  @property
  def text(self):
    return self.out + "\n" + self.err


def env(**extra):
  e = dict(os.environ)
  e["PYTHONPATH"] = ROOT + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
  e.setdefault("JAX_PLATFORMS", "cpu")
  e.update(extra)
  return e


def default_sigint():
  """A child's SIGINT as in a terminal: a shell script started in the background
  (``&``) ignores SIGINT, and its children inherit that."""
  signal.signal(signal.SIGINT, signal.SIG_DFL)


def sh(args, cwd, timeout=120, stdin=None, **extra) -> Result:
  t = time.monotonic()
  p = subprocess.Popen(args, cwd=cwd, env=env(**extra), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, stdin=subprocess.PIPE if stdin else None,
                       text=True, start_new_session=True, preexec_fn=default_sigint)
  try:
    out, err = p.communicate(stdin, timeout=timeout)
    return Result(p.returncode, out, err, time.monotonic() - t)
  except subprocess.TimeoutExpired:
    os.killpg(p.pid, signal.SIGKILL)
    out, err = p.communicate()
    return Result(None, out, err, time.monotonic() - t, timed_out=True)


def py(body, cwd, timeout=120, **extra) -> Result:
  """Run ``body`` (after :data:`PRELUDE`) as a script file in ``cwd``."""
  script = PRELUDE + "try:\n" + textwrap.indent(textwrap.dedent(body), "  ") + (
      "\nexcept BaseException as e:\n"
      "  print('RAISED ' + type(e).__name__ + ': ' + ' '.join(str(e).split())[:600])\n"
      "  sys.exit(3)\n")
  path = os.path.join(cwd, "trial.py")
  with open(path, "w") as f:
    f.write(script)
  return sh([PY, path], cwd, timeout, **extra)


def cli(tool, *args):
  module = {"run": "fedfrac.main", "sweep": "fedfrac.sweep",
            "reproduce": "fedfrac_lab.reproduce", "campaign": "fedfrac_lab.campaign"}[tool]
  return [PY, "-m", module, *args]


def shown(args) -> str:
  names = {"fedfrac.main": "fedfrac-run", "fedfrac.sweep": "fedfrac-sweep",
           "fedfrac_lab.reproduce": "fedfrac-reproduce",
           "fedfrac_lab.campaign": "fedfrac-campaign"}
  if args[:2] == [PY, "-m"]:
    args = [names[args[2]]] + list(args[3:])
  return " ".join(str(a) for a in args)


def error_lines(res):
  return [l for l in res.err.splitlines() if l.startswith("error:")]


def raised(res):
  m = re.search(r"^RAISED (.*)$", res.out, re.M)
  return m.group(1) if m else None


def last_line(res):
  for stream in (res.err, res.out):
    lines = [l for l in stream.splitlines() if l.strip()]
    if lines:
      return lines[-1]
  return ""


def judge_refusal(res, names=()):
  """A refusal is due: classify a command's or a Python snippet's outcome."""
  if res.timed_out:
    return "stall", f"(no end after {res.seconds:.0f} s)", True
  if "Traceback (most recent call last)" in res.text:
    return "traceback", last_line(res), True
  r = raised(res)
  if r is not None:
    missing = [n for n in names if n not in r]
    if missing:
      return "traceback", r, True
    return "one line before compute", r, False
  errs = error_lines(res)
  if res.rc == 2 and len(errs) == 1:
    missing = [n for n in names if n not in errs[0]]
    return "one line before compute", errs[0] + (f"  [does not name {missing}]"
                                                if missing else ""), bool(missing)
  if res.rc == 0:
    return "silent", last_line(res) or "(exit 0)", True
  return "traceback", f"exit {res.rc}: {last_line(res)}", True


TRIALS = []


def trial(section, item, alone=False):
  def deco(fn):
    TRIALS.append({"section": section, "item": item, "fn": fn, "alone": alone})
    return fn
  return deco


# -- Wrong numbers and lost data -------------------------------------------------

W = "Wrong numbers and lost data"


@trial(W, "natural partition: own test_groups ignored unless test_split='natural'")
def natural_test_groups(d):
  body = '''
  x, y = digits(); g = np.arange(len(y)) % 4
  data = {"x_train": x[:1400], "y_train": y[:1400], "x_test": x[1400:], "y_test": y[1400:],
          "train_groups": g[:1400], "test_groups": g[1400:]}
  c = tiny(); c.data.partition = "natural"
  r = ff.run(c, data=data)
  print("RAN", r.table().splitlines()[-1])
  '''
  res = py(body, d)
  cmd = "ff.run(config with data.partition='natural', data={... train_groups, test_groups})"
  if res.rc == 0:
    return cmd, "wrong", "ran on re-sampled test rows: " + last_line(res), True
  return (cmd,) + judge_refusal(res, ("test_split",))


@trial(W, "checkpoint copied from another seed taken as this seed's")
def checkpoint_other_seed(d):
  write(d, "tiny.py", TINY)
  base = cli("run", "--config=tiny.py", "--config.seeds=(0,1)", "--config.rounds=4",
             "--config.checkpoint_every=1", "--workdir=w")
  first = sh(base, d, 240)
  if first.rc != 0:
    return shown(base), "traceback", "first run failed: " + last_line(first), True
  truth = summary_numbers(first.out)
  seed0 = os.path.join(d, "w", "checkpoints", "fedavg", "seed_0")
  shutil.rmtree(seed0)
  shutil.copytree(os.path.join(d, "w", "checkpoints", "fedavg", "seed_1"), seed0)
  os.remove(os.path.join(d, "w", "runs", "fedavg", "seed_0.json"))
  res = sh(base, d, 240)
  cmd = shown(base) + " (after copying seed_1's checkpoints into seed_0/, removing seed 0's record)"
  if res.timed_out or res.rc != 0:
    return (cmd,) + judge_refusal(res)
  said = [l for l in res.text.splitlines() if "seed 1, not seed 0" in l]
  again = summary_numbers(res.out)
  if again != truth:
    return cmd, "wrong", f"table {again!r}, first run {truth!r}", True
  if not said:
    return cmd, "silent", "same table, nothing said of the foreign checkpoint", True
  return cmd, "completed", said[0].strip() + f" | table as the first run: {again}", False


@trial(W, "collect: campaign.table '../../../../escaped_table' written outside --root")
def collect_escape(d):
  item = firma_item()
  item["campaign"]["table"] = "../../../../escaped_table"
  archive = make_archive(d, "a", {"items/firma_fashion_mnist/abc123.json": item})
  root = os.path.join(d, "r", "s", "t", "checkout")
  os.makedirs(root)
  args = cli("campaign", "collect", archive, "--plan", plan(d), "--root", root)
  res = sh(args, d)
  outcome = judge_refusal(res, ("campaign.table",))
  if glob.glob(os.path.join(d, "**", "escaped_table*"), recursive=True):
    return shown(args), "lost", "a file outside --root was written: " + outcome[1], True
  return (shown(args),) + outcome


@trial(W, "four shards of one sweep finishing together on one --out (shared .tmp.png)", alone=True)
def shards_together(d):
  write(d, "tiny.py", TINY)
  argv = ["--config=tiny.py", "--sweep=data.alpha=0.1,1.0", "--seeds=0", "--out=out/s.md",
          "--workers=1", "--no_progress"]
  procs = [subprocess.Popen(cli("sweep", *argv, f"--shard={i}/4"), cwd=d, env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
           for i in range(4)]
  outs = []
  for p in procs:
    try:
      outs.append((p.wait(timeout=400), p.stdout.read(), p.stderr.read()))
    except subprocess.TimeoutExpired:
      p.kill()
      outs.append((None, "", "timeout"))
  cmd = shown(cli("sweep", *argv, "--shard=I/4")) + "  (I = 0..3 started at once)"
  if any(rc is None for rc, _, _ in outs):
    return cmd, "stall", "a shard did not end in 400 s", True
  for rc, out, err in outs:
    if "Traceback" in err or rc != 0:
      return cmd, "traceback", f"exit {rc}: " + (err.strip().splitlines() or [""])[-1], True
  table = os.path.join(d, "out", "s.md")
  rows = [l for l in open(table).read().splitlines() if l.startswith("| ") and "---" not in l] \
      if os.path.exists(table) else []
  if len(rows) != 3 or not os.path.exists(os.path.join(d, "out", "s.png")):
    return cmd, "lost", f"table {table} has {max(len(rows) - 1, 0)} of 2 rows or no figure", True
  return cmd, "completed", f"4 shards exit 0; table with 2 rows and s.png ({rows[1][:80]})", False


# -- Stalls --------------------------------------------------------------------

S = "Stalls"

STDIN_SCRIPT = PRELUDE + '''\
x, y = digits()
c = tiny(); c.workers = 2; c.seeds = (0, 1)
r = ff.run(c, data=(x, y))
print("RAN", r.table().splitlines()[-1])
'''


def judge_stdin(res, cmd, note_due=True):
  if res.timed_out:
    return cmd, "stall", f"no end after {res.seconds:.0f} s: " + last_line(res), True
  if "Traceback (most recent call last)" in res.text:
    return cmd, "traceback", last_line(res), True
  said = [l for l in res.text.splitlines() if "in this process" in l or "<stdin>" in l
          or "-c" in l and "import" in l]
  if res.rc == 0 and "RAN" in res.out:
    if said:
      return cmd, "completed", said[0].strip() + f" (ended in {res.seconds:.0f} s)", False
    if not note_due:
      return cmd, "completed", (f"ran in worker processes and ended in {res.seconds:.0f} s "
                                f"(a -c script has no file for them to import)"), False
    return cmd, "silent", f"ran in {res.seconds:.0f} s without saying how", True
  return cmd, "traceback", f"exit {res.rc}: {last_line(res)}", True


@trial(S, "script from standard input (python - <<EOF), workers=2, data=")
def stdin_workers(d):
  res = sh([PY, "-"], d, 150, stdin=STDIN_SCRIPT)
  return judge_stdin(res, "python - <<EOF (ff.run(config with workers=2, data=(x, y)))")


@trial(S, "script given as python -c, workers=2, data=")
def dash_c_workers(d):
  res = sh([PY, "-c", STDIN_SCRIPT], d, 150)
  return judge_stdin(res, "python -c '...ff.run(config with workers=2, data=(x, y))'",
                     note_due=False)


# -- Tracebacks ------------------------------------------------------------------

T = "Tracebacks"


def firma_item(table="firma_fashion_mnist"):
  device = "NVIDIA H100 80GB HBM3"
  cell = {"num_clients": 10, "runs": [{"accuracy": 0.88, "gini": 0.01},
                                      {"accuracy": 0.90, "gini": 0.02}]}
  return {"args": {"seeds": 2, "rounds": 30, "device": device, "inputs": "authors",
                   "dataset": "fashion_mnist"},
          "scenarios": {"iid": {"results": {"reference_code": {"iid/fedavg": cell}}}},
          "campaign": {"item": "abc123", "stage": "b", "kind": "firma", "table": table,
                       "device": device, "slug": "h100", "seconds": 30.0,
                       "date": "2026-11-26T10:00"}}


def make_archive(d, name, members, timings=None, raw=None):
  """A window's archive packed by the campaign's own writer (checksums right)."""
  sys.path.insert(0, ROOT)
  from fedfrac_lab.campaign.files import pack
  from fedfrac_lab.reproduce import item_files as files
  staging = os.path.join(d, name, "staging")
  for member, obj in members.items():
    files.write_item(os.path.join(staging, member), obj)
  for member, blob in (raw or {}).items():
    os.makedirs(os.path.dirname(os.path.join(staging, member)), exist_ok=True)
    with open(os.path.join(staging, member), "w") as f:
      f.write(blob)
  if timings is None:
    files.write_json_atomic(os.path.join(staging, "timings.json"), [
        {"key": "k", "device": "d", "seconds": 30.0, "item": "abc123", "label": "l",
         "stage": "b", "date": "2026-11-26"}])
  else:
    os.makedirs(staging, exist_ok=True)
    with open(os.path.join(staging, "timings.json"), "w") as f:
      f.write(timings)
  archive = os.path.join(d, name, "campaign.tar.gz")
  pack(staging, archive, {"device": {"device": "d", "slug": "h100", "platform": "gpu"},
                          "dry_run": False, "started": "2026-11-26T10:00:00"})
  return archive


def plan(d, tables=None):
  path = os.path.join(d, "plan.json")
  write(d, "plan.json", json.dumps({"tables": tables or {}}))
  return path


FIRMA_PLAN = {"firma_fashion_mnist": {
    "kind": "firma", "dataset": "fashion_mnist", "out": "results/firma_fashion_mnist.md",
    "include": []}}


def collect_trial(d, archive, names=(), plan_tables=None):
  root = os.path.join(d, "checkout")
  os.makedirs(root, exist_ok=True)
  args = cli("campaign", "collect", archive, "--plan", plan(d, plan_tables), "--root", root)
  return (shown(args),) + judge_refusal(sh(args, d), names)


@trial(T, "collect: MANIFEST.json that is not JSON")
def collect_manifest(d):
  import tarfile
  write(d, "m.json", "{not json")
  archive = os.path.join(d, "bad.tar.gz")
  with tarfile.open(archive, "w:gz") as tar:
    tar.add(os.path.join(d, "m.json"), arcname="MANIFEST.json")
  return collect_trial(d, archive, ("MANIFEST.json",))


@trial(T, "collect: an item without a campaign key")
def collect_no_campaign(d):
  item = firma_item()
  del item["campaign"]
  return collect_trial(d, make_archive(d, "a", {"items/t/abc.json": item}), ("campaign",))


@trial(T, "collect: a garbage timings.json in the archive")
def collect_garbage_timings(d):
  return collect_trial(d, make_archive(d, "a", {}, timings="garbage"), ("timings.json",))


@trial(T, "collect: an incomplete timings.json in the archive")
def collect_incomplete_timings(d):
  return collect_trial(d, make_archive(d, "a", {}, timings='[{"item": "abc123"}]'),
                       ("timings.json",))


@trial(T, "collect: a garbage results/campaign/timings.json in the checkout")
def collect_local_timings(d):
  archive = make_archive(d, "a", {"items/t/abc123.json": firma_item("t")})
  write(d, "checkout/results/campaign/timings.json", "[{")
  cmd, outcome, line, still = collect_trial(d, archive, ("timings.json",))
  left = os.path.exists(os.path.join(d, "checkout", "results", "campaign", "t", "abc123.json"))
  return cmd, outcome, line + ("  [the item was left in results/campaign/]" if left else ""), \
      still or left


@trial(T, "collect: a garbled item (not JSON) of a plan table")
def collect_garbled_item(d):
  archive = make_archive(d, "a", {}, raw={"items/firma_fashion_mnist/abc123.json": "{garbled"})
  return collect_trial(d, archive, ("abc123",), FIRMA_PLAN)


@trial(T, "collect: an item of a plan table missing its results; then a later good collect")
def collect_incomplete_item(d):
  bad = firma_item()
  del bad["scenarios"]
  cmd, outcome, line, still = collect_trial(
      d, make_archive(d, "a", {"items/firma_fashion_mnist/abc123.json": bad}), ("abc123",),
      FIRMA_PLAN)
  good = firma_item()
  good["campaign"]["item"] = "def456"
  cmd2, outcome2, line2, still2 = collect_trial(
      d, make_archive(d, "b", {"items/firma_fashion_mnist/def456.json": good}), (), FIRMA_PLAN)
  if outcome2 == "silent":     # a good archive collected: exit 0 is right
    outcome2, still2 = "completed", False
  kept = os.path.exists(os.path.join(d, "checkout", "results", "campaign",
                                     "firma_fashion_mnist", "abc123.json"))
  return (cmd + " ; then a good archive", outcome if outcome != "completed" else outcome2,
          f"{line} | later collect: {outcome2}: {line2}"
          + ("  [the bad item stays in results/campaign/]" if kept else ""),
          still or still2)


def repro_args(*extra):
  return cli("reproduce", "stragglers", "--rounds=2", "--seeds=0", "--workers=1", *extra)


@trial(T, "fedfrac-reproduce --seeds=a")
def repro_seeds_a(d):
  args = cli("reproduce", "stragglers", "--seeds=a")
  return (shown(args),) + judge_refusal(sh(args, d), ("--seeds",))


@trial(T, "fedfrac-reproduce --seeds=")
def repro_seeds_empty(d):
  args = cli("reproduce", "stragglers", "--seeds=")
  return (shown(args),) + judge_refusal(sh(args, d), ("--seeds",))


@trial(T, "fedfrac-reproduce --dir under a file")
def repro_dir_file(d):
  write(d, "afile", "x")
  args = repro_args("--dir=afile/x", "--out=o.md")
  return (shown(args),) + judge_refusal(sh(args, d, 200), ("--dir",))


@trial(T, "fedfrac-reproduce --out under a file (after the compute, points lost)")
def repro_out_file(d):
  write(d, "afile", "x")
  args = repro_args("--out=afile/x.md")
  return (shown(args),) + judge_refusal(sh(args, d, 200), ("--out",))


@trial(T, "a directory where a run record should be")
def record_is_dir(d):
  write(d, "tiny.py", TINY)
  args = cli("run", "--config=tiny.py", "--workdir=w")
  first = sh(args, d, 200)
  rec = os.path.join(d, "w", "runs", "fedavg", "seed_0.json")
  if first.rc != 0 or not os.path.exists(rec):
    return shown(args), "traceback", "first run failed: " + last_line(first), True
  metrics = open(os.path.join(d, "w", "metrics.csv")).read()
  os.remove(rec)
  os.makedirs(rec)
  res = sh(args, d, 200)
  cmd = shown(args) + " (runs/fedavg/seed_0.json made a directory)"
  outcome = judge_refusal(res, ("seed_0.json",))
  if open(os.path.join(d, "w", "metrics.csv")).read() != metrics:
    return cmd, "lost", "metrics.csv changed: " + outcome[1], True
  return (cmd,) + outcome


def sweep_argv(*extra):
  return ["--config=tiny.py", "--seeds=0", "--workers=1", "--no_progress", *extra]


@trial(T, "a directory where a sweep point file should be")
def point_is_dir(d):
  write(d, "tiny.py", TINY)
  args = cli("sweep", *sweep_argv("--dir=pts", "--out=t.md"))
  first = sh(args, d, 200)
  points = glob.glob(os.path.join(d, "pts", "points", "*.json"))
  if first.rc != 0 or not points:
    return shown(args), "traceback", "first sweep failed: " + last_line(first), True
  os.remove(points[0])
  os.makedirs(points[0])
  res = sh(args, d, 200)
  cmd = shown(args) + " (a point file made a directory)"
  if res.rc == 0:
    said = [l for l in res.text.splitlines() if os.path.basename(points[0]) in l]
    if said:
      return cmd, "completed", said[0].strip(), False
  return (cmd,) + judge_refusal(res, (os.path.basename(points[0]),))


@trial(T, "claims/ of a sweep's point directory is a file")
def claims_is_file(d):
  write(d, "tiny.py", TINY)
  write(d, "pts/claims", "not a folder")
  args = cli("sweep", *sweep_argv("--dir=pts", "--out=t.md", "--shard=0/2"))
  return (shown(args) + " (pts/claims is a file)",) + judge_refusal(sh(args, d, 200),
                                                                   ("claims",))


@trial(T, "a sweep --dir that cannot be created")
def sweep_dir_uncreatable(d):
  write(d, "tiny.py", TINY)
  args = cli("sweep", *sweep_argv("--dir=/proc/fedfrac_trial/pts", "--out=t.md"))
  return (shown(args) + " (nothing can be created under /proc)",) + judge_refusal(
      sh(args, d, 200), ("--dir",))


@trial(T, "the disk filling while a sweep draws its figures (ENOSPC injected into savefig)")
def sweep_disk_full_figures(d):
  write(d, "tiny.py", TINY)
  body = '''
  import errno, matplotlib.figure
  def full(self, *a, **k):
    raise OSError(errno.ENOSPC, "No space left on device")
  matplotlib.figure.Figure.savefig = full
  from fedfrac.sweep import cli
  sys.argv = ["fedfrac-sweep", "--config=tiny.py", "--seeds=0", "--workers=1",
              "--no_progress", "--out=t.md"]
  rc = cli()
  print("EXIT", rc)
  '''
  res = py(body, d, 200)
  cmd = "fedfrac-sweep --out=t.md with Figure.savefig raising ENOSPC (in-process)"
  kept = glob.glob(os.path.join(d, "t.points", "points", "*.json"))
  if "Traceback" in res.text or (raised(res) and "SystemExit" not in raised(res)):
    return cmd, "traceback", raised(res) or last_line(res), True
  errs = error_lines(res) + [l for l in res.err.splitlines() if "No space" in l]
  if kept and errs:
    return cmd, "fault kept with one line", errs[0] + f"  [{len(kept)} point kept]", False
  if not kept:
    return cmd, "lost", last_line(res), True
  return cmd, "silent", last_line(res), True


def sigint_trial(d, delays):
  """SIGINT to a 100,000-round sweep (minutes: still computing at every delay)
  after each of ``delays`` seconds: exit 130 and one line each time, or what
  happened instead."""
  write(d, "tiny.py", TINY)
  argv = sweep_argv("--dir=pts", "--out=t.md", "--set=rounds=100000",
                    "--set=eval_every=5000")
  lines, bad = [], []
  for delay in delays:
    shutil.rmtree(os.path.join(d, "pts"), ignore_errors=True)
    p = subprocess.Popen(cli("sweep", *argv), cwd=d, env=env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    time.sleep(delay)
    p.send_signal(signal.SIGINT)
    try:
      out, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
      p.kill()
      out, err = p.communicate()
      bad.append(f"after {delay:.0f} s: no end 120 s after SIGINT")
      continue
    last = err.strip().splitlines()[-1] if err.strip() else ""
    if p.returncode == 0:
      bad.append(f"after {delay:.0f} s: SIGINT swallowed, exit 0")
    elif "Traceback" in err:
      bad.append(f"after {delay:.0f} s: traceback {last}")
    elif p.returncode != 130:
      bad.append(f"after {delay:.0f} s: exit {p.returncode} {last}")
    else:
      lines.append(last or "(exit 130, no line)")
  when = ", ".join(f"{t:.0f}" for t in delays)
  cmd = shown(cli("sweep", *argv)) + f"  (SIGINT after {when} s)"
  if bad:
    return cmd, ("silent" if "swallowed" in bad[0] else "traceback"), "; ".join(bad), True
  n = len(delays)
  return cmd, "fault kept with one line", f"{n} of {n} exit 130: {lines[0]}", False


@trial(T, "Ctrl-C while a sweep computes (2 SIGINTs; the GC-callback race cannot be forced)",
       alone=True)
def sweep_sigint(d):
  return sigint_trial(d, (25.0, 35.0))


@trial(T, "Ctrl-C while a sweep starts (SIGINT after 4 s, during its imports)", alone=True)
def sweep_sigint_start(d):
  return sigint_trial(d, (4.0,))


@trial(T, "Python: a personalised method (fedrep) on a model without a head")
def no_head(d):
  body = '''
  import flax.linen as nn
  class Plain(nn.Module):
    @nn.compact
    def __call__(self, x):
      return nn.Dense(10)(nn.relu(nn.Dense(16)(x.reshape((x.shape[0], -1)))))
  c = tiny(); c.methods = {"rep": {"name": "fedrep"}}
  r = ff.run(c, model=Plain())
  print("RAN")
  '''
  return ("ff.run(config with methods.rep.name='fedrep', model=<flax module without head>)",) \
      + judge_refusal(py(body, d), ("head",))


OWN = '''
from fedfrac.algorithms import contract, local_training, tasks
import jax
def make(ctx, hp):
  loss_fn = tasks.supervised_loss(ctx.model, ctx.task)
  def client_update(params, state, view, key, round_index):
    delta, metrics = local_training.local_delta(params, view, key, round_index, loss_fn,
                                                ctx.training)
    return delta, state, metrics
  def aggregate(params, states, deltas, weights, mask, key):
    mean = ff.ops.weighted_mean(deltas, weights, mask)
    return jax.tree.map(lambda p, d: p + d, params, mean), states
  return contract.FedAlgorithm("mine", lambda key, p0, k, info: (p0, None), lambda s: s,
                               client_update, aggregate, lambda s, c: s)
'''


def own_trial(d, build_src, names, cmd, note=None):
  """Run a method of the user's own (``build``); ``note``: the run should
  complete and say a line holding it."""
  body = OWN + build_src + '''
c = tiny(); c.methods = {"m": {"name": "mine"}}
r = ff.run(c, algorithms={"mine": build})
print("RAN", r.table().splitlines()[-1])
'''
  res = py(body, d)
  outcome, line, still = judge_refusal(res, names)
  if note is not None and outcome == "silent":
    said = [l for l in res.text.splitlines() if note in l]
    if said:
      return cmd, "completed", said[0].strip(), False
  return cmd, outcome, line, still


@trial(T, "Python: a user's build without the hp argument")
def build_no_hp(d):
  return own_trial(d, "def build(ctx):\n  return make(ctx, {})\n", ("'mine'",),
                   "ff.run(config, algorithms={'mine': build}) with def build(ctx)")


@trial(T, "Python: a user's build returning None")
def build_none(d):
  return own_trial(d, "def build(ctx, hp):\n  make(ctx, hp)\n", ("'mine'", "None"),
                   "ff.run(config, algorithms={'mine': build}), build returns None")


@trial(T, "Python: a user's build reading hp['mu'] without a schema")
def build_hp_mu(d):
  return own_trial(d, "def build(ctx, hp):\n  hp['mu']\n  return make(ctx, hp)\n",
                   ("'mine'", "mu"),
                   "ff.run(config, algorithms={'mine': build}), build reads hp['mu']")


@trial(T, "Python: train_groups of the wrong length without test arrays")
def train_groups_length(d):
  body = '''
  x, y = digits()
  c = tiny(); c.data.partition = "natural"
  r = ff.run(c, data={"x_train": x, "y_train": y, "train_groups": np.arange(100) % 4})
  print("RAN")
  '''
  return ("ff.run(config natural, data={x_train, y_train, train_groups of 100 for 1797 rows})",) \
      + judge_refusal(py(body, d), ("train_groups",))


@trial(T, "Python: nn.Dropout(deterministic=False) in a user's model")
def dropout(d):
  body = '''
  import flax.linen as nn
  class Drop(nn.Module):
    @nn.compact
    def __call__(self, x):
      h = nn.relu(nn.Dense(16)(x.reshape((x.shape[0], -1))))
      return nn.Dense(10)(nn.Dropout(0.5, deterministic=False)(h))
  r = ff.run(tiny(), model=Drop())
  print("RAN")
  '''
  return ("ff.run(config, model=<module with nn.Dropout(0.5, deterministic=False)>)",) \
      + judge_refusal(py(body, d), ("train",))


@trial(T, "Python: an error raised in a host callback of a user's method")
def callback_error(d):
  src = '''
def build(ctx, hp):
  alg = make(ctx, hp)
  def boom(x):
    raise ValueError("boom from my callback")
  def client_update(params, state, view, key, round_index):
    jax.debug.callback(boom, round_index)
    return alg.client_update(params, state, view, key, round_index)
  return alg._replace(client_update=client_update)
'''
  # The failed run is kept as failed and the others go on (exit 0): what is due is
  # one line naming the callback's own exception, with no traceback.
  return own_trial(d, src, ("boom from my callback",),
                   "ff.run with a method whose client_update's jax.debug.callback raises",
                   note="ValueError: boom from my callback")


@trial(T, "Python: client.local_epochs=10**20")
def local_epochs_huge(d):
  body = '''
  c = tiny(); c.client.local_epochs = 10**20
  r = ff.run(c); print("RAN")
  '''
  return ("ff.run(config with client.local_epochs=10**20)",) + judge_refusal(
      py(body, d), ("local_epochs",))


@trial(T, "fedfrac-run --config.client.local_epochs=100000000000000000000")
def local_epochs_cli(d):
  write(d, "tiny.py", TINY)
  args = cli("run", "--config=tiny.py", "--config.client.local_epochs=100000000000000000000")
  return (shown(args),) + judge_refusal(sh(args, d), ("local_epochs",))


@trial(T, "Python: data.test_fraction=1e-30 with arrays without a test set")
def test_fraction_tiny(d):
  body = '''
  x, y = digits()
  c = tiny(); c.data.test_fraction = 1e-30
  r = ff.run(c, data=(x, y)); print("RAN")
  '''
  return ("ff.run(config with data.test_fraction=1e-30, data=(x, y))",) + judge_refusal(
      py(body, d), ("test_fraction",))


# -- Accepted silently -------------------------------------------------------------

A = "Accepted silently"


@trial(A, "fedfrac-run --config.rounds=99999999999999999999")
def run_rounds_huge(d):
  write(d, "tiny.py", TINY)
  args = cli("run", "--config=tiny.py", "--config.rounds=99999999999999999999")
  return (shown(args),) + judge_refusal(sh(args, d, 60), ("rounds",))


@trial(A, "fedfrac-sweep --set=rounds=99999999999999999999")
def sweep_rounds_huge(d):
  write(d, "tiny.py", TINY)
  args = cli("sweep", *sweep_argv("--set=rounds=99999999999999999999", "--out=t.md"))
  return (shown(args),) + judge_refusal(sh(args, d, 60), ("rounds",))


@trial(A, "fedfrac-sweep --out=")
def sweep_out_empty(d):
  write(d, "tiny.py", TINY)
  args = cli("sweep", *sweep_argv("--out="))
  return (shown(args),) + judge_refusal(sh(args, d, 60), ("--out",))


@trial(A, "fedfrac-sweep --metrics=")
def sweep_metrics_empty(d):
  write(d, "tiny.py", TINY)
  args = cli("sweep", *sweep_argv("--metrics=", "--out=t.md"))
  return (shown(args),) + judge_refusal(sh(args, d, 60), ("--metrics",))


@trial(A, "fedfrac-sweep --sweep=client.lr=0.1,,1.0 (an empty value)")
def sweep_empty_value(d):
  write(d, "tiny.py", TINY)
  args = cli("sweep", *sweep_argv("--sweep=client.lr=0.1,,1.0", "--out=t.md"))
  return (shown(args),) + judge_refusal(sh(args, d, 60), ("0.1,,1.0",))


@trial(A, "fedfrac-reproduce --workers=-1")
def repro_workers(d):
  args = cli("reproduce", "stragglers", "--workers=-1")
  return (shown(args),) + judge_refusal(sh(args, d, 60), ("--workers",))


@trial(A, "Python: optax.sgd(-0.5) as the server optimizer")
def optax_negative(d):
  body = '''
  import optax
  c = tiny(); c.methods = {"fedavg": {"name": "fedavg", "server_optimizer": optax.sgd(-0.5)}}
  r = ff.run(c); print("RAN", r.table().splitlines()[-1])
  '''
  return ("ff.run(config with methods.fedavg.server_optimizer=optax.sgd(-0.5))",) \
      + judge_refusal(py(body, d), ("server_optimizer",))


@trial(A, "Python: a vector-valued client metric")
def vector_metric(d):
  src = '''
import jax.numpy as jnp
def build(ctx, hp):
  alg = make(ctx, hp)
  def client_update(params, state, view, key, round_index):
    delta, state, metrics = alg.client_update(params, state, view, key, round_index)
    return delta, state, dict(metrics, vec=jnp.ones(3))
  return alg._replace(client_update=client_update)
'''
  return own_trial(d, src, (), "ff.run with a method whose client metric 'vec' is "
                   "jnp.ones(3)", note="'vec'")


# -- Ways out and messages -----------------------------------------------------------

M = "Ways out and messages"


@trial(M, "a foreign but valid experiment.json: the refusal's ways out")
def foreign_experiment(d):
  write(d, "tiny.py", TINY)
  mine = cli("run", "--config=tiny.py", "--workdir=w")
  other = cli("run", "--config=tiny.py", "--config.client.lr=0.2", "--workdir=other")
  tables = []
  for args in (mine, other):
    first = sh(args, d, 200)
    if first.rc != 0:
      return shown(args), "traceback", "first run failed: " + last_line(first), True
    tables.append(summary_numbers(first.out))
  truth = tables[0]
  shutil.copy(os.path.join(d, "other", "experiment.json"), os.path.join(d, "w"))
  res = sh(mine, d, 200)
  cmd = shown(mine) + " (over w's own runs, w/experiment.json copied from another " \
      "experiment's workdir)"
  outcome, line, still = judge_refusal(res, ("experiment.json",))
  if outcome != "one line before compute":
    return cmd, outcome, line, still
  if not re.search(r"remov\w* \S*experiment\.json", line, re.I):
    return cmd, outcome, line + "  [no way out but another folder or --overwrite]", True
  os.remove(os.path.join(d, "w", "experiment.json"))       # the way out it names
  again = sh(mine, d, 200)
  if again.rc != 0 or summary_numbers(again.out) != truth:
    return cmd, "lost", line + f"  [after removing it: exit {again.rc}, table " \
        f"{summary_numbers(again.out)!r}, first run {truth!r}]", True
  return cmd, outcome, line + "  [followed: the rerun rebuilt it, same table]", False


@trial(M, "a garbage sweep.json in a sweep's point directory: the refusal's ways out")
def garbage_sweep_json(d):
  write(d, "tiny.py", TINY)
  write(d, "pts/sweep.json", "garbage{")
  args = cli("sweep", *sweep_argv("--dir=pts", "--out=t.md"))
  res = sh(args, d, 200)
  cmd = shown(args) + " (pts/sweep.json is garbage)"
  if res.rc == 0:
    said = [l for l in res.text.splitlines() if "sweep.json" in l]
    return (cmd, "completed", said[0].strip(), False) if said else \
        (cmd, "silent", "garbage sweep.json replaced without a word", True)
  outcome, line, still = judge_refusal(res, ("sweep.json",))
  if outcome == "one line before compute" and not re.search(r"remove \S*sweep\.json", line):
    return cmd, outcome, line + "  [no way out but another folder or --overwrite]", True
  return cmd, outcome, line, still


@trial(M, "Python: Ctrl-C in ff.run without a workdir: the message")
def python_ctrl_c(d):
  body = '''
  import threading, signal
  c = tiny(); c.rounds = 40000; c.eval_every = 100; c.seeds = (0, 1)
  timer = threading.Timer(25.0, lambda: os.kill(os.getpid(), signal.SIGINT))
  timer.daemon = True
  timer.start()
  try:
    ff.run(c)
    timer.cancel()
    print("FINISHED before the signal")
  except KeyboardInterrupt as e:
    res = getattr(e, "results", None)
    print("MESSAGE", getattr(e, "message", str(e)), "| e.results:", repr(res)[:80])
  '''
  res = py(body, d, 200)
  cmd = "ff.run(config of 40000 rounds) interrupted by SIGINT after 25 s"
  if "FINISHED before the signal" in res.out:   # the trial did not reproduce the item
    return cmd, "traceback", "trial error: the run ended before the signal", True
  m = re.search(r"^MESSAGE (.*)$", res.out, re.M)
  if not m:
    return (cmd,) + judge_refusal(res)
  line = m.group(1)
  if "--workdir" in line or "nothing was kept" in line or "e.results" not in line:
    return cmd, "fault kept with one line", line + "  [names the command-line flag / says " \
        "nothing kept while e.results holds the runs]", True
  return cmd, "fault kept with one line", line, False


@trial(M, "a full disk under the compile cache (a 64 KiB tmpfs filled up)")
def cache_disk_full(d):
  write(d, "tiny.py", TINY)
  full = os.path.join(d, "full")
  os.makedirs(full)
  mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", full],
                           capture_output=True).returncode == 0
  try:
    if mounted:
      os.makedirs(os.path.join(full, "jax"))
      with open(os.path.join(full, "fill"), "wb") as f:
        try:
          f.write(b"\0" * 2**17)
        except OSError:
          pass
      cache, how = os.path.join(full, "jax"), "a full 64 KiB tmpfs"
    else:        # no mount allowed: a folder that cannot be created
      cache, how = "/proc/fedfrac_trial_cache", "a folder under /proc (not a full disk)"
    args = cli("run", "--config=tiny.py", "--config.data.num_clients=5")
    res = sh(args, d, 200, FEDFRAC_COMPILE_CACHE=cache)
  finally:
    if mounted:
      subprocess.run(["umount", full], capture_output=True)
  cmd = f"FEDFRAC_COMPILE_CACHE=<{how}> " + shown(args)
  if res.rc != 0:
    return (cmd,) + judge_refusal(res)
  noisy = [l for l in res.err.splitlines() if re.search(r"warn|cache", l, re.I)]
  if len(noisy) > 2:
    return cmd, "silent", f"{len(noisy)} warning lines, e.g. {noisy[0].strip()}", True
  return cmd, "completed", (f"{len(noisy)} line: " + noisy[0].strip()) if noisy else \
      "(ran; nothing said of the cache)", not noisy


@trial(M, "Python: results.plot().save(dir) with a folder that does not exist")
def plot_save_new_dir(d):
  body = '''
  r = ff.run(tiny())
  saved = r.plot().save("new/figs")
  print("SAVED", saved, os.path.isdir("new/figs"), sorted(os.listdir("new/figs")))
  '''
  res = py(body, d, 200)
  cmd = "ff.run(config).plot().save('new/figs')"
  m = re.search(r"^SAVED (.*)$", res.out, re.M)
  if m and "True" in m.group(1):
    return cmd, "completed", m.group(1), False
  return cmd, "traceback", raised(res) or last_line(res), True


@trial(M, "config.json of a run with an optax server optimizer")
def config_json_optax(d):
  body = '''
  import optax, json
  c = tiny(); c.methods = {"fedavg": {"name": "fedavg", "server_optimizer": optax.adam(0.1)}}
  ff.run(c, workdir="w")
  v = json.load(open("w/config.json"))["methods"]["fedavg"]["server_optimizer"]
  print("RECORDED", json.dumps(v))
  '''
  res = py(body, d, 200)
  cmd = "ff.run(config with server_optimizer=optax.adam(0.1), workdir='w'); w/config.json"
  m = re.search(r"^RECORDED (.*)$", res.out, re.M)
  if not m:
    return (cmd,) + judge_refusal(res)
  if "init_fn" in m.group(1):
    return cmd, "silent", "config.json records " + m.group(1), True
  return cmd, "completed", "config.json records " + m.group(1), False


@trial(M, "a user's points/notes.json in a sweep's point directory")
def user_notes(d):
  write(d, "tiny.py", TINY)
  args = cli("sweep", *sweep_argv("--dir=pts", "--out=t.md"))
  first = sh(args, d, 200)
  if first.rc != 0:
    return shown(args), "traceback", "first sweep failed: " + last_line(first), True
  write(d, "pts/points/notes.json", '{"my": "notes"}')
  res = sh(args, d, 200)
  cmd = shown(args) + " (a user's pts/points/notes.json)"
  said = [l for l in res.text.splitlines() if "notes.json" in l]
  intact = open(os.path.join(d, "pts", "points", "notes.json")).read() == '{"my": "notes"}'
  if res.rc != 0:
    return (cmd,) + judge_refusal(res)
  if said and "running it again" in said[0]:
    return cmd, "completed", said[0].strip() + "  [calls a user's file a point to run again]", \
        True
  if not intact:
    return cmd, "lost", "notes.json was changed or removed", True
  return cmd, "completed", said[0].strip() if said else "(notes.json left alone, no word)", \
      False


@trial(M, "a workdir's cost on a tiny run (checkpoint every round), and the record's wall_s",
       alone=True)
def workdir_cost(d):
  body = '''
  import time
  c = tiny(); c.rounds = 200; c.checkpoint_every = 1
  ff.run(c)                                   # compiled (and cached) first
  t = time.perf_counter(); plain = ff.run(c); a = time.perf_counter() - t
  t = time.perf_counter(); kept = ff.run(c, workdir="w"); b = time.perf_counter() - t
  print("TIMES", a, b, plain.records[0].wall_s, kept.records[0].wall_s)
  '''
  res = py(body, d, 300)
  cmd = "ff.run(config of 200 rounds) timed without and with workdir='w' (checkpoint_every=1)"
  m = re.search(r"^TIMES (\S+) (\S+) (\S+) (\S+)$", res.out, re.M)
  if not m:
    return (cmd,) + judge_refusal(res)
  a, b, wa, wb = map(float, m.groups())
  said = [l for l in res.text.splitlines() if "checkpoint" in l.lower()]
  line = (f"200 rounds: {a:.1f} s without, {b:.1f} s with a workdir ({b / a:.1f}x); the "
          f"records' wall_s {wa:.1f} s and {wb:.1f} s"
          + (f"; says: {said[0].strip()}" if said else "; nothing said of the cost"))
  hidden = not said and b / a >= 2 and wb < 0.6 * b
  return cmd, "silent" if hidden else "completed", line, hidden


# -- driver ----------------------------------------------------------------------------


def write(d, rel, text):
  path = os.path.join(d, rel)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w") as f:
    f.write(text)


def summary_numbers(out):
  """The fedavg row of a run's table without its wall-clock column."""
  rows = [l for l in out.splitlines() if l.startswith("| fedavg ")]
  if not rows:
    return None
  cells = [c.strip() for c in rows[-1].strip("|").split("|")]
  return " | ".join(cells[:-2] + cells[-1:])


def run_one(t, base):
  d = tempfile.mkdtemp(prefix=t["fn"].__name__ + "_", dir=base)
  start = time.monotonic()
  try:
    cmd, outcome, line, still = t["fn"](d)
  except Exception as e:        # the trial itself failed: say so, never hide it
    cmd, outcome, line, still = t["fn"].__name__, "traceback", f"trial error: {e!r}", True
  line = " ".join(str(line).split())
  cmd, line = (str(s).replace(d + os.sep, "").replace(d, ".").replace(base, "$TMP")
               for s in (cmd, line))
  return {"section": t["section"], "item": t["item"], "command": cmd, "outcome": outcome,
          "line": line if len(line) <= 160 else line[:157] + "...", "open": bool(still),
          "seconds": round(time.monotonic() - start, 1)}


NOTES = ("Not reproduced as the issue describes: the Ctrl-C swallowed in a JAX "
         "garbage-collection callback is a race that cannot be forced (two SIGINTs "
         "mid-sweep sample it; the fix is tested by raising the signal inside a gc "
         "callback); a full disk is a 64 KiB tmpfs (mounted by the script, which needs "
         "root) or, failing that, a folder that cannot be created; the disk filling "
         "while a sweep draws its figures is an ENOSPC injected into matplotlib's "
         "savefig. Same seed, different bits (1 vs 2 XLA devices) is not a trial here.")


def render(rows, counts, command, date, wall):
  lines = ["# Reliability trials rerun by hand", "",
           f"Remade with `{command}` on {date} ({wall:.0f} s wall on a shared 2-core CPU, "
           f"{len(rows)} trials). Each row is one item of the reliability issue reproduced "
           "in a fresh temporary folder (tiny settings on the bundled digits); the outcome "
           "is read from the exit status and the output (`scripts/reliability_trials.py` "
           "says how), *open* says whether the item still behaves as the issue describes."
           + (" Rows marked *(rerun)* come from the second command, the others from the "
              "first." if any(r.get("rerun") for r in rows) else ""),
           "", NOTES, "", "| outcome | trials |", "|---|---|"]
  lines += [f"| {k} | {v} |" for k, v in counts["outcomes"].items()]
  lines += [f"| still open | {counts['open']} |", ""]
  section = None
  for r in rows:
    if r["section"] != section:
      section = r["section"]
      lines += ["", f"## {section}", "", "| item | command / snippet | outcome | open | "
                "the line the user sees | s |", "|---|---|---|---|---|---|"]
    cells = [r["item"] + (" *(rerun)*" if r.get("rerun") else ""), f"`{r['command']}`",
             r["outcome"], "yes" if r["open"] else "no",
             r["line"].replace("`", "'"), f"{r['seconds']:.0f}"]
    lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
  return "\n".join(lines) + "\n"


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--only", default="", help="run the trials whose function name holds one "
                 "of these comma-separated words")
  p.add_argument("--jobs", type=int, default=2, help="trials run at once (default 2)")
  p.add_argument("--out", default=os.path.join(ROOT, "results", "reliability_trials.md"))
  p.add_argument("--merge", action="store_true",
                 help="with --only: replace those trials' rows in the JSON beside --out "
                 "and keep every other row (and its date) as it was")
  p.add_argument("--render", action="store_true",
                 help="run nothing: write the markdown again from the JSON beside --out")
  args = p.parse_args(argv)
  if args.render:
    with open(os.path.splitext(args.out)[0] + ".json") as f:
      saved = json.load(f)
    with open(args.out, "w") as f:
      f.write(render(saved["trials"], saved["counts"], saved["command"], saved["date"],
                     saved["wall_s"]))
    return 0
  words = [w for w in args.only.split(",") if w] or [""]
  chosen = [t for t in TRIALS if any(w in t["fn"].__name__ for w in words)]
  base = tempfile.mkdtemp(prefix="fedfrac_trials_")
  start = time.monotonic()
  results = {}
  with futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
    jobs = {pool.submit(run_one, t, base): i for i, t in enumerate(chosen) if not t["alone"]}
    for job in futures.as_completed(jobs):
      results[jobs[job]] = job.result()
      r = results[jobs[job]]
      print(f"[{r['seconds']:5.0f} s] {r['outcome']:25s} {r['item'][:60]}", flush=True)
  for i, t in enumerate(chosen):
    if t["alone"]:
      results[i] = r = run_one(t, base)
      print(f"[{r['seconds']:5.0f} s] {r['outcome']:25s} {r['item'][:60]}", flush=True)
  shutil.rmtree(base, ignore_errors=True)
  rows = [results[i] for i in sorted(results)]
  earlier = None
  if args.merge:
    with open(os.path.splitext(args.out)[0] + ".json") as f:
      earlier = json.load(f)
    fresh = {r["item"]: dict(r, rerun=True) for r in rows}
    rows = [fresh.pop(r["item"], r) for r in earlier["trials"]] + list(fresh.values())
  counts = {"outcomes": {k: sum(r["outcome"] == k for r in rows) for k in OUTCOMES},
            "open": sum(r["open"] for r in rows), "trials": len(rows)}
  wall = time.monotonic() - start
  niceness = os.nice(0)
  command = (f"nice -n {niceness} " if niceness else "") + (
      "python scripts/reliability_trials.py") + (
      f" --only={args.only}" if args.only else "") + (
      f" --jobs={args.jobs}" if args.jobs != 2 else "")
  date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
  if earlier is not None:   # the whole run's command and date, then this rerun's
    command = f"{earlier['command']}` on {earlier['date']}, then `{command} --merge"
    wall = earlier["wall_s"] + wall
  os.makedirs(os.path.dirname(args.out), exist_ok=True)
  with open(args.out, "w") as f:
    f.write(render(rows, counts, command, date, wall))
  with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
    json.dump({"command": command, "date": date, "wall_s": round(wall, 1),
               "counts": counts, "trials": rows}, f, indent=1)
    f.write("\n")
  print(json.dumps(counts))
  return 0


if __name__ == "__main__":
  sys.exit(main())
