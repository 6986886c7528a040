"""The report of ``fedfrac-reproduce kuramoto_authors``
(:mod:`fedfrac_lab.reproduce.kuramoto_authors`): its run files read back, the
authors' and fedfrac's curves compared round by round, ``kuramoto_authors.json``
and ``kuramoto_authors.md`` written, the run files packed.

Run files (one folder per call, or its ``kuramoto_authors_runs.tar.gz``):
``setting.json`` (the call's setting and command), ``authors_<method>_seed<s>.json``
(:mod:`fedfrac_lab.reproduce.kuramoto_authors_driver`) and
``fedfrac_<method>_seed<s>.json``, each with ``curve`` (the global test accuracy
after rounds 1, 2, ...) and ``status``; the authors' logs beside theirs.

The comparison (:func:`compare`): at each round, the authors' range over seeds
[min, max] and fedfrac's mean over seeds; ``within`` when the mean lies in the
range (the target), ``outside_pp`` its distance to the range in points.
"""
from __future__ import annotations

import datetime
import glob
import json
import os
import re
import tarfile
import tempfile

import numpy as np
from fedfrac_lab.reproduce.item_files import unique_tmp

ARCHIVE = "kuramoto_authors_runs.tar.gz"
RUN_FILE = re.compile(r"^(authors|fedfrac)_(\w+)_seed(\d+)\.json$")


def write_json(path, obj) -> None:
  tmp = unique_tmp(path)
  with open(tmp, "w") as f:
    json.dump(obj, f, indent=1)
  os.replace(tmp, path)


def rounds_in(path) -> int:
  """Rounds a run file holds (0 when it is missing or unreadable)."""
  try:
    with open(path) as f:
      return len(json.load(f).get("curve", []))
  except (OSError, ValueError):
    return 0


def unpack(path) -> str:
  """A runs folder: ``path`` itself, or a run archive unpacked to a temporary one."""
  if os.path.isdir(path):
    return path
  folder = tempfile.mkdtemp(prefix="kuramoto_authors_runs_")
  with tarfile.open(path) as tar:
    for member in tar.getmembers():   # plain files, by their base name only
      name = os.path.basename(member.name)
      if member.isfile() and name.endswith((".json", ".log")):
        with open(os.path.join(folder, name), "wb") as f:
          f.write(tar.extractfile(member).read())
  return folder


def load_runs(folders) -> tuple[dict, list]:
  """``(setting, runs)`` from run folders: every folder's ``setting.json`` must
  agree on the setting (its command aside); ``runs`` one dict per run file
  (side, method, seed, curve, status, ...). A run in two folders: the longer wins."""
  settings, runs = [], {}
  for folder in folders:
    with open(os.path.join(folder, "setting.json")) as f:
      settings.append(json.load(f))
    for path in sorted(glob.glob(os.path.join(folder, "*_seed*.json"))):
      match = RUN_FILE.match(os.path.basename(path))
      if not match:
        continue
      with open(path) as f:
        run = json.load(f)
      side, method, seed = match.group(1), match.group(2), int(match.group(3))
      run.update(side=side, method=method, seed=seed)
      key = (side, method, seed)
      if key not in runs or len(run.get("curve", [])) > len(runs[key].get("curve", [])):
        runs[key] = run
  core = [{k: v for k, v in s.items() if k != "command"} for s in settings]
  if any(c != core[0] for c in core[1:]):
    raise ValueError(f"run folders of different settings: {core[0]} and "
                     f"{next(c for c in core if c != core[0])}")
  merged = dict(core[0], commands=[s.get("command", "") for s in settings])
  return merged, [runs[k] for k in sorted(runs)]


def compare(authors: dict, ours: dict, rounds: int) -> list[dict]:
  """Per round r = 1..rounds: the authors' seeds' [min, max] and mean, fedfrac's
  mean, min and max, ``within`` (fedfrac's mean inside the authors' range) and
  ``outside_pp`` (its distance to that range, points). ``authors`` / ``ours``:
  ``{seed: [accuracy after round 1, 2, ...]}``; a round without runs on both
  sides is left out."""
  rows = []
  for r in range(rounds):
    a = np.asarray([c[r] for c in authors.values() if len(c) > r], np.float64)
    o = np.asarray([c[r] for c in ours.values() if len(c) > r], np.float64)
    if not a.size or not o.size:
      continue
    lo, hi, mean = float(a.min()), float(a.max()), float(o.mean())
    rows.append({"round": r + 1, "authors_min": lo, "authors_max": hi,
                 "authors_mean": float(a.mean()), "authors_n": int(a.size),
                 "fedfrac_mean": mean, "fedfrac_min": float(o.min()),
                 "fedfrac_max": float(o.max()), "fedfrac_n": int(o.size),
                 "within": bool(lo <= mean <= hi),
                 "outside_pp": round(100 * (mean - min(max(mean, lo), hi)), 3)})
  return rows


def curves(runs, side, method) -> dict:
  return {r["seed"]: list(r.get("curve", [])) for r in runs
          if r["side"] == side and r["method"] == method}


