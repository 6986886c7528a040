"""The campaign plan (``benchmarks/gpu/plan.json``): what the GPU windows run, in
priority order.

The file holds

* ``tables``: name -> how a table is rendered from its items (``kind``
  ``firma``: ``fedfrac-reproduce firma_files``' table, ``out`` and the committed
  JSON files it already ``include`` s; ``kind`` ``jobs``: a table of final
  metrics per method, ``out``, ``title``, ``metrics``);
* ``measurements`` (stage a): ``{"name", "args", "estimate_s", "late"}`` of
  :data:`fedfrac_lab.bench.accelerator.MEASUREMENTS`, in order; a ``late`` one runs
  after stage b's items (a window's time goes to the plan's points first; a call
  with ``--stages a`` runs it);
* ``groups`` (stage b): each expands into items (:func:`expand`), in order:
  ``kind`` ``firma`` (FIRMA on the real data: ``dataset``, ``data`` path under
  the data folder, ``modes``, ``inputs``, ``scenarios``, ``methods``, ``seeds``,
  ``rounds``, ``item``): with ``item`` ``"cell"`` (the default) one item per
  (mode, scenario, method), its seeds vmapped; with ``"column"`` one item per
  (mode, entry of ``methods``) over every scenario, an entry being a method or a
  list of methods run in one item, its runs (scenarios × seeds × methods) in as
  few compiled programs as the methods allow
  (:func:`fedfrac_lab.reproduce.firma_groups.run_group`: one per number of clients,
  FibFL and FibFL+ in one);
  ``kind`` ``jobs`` (a config file run through ``fedfrac_lab.reproduce.jobs``:
  ``config``, ``args``, ``set``, ``labels``, ``seeds``, optional ``grid``): one
  item per (config argument, method label), its seeds × grid values vmapped.

``estimate_s`` (a number, or per method / label with a ``default``) is the
scheduling guess for an item before any window has measured one; once a window
has, the measured time of the same kind of item on the same device is used
(``results/campaign/timings.json``). ``{data}`` in a path is the data folder the
command line names.

An item's id is the digest of its kind, table and spec (never of a machine
path), so the same item has the same id in every window. A FIRMA item's cells
that committed files already hold (:func:`held_cells`: the table's ``include``
files and the campaign's own item files, a window's partial ones too) are not
run again (:func:`coverage`).
"""
from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os

KINDS = ("firma", "jobs")
TABLE_KINDS = ("firma", "jobs")
FIRMA_ITEMS = ("cell", "column")
SAFETY = 1.15      # measured seconds x this = the estimate for the next such item


class PlanError(ValueError):
  """A plan file that cannot be used (one line: the key, the value, what is allowed)."""


@dataclasses.dataclass(frozen=True)
class Item:
  """One unit of campaign work: ``stage`` ``a`` (a measurement) or ``b`` (points
  of a table); ``spec`` is JSON-able; ``estimate_s`` the plan's guess."""
  stage: str
  kind: str
  table: str
  spec: dict
  estimate_s: float
  late: bool = False

  @property
  def id(self) -> str:
    text = json.dumps({"kind": self.kind, "table": self.table, "spec": self.spec},
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]

  @property
  def column(self) -> bool:
    """A FIRMA item over several scenarios (and methods): ``spec["scenarios"]``."""
    return self.kind == "firma" and "scenarios" in self.spec

  @property
  def cells(self) -> list:
    """``[(scenario, method)]`` of a FIRMA item, in run order."""
    s = self.spec
    if self.column:
      return [(sc, m) for sc in s["scenarios"] for m in s["methods"]]
    return [(s["scenario"], s["method"])] if self.kind == "firma" else []

  @property
  def timing_key(self) -> str:
    """Items with the same key take about the same time on one device."""
    s = self.spec
    if self.column:
      return (f"firma-column:{s['dataset']}:{'+'.join(s['methods'])}:"
              f"scenarios={len(s['scenarios'])}:seeds={s['seeds']}:R={s['rounds']}")
    if self.kind == "firma":
      return f"firma:{s['dataset']}:{s['method']}:seeds={s['seeds']}:R={s['rounds']}"
    if self.kind == "jobs":
      return f"jobs:{s['config']}:{s['arg']}:{s['label']}:seeds={len(s['seeds'])}"
    return f"{self.kind}:{self.table}"

  def request(self, skip=None, resume=None) -> dict:
    """The worker's view of this item; a FIRMA column also gets the cells to
    ``skip`` (held by committed files) and the file to ``resume`` from (its own
    partial item file of an earlier window)."""
    out = {"id": self.id, "stage": self.stage, "kind": self.kind, "table": self.table,
           "spec": self.spec, "label": self.label, "timing_key": self.timing_key}
    if self.column:
      out["skip"] = [list(c) for c in (skip or [])]
      out["resume"] = resume
    return out

  @property
  def label(self) -> str:
    s = self.spec
    if self.column:
      variant = f" init={s['init']}" if s.get("init") else ""
      return (f"{self.table} {s['mode']}{variant} {'+'.join(s['methods'])} "
              f"{len(s['scenarios'])} scenarios seeds={s['seeds']}")
    if self.kind == "firma":
      return (f"{self.table} {s['mode']} {s['scenario']} {s['method']} "
              f"seeds={s['seeds']}")
    if self.kind == "jobs":
      return f"{self.table} {s['arg'] or '-'} {s['label']} seeds={len(s['seeds'])}"
    return f"measurement {self.table}"


