"""The campaign's worker: checks the device, then runs the items the supervisor
sends, in order, and stops starting items when the time left is under the next
one's estimate (an item estimated longer than a whole window is skipped, with a
line saying so, instead of stopping every window at it). The supervisor forks
it (the package is imported once) and kills it at the deadline; ``python -m
fedfrac_lab.campaign.worker`` runs it alone.

Talks to the supervisor in JSON lines: events on one stream (everything the
code prints goes to stderr), one request on another::

  -> {"event": "hello"}                        before anything heavy
  -> {"event": "device", "device", "platform", "slug", "jax", "devices",
      "torch", "torch_cuda", "memory_bytes", "seconds"}
  <- {"items": [...], "estimates": {id: s}, "deadline": epoch s, "window": s,
      "context": {"root", "cache_dir", "step_time", "sync_dir"}}
  -> {"event": "start" | "done" | "failed" | "skip" | "stop" | "progress",
      "item": id, ...}
  -> {"event": "end"}

A FIRMA column writes its item file after each compiled program (``progress``:
the supervisor repacks the archive, so a window stopped inside the item keeps
its finished cells). With a ``sync_dir``, the worker waits before compiling a
program that the compile-ahead process (:mod:`fedfrac_lab.campaign.precompile`) is
compiling at that moment, then loads it from the cache.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback


def _events():
  """A line-buffered stream on the original stdout; fd 1 then points at stderr,
  so stray prints cannot break the event stream."""
  out = os.fdopen(os.dup(1), "w", buffering=1)
  os.dup2(2, 1)
  sys.stdout = sys.stderr
  return out


def device_check() -> dict:
  t0 = time.perf_counter()
  import jax
  from fedfrac_lab.campaign import items
  devs = jax.devices()
  info = {"event": "device", "platform": devs[0].platform,
          "device": items.device_label(), "devices": [str(d) for d in devs],
          "jax": jax.__version__, "torch": None, "torch_cuda": False}
  info["slug"] = items.device_slug(info["device"])
  from fedfrac.runner.local_devices import worker_memory_bytes
  info["memory_bytes"] = worker_memory_bytes(1)
  try:
    import torch
    info["torch"], info["torch_cuda"] = torch.__version__, bool(torch.cuda.is_available())
  except ImportError:
    pass
  info["seconds"] = time.perf_counter() - t0
  return info


def log(msg):
  print(msg, file=sys.stderr, flush=True)


def serve(events, request, staging, data_dir) -> int:
  """Emit ``hello`` and the device, read one request, run its items; ``events``
  is a writable text stream, ``request`` a readable one."""
  def emit(**kw):
    events.write(json.dumps(kw) + "\n")
    events.flush()
  emit(event="hello", pid=os.getpid())
  emit(**device_check())
  line = request.readline()
  if not line:
    return 0
  request = json.loads(line)
  from fedfrac_lab.campaign import items as items_lib
  from fedfrac_lab.campaign.plan import SAFETY
  from fedfrac_lab.reproduce import jobs
  code = jobs.code_digest()
  measured = {}
  context = dict(request.get("context") or {})
  sync_dir = context.pop("sync_dir", None)
  sync = None
  if sync_dir:
    from fedfrac_lab.campaign import precompile
    sync = precompile.CompileSync(sync_dir, context.get("cache_dir"), log)
  for item in request["items"]:
    key = item["timing_key"]
    est = SAFETY * measured[key] if key in measured else request["estimates"][item["id"]]
    left = request["deadline"] - time.time()
    if est > request.get("window", float("inf")):
      # Longer than a whole window: it would stop every window here. Go on.
      emit(event="skip", item=item["id"], label=item["label"], estimate=est)
      continue
    if est > left:
      emit(event="stop", item=item["id"], label=item["label"], estimate=est, left=left)
      break
    emit(event="start", item=item["id"], label=item["label"], estimate=est, key=key)
    t0 = time.perf_counter()
    progress = lambda path, item=item: emit(event="progress", item=item["id"], path=path)
    hooks = {}
    if sync is not None:
      hooks = dict(zip(("before_compile", "after_compile"), sync.for_item(item["id"])))
    try:
      path = items_lib.run_item(item, data_dir, staging, code, log,
                                dict(context, progress=progress, **hooks))
    except (Exception, SystemExit) as e:   # a plan entry that fails: say so, go on
      traceback.print_exc()
      text = str(e).strip().splitlines()
      emit(event="failed", item=item["id"], label=item["label"],
           error=f"{type(e).__name__}: {text[-1] if text else ''}",
           seconds=time.perf_counter() - t0)
      continue
    seconds = time.perf_counter() - t0
    measured[key] = seconds
    from fedfrac_lab.reproduce import item_files
    stats = items_lib.item_stats(item_files.read_verified(path) or {})
    emit(event="done", item=item["id"], label=item["label"], seconds=seconds, path=path,
         key=key, stats=stats)
  emit(event="end", modules=third_party_modules())
  return 0


def third_party_modules() -> list:
  """Top-level modules imported in this process that are neither the standard
  library's nor the project's (what the GPU image or the wheels must provide)."""
  names = {m.split(".")[0] for m in list(sys.modules)}
  return sorted(n for n in names if not n.startswith("_") and n not in ("fedfrac", "fedfrac_lab")
                and n not in sys.stdlib_module_names and n not in sys.builtin_module_names
                and getattr(sys.modules.get(n), "__file__", None))   # files, not stubs


def main(argv=None):
  """Run as a program: events on stdout, the request on stdin."""
  p = argparse.ArgumentParser(prog="python -m fedfrac_lab.campaign.worker")
  p.add_argument("--staging", required=True)
  p.add_argument("--data", required=True)
  args = p.parse_args(argv)
  return serve(_events(), sys.stdin, args.staging, args.data)


if __name__ == "__main__":
  sys.exit(main())
