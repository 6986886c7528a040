"""What fedfrac wrote in a workdir, so ``--overwrite`` removes only that.

``<workdir>/written.json`` (a sealed record, :mod:`fedfrac.runner.sealed`) lists

* ``files``: the files fedfrac wrote there (``experiment.json``, ``config.json``,
  the metrics and summary files, the plot, each ``runs/<method>/seed_<s>.json``);
* ``runs``: the directories it manages one run's files in
  (``checkpoints/<method>/seed_<s>``, whose ``step_<round>/`` holds
  ``state.npz``, ``history.json`` and ``manifest.json``, and
  ``tensorboard/<method>/seed_<s>``, whose files are ``events.out.tfevents.*``).

A path is registered before it is first written. :func:`survey` sorts what lies
where fedfrac writes (the files above at the top level, and everything under
``checkpoints/``, ``runs/`` and ``tensorboard/``) into what fedfrac wrote and
what it did not; :func:`remove` deletes the former, and refuses in one line,
naming them, when any of the latter are in the way (e.g. a
``checkpoints/other/model.pt`` or a ``runs/x/`` of one's own).

Without a usable list (a workdir written before it existed, or one whose list
was deleted or damaged: said once, in one line) nothing is taken on its name
alone where content can tell: a record under ``runs/`` is fedfrac's when it
verifies as the sealed record of the method and seed its path names, a
checkpoint step when its files match its manifest; a file shaped like one but
failing that (``runs/fedavg/seed_7.json`` of one's own) is named and refused.
Top-level result files count by name in a workdir with an ``experiment.json``.
What verifies is adopted into a new list on the next run.
"""
from __future__ import annotations

import os
import re
import sys

from fedfrac._validation import ConfigError, argument
from fedfrac.runner import sealed
from fedfrac.runner.checkpoint import STEP_FILES, Checkpointer

MANIFEST = "written.json"
FINGERPRINT = "experiment.json"
RESULT_FILES = ("metrics.csv", "metrics.jsonl", "rounds.csv", "summary.json", "summary.md",
                "accuracy.png", "ranking.png")
TOP_FILES = (FINGERPRINT, "config.json") + RESULT_FILES + (MANIFEST,)
TREES = ("checkpoints", "runs", "tensorboard")
_TMP = re.compile(r"\.tmp\d+$")          # an atomic write cut short
_SEED = re.compile(r"^seed_-?\d+$")
_STEP = re.compile(r"^step_(\d+)$")
_LEFTOVER = re.compile(r"^(\.step_\d+\.tmp\d+|step_\d+\.old\d+)$")
_RECORD = re.compile(r"^seed_(-?\d+)\.json$")
SHOWN = 5   # unknown paths named in a refusal
_REPORTED: set = set()   # damaged lists already named in this process


def _rel(*parts) -> str:
  return "/".join(parts)


def label_dir(label: str) -> str:
  """The folder name of a method label under ``runs/``, ``checkpoints/`` and
  ``tensorboard/``: path separators become ``_`` (``/abs/dir`` -> ``_abs_dir``)
  and ``.`` / ``..`` gain one, so every label stays one folder inside its tree."""
  name = label.replace(os.sep, "_")
  if os.altsep:
    name = name.replace(os.altsep, "_")
  return "_" + name if name in ("", ".", "..") else name


def load(workdir):
  """``{"files": set, "runs": set}`` of ``workdir``; ``None`` when there is no
  usable list (a workdir of an older fedfrac, or a deleted or damaged list;
  a damaged one is named once, in one line)."""
  path = os.path.join(workdir, MANIFEST)
  if not os.path.exists(path):
    return None
  try:
    content = sealed.read(path)
    return {"files": set(content["files"]), "runs": set(content["runs"])}
  except (OSError, sealed.Damaged, KeyError, TypeError) as e:
    if os.path.abspath(path) not in _REPORTED:
      _REPORTED.add(os.path.abspath(path))
      print(f"{path} failed verification ({e}); judging the workdir's files by their "
            f"content", file=sys.stderr)
    return None


def _save(workdir, listed) -> None:
  sealed.write(os.path.join(workdir, MANIFEST),
               {"files": sorted(listed["files"]), "runs": sorted(listed["runs"])}, indent=1)


def _by_layout(workdir) -> bool:
  """Whether, without a list, the top-level result files count as fedfrac's by
  their names: the workdir has a fingerprint (so fedfrac wrote there)."""
  return os.path.exists(os.path.join(workdir, FINGERPRINT))


