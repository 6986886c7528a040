"""Claims on the batches of a sweep shared by several hosts (``fedfrac-sweep
--shard=I/N``), in its point directory.

A shard runs a batch only after it *claims* it: it creates
``<directory>/claims/<batch key>.claim`` with ``O_CREAT | O_EXCL`` (atomic on a
local filesystem and on NFS v3 and later), so of two hosts that try at the same
moment exactly one gets the batch. The file names its owner (host, process,
shard); its modification time is its *heartbeat*, renewed every
``heartbeat_s`` seconds by the process running the batch (:func:`holding`). A
claim whose heartbeat is older than ``timeout_s``, whose owner is a process of
this host that no longer exists, or whose owner is an earlier run of the same
shard (a shard is one process at a time: a rerun or a requeued job array task)
is *stale*: the next shard that meets it takes the batch over, by renaming the
stale file away (only one host's rename succeeds) and claiming afresh. So is a
claim file that is not one: garbage, empty for longer than a claim takes to
write, or dated in the future (beyond two heartbeats of clock skew). The
owner removes its claim when the batch's points are written (or it fails);
after Ctrl-C / SIGTERM the sweep removes every claim it still holds.

Claims only prevent duplicated work: every point file is written atomically and a
batch's points are the same whichever host runs it (same batch layout,
:func:`agree`), so even a batch run twice (a host thought dead that was only
slow) leaves the same table.
"""
from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from typing import Optional

CLAIMS = "claims"
HEARTBEAT_S = 30.0
TIMEOUT_S = 600.0
EMPTY_GRACE_S = 10.0   # an empty claim file younger than this may be being written
_CLAIM_KEYS = ("owner", "host", "pid", "shard")


def write_new(path: str, text: str) -> bool:
  """Create ``path`` holding ``text`` unless it exists (atomically: a unique
  temporary file, then a hard link, which fails when ``path`` exists); whether
  this call created it."""
  tmp = f"{path}.{socket.gethostname()}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
  with open(tmp, "w") as f:
    f.write(text)
  try:
    os.link(tmp, path)
    return True
  except FileExistsError:
    return False
  finally:
    os.unlink(tmp)


def agree(path: str, proposal: dict, log=None) -> dict:
  """The settings every shard of a sweep uses: the first shard's ``proposal``,
  written to ``path`` (:func:`write_new`); later shards read and use it. A file
  there that is not such settings (truncated, garbage) is replaced by
  ``proposal``, saying so in one line (``log``, default stderr)."""
  for _ in range(5):
    write_new(path, json.dumps(proposal, sort_keys=True))
    try:
      with open(path) as f:
        agreed = json.load(f)
      if isinstance(agreed, dict) and set(agreed) == set(proposal):
        return agreed
      why = "not this sweep's settings"
    except FileNotFoundError:   # replaced by another shard meanwhile: read again
      continue
    except ValueError:
      why = "truncated or not JSON"
    moved = f"{path}.damaged.{socket.gethostname()}.{os.getpid()}"
    try:
      os.rename(path, moved)   # of several shards replacing it, one succeeds
    except FileNotFoundError:
      continue
    os.unlink(moved)
    (log or _stderr)(f"{path} was unreadable ({why}); replaced it with this shard's "
                     f"settings")
  raise OSError(f"{path}: cannot agree on the sweep's settings (replaced 5 times)")


def _stderr(line):
  import sys
  print(line, file=sys.stderr)


def _alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:   # someone else's process
    return True
  return True


class Claim:
  """A claim this process holds: its path and the open file (the heartbeat
  touches this file, not whatever the path names later)."""

  def __init__(self, path: str, fd: int):
    self.path, self.fd = path, fd

  def beat(self):
    os.utime(self.fd)

  def release(self):
    """Remove the claim file if it is still this claim's, and close it."""
    try:
      if os.stat(self.path).st_ino == os.fstat(self.fd).st_ino:
        os.unlink(self.path)
    except OSError:
      pass
    finally:
      with contextlib.suppress(OSError):
        os.close(self.fd)


