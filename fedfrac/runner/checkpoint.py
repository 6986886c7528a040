"""Verified checkpoints of a run's engine state and history, and atomic file writes.

A checkpoint step is one directory ``step_<round>/`` under a run's checkpoint
directory (``<workdir>/checkpoints/<method>/seed_<s>/``) holding

* ``state.npz``: the engine state (:class:`fedfrac.sim.state.SimState`), one
  array per leaf, named by the state's own field path (``server/params/Dense_0/
  kernel``, ``clients/...``, ``available``, ``key``, ``round``, ``byzantine``);
* ``history.json``: the run's rows and status up to that round;
* ``manifest.json``: the step, the SHA-256 of both files, and every item's
  shape and dtype.

One commit point: the files are written (and flushed to disk) in a temporary
directory that is then renamed to ``step_<round>``, so a step either exists
whole or not at all; the state and its history can never disagree. On restore
every file is checked against the manifest; a step that fails is reported in one
line on stderr and the previous step is tried. Only the last ``keep`` steps are
kept (state and history together).

Writes that fail because the disk (or quota) is full raise :class:`DiskFullError`,
one line naming the file and the space it needed; a checkpoint cut short that way
leaves no step behind, so the rerun resumes from the step before it.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import re
import secrets
import shutil
import sys
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from fedfrac._validation import ConfigError, setting

FORMAT = 1
STEP_PATTERN = re.compile(r"^step_(\d+)$")
STEP_FILES = ("state.npz", "history.json", "manifest.json")
# Folders of a step being written (``.step_<round>.tmp<pid>``) or replaced
# (``step_<round>.old<pid>``): left behind only by a write cut short.
LEFTOVER_PATTERN = re.compile(r"^(\.step_\d+\.tmp\d+|step_\d+\.old\d+)$")


class CheckpointError(ConfigError):
  """No checkpoint of a run can be used (all failed verification, or they hold a
  state of another shape); the message says what to do."""


class NoIntactCheckpoint(CheckpointError):
  """Every step of a run failed verification (the run can only start again);
  ``found`` says which steps were tried, without the advice."""
  found: str = ""


class DiskFullError(Exception):
  """A write failed because the device (or the user's quota) is full; the
  message names the file and the space it needed."""


def _megabytes(n) -> str:
  """A size for people: KiB rounded up below 1 MiB, else MiB or GiB."""
  if n >= 2**30:
    return f"{n / 2**30:.1f} GiB"
  return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{max(1, -(-int(n) // 2**10))} KiB"


def _on_disk(sizes, folder) -> int:
  """Bytes files of ``sizes`` take on the file system of ``folder``: each rounded
  up to whole blocks, plus a block for their directory when there are several."""
  try:
    block = max(1, os.statvfs(folder).f_frsize)
  except (OSError, AttributeError):
    block = 4096
  blocks = sum(-(-int(n) // block) for n in sizes) + (1 if len(sizes) > 1 else 0)
  return blocks * block


@contextlib.contextmanager
def disk_full_as_error(path, sizes, cleanup=None):
  """Turn ``ENOSPC`` / ``EDQUOT`` while writing ``path`` (files of ``sizes``
  bytes) into :class:`DiskFullError`: one line with the space they need on that
  file system and the space free once ``cleanup()`` removed what the write
  left. Other ``OSError``s pass through."""
  try:
    yield
  except OSError as e:
    if e.errno not in (errno.ENOSPC, errno.EDQUOT):
      raise
    if cleanup is not None:
      cleanup()
    folder = os.path.dirname(os.path.abspath(path))
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
      folder = os.path.dirname(folder)
    try:
      shown = f", {_megabytes(shutil.disk_usage(folder).free)} free"
    except OSError:
      shown = ""
    raise DiskFullError(f"no space left on the device to write {path} "
                        f"({_megabytes(_on_disk(sizes, folder))} needed{shown}; "
                        f"{e.strerror or 'disk full'})") from None


def json_default(o):
  """``json.dumps`` fallback for NumPy scalars and arrays (else ``str``)."""
  if isinstance(o, (np.floating,)):
    return float(o)
  if isinstance(o, (np.integer,)):
    return int(o)
  if isinstance(o, np.ndarray):
    return o.tolist()
  return str(o)


def unique_tmp(path, ext: str = "") -> str:
  """A temporary name beside ``path`` that no other writer uses:
  ``<path>.tmp<pid><8 random digits><ext>`` (processes of several hosts may
  share a pid; the random digits tell them apart). Writing there and renaming
  with ``os.replace`` makes concurrent writers of one file each replace it
  whole; a name cut short still matches ``.tmp<digits>``."""
  return f"{path}.tmp{os.getpid()}{secrets.randbelow(10 ** 8):08d}{ext}"


def atomic_write(path, text):
  """Write ``text`` to ``path`` through a temporary file of its own
  (:func:`unique_tmp`) and a rename (:class:`DiskFullError` when the disk is
  full; ``path`` is then unchanged)."""
  tmp = unique_tmp(path)
  data = text.encode() if isinstance(text, str) else text

  def remove_tmp():
    with contextlib.suppress(OSError):
      os.remove(tmp)
  try:
    with disk_full_as_error(path, [len(data)], cleanup=remove_tmp):
      with open(tmp, "wb") as f:
        f.write(data)
  except BaseException:
    remove_tmp()
    raise
  os.replace(tmp, path)


def write_file(path, data: bytes) -> None:
  """Write ``data`` to a new file ``path`` and flush it to disk."""
  with open(path, "wb") as f:
    f.write(data)
    f.flush()
    os.fsync(f.fileno())


def commit(tmp_dir, final_dir) -> None:
  """Make the fully written ``tmp_dir`` the step ``final_dir`` (one rename)."""
  os.replace(tmp_dir, final_dir)


def _key_name(key) -> str:
  for attr in ("name", "key", "idx"):
    if hasattr(key, attr):
      return str(getattr(key, attr))
  return str(key)


def named_leaves(state) -> dict:
  """``{field path: leaf}`` of a state pytree, e.g. ``server/params/Dense_0/bias``."""
  flat, _ = jax.tree_util.tree_flatten_with_path(state)
  return {"/".join(_key_name(k) for k in path): leaf for path, leaf in flat}


def _sha256(data: bytes) -> str:
  return hashlib.sha256(data).hexdigest()


_VERIFIED: dict = {}   # step folder -> (its files' stat signature, manifest)


class Checkpointer:
  """Verified checkpoints of one (method, seed) run in ``directory``
  (``label``: the run's method, named in what an error advises)."""

  def __init__(self, directory, keep: int = 2, label: Optional[str] = None):
    self.directory = os.path.abspath(directory)
    self.keep = keep
    self.label = label
    os.makedirs(self.directory, exist_ok=True)

  @property
  def advice(self) -> str:
    """What to do when no step can be used: restart this method's runs only."""
    method = self.label or "<method>"
    return (f"rerun with {setting('overwrite', method)} to restart {method}'s runs (other "
            f"methods' results are kept)")

  def steps(self) -> list:
    """Committed steps, oldest first: ``step_<round>`` folders holding at least
    one of :data:`STEP_FILES` (an empty or foreign folder is not a step)."""
    out = []
    for name in os.listdir(self.directory):
      m = STEP_PATTERN.match(name)
      path = os.path.join(self.directory, name)
      if m and os.path.isdir(path) and any(
          os.path.lexists(os.path.join(path, f)) for f in STEP_FILES):
        out.append(int(m.group(1)))
    return sorted(out)

  def latest(self) -> Optional[int]:
    steps = self.steps()
    return steps[-1] if steps else None

  def latest_verified(self) -> Optional[int]:
    """The newest step whose files match its manifest (None: no intact step)."""
    for step in reversed(self.steps()):
      try:
        self.verify(step)
        return step
      except ValueError:
        continue
    return None

  def _remove(self, path) -> list:
    """Delete the files fedfrac writes in the step folder ``path`` and the folder
    once empty; returns the names of the other files left there."""
    for name in STEP_FILES:
      with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(path, name))
    try:
      left = sorted(os.listdir(path))
    except FileNotFoundError:
      return []
    if not left:
      os.rmdir(path)
    return left

  def _remove_step(self, step) -> None:
    """:meth:`_remove` step ``step``; files of one's own keep its folder (said
    in one line on stderr)."""
    left = self._remove(self.step_dir(step))
    if left:
      shown = ", ".join(left[:3]) + (", ..." if len(left) > 3 else "")
      print(f"checkpoint {self.step_dir(step)}: removed fedfrac's files; kept the "
            f"folder for the files fedfrac did not write there ({shown})",
            file=sys.stderr)

  def step_dir(self, step) -> str:
    return os.path.join(self.directory, f"step_{int(step)}")

  def save(self, step, state, history) -> None:
    """Write step ``step`` (state + history) with one commit point, then prune."""
    arrays = {name: np.asarray(leaf) for name, leaf in named_leaves(state).items()}
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    state_bytes = buf.getvalue()
    history_bytes = json.dumps(history, default=json_default).encode()
    manifest = {"format": FORMAT, "step": int(step),
                "files": {"state.npz": _sha256(state_bytes),
                          "history.json": _sha256(history_bytes)},
                "items": {k: [list(a.shape), str(a.dtype)] for k, a in arrays.items()}}
    tmp = os.path.join(self.directory, f".step_{int(step)}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    manifest_bytes = json.dumps(manifest).encode()
    sizes = [len(state_bytes), len(history_bytes), len(manifest_bytes)]
    # No half step is left: what the failed write took is freed first.
    with disk_full_as_error(self.step_dir(step), sizes,
                            cleanup=lambda: shutil.rmtree(tmp, ignore_errors=True)):
      os.makedirs(tmp)
      write_file(os.path.join(tmp, "state.npz"), state_bytes)
      write_file(os.path.join(tmp, "history.json"), history_bytes)
      write_file(os.path.join(tmp, "manifest.json"), manifest_bytes)
    final = self.step_dir(step)
    if os.path.exists(final):    # re-saving a step (e.g. a resumed run's last round)
      old = final + f".old{os.getpid()}"
      os.replace(final, old)
      commit(tmp, final)
      for name in os.listdir(old):   # files of one's own move to the new step
        if name not in STEP_FILES:
          os.replace(os.path.join(old, name), os.path.join(final, name))
      self._remove(old)
    else:
      commit(tmp, final)
    self._prune()

  def _prune(self):
    """Drop all but the last ``keep`` steps and leftovers of interrupted writes
    (only the files fedfrac wrote in them)."""
    for step in self.steps()[:-self.keep]:
      self._remove_step(step)
    for name in os.listdir(self.directory):
      path = os.path.join(self.directory, name)
      if LEFTOVER_PATTERN.match(name) and os.path.isdir(path):
        self._remove(path)

  def verify(self, step) -> dict:
    """The manifest of an intact step; raises ``ValueError`` saying what is wrong.
    A step verified before in this process whose files are unchanged since
    (same inode, size and change times) is not read again."""
    d = self.step_dir(step)
    try:
      seen = tuple((s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns) for s in
                   (os.stat(os.path.join(d, name)) for name in STEP_FILES))
    except OSError:
      seen = None
    if seen is not None and _VERIFIED.get(d, (None,))[0] == seen:
      return _VERIFIED[d][1]
    manifest = self._verify_files(d, step)
    if seen is not None:
      _VERIFIED[d] = (seen, manifest)
    return manifest

  def _verify_files(self, d, step) -> dict:
    try:
      with open(os.path.join(d, "manifest.json"), "rb") as f:
        manifest = json.loads(f.read())
      files = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError) as e:
      raise ValueError(f"manifest.json unreadable ({type(e).__name__})") from None
    if manifest.get("step") != int(step) or set(files) != {"state.npz", "history.json"}:
      raise ValueError("manifest.json does not describe this step")
    for name, digest in files.items():
      try:
        with open(os.path.join(d, name), "rb") as f:
          data = f.read()
      except OSError:
        raise ValueError(f"{name} missing") from None
      if _sha256(data) != digest:
        raise ValueError(f"{name} checksum mismatch")
    return manifest

  def _load(self, step, like_state):
    d = self.step_dir(step)
    with np.load(os.path.join(d, "state.npz"), allow_pickle=False) as npz:
      stored = {k: npz[k] for k in npz.files}
    with open(os.path.join(d, "history.json")) as f:
      history = json.load(f)
    like = named_leaves(like_state)
    if set(stored) != set(like):
      missing = sorted(set(like) ^ set(stored))
      raise CheckpointError(
          f"checkpoint {d}: its items differ from this config's state ({missing[0]}, "
          f"...); {self.advice}")
    leaves = []
    for name, leaf in like.items():
      a, want = stored[name], np.asarray(leaf)
      if a.shape != want.shape or a.dtype != want.dtype:
        raise CheckpointError(
            f"checkpoint {d}: item {name} is {a.dtype}{list(a.shape)} but this config "
            f"builds {want.dtype}{list(want.shape)}; {self.advice}")
      leaves.append(jnp.asarray(a))
    treedef = jax.tree.structure(like_state)
    return jax.tree.unflatten(treedef, leaves), history

  def restore_latest(self, like_state):
    """``(step, state, history)`` of the newest intact step, ``None`` if there are
    no steps. A step that fails verification is reported on stderr and the one
    before it is used; raises :class:`CheckpointError` when none is intact."""
    steps = self.steps()
    if not steps:
      return None
    bad = []
    for step in reversed(steps):
      try:
        self.verify(step)
      except ValueError as e:
        bad.append(step)
        then = ("trying the step before it" if step != steps[0] else
                "no step before it")
        print(f"checkpoint {self.step_dir(step)} failed verification ({e}); {then}",
              file=sys.stderr)
        continue
      state, history = self._load(step, like_state)
      for b in bad:   # never resume from it later, never prune the good one for it
        self._remove_step(b)
      return step, state, history
    found = (f"checkpoints in {self.directory}: no intact step (tried "
             f"{', '.join(map(str, reversed(steps)))})")
    error = NoIntactCheckpoint(f"{found}; {self.advice}")
    error.found = found
    raise error

  def latest_history(self):
    """``(step, history)`` of the newest intact step (its state is not read), or
    ``None`` when no step is intact."""
    for step in reversed(self.steps()):
      try:
        self.verify(step)
        with open(os.path.join(self.step_dir(step), "history.json")) as f:
          return step, json.load(f)
      except (OSError, ValueError):
        continue
    return None

  def remove_steps(self) -> None:
    """Delete every step (e.g. all failed verification and the run starts again)."""
    for step in self.steps():
      self._remove_step(step)

  def restore(self, step, like_state):
    """``(state, history)`` of step ``step`` (verified)."""
    try:
      self.verify(step)
    except ValueError as e:
      raise CheckpointError(f"checkpoint {self.step_dir(step)}: {e}") from None
    return self._load(step, like_state)
