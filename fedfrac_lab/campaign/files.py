"""The archive a window brings back, around its checksummed item files
(:mod:`fedfrac_lab.reproduce.item_files`: the format, its checksums and which item
files are verified or partial, re-exported here).

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

# The item files themselves (their checksums, which are verified, which finished
# in part) are a results format the renderers read: fedfrac_lab.reproduce.item_files.
from fedfrac_lab.reproduce.item_files import (  # noqa: F401  (re-exported)
    canonical, checksum, done_items, is_partial, partial_items, read_verified,
    unique_tmp, write_item, write_json_atomic)

MANIFEST = "MANIFEST.json"
ARCHIVE = "campaign.tar.gz"
FORMAT = 1


class ArchiveError(ValueError):
  """An archive or item file that fails its checks (one line)."""


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
  tmp = unique_tmp(archive)
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
  try:
    manifest = json.loads(blobs.pop(MANIFEST))
  except ValueError:
    raise ArchiveError(f"archive {archive!r}: {MANIFEST} is not JSON") from None
  if not isinstance(manifest, dict):
    raise ArchiveError(f"archive {archive!r}: {MANIFEST} holds a "
                       f"{type(manifest).__name__}, not an object")
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
      if not isinstance(obj, dict) or obj.get("sha256") != checksum(obj):
        raise ArchiveError(f"archive {archive!r}: {name} does not match its own "
                           "checksum")
  return manifest, blobs