def _in_run_dir(tree, rest, is_dir) -> bool:
  """Whether ``rest`` (path parts below a run directory of ``tree``) is what
  fedfrac writes there: a step directory and its three files under
  ``checkpoints``, event files under ``tensorboard``."""
  if tree == "checkpoints":
    if not (_STEP.match(rest[0]) or _LEFTOVER.match(rest[0])):
      return False
    return is_dir if len(rest) == 1 else (len(rest) == 2 and not is_dir
                                          and rest[1] in STEP_FILES)
  return (tree == "tensorboard" and len(rest) == 1 and not is_dir
          and rest[0].startswith("events.out.tfevents."))


def _record_verifies(workdir, rel) -> bool:
  """Whether ``runs/<label>/seed_<s>.json`` is the sealed record of that label
  and seed (what fedfrac writes there)."""
  folder, name = rel.split("/")[1:]
  match = _RECORD.match(name)
  try:
    data = sealed.read(os.path.join(workdir, rel))
    return (match is not None and label_dir(str(data["method"])) == folder
            and data["seed"] == int(match.group(1)))
  except (OSError, sealed.Damaged, KeyError, TypeError):
    return False


def _step_verifies(workdir, parts) -> bool:
  """Whether ``checkpoints/<label>/seed_<s>/step_<round>`` matches its manifest."""
  match = _STEP.match(parts[3])
  if match is None:
    return bool(_LEFTOVER.match(parts[3]))   # a write cut short: fedfrac's names
  try:
    Checkpointer(os.path.join(workdir, *parts[:3])).verify(int(match.group(1)))
    return True
  except ValueError:
    return False


def _verified_content(workdir, rel, parts, is_dir) -> bool:
  """Without a list: whether ``rel`` (below one of :data:`TREES`) is fedfrac's
  by what it holds (see the module docstring)."""
  tree = parts[0]
  if tree == "runs":
    if is_dir:
      return len(parts) == 2
    return len(parts) == 3 and (_record_verifies(workdir, rel) or bool(
        re.match(r"^seed_-?\d+\.json\.tmp\d+$", parts[2])))
  if len(parts) <= 3:
    return is_dir and (len(parts) == 2 or bool(_SEED.match(parts[2])))
  if tree == "checkpoints" and not _step_verifies(workdir, parts[:4]):
    return False
  return _in_run_dir(tree, parts[3:], is_dir)


def _owned(rel: str, listed, is_dir: bool, workdir: str = "") -> bool:
  """Whether fedfrac wrote the file (or made the directory) ``rel``."""
  parts = rel.split("/")
  tree = parts[0]
  if listed is None:     # no list: by content
    if len(parts) == 1:
      return ((not is_dir and _TMP.sub("", rel) in TOP_FILES and _by_layout(workdir))
              or (is_dir and tree in TREES))
    return _verified_content(workdir, rel, parts, is_dir)
  if not is_dir and _TMP.sub("", rel) in listed["files"]:
    return True
  if len(parts) == 1:
    return is_dir and tree in TREES
  if len(parts) > 3 and _rel(*parts[:3]) in listed["runs"]:
    return _in_run_dir(tree, parts[3:], is_dir)
  if is_dir:   # a directory on the way to a listed file or run directory
    prefix = rel + "/"
    return rel in listed["runs"] or any(p.startswith(prefix)
                                        for p in listed["files"] | listed["runs"])
  return False


def _foreign(workdir, rel, unknown) -> None:
  """Every file below the directory ``rel`` fedfrac did not make (``rel/`` when
  it is empty)."""
  names = sorted(os.listdir(os.path.join(workdir, rel)))
  if not names:
    unknown.append(rel + "/")
  for name in names:
    sub = _rel(rel, name)
    path = os.path.join(workdir, sub)
    if os.path.isdir(path) and not os.path.islink(path):
      _foreign(workdir, sub, unknown)
    else:
      unknown.append(sub)


def _walk(workdir, rel, listed, owned, unknown) -> None:
  """Sort the directory ``rel`` (owned by fedfrac) into ``owned`` files and
  directories (contents before their directory) and ``unknown`` paths."""
  for name in sorted(os.listdir(os.path.join(workdir, rel))):
    sub = _rel(rel, name)
    path = os.path.join(workdir, sub)
    is_dir = os.path.isdir(path) and not os.path.islink(path)
    if not _owned(sub, listed, is_dir, workdir):
      if is_dir:
        _foreign(workdir, sub, unknown)
      else:
        unknown.append(sub)
    elif is_dir:
      mark = len(owned)
      _walk(workdir, sub, listed, owned, unknown)
      if listed is None and len(owned) == mark:
        # By layout alone, an empty directory is not known to be fedfrac's.
        if not os.listdir(os.path.join(workdir, sub)):
          unknown.append(sub + "/")
        continue
      owned.append(sub + "/")
    else:
      owned.append(sub)