@dataclasses.dataclass
class Plan:
  path: str
  tables: dict
  measurements: list
  items: list
  digest: str


def _need(cond, key, value, allowed):
  if not cond:
    raise PlanError(f"plan {key}={value!r}: {allowed}")


def _estimate(group, name, where):
  est = group.get("estimate_s", 60)
  if isinstance(est, dict):
    est = est.get(name, est.get("default"))
  _need(isinstance(est, (int, float)) and est > 0, f"{where}.estimate_s", est,
        "must be a number > 0 (or a dict of them with a 'default')")
  return float(est)


def _strings(group, key, where):
  v = group.get(key)
  _need(isinstance(v, list) and v and all(isinstance(x, str) for x in v),
        f"{where}.{key}", v, "must be a non-empty list of strings")
  return v


def expand(group, where) -> list:
  """The items of one plan group, in order."""
  kind = group.get("kind")
  _need(kind in KINDS, f"{where}.kind", kind, f"allowed values are {', '.join(KINDS)}")
  table = group.get("table")
  items = []
  if kind == "firma":
    seeds, rounds = group.get("seeds"), group.get("rounds", 30)
    _need(isinstance(seeds, int) and seeds >= 1, f"{where}.seeds", seeds,
          "must be an integer >= 1 (seeds 0 .. n-1, vmapped)")
    _need(isinstance(rounds, int) and rounds >= 1, f"{where}.rounds", rounds,
          "must be an integer >= 1")
    per_item = group.get("item", "cell")
    _need(per_item in FIRMA_ITEMS, f"{where}.item", per_item,
          f"allowed values are {', '.join(FIRMA_ITEMS)}")
    entries = group.get("methods")
    ok = isinstance(entries, list) and entries and all(
        isinstance(e, str) or (per_item == "column" and isinstance(e, list) and e
                               and all(isinstance(m, str) for m in e)) for e in entries)
    _need(ok, f"{where}.methods", entries, "must be a non-empty list of method names"
          + (" (or of lists of them, run in one item)" if per_item == "column" else ""))
    base = {"dataset": group.get("dataset"), "data": group.get("data"),
            "inputs": group.get("inputs", "authors")}
    if group.get("init") is not None:      # a labelled variant (firma_variants)
      from fedfrac_lab.reproduce.firma_variants import INITS
      _need(group["init"] in INITS, f"{where}.init", group["init"],
            f"allowed values are {', '.join(INITS)} (or leave it out)")
      base["init"] = group["init"]
    for mode in _strings(group, "modes", where):
      scenarios = _strings(group, "scenarios", where)
      if per_item == "column":
        for entry in entries:
          methods = [entry] if isinstance(entry, str) else list(entry)
          spec = {**base, "mode": mode, "scenarios": scenarios, "methods": methods,
                  "seeds": seeds, "rounds": rounds}
          items.append(Item("b", kind, table, spec,
                            _estimate(group, "+".join(methods), where)))
        continue
      for scenario in scenarios:
        for method in entries:
          spec = {**base, "mode": mode, "scenario": scenario, "method": method,
                  "seeds": seeds, "rounds": rounds}
          items.append(Item("b", kind, table, spec, _estimate(group, method, where)))
  else:
    seeds = group.get("seeds")
    _need(isinstance(seeds, list) and seeds and all(isinstance(s, int) and s >= 0
                                                   for s in seeds),
          f"{where}.seeds", seeds, "must be a non-empty list of integers >= 0")
    _need(isinstance(group.get("config"), str), f"{where}.config", group.get("config"),
          "must be a config file path")
    sets = group.get("set", {})
    _need(isinstance(sets, dict), f"{where}.set", sets, "must be a dict key -> value")
    grid = group.get("grid")
    _need(grid is None or (isinstance(grid, dict) and len(grid) == 1),
          f"{where}.grid", grid, "must be absent or {option: [values]}")
    for arg in group.get("args", [""]):
      for label in _strings(group, "labels", where):
        spec = {"config": group["config"], "arg": arg, "set": sets, "label": label,
                "seeds": seeds, "grid": grid}
        items.append(Item("b", kind, table, spec, _estimate(group, label, where)))
  return items


