"""Compiling off the critical path: a second process of the GPU window compiles
the programs of the window's FIRMA column items, in plan order, into the
window's persistent compilation cache while the worker runs stage a and the
items before them; the worker then loads each program from the cache instead of
compiling it (``--compile-ahead``, :mod:`fedfrac_lab.campaign.supervisor`).

Both processes compile through the same code (:func:`fedfrac_lab.campaign.items.run_item`
with ``compile_only`` here), so a program has the same cache key in both, and
both go through one :class:`CompileSync` in a shared folder: the first to reach
a program claims it (``<key>.compiling``, created exclusively) and marks it
``<key>.done`` when compiled; the other waits for the mark and then loads the
program from the cache. Each claim also records which cache entries the
compilation wrote (``<key>.entries``), so the window can carry the entries of
the items it did not reach to the next window first
(:mod:`fedfrac_lab.campaign.carried_cache`).
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time

WAIT_S = 600.0       # longest a process waits for the other one's compilation


def program_key(name: str) -> str:
  return hashlib.sha256(name.encode()).hexdigest()[:24]


class CompileSync:
  """Claim-or-wait around each compilation (``before`` / ``after``), for the
  programs of one item (``item`` prefixes the names)."""

  def __init__(self, sync_dir, cache_dir=None, log=None, who="worker"):
    self.sync_dir, self.cache_dir, self.log, self.who = sync_dir, cache_dir, log, who
    os.makedirs(sync_dir, exist_ok=True)
    self._listing = {}

  def _path(self, name, state):
    return os.path.join(self.sync_dir, f"{program_key(name)}.{state}")

  def _entries(self):
    if not self.cache_dir or not os.path.isdir(self.cache_dir):
      return set()
    return {n for n in os.listdir(self.cache_dir) if n.endswith("-cache")}

  def before(self, name):
    """Claim ``name``, or wait until the process that claimed it has compiled it."""
    self._listing[name] = self._entries()
    try:
      fd = os.open(self._path(name, "compiling"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
      t0 = time.time()
      while (not os.path.exists(self._path(name, "done"))
             and time.time() - t0 < WAIT_S):
        time.sleep(0.1)
      waited = time.time() - t0
      if self.log is not None and waited > 0.5:
        self.log(f"  waited {waited:.1f}s for the other process to compile {name}")
      return
    with os.fdopen(fd, "w") as f:
      f.write(f"{self.who} {os.getpid()}\n")

  def after(self, name):
    """Mark ``name`` compiled and record the cache entries that appeared."""
    new = sorted(self._entries() - self._listing.pop(name, set()))
    if new:
      with open(self._path(name, "entries"), "w") as f:
        json.dump({"name": name, "files": new, "who": self.who}, f)
    with open(self._path(name, "done"), "w") as f:
      f.write(f"{self.who}\n")

  def for_item(self, item_id):
    """``(before, after)`` hooks of one item's programs."""
    return (lambda name: self.before(f"{item_id}:{name}"),
            lambda name: self.after(f"{item_id}:{name}"))


def item_entries(sync_dir) -> dict:
  """``{item id: [cache entry files]}`` recorded by :meth:`CompileSync.after`."""
  out = {}
  if not os.path.isdir(sync_dir):
    return out
  for n in sorted(os.listdir(sync_dir)):
    if n.endswith(".entries"):
      try:
        with open(os.path.join(sync_dir, n)) as f:
          d = json.load(f)
        out.setdefault(d["name"].split(":", 1)[0], []).extend(d["files"])
      except (OSError, ValueError, KeyError):
        continue
  return out


def compile_items(items, data_dir, context, sync_dir, log) -> int:
  """Compile every program of the FIRMA column ``items`` in order (nothing
  runs); returns the number of items gone through. Errors are logged and the
  next item goes on: the worker compiles what is missing itself."""
  from fedfrac_lab.campaign import items as items_lib
  sync = CompileSync(sync_dir, context.get("cache_dir"), log, who="compile-ahead")
  done = 0
  for item in items:
    if item["kind"] != "firma" or "scenarios" not in item["spec"]:
      continue
    before, after = sync.for_item(item["id"])
    t0 = time.perf_counter()
    try:
      items_lib.run_firma_column(item, data_dir, lambda msg: None, dict(
          context, compile_only=True, before_compile=before, after_compile=after))
    except Exception as e:  # noqa: BLE001 - the worker compiles it itself
      log(f"compile-ahead: {item['label']}: {type(e).__name__}: {e}")
      continue
    done += 1
    log(f"compile-ahead: {item['label']} compiled in {time.perf_counter() - t0:.1f} s")
  return done


def main_child(request_line, data_dir, log_fd):
  """The forked compile-ahead process: a lower priority than the worker, the
  accelerator's memory allocated on demand, then :func:`compile_items`."""
  os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
  try:
    os.nice(5)
  except OSError:
    pass
  out = os.fdopen(log_fd, "w", buffering=1)

  def log(msg):
    out.write(msg + "\n")
  request = json.loads(request_line)
  compile_items(request["items"], data_dir, dict(request.get("context") or {}),
                request["context"]["sync_dir"], log)
  out.flush()
  sys.stdout.flush()
