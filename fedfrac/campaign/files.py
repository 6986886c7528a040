"""Checksummed item files and the archive a window brings back.

An *item file* is one JSON object with a ``campaign`` entry (the item's id,
kind, table, spec, device, seconds, date, code digest) beside what the item
produced, and ``sha256``: the SHA-256 of the object without that key as
canonical JSON (sorted keys). :func:`read_verified` returns it only when the
checksum matches, so an edited or truncated file is never taken for a result.

The *archive* (``campaign.tar.gz``) holds ``MANIFEST.json`` (the window's
device, budget, plan digest, and the SHA-256 of every other member), the item
files under ``items/<table>/<id>.json``, ``measurements/<name>.json``, the log
and the timing table. It is rewritten (to a temporary name, then renamed)
after every finished item, so a window killed at any moment leaves the archive
of everything finished before.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import time

MANIFEST = "MANIFEST.json"
ARCHIVE = "campaign.tar.gz"
FORMAT = 1


class ArchiveError(ValueError):
  """An archive or item file that fails its checks (one line)."""


def canonical(obj) -> bytes:
  return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=float).encode()


def checksum(obj) -> str:
  return hashlib.sha256(canonical({k: v for k, v in obj.items() if k != "sha256"})
                        ).hexdigest()


def write_json_atomic(path, obj):
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  tmp = f"{path}.tmp{os.getpid()}"
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


def _sha_file(path):
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      h.update(block)
  return h.hexdigest()


def pack(staging, archive, manifest: dict):
  """Write ``archive`` (tar.gz) of every file under ``staging`` plus
  ``MANIFEST.json`` (``manifest`` and the members' SHA-256), atomically."""
  members = []
  for dirpath, _, names in os.walk(staging):
    for name in sorted(names):
      if ".tmp" in name:
        continue
      path = os.path.join(dirpath, name)
      members.append((os.path.relpath(path, staging), path))
  members.sort()
  man = dict(manifest, format=FORMAT, packed=time.strftime("%Y-%m-%dT%H:%M:%S"),
             files={rel: _sha_file(path) for rel, path in members})
  data = json.dumps(man, indent=1, sort_keys=True).encode()
  tmp = f"{archive}.tmp{os.getpid()}"
  with tarfile.open(tmp, "w:gz") as tar:
    info = tarfile.TarInfo(MANIFEST)
    info.size, info.mtime = len(data), int(time.time())
    tar.addfile(info, io.BytesIO(data))
    for rel, path in members:
      tar.add(path, arcname=rel, recursive=False)
  os.replace(tmp, archive)
  return man


def read_archive(archive) -> tuple:
  """``(manifest, {member: bytes})`` of ``archive`` after checking every member
  against the manifest and every item file against its own checksum; raises
  :class:`ArchiveError` naming the first problem."""
  try:
    with tarfile.open(archive, "r:gz") as tar:
      blobs = {}
      for m in tar.getmembers():
        if not m.isfile():
          continue
        name = os.path.normpath(m.name)
        if name.startswith("..") or os.path.isabs(name):
          raise ArchiveError(f"archive {archive!r}: member {m.name!r} points outside it")
        blobs[name] = tar.extractfile(m).read()
  except (OSError, tarfile.TarError, EOFError) as e:
    raise ArchiveError(f"archive {archive!r}: not a readable tar.gz ({e})") from None
  if MANIFEST not in blobs:
    raise ArchiveError(f"archive {archive!r}: no {MANIFEST}")
  manifest = json.loads(blobs.pop(MANIFEST))
  if manifest.get("format") != FORMAT:
    raise ArchiveError(f"archive {archive!r}: format {manifest.get('format')!r}, "
                       f"this code reads {FORMAT}")
  listed = manifest.get("files", {})
  for name in sorted(set(listed) | set(blobs)):
    if name not in blobs:
      raise ArchiveError(f"archive {archive!r}: {name} is in the manifest but missing")
    if name not in listed:
      raise ArchiveError(f"archive {archive!r}: {name} is not in the manifest")
    if hashlib.sha256(blobs[name]).hexdigest() != listed[name]:
      raise ArchiveError(f"archive {archive!r}: {name} does not match its checksum "
                         "in the manifest")
    if name.startswith(("items/", "measurements/")):
      try:
        obj = json.loads(blobs[name])
      except ValueError:
        raise ArchiveError(f"archive {archive!r}: {name} is not JSON") from None
      if obj.get("sha256") != checksum(obj):
        raise ArchiveError(f"archive {archive!r}: {name} does not match its own "
                           "checksum")
  return manifest, blobs
