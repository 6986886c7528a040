"""The compilation cache one GPU window carries to the next.

A window compiles into ``.gpu-cache/xla`` of its checkout (JAX's persistent
cache: compiled programs, and on a GPU XLA's autotuning results in a folder of
their own). At its end it packs the entries most useful to the next window into
``OUT/xla_cache.tar`` (:func:`pack`: first those of the plan items it compiled
ahead but did not reach, in plan order, then the autotuning results, then the
newest others, up to ``cap`` bytes: a window carries at most 64 MiB in all,
data and wheels included), with a manifest of the jax / jaxlib versions and
the device. ``fedfrac-campaign collect`` unpacks it into ``.gpu-cache/``
(ignored by git) beside the results (:func:`unpack`), and the next window,
called with ``.gpu-cache`` among the carried folders, starts with those
entries. JAX keys every entry by the program, the compile options, the device
kind and the jax / jaxlib versions, so entries from another version or device
are simply not found; the window says so in one line (:func:`describe`).
"""
from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import time
from fedfrac_lab.reproduce.item_files import unique_tmp

FOLDER = ".gpu-cache"     # in the checkout, ignored by git, carried to a window
ENTRIES = "xla"           # JAX's persistent cache inside it
MANIFEST = "MANIFEST.json"
TAR = "xla_cache.tar"
CAP_BYTES = 10 << 20


def directory(root) -> str:
  return os.path.join(root, FOLDER, ENTRIES)


def _files(cache_dir):
  """``[(relative path, bytes, mtime)]`` of every file under ``cache_dir``."""
  out = []
  for dirpath, _, names in os.walk(cache_dir):
    for n in names:
      if n.startswith(".") or n.endswith("-atime"):
        continue             # JAX's lock file and access times
      path = os.path.join(dirpath, n)
      st = os.stat(path)
      out.append((os.path.relpath(path, cache_dir), st.st_size, st.st_mtime))
  return out


def describe(root, jax_version=None, device=None) -> str:
  """One line on the cache a window starts with: its entries and where they were
  compiled, and whether they can serve this window (``jax_version``,
  ``device``)."""
  cache = directory(root)
  files = _files(cache) if os.path.isdir(cache) else []
  if not files:
    return "compile cache: none carried (every program compiles in this window)"
  size = sum(b for _, b, _ in files) / 2 ** 20
  man = {}
  try:
    with open(os.path.join(root, FOLDER, MANIFEST)) as f:
      man = json.load(f)
  except (OSError, ValueError):
    pass
  where = (f"jax {man.get('jax', '?')} on {man.get('device', '?')}, from the window "
           f"of {man.get('window', '?')}")
  line = f"compile cache: {len(files)} files ({size:.1f} MiB) carried, {where}"
  if jax_version and device and man:
    if man.get("jax") == jax_version and man.get("device") == device:
      return line + ": the same jax and device, its programs load instead of compiling"
    return (line + f": this window runs jax {jax_version} on {device}, so JAX will not "
            "find them and compiles afresh")
  return line


def pack(cache_dir, out_path, manifest, first=(), cap=CAP_BYTES) -> dict:
  """Write ``out_path`` (tar) with ``manifest`` and the entries of ``cache_dir``
  that fit in ``cap`` bytes: the files named in ``first`` (in that order), then
  everything in sub-folders (XLA's autotuning results), then the newest others.
  Returns ``{"files", "bytes", "left_out"}``."""
  files = _files(cache_dir) if os.path.isdir(cache_dir) else []
  by_name = {rel: (b, t) for rel, b, t in files}
  order = [f for f in dict.fromkeys(first) if f in by_name]
  order += sorted((rel for rel, _, _ in files if os.sep in rel and rel not in order),
                  key=lambda r: -by_name[r][1])
  order += sorted((rel for rel, _, _ in files if rel not in order),
                  key=lambda r: -by_name[r][1])
  chosen, total = [], 0
  for rel in order:
    if total + by_name[rel][0] <= cap:
      chosen.append(rel)
      total += by_name[rel][0]
  man = dict(manifest, files=len(chosen), bytes=total, packed=time.strftime(
      "%Y-%m-%dT%H:%M:%S"))
  tmp = unique_tmp(out_path)
  with tarfile.open(tmp, "w") as tar:
    data = json.dumps(man, indent=1, sort_keys=True).encode()
    info = tarfile.TarInfo(MANIFEST)
    info.size, info.mtime = len(data), int(time.time())
    tar.addfile(info, io.BytesIO(data))
    for rel in chosen:
      tar.add(os.path.join(cache_dir, rel), arcname=f"{ENTRIES}/{rel}", recursive=False)
  os.replace(tmp, out_path)
  return {"files": len(chosen), "bytes": total, "left_out": len(files) - len(chosen)}


def unpack(tar_path, root) -> dict:
  """Replace ``root/.gpu-cache`` by the content of ``tar_path`` (a window's
  :func:`pack`); returns its manifest. Raises ``ValueError`` (one line) for a
  file that is not such a tar."""
  try:
    with tarfile.open(tar_path, "r") as tar:
      members = [m for m in tar.getmembers() if m.isfile()]
      for m in members:
        name = os.path.normpath(m.name)
        if name.startswith("..") or os.path.isabs(name) or not (
            name == MANIFEST or name.startswith(ENTRIES + os.sep)):
          raise ValueError(f"{tar_path}: member {m.name!r} is not a cache entry")
      if MANIFEST not in {m.name for m in members}:
        raise ValueError(f"{tar_path}: no {MANIFEST}")
      manifest = json.loads(tar.extractfile(MANIFEST).read())
      folder = os.path.join(root, FOLDER)
      tmp = unique_tmp(folder)
      shutil.rmtree(tmp, ignore_errors=True)
      for m in members:
        dest = os.path.join(tmp, os.path.normpath(m.name))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "wb") as f:
          f.write(tar.extractfile(m).read())
  except (OSError, tarfile.TarError, EOFError) as e:
    raise ValueError(f"{tar_path}: not a readable cache tar ({e})") from None
  shutil.rmtree(folder, ignore_errors=True)
  os.replace(tmp, folder)
  return manifest