def load(path) -> Plan:
  """Read and check the plan file ``path``; raises :class:`PlanError`."""
  try:
    with open(path, "rb") as f:
      raw = f.read()
    data = json.loads(raw)
  except OSError as e:
    raise PlanError(f"plan file {path!r}: cannot be read ({e.strerror})") from None
  except ValueError as e:
    raise PlanError(f"plan file {path!r}: not JSON ({e})") from None
  _need(isinstance(data, dict), "file", type(data).__name__, "must be a JSON object")
  tables = data.get("tables", {})
  for name, t in tables.items():
    _need(isinstance(t, dict) and t.get("kind") in TABLE_KINDS, f"tables.{name}.kind",
          t.get("kind") if isinstance(t, dict) else t,
          f"allowed values are {', '.join(TABLE_KINDS)}")
    _need(isinstance(t.get("out"), str), f"tables.{name}.out", t.get("out"),
          "must be the path of the markdown table")
  measurements = []
  from fedfrac_lab.campaign import MEASUREMENT_NAMES
  for i, m in enumerate(data.get("measurements", [])):
    where = f"measurements[{i}]"
    _need(m.get("name") in MEASUREMENT_NAMES, f"{where}.name", m.get("name"),
          f"allowed values are {', '.join(MEASUREMENT_NAMES)}")
    _need(isinstance(m.get("args", {}), dict), f"{where}.args", m.get("args"),
          "must be a dict of keyword arguments")
    _need(isinstance(m.get("late", False), bool), f"{where}.late", m.get("late"),
          "must be true or false")
    measurements.append(Item("a", "bench", m["name"], m.get("args", {}),
                             _estimate(m, m["name"], where), bool(m.get("late", False))))
  items = []
  for i, group in enumerate(data.get("groups", [])):
    where = f"groups[{i}]"
    _need(group.get("table") in tables, f"{where}.table", group.get("table"),
          f"must name a table of the plan ({', '.join(tables)})")
    _need(tables[group["table"]]["kind"] == group.get("kind"), f"{where}.kind",
          group.get("kind"), f"table {group['table']!r} is of kind "
          f"{tables[group['table']]['kind']!r}")
    items += expand(group, where)
  seen = {}
  for item in items:
    _need(item.id not in seen, "groups", item.label,
          f"the same item is planned twice (also {seen.get(item.id)})")
    seen[item.id] = item.label
  return Plan(path, tables, measurements, items, hashlib.sha256(raw).hexdigest()[:16])


def resolve(value, data_dir):
  """``value`` with ``{data}`` replaced by ``data_dir`` (strings, recursively)."""
  if isinstance(value, str):
    return value.replace("{data}", data_dir)
  if isinstance(value, dict):
    return {k: resolve(v, data_dir) for k, v in value.items()}
  if isinstance(value, list):
    return [resolve(v, data_dir) for v in value]
  return value


