"""Sealed JSON records: a JSON object stored with the SHA-256 of its content.

Every record a result table is built from (a run's ``runs/<method>/seed_<s>.json``,
a sweep point ``points/<id>.json``, a workdir's ``experiment.json``) is written
as a JSON object with one extra key, ``sha256``: the hex SHA-256 of the other
keys as canonical JSON (sorted keys, no spaces). Reading one back recomputes it,
so a truncated file, a flipped bit or a hand edit is found (:class:`Damaged`,
with a short reason) instead of changing a table silently. Checkpoints carry
their own manifest (:mod:`fedfrac.runner.checkpoint`).
"""
from __future__ import annotations

import hashlib
import json

from fedfrac.runner.checkpoint import atomic_write, json_default

KEY = "sha256"


class Damaged(ValueError):
  """A sealed record failed verification; ``str(e)`` says how (``truncated or not
  JSON``, ``checksum mismatch``, ``no checksum``)."""


def digest(content: dict) -> str:
  """SHA-256 of ``content`` as canonical JSON (what :func:`seal` stores)."""
  text = json.dumps(content, sort_keys=True, separators=(",", ":"), default=json_default)
  return hashlib.sha256(text.encode()).hexdigest()


def seal(content: dict) -> dict:
  """``content`` with its ``sha256`` added (``content`` must not have that key)."""
  content = json.loads(json.dumps(content, default=json_default))   # as stored
  return {**content, KEY: digest(content)}


def unseal(obj, legacy: bool = False) -> dict:
  """The content of a sealed object (without ``sha256``), verified.

  ``legacy``: accept an object written before records were sealed (no
  ``sha256`` key) as it is. Raises :class:`Damaged` otherwise.
  """
  if not isinstance(obj, dict):
    raise Damaged("not a JSON object")
  if KEY not in obj:
    if legacy:
      return obj
    raise Damaged("no checksum")
  content = {k: v for k, v in obj.items() if k != KEY}
  if obj[KEY] != digest(content):
    raise Damaged("checksum mismatch")
  return content


def read(path, legacy: bool = False) -> dict:
  """The verified content of the sealed file ``path``; :class:`Damaged` when it
  is truncated, not JSON or does not match its checksum (``OSError`` when it
  cannot be read)."""
  with open(path, "rb") as f:
    data = f.read()
  try:
    obj = json.loads(data)
  except ValueError:
    raise Damaged("truncated or not JSON") from None
  return unseal(obj, legacy)


def write(path, content: dict, indent=None) -> None:
  """Write ``content`` sealed to ``path`` atomically."""
  atomic_write(path, json.dumps(seal(content), indent=indent, default=json_default))