class Claims:
  """The claims of one shard (``shard``: e.g. ``"0/4"``, the same in every run
  of that shard) in ``directory/claims``; picklable (sent to worker processes,
  which claim the batches they run under the same owner)."""

  def __init__(self, directory: str, shard: str, timeout_s: float = TIMEOUT_S,
               heartbeat_s: float = HEARTBEAT_S):
    self.directory = os.path.join(os.path.abspath(directory), CLAIMS)
    os.makedirs(self.directory, exist_ok=True)
    self.shard, self.timeout_s, self.heartbeat_s = shard, float(timeout_s), float(heartbeat_s)
    self.host = socket.gethostname()
    self.owner = f"{self.host}:{os.getpid()}:{uuid.uuid4().hex[:12]}"

  def path(self, key: str) -> str:
    return os.path.join(self.directory, f"{key}.claim")

  def _create(self, path: str) -> Optional[Claim]:
    try:
      fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
      return None
    record = {"owner": self.owner, "host": self.host, "pid": os.getpid(),
              "shard": self.shard, "claimed_at": time.time()}
    os.write(fd, json.dumps(record).encode())
    os.fsync(fd)
    return Claim(path, fd)

  def stale(self, record, age_s: float) -> Optional[str]:
    """Why a claim (its ``record``: the parsed file, None when it is not JSON;
    and heartbeat age) may be taken over, or None."""
    if age_s > self.timeout_s:
      return f"no heartbeat for {age_s:.0f} s"
    if age_s < -2 * self.heartbeat_s:
      return f"its heartbeat is dated {-age_s:.0f} s in the future"
    if record is None:
      return "not a claim (garbage)"
    if not isinstance(record, dict) or not all(k in record for k in _CLAIM_KEYS):
      if record == {} and age_s < EMPTY_GRACE_S:   # being written
        return None
      return "not a claim (empty or incomplete)"
    if record.get("owner") == self.owner:
      return None
    if record.get("shard") == self.shard:
      return f"left by an earlier run of shard {self.shard}"
    if record.get("host") == self.host and isinstance(record.get("pid"), int) and (
        not _alive(record["pid"])):
      return f"its process {record['pid']} on this host is gone"
    return None

  def acquire(self, key: str) -> Optional[Claim]:
    """Claim batch ``key``: a :class:`Claim`, or None when another live shard
    holds it (a stale claim is taken over)."""
    path = self.path(key)
    claim = self._create(path)
    if claim is not None:
      return claim
    try:
      before = os.stat(path)
      with open(path) as f:
        text = f.read()
    except OSError:   # released meanwhile: not ours
      return None
    try:
      record = json.loads(text or "{}")
    except ValueError:
      record = None
    if self.stale(record, time.time() - before.st_mtime) is None:
      return None
    moved = f"{path}.stale.{self.owner.replace(':', '_')}"
    try:
      os.rename(path, moved)   # of several shards taking it over, one succeeds
    except FileNotFoundError:
      return None
    after = os.stat(moved)
    if (after.st_ino, after.st_mtime) != (before.st_ino, before.st_mtime):
      # Renewed or replaced between our look and the rename: put it back.
      with contextlib.suppress(OSError):
        os.link(moved, path)
      os.unlink(moved)
      return None
    os.unlink(moved)
    return self._create(path)

  def release_owned(self):
    """Remove every claim this shard's processes still hold (after an interrupt:
    the batches they were running can be claimed again at once)."""
    for name in os.listdir(self.directory):
      if not name.endswith(".claim"):
        continue
      path = os.path.join(self.directory, name)
      with contextlib.suppress(OSError, ValueError, AttributeError):
        with open(path) as f:
          if json.loads(f.read() or "{}").get("owner") == self.owner:
            os.unlink(path)


@contextlib.contextmanager
def holding(claims: Optional[Claims], key: str):
  """Claim batch ``key`` for the ``with`` block: yields True while holding it
  (its heartbeat renewed by a thread), False when another shard holds it; the
  claim is released at the end. ``claims=None`` (an unsharded sweep) always
  yields True."""
  if claims is None:
    yield True
    return
  claim = claims.acquire(key)
  if claim is None:
    yield False
    return
  stop = threading.Event()

  def beat():
    while not stop.wait(claims.heartbeat_s):
      with contextlib.suppress(OSError):
        claim.beat()
  thread = threading.Thread(target=beat, name="fedfrac-claim-heartbeat", daemon=True)
  thread.start()
  try:
    yield True
  finally:
    stop.set()
    thread.join()
    claim.release()