def load_timings(path) -> list:
  """Rows ``{"key", "device", "seconds", ...}`` of earlier windows ([] if none)."""
  if not os.path.exists(path):
    return []
  try:
    with open(path) as f:
      rows = json.load(f)
  except (OSError, ValueError) as e:
    raise PlanError(f"{path}: not readable as JSON ({type(e).__name__}); move it "
                    f"aside (the next windows then use the plan's estimates)") from None
  if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
    raise PlanError(f"{path}: holds a {type(rows).__name__}, not a list of timing rows; "
                    f"move it aside (the next windows then use the plan's estimates)")
  return rows


def estimate(item: Item, device: str, timings: list, measured: dict) -> float:
  """Seconds item ``item`` is expected to take on ``device``: a time measured in
  this run for the same key, else the largest earlier one on that device (an item
  stopped at a window's deadline left its time so far: a lower bound), times
  :data:`SAFETY`; else the plan's guess."""
  if item.timing_key in measured:
    return SAFETY * measured[item.timing_key]
  times = [r["seconds"] for r in timings if r.get("key") == item.timing_key
           and r.get("device") == device]
  if times:
    return SAFETY * max(times)
  return item.estimate_s


def held_cells(plan, root) -> dict:
  """``{(table, mode, inputs, scenario, method, rounds): (seeds, path)}``: the
  most seeds of each FIRMA cell in the files a plan table renders from (its
  ``include`` globs and its verified campaign item files under
  ``results/campaign/<table>/``, a window's partial ones too), read as
  ``fedfrac-reproduce firma_files --json`` writes them."""
  from fedfrac_lab.reproduce import item_files
  from fedfrac_lab.reproduce.firma_files_table import json_cells  # the format's one reader
  held = {}
  for name, table in plan.tables.items():
    if table.get("kind") != "firma":
      continue
    paths = [p for pattern in table.get("include", [])
             for p in sorted(glob.glob(os.path.join(root, pattern)))]
    paths += sorted(item_files.done_items(os.path.join(root, "results", "campaign", name),
                                     partial=True).values())
    for path in paths:
      try:
        with open(path) as f:
          d = json.load(f)
        for mode, inputs, sc, method, cell in json_cells(d):
          k = (name, mode, inputs, sc, method, int(d["args"]["rounds"]))
          if len(cell["runs"]) > held.get(k, (0, ""))[0]:
            held[k] = (len(cell["runs"]), os.path.relpath(path, root))
      except (OSError, ValueError, KeyError, TypeError, AttributeError):
        continue           # not a firma_files result: it covers nothing
  return held


def coverage(plan, root) -> dict:
  """``{item id: {"cells": [(scenario, method)], "paths": [...]}}``: the cells of
  each FIRMA item that :func:`held_cells` holds with at least the item's seeds
  and its rounds (the CPU campaign's cells, earlier windows' items), and the
  files holding them."""
  from fedfrac_lab.reproduce.firma_variants import cell_inputs
  held = held_cells(plan, root)
  out = {}
  for item in plan.items:
    if item.kind != "firma":
      continue
    sp = item.spec
    # As json_cells reads the files: the inputs (and a variant) count only for
    # reference_code.
    inputs = cell_inputs(sp["mode"], {"inputs": "authors", **sp})
    got = [(cell, held.get((item.table, sp["mode"], inputs, *cell, sp["rounds"]), (0, "")))
           for cell in item.cells]
    cells = [(cell, path) for cell, (n, path) in got if n >= sp["seeds"]]
    if cells:
      out[item.id] = {"cells": [c for c, _ in cells],
                      "paths": sorted({p for _, p in cells})}
  return out


def covered_items(plan, root) -> dict:
  """``{item id: path}`` of the plan's FIRMA items whose every cell (mode,
  inputs, scenario, method) a committed file holds with at least the item's
  seeds and its rounds (:func:`coverage`): one run of that cell with ``seeds``
  seeds, as the CPU campaign writes them (``fedfrac-reproduce firma_files
  --json``), or an earlier window's item."""
  items = {i.id: i for i in plan.items}
  return {iid: ", ".join(c["paths"]) for iid, c in coverage(plan, root).items()
          if len(c["cells"]) == len(items[iid].cells)}
