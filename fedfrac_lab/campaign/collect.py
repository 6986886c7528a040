"""``fedfrac-campaign collect ARCHIVE`` (``make gpu-collect ARCHIVE=...``): check a
window's archive and unpack it into the checkout, then re-render what it touched.

Every member is checked against the manifest's SHA-256 and every item file
against its own checksum before anything is written (one line and exit status 2
on the first mismatch). Then:

* ``items/<table>/<id>.json`` -> ``results/campaign/<table>/<id>.json`` (an item
  already collected is kept as it is);
* ``measurements/<name>.json`` -> the ``accelerator`` entry of
  ``benchmarks/results_<device>.json`` and its block of
  ``benchmarks/results_<device>.md``;
* the window's measured times are appended to ``results/campaign/timings.json``
  (the next window's estimates) and its timing table kept as
  ``results/campaign/windows/<start>_<device>.md``;
* every plan table with a new item is re-rendered (device names in its title);
* ``xla_cache.tar`` beside the archive (the compilation cache the window packed
  for the next one) replaces ``.gpu-cache/`` of the checkout (ignored by git;
  carried to the next window, :mod:`fedfrac_lab.campaign.carried_cache`).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

from fedfrac_lab.campaign import carried_cache, files, plan as plan_lib
from fedfrac_lab.reproduce import item_files
from fedfrac_lab.reproduce.item_files import table_files  # noqa: F401  (re-exported)
from fedfrac_lab.reproduce.item_files import unique_tmp

CAMPAIGN = os.path.join("results", "campaign")


def _write_new(path, blob) -> str:
  """Write ``blob`` to ``path`` unless a verified file is there: 'new', 'same'
  or 'kept' (a different, verified file stays), except that an item finished in
  part is replaced by a later file of the same item ('more': a window that went
  on with it holds its earlier cells too, :func:`fedfrac_lab.campaign.items.run_firma`)."""
  status = "new"
  if os.path.exists(path):
    with open(path, "rb") as f:
      if f.read() == blob:
        return "same"
    old = item_files.read_verified(path)
    if old is not None:
      if not (item_files.is_partial(old) and _holds_all(json.loads(blob), old)):
        return "kept"
      status = "more"
  os.makedirs(os.path.dirname(path), exist_ok=True)
  tmp = unique_tmp(path)
  with open(tmp, "wb") as f:
    f.write(blob)
  os.replace(tmp, path)
  return status


def _cells(obj) -> set:
  from fedfrac_lab.reproduce.firma_files_table import json_cells
  try:
    return {(mode, inputs, s, m) for mode, inputs, s, m, _ in json_cells(obj)}
  except (KeyError, TypeError, AttributeError):
    return set()


def _holds_all(new, old) -> bool:
  """Whether item file ``new`` holds every FIRMA cell of ``old`` (same item)."""
  return (new.get("campaign", {}).get("item") == old["campaign"]["item"]
          and _cells(old) <= _cells(new))


def jobs_table(title, metrics, paths, root) -> str:
  """Markdown: final ``metrics`` per (setting, method) of the jobs item files
  ``paths``, mean ± std over seeds, with the device of each row."""
  from fedfrac_lab.reproduce import jobs
  rows, devices = {}, set()
  for path in paths:
    obj = item_files.read_verified(os.path.join(root, path))
    if obj is None:
      continue
    dev = obj["campaign"]["device"]
    devices.add(dev)
    for enc in obj["records"]:
      rec = jobs.decode_record(enc)
      cell = rows.setdefault((obj["config_name"], rec.method, dev), {m: [] for m in metrics})
      for m in metrics:
        final = rec.curve(m, default=float("nan"))[1] if rec.rows else [float("nan")]
        cell[m].append(float(final[-1]))
  lines = [f"# {title} (devices: {'; '.join(sorted(devices)) or 'none yet'})", "",
           "Rendered by `fedfrac-campaign collect` from the campaign's item files "
           "(`results/campaign/`); final value of each metric, mean ± std over seeds.", "",
           "| setting | method | n | " + " | ".join(metrics) + " | device |",
           "|---|---|---|" + "---|" * len(metrics) + "---|"]
  for (setting, method, dev), cell in sorted(rows.items()):
    vals = []
    for m in metrics:
      v = cell[m]
      sd = statistics.stdev(v) if len(v) > 1 else 0.0
      vals.append(f"{statistics.fmean(v):.4f} ± {sd:.4f}")
    lines.append(f"| {setting} | {method} | {len(cell[metrics[0]])} | " + " | ".join(vals)
                 + f" | {dev} |")
  return "\n".join(lines) + "\n"


def render_table(root, name, table) -> str:
  """Re-render plan table ``name``; returns the path written."""
  paths = table_files(root, name, table)
  out = os.path.join(root, table["out"])
  os.makedirs(os.path.dirname(out), exist_ok=True)
  if table["kind"] == "firma":
    from fedfrac_lab.reproduce import firma_files_table
    cwd = os.getcwd()
    os.chdir(root)      # the table quotes the paths it was rendered from
    try:
      firma_files_table.write_table(paths, table["out"], dataset=table["dataset"])
    finally:
      os.chdir(cwd)
  else:
    with open(out, "w") as f:
      f.write(jobs_table(table["title"], table.get("metrics", ["accuracy"]), paths, root))
  return out


def merge_measurements(root, new: dict) -> list:
  """Add ``{slug: {name: entry}}`` to ``benchmarks/results_<slug>.json`` and
  rewrite the accelerator block of its ``.md``; returns the paths written."""
  from fedfrac_lab.bench import accelerator
  written = []
  for slug, entries in new.items():
    jpath = os.path.join(root, "benchmarks", f"results_{slug}.json")
    data = {}
    if os.path.exists(jpath):
      with open(jpath) as f:
        data = json.load(f)
    have = data.setdefault("accelerator", {})
    for name, entry in entries.items():
      have.setdefault(name, entry)
    os.makedirs(os.path.dirname(jpath), exist_ok=True)
    item_files.write_json_atomic(jpath, data)
    mpath = jpath[:-5] + ".md"
    text = open(mpath).read() if os.path.exists(mpath) else f"# fedfrac on {slug}\n\n"
    first = next(iter(have.values()))
    device = first["device"] + (" (a dry run on the CPU)" if first.get("dry_run") else "")
    block = accelerator.section(have, device)
    if accelerator.START in text and accelerator.END in text:
      text = (text[:text.index(accelerator.START)] + block
              + text[text.index(accelerator.END) + len(accelerator.END) + 1:])
    else:
      text = text.rstrip("\n") + "\n\n" + block
    with open(mpath, "w") as f:
      f.write(text)
    written += [jpath, mpath]
  return written


def _plain_name(value) -> bool:
  """Whether ``value`` can name one file or folder inside another (no path
  separator, not ``.`` / ``..``, not empty)."""
  return (isinstance(value, str) and value not in ("", ".", "..") and "\0" not in value
          and "/" not in value and "\\" not in value and os.path.basename(value) == value)


def unreadable(obj, kind) -> str | None:
  """Why the item file ``obj`` of a plan table of ``kind`` cannot be rendered
  (the exception a render would raise, in one line), or None when it can."""
  try:
    if kind == "firma":
      from fedfrac_lab.reproduce.firma_files_table import json_cells
      read = [obj["args"]["seeds"], obj["args"]["rounds"]]
      for *_, cell in json_cells(obj):
        read += [run["accuracy"] for run in cell["runs"]]
    else:
      from fedfrac_lab.reproduce import jobs
      read = [obj["config_name"], obj["campaign"]["device"]]
      read += [jobs.decode_record(enc) for enc in obj["records"]]
  except (KeyError, TypeError, AttributeError, ValueError, IndexError) as e:
    return f"{type(e).__name__}: {e}"
  return None


def _check_tables(archive, plan, root, items, blobs) -> None:
  """Every file a touched plan table renders from, the archive's new items and
  those already under ``root``, is readable as that table's kind; raises
  :class:`files.ArchiveError` naming the first that is not, before anything is
  written (an item that cannot be rendered would crash every later collect
  into its table)."""
  for name, table in sorted(items.items()):
    if table not in plan.tables:
      continue
    why = unreadable(json.loads(blobs[name]), plan.tables[table]["kind"])
    if why:
      raise files.ArchiveError(f"archive {archive!r}: {name}: not a readable "
                               f"{plan.tables[table]['kind']} item of table {table!r} ({why})")
  for table in sorted({t for t in items.values() if t in plan.tables}):
    spec = plan.tables[table]
    for path in table_files(root, table, spec):
      full = os.path.join(root, path)
      try:
        with open(full) as f:
          why = unreadable(json.load(f), spec["kind"])
      except (OSError, ValueError) as e:
        why = f"{type(e).__name__}: {e}"
      if why:
        raise files.ArchiveError(
            f"{full}: not a readable {spec['kind']} item of table {table!r} ({why}), so the "
            f"table cannot be rendered; move it out of {os.path.dirname(full)} and collect "
            f"again")


def _checked(archive, manifest, blobs) -> tuple:
  """``(items, measurements, timing rows)`` of ``blobs``, every field that names a
  path a plain name and every field collect reads present; raises
  :class:`files.ArchiveError` naming the member and the field, before anything
  is written."""
  def bad(name, what):
    raise files.ArchiveError(f"archive {archive!r}: {name}: {what}")

  def campaign_of(name, obj, keys):
    c = obj.get("campaign")
    if not isinstance(c, dict):
      bad(name, "has no 'campaign' object (not an item file of a window)")
    missing = [k for k in keys if k not in c]
    if missing:
      bad(name, f"campaign.{missing[0]} is missing")
    return c

  items, measurements = {}, {}
  for name in sorted(blobs):
    if name.startswith("items/"):
      obj = json.loads(blobs[name])
      table = campaign_of(name, obj, ("table",))["table"]
      if not _plain_name(table):
        bad(name, f"campaign.table={table!r} is not a plain name (it names a folder "
                  f"under {CAMPAIGN})")
      items[name] = table
    elif name.startswith("measurements/"):
      obj = json.loads(blobs[name])
      c = campaign_of(name, obj, ("slug", "table", "device", "date", "seconds"))
      for key in ("result", "command"):
        if key not in obj:
          bad(name, f"{key} is missing")
      if not _plain_name(c["slug"]):
        bad(name, f"campaign.slug={c['slug']!r} is not a plain name (it names "
                  f"benchmarks/results_<slug>.json)")
      if not isinstance(c["table"], str):
        bad(name, f"campaign.table={c['table']!r} is not a name")
      measurements[name] = obj
  try:
    rows = json.loads(blobs.get("timings.json", b"[]"))
  except ValueError:
    bad("timings.json", "is not JSON")
  if not isinstance(rows, list) or not all(
      isinstance(r, dict) and all(k in r for k in ("item", "device", "seconds"))
      for r in rows):
    bad("timings.json", "is not a list of timing rows {item, device, seconds, ...}")
  if not isinstance(manifest.get("device") or {}, dict):
    bad(files.MANIFEST, f"device={manifest['device']!r} is not an object")
  slug = (manifest.get("device") or {}).get("slug", "device")
  start = manifest.get("started", "start")
  if "timings.md" in blobs:
    if not _plain_name(slug):
      bad(files.MANIFEST, f"device.slug={slug!r} is not a plain name (it names "
                          f"{CAMPAIGN}/windows/<start>_<slug>.md)")
    if not isinstance(start, str) or not _plain_name(start.replace(":", "")):
      bad(files.MANIFEST, f"started={start!r} is not a plain name (it names "
                          f"{CAMPAIGN}/windows/<start>_<slug>.md)")
  return items, measurements, rows


def collect(archive, plan_path, root=".", log=print) -> dict:
  """Check ``archive`` and unpack it into ``root``; returns what was done."""
  manifest, blobs = files.read_archive(archive)
  items, measured, rows = _checked(archive, manifest, blobs)
  plan = plan_lib.load(plan_path)
  _check_tables(archive, plan, root, items, blobs)
  timings_path = os.path.join(root, CAMPAIGN, "timings.json")
  old = plan_lib.load_timings(timings_path)
  device = (manifest.get("device") or {}).get("device", "unknown device")
  if manifest.get("dry_run"):
    log(f"{archive}: a dry run on the CPU ({device})")
  status, dests, touched, measurements = {}, {}, set(), {}
  for name, table in items.items():
    dest = os.path.join(root, CAMPAIGN, table, os.path.basename(name))
    status[name], dests[name] = _write_new(dest, blobs[name]), dest
    if status[name] in ("new", "more"):
      touched.add(table)
  for name, obj in measured.items():
    c = obj["campaign"]
    measurements.setdefault(c["slug"], {})[c["table"]] = {
        "result": obj["result"], "command": obj["command"], "device": c["device"],
        "date": c["date"], "seconds": c["seconds"], "dry_run": manifest.get("dry_run")}
    status[name] = "merged"
    dests[name] = os.path.join(root, "benchmarks", f"results_{c['slug']}.json")
  seen = {(r.get("item"), r.get("device"), r.get("seconds")) for r in old}
  new_rows = [r for r in rows if (r["item"], r["device"], r["seconds"]) not in seen]
  item_files.write_json_atomic(timings_path, old + new_rows)
  if "timings.md" in blobs:
    slug = (manifest.get("device") or {}).get("slug", "device")
    start = manifest.get("started", "start").replace(":", "")
    _write_new(os.path.join(root, CAMPAIGN, "windows", f"{start}_{slug}.md"),
               blobs["timings.md"])
  written = merge_measurements(root, measurements)
  for table in sorted(touched):
    if table in plan.tables:
      written.append(render_table(root, table, plan.tables[table]))
    else:
      log(f"{table}: not a table of {plan_path}; its items are kept, nothing rendered")
  cache = os.path.join(os.path.dirname(os.path.abspath(archive)), carried_cache.TAR)
  if os.path.exists(cache):
    try:
      man = carried_cache.unpack(cache, root)
      log(f"cache  {man.get('files', 0)} compiled-program files "
          f"({man.get('bytes', 0) / 2 ** 20:.1f} MiB, jax {man.get('jax')} on "
          f"{man.get('device')}) -> {os.path.join(root, carried_cache.FOLDER)}")
    except ValueError as e:
      log(f"cache  not taken: {e}")
  for name, what in sorted(status.items()):
    log(f"{what:6s} {name} -> {dests[name]}")
  for path in written:
    log(f"wrote {path}")
  return {"status": status, "written": written, "timings_added": len(new_rows),
          "device": device, "dry_run": bool(manifest.get("dry_run"))}


def main(argv=None) -> int:
  p = argparse.ArgumentParser(prog="fedfrac-campaign collect",
                              description=__doc__.split("\n")[0])
  p.add_argument("archive")
  p.add_argument("--plan", default=os.path.join("benchmarks", "gpu", "plan.json"))
  p.add_argument("--root", default=".", help="the checkout to unpack into")
  args = p.parse_args(sys.argv[1:] if argv is None else argv)
  try:
    collect(args.archive, args.plan, args.root)
  except (files.ArchiveError, plan_lib.PlanError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  return 0