def build(setting, runs) -> dict:
  """The JSON document: the setting, every run's curve, the comparison per method."""
  methods = sorted({r["method"] for r in runs})
  out = {"setting": setting, "date": datetime.date.today().isoformat(),
         "fedfrac_overrides": sorted({tuple(r.get("overrides") or ()) for r in runs
                                      if r["side"] == "fedfrac"} - {()}),
         "authors_commits": sorted({r.get("authors_commit") or "unknown" for r in runs
                                    if r["side"] == "authors"}),
         "runs": [{k: r.get(k) for k in ("side", "method", "seed", "status", "wall_s",
                                          "device_name", "torch")}
                  | {"rounds": len(r.get("curve", []))} for r in runs],
         "curves": {m: {side: curves(runs, side, m) for side in ("authors", "fedfrac")}
                    for m in methods},
         "comparison": {}}
  for m in methods:
    rows = compare(curves(runs, "authors", m), curves(runs, "fedfrac", m),
                   setting["rounds"])
    out["comparison"][m] = {"rows": rows, "rounds_compared": len(rows),
                            "rounds_within": sum(r["within"] for r in rows)}
  return out


def _span(lo, hi, mean):
  return f"{100 * mean:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"


def markdown(doc) -> list[str]:
  s = doc["setting"]
  lines = [
      "# Kuramoto-FedAvg: the authors' code beside fedfrac `reference_code`", "",
      f"{s['dataset']}, K = {s['clients']} clients × s = {s['shards']} shards "
      f"({s['partition']}), {s['local_epochs']} local epochs, batch {s['batch_size']}, "
      f"{s['rounds']} rounds; the global model's test accuracy (%) after each round. "
      "Authors: github.com/amuhebwa/Kuramoto-FedAvg `src/main.py` run unchanged "
      "(`fedfrac_lab.reproduce.kuramoto_authors_driver`); fedfrac: "
      "`configs/kuramoto/fashion_mnist.py:mode=reference_code`. Target: fedfrac's mean "
      "inside the authors' range over seeds, round by round.", ""]
  for overrides in doc["fedfrac_overrides"]:
    lines += [f"fedfrac runs with overrides: {', '.join(overrides)}.", ""]
  lines += ["| method | rounds with fedfrac's mean inside the authors' range | largest "
            "distance outside (pp, round) | authors' seeds | fedfrac's seeds |",
            "|---|---|---|---|---|"]
  for m, c in doc["comparison"].items():
    rows = c["rows"]
    worst = max(rows, key=lambda r: abs(r["outside_pp"]), default=None)
    far = (f"{worst['outside_pp']:+.1f} (round {worst['round']})"
           if worst and worst["outside_pp"] else "–")
    seeds = {side: sorted(doc["curves"][m][side]) for side in ("authors", "fedfrac")}
    lines.append(f"| {m} | {c['rounds_within']} of {c['rounds_compared']} | {far} | "
                 f"{seeds['authors']} | {seeds['fedfrac']} |")
  for m, c in doc["comparison"].items():
    lines += ["", f"## {m}", "", "| round | authors: mean [min, max] | fedfrac: mean "
              "[min, max] | inside |", "|---|---|---|---|"]
    for r in c["rows"]:
      theirs = _span(r["authors_min"], r["authors_max"], r["authors_mean"])
      ours = _span(r["fedfrac_min"], r["fedfrac_max"], r["fedfrac_mean"])
      lines.append(f"| {r['round']} | {theirs} | {ours} | {'yes' if r['within'] else 'no'} |")
  lines += ["", "## Runs", "", "| side | method | seed | rounds | status | wall s | device |",
            "|---|---|---|---|---|---|---|"]
  for r in doc["runs"]:
    lines.append(f"| {r['side']} | {r['method']} | {r['seed']} | {r['rounds']} | "
                 f"{r['status']} | {r['wall_s']} | {r['device_name'] or 'cpu'} |")
  if doc["authors_commits"]:
    lines += ["", f"The authors' code at commit {', '.join(doc['authors_commits'])}."]
  lines += ["", "Commands: " + "; ".join(f"`{c}`" for c in s.get("commands", []) if c)]
  return lines


def write_outputs(out, folders, command=None, archive=True) -> dict:
  """``out/kuramoto_authors.json`` and ``.md`` from the run folders (and, with
  ``archive``, the first folder packed as ``out/kuramoto_authors_runs.tar.gz``);
  ``command`` is recorded in the first folder's ``setting.json``."""
  os.makedirs(out, exist_ok=True)
  if command:
    path = os.path.join(folders[0], "setting.json")
    with open(path) as f:
      first = json.load(f)
    write_json(path, dict(first, command=command))
  setting, runs = load_runs(folders)
  doc = build(setting, runs)
  write_json(os.path.join(out, "kuramoto_authors.json"), doc)
  with open(os.path.join(out, "kuramoto_authors.md"), "w") as f:
    f.write("\n".join(markdown(doc)) + "\n")
  if archive:
    tmp = unique_tmp(os.path.join(out, ARCHIVE))
    with tarfile.open(tmp, "w:gz") as tar:
      for name in sorted(os.listdir(folders[0])):
        if name.endswith((".json", ".log")) and ".tmp" not in name:
          tar.add(os.path.join(folders[0], name), arcname=name)
    os.replace(tmp, os.path.join(out, ARCHIVE))
  return doc


__all__ = ["compare", "build", "markdown", "load_runs", "write_outputs", "unpack",
           "rounds_in", "write_json"]