def _label_roots(workdir, labels):
  """``checkpoints/<label>``, ``runs/<label>``, ``tensorboard/<label>`` (and the
  grid runs ``<label>[option=value]``) that exist in ``workdir``."""
  roots = []
  for tree in TREES:
    base = os.path.join(workdir, tree)
    names = sorted(os.listdir(base)) if os.path.isdir(base) else []
    for label in labels:
      stem = label_dir(label)
      roots += [_rel(tree, n) for n in names if n == stem or n.startswith(stem + "[")]
  return roots


def survey(workdir, labels=None):
  """``(owned, unknown)``: relative paths where fedfrac writes in ``workdir``
  that it wrote (directories end in ``/`` and follow their contents) and that
  it did not. ``labels``: only those methods' run directories (else the
  whole workdir, its top-level result files included)."""
  listed = load(workdir)
  owned, unknown = [], []
  if labels is None:
    for entry in sorted(os.listdir(workdir)):
      if _TMP.sub("", entry) in TOP_FILES:
        is_dir = os.path.isdir(os.path.join(workdir, entry))
        if _owned(entry, listed, is_dir, workdir):
          owned.append(entry)
        else:
          unknown.append(entry + "/" if is_dir else entry)
    roots = [t for t in TREES if os.path.lexists(os.path.join(workdir, t))]
  else:
    roots = _label_roots(workdir, labels)
  for root in roots:
    path = os.path.join(workdir, root)
    is_dir = os.path.isdir(path) and not os.path.islink(path)
    if is_dir and _owned(root, listed, True, workdir):
      _walk(workdir, root, listed, owned, unknown)
      owned.append(root + "/")
    elif is_dir:
      _foreign(workdir, root, unknown)
    else:
      unknown.append(root)
  return owned, unknown


def remove(workdir, labels=None) -> None:
  """Delete what fedfrac wrote in ``workdir`` (``labels``: only those methods'
  runs, records and checkpoints, and the result files built from every run,
  which the next run writes again without them); refuse, naming them, if files
  it did not write are in the way (nothing is deleted then)."""
  owned, unknown = survey(workdir, labels)
  listed = load(workdir)
  if labels is not None:
    owned += [name for name in RESULT_FILES if os.path.exists(os.path.join(workdir, name))
              and _owned(name, listed, False, workdir)]
  if unknown:
    shown = ", ".join(unknown[:SHOWN]) + (f" and {len(unknown) - SHOWN} more"
                                          if len(unknown) > SHOWN else "")
    how = "" if listed is not None else (f" (no usable {MANIFEST}: its files were judged "
                                         f"by their content)")
    raise ConfigError(f"{argument('overwrite')}: {workdir} holds files fedfrac did not write "
                      f"({shown}); move them out of the way (nothing was deleted){how}")
  for rel in owned:    # contents before their directories
    path = os.path.join(workdir, rel.rstrip("/"))
    if rel.endswith("/"):
      if os.path.isdir(path) and not os.listdir(path):
        os.rmdir(path)
    elif os.path.lexists(path) and rel != MANIFEST:
      os.remove(path)
  if labels is None:
    if os.path.exists(os.path.join(workdir, MANIFEST)):
      os.remove(os.path.join(workdir, MANIFEST))
  elif listed is not None:
    gone = {r.rstrip("/") for r in owned}
    listed = {k: {p for p in v if p not in gone} for k, v in listed.items()}
    _save(workdir, listed)
  for tree in TREES:   # tidy: trees left empty
    path = os.path.join(workdir, tree)
    if os.path.isdir(path) and not os.path.islink(path) and not os.listdir(path):
      os.rmdir(path)


def register(workdir, files=(), runs=()) -> None:
  """Add ``files`` and run directories ``runs`` (relative paths) to the list
  before they are written; a workdir of an older fedfrac first adopts what
  its layout says it wrote."""
  listed = load(workdir)
  if listed is None:
    listed = {"files": set(), "runs": set()}
    if any(os.path.lexists(os.path.join(workdir, t)) for t in TREES + (FINGERPRINT,)):
      owned, _ = survey(workdir)
      for rel in owned:
        parts = rel.rstrip("/").split("/")
        if rel.endswith("/") and len(parts) == 3 and parts[0] != "runs":
          listed["runs"].add(rel.rstrip("/"))
        elif not rel.endswith("/") and (len(parts) == 1 or parts[0] == "runs"):
          listed["files"].add(_TMP.sub("", rel))
  new_files, new_runs = set(files) - listed["files"], set(runs) - listed["runs"]
  if new_files or new_runs or not os.path.exists(os.path.join(workdir, MANIFEST)):
    listed["files"] |= new_files | {MANIFEST}
    listed["runs"] |= new_runs
    _save(workdir, listed)
