"""Optional TensorBoard event files of a run's metrics (extra ``tensorboard``:
``pip install fedfrac[tensorboard]``, i.e. ``tensorboardX``, no TensorFlow).

Turned on with ``config.log.tensorboard=True``; ``metrics.csv`` / ``metrics.jsonl``
stay the default record. One event directory per run:
``<workdir>/tensorboard/<method>/seed_<seed>/``, holding every finite numeric
column of the evaluated rows (tag = column name, step = round) and of the
per-round rows (tag ``round/<column>``).
"""
from __future__ import annotations

import glob
import math
import os
import struct

from fedfrac.runner.records import FIRST_COLUMNS

EXTRA = "tensorboard"


def _summary_writer():
  try:
    from tensorboardX import SummaryWriter
  except ImportError:
    raise ImportError(
        f"config.log.tensorboard=True needs tensorboardX: pip install "
        f"'fedfrac[{EXTRA}]' (or pip install tensorboardX)") from None
  return SummaryWriter


def _scalars(row):
  return {k: float(v) for k, v in row.items()
          if k not in FIRST_COLUMNS and isinstance(v, (int, float))
          and not isinstance(v, bool) and math.isfinite(v)}


def run_logdir(workdir, method, seed):
  """Event directory of one run."""
  return os.path.join(workdir, "tensorboard", method.replace(os.sep, "_"), f"seed_{seed}")


def write_events(results, workdir):
  """Write every run's rows of ``results`` as TensorBoard scalars under ``workdir``
  (written only from finite rows, as in ``metrics.csv``)."""
  writer_cls = _summary_writer()
  for rec in results.records:
    writer = writer_cls(logdir=run_logdir(workdir, rec.method, rec.seed))
    try:
      for row in rec.finite_rows(rec.round_rows):
        for tag, value in _scalars(row).items():
          writer.add_scalar(f"round/{tag}", value, int(row["round"]))
      for row in rec.finite_rows():
        for tag, value in _scalars(row).items():
          writer.add_scalar(tag, value, int(row["round"]))
    finally:
      writer.close()


def read_scalars(logdir):
  """``{tag: [(step, value), ...]}`` of the scalar events in ``logdir``'s event
  files (TFRecord framing: length, its CRC, an ``Event`` proto, its CRC)."""
  from tensorboardX.proto import event_pb2
  out = {}
  for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
    with open(path, "rb") as f:
      data = f.read()
    pos = 0
    while pos + 12 <= len(data):
      (length,) = struct.unpack("<Q", data[pos:pos + 8])
      record = data[pos + 12:pos + 12 + length]
      pos += 12 + length + 4
      event = event_pb2.Event.FromString(record)
      for value in event.summary.value:
        out.setdefault(value.tag, []).append((int(event.step), float(value.simple_value)))
  return out
