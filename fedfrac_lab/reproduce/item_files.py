"""The item files of the GPU campaign, as the renderers read them.

An *item file* is one JSON object with a ``campaign`` entry (the item's id,
kind, table, spec, device, seconds, date, code digest) beside what the item
produced, and ``sha256``: the SHA-256 of the object without that key as
canonical JSON (sorted keys). :func:`read_verified` returns it only when the
checksum matches, so an edited or truncated file is never taken for a result;
an item a window finished in part is marked ``campaign.partial``. The campaign
(:mod:`fedfrac_lab.campaign`) writes and collects them; the tables and the
generated docs read them through :func:`table_files`, one list for both.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import random

CAMPAIGN = os.path.join("results", "campaign")


def canonical(obj) -> bytes:
  return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=float).encode()


def unique_tmp(path, ext: str = "") -> str:
  """A temporary name beside ``path`` no other writer uses (pid and 8 random
  digits): write there, then ``os.replace`` it onto ``path``."""
  return f"{path}.tmp{os.getpid()}{random.SystemRandom().randrange(10 ** 8):08d}{ext}"


def checksum(obj) -> str:
  return hashlib.sha256(canonical({k: v for k, v in obj.items() if k != "sha256"})
                        ).hexdigest()


def write_json_atomic(path, obj):
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  tmp = unique_tmp(path)
  with open(tmp, "w") as f:
    json.dump(obj, f, default=float)
  os.replace(tmp, path)


def write_item(path, payload: dict) -> dict:
  """Write ``payload`` (with its ``campaign`` entry) and its checksum to ``path``."""
  obj = dict(payload)
  obj["sha256"] = checksum(obj)
  write_json_atomic(path, obj)
  return obj


def read_verified(path):
  """The item file at ``path`` if it parses and its checksum matches, else None."""
  try:
    with open(path) as f:
      obj = json.load(f)
  except (OSError, ValueError):
    return None
  if not isinstance(obj, dict) or obj.get("sha256") != checksum(obj) or \
      "campaign" not in obj:
    return None
  return obj


def is_partial(obj) -> bool:
  """Whether an item file holds part of its item (a window stopped inside it)."""
  return bool(obj.get("campaign", {}).get("partial"))


def done_items(folder, partial=False) -> dict:
  """``{item id: path}`` of the verified item files under ``folder`` (recursive);
  those of items finished in part only with ``partial``."""
  out = {}
  if not os.path.isdir(folder):
    return out
  for dirpath, _, names in os.walk(folder):
    for name in sorted(names):
      if name.endswith(".json") and name != "timings.json":
        obj = read_verified(os.path.join(dirpath, name))
        if obj is not None and (partial or not is_partial(obj)):
          out[obj["campaign"]["item"]] = os.path.join(dirpath, name)
  return out


def partial_items(root) -> dict:
  """``{item id: path relative to root}`` of the verified item files under
  ``root/results/campaign`` of items a window finished in part only."""
  folder = os.path.join(root, "results", "campaign")
  done = done_items(folder)
  return {i: os.path.relpath(p, root) for i, p in
          done_items(folder, partial=True).items() if i not in done}


def table_files(root, name, table) -> list:
  """Paths (relative to ``root``) of every file a plan table is rendered from:
  its ``include`` globs, then its verified campaign item files (those of items
  a window finished in part too)."""
  out = []
  for pattern in table.get("include", []):
    out += sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, pattern)))
  folder = os.path.join(root, CAMPAIGN, name)
  done = done_items(folder, partial=True)
  out += sorted(os.path.relpath(p, root) for p in done.values())
  return out
