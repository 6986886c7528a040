"""FOFedAvg Tables II, III and IV, and the K = 10 column of Tables V and VI, on the
real MNIST, from finished workdirs of ``python -m fedfrac.main
--config=configs/fofedavg/mnist_cnn.py:<scenario> --config.only=<method>`` (one
workdir a method, ``ROOT/<folder>/<method>``; the folder of ``severe,10`` is
``severe_10``).

  fedfrac-reproduce fofedavg_mnist --collect=ROOT   # ROOT/iid/*, ROOT/alpha/*, ROOT/severe_10/*
  fedfrac-reproduce fofedavg_mnist --table          # results/fofedavg_mnist_cpu.md

``--collect`` reads every workdir whose run finished: a verified record
(:mod:`fedfrac.runner.stored`) with status ``ok`` and every round, for every seed
of its config. A workdir with a seed missing, partial, diverged or damaged is not
counted (it is listed as pending, without numbers). The cells found are merged
into ``results/fofedavg_mnist_iid.json`` (Tables II–III) and
``results/fofedavg_mnist_alpha.json`` (Table IV): per method the per-seed,
per-round test accuracy and loss, the final accuracy, the config it ran with, its
command, the device, the CPU wall seconds the cell took (from the lines ``start
<scenario>/<method> (core N)`` / ``end <scenario>/<method> rc=0 wall_s=S`` of the
logs given by ``--timings``, else the sum of its records' wall and compile
seconds, named as such) and the date it finished. ``results/fofedavg_mnist_cpu.md``
is rendered from those two files (``fedfrac-reproduce docs`` keeps it in step).

The statistics (the paper's appendix B-C; our reading in
``configs/fofedavg/mnist_cnn.py``): Table II is the mean, variance and std of the
test accuracy *over the evaluated rounds of one run* (rounds 1 … 25), one value
per seed, compared over the seeds with the verdict rule
(:mod:`fedfrac_lab.reproduce.verdicts`); the variance is judged on its square root
(the rule's 2 pp margin is one of an accuracy, not of its square). Table III is
the 95 % Student-t interval of that mean, x̄ ± t₀.₉₇₅,ₙ₋₁ · s / √n; the paper states
neither n nor whether it runs over rounds or runs, so its cells show ours with
n = the rounds of a run and get no verdict (*not defined*). Table IV is the final
round's accuracy over seeds: its mean is judged; its std (one number over the
seeds, which the rule gives no interval) and its interval (n not stated) are
shown, *not defined*.

Tables V and VI (``severe,10``: Dirichlet 0.1, K = 10, run with
``--config.stop_at_target=True``) are read by :func:`read_target_cell`: a run
counts when its record is verified, its status ``ok``, and it either stopped at
the target (its ``stopped`` entry agreeing with its rows) or ran all its rounds.
Per seed: the first evaluated round whose test accuracy reached the config's
``target_accuracy`` (60 %) and the cumulative uplink bytes (``cum_bytes_up``) at
that round; a seed that never reached it has neither ("not reached in R rounds").
The paper prints one number a cell (its run count not stated) and the verdict
rule has a margin for an accuracy and a Gini coefficient, none for a count of
rounds or of bytes, so these cells show ours, Δ and its 90 % interval, *not
defined* (:func:`target_cells`).
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import re
import sys
import time
from typing import Dict, List, Optional, Tuple

from fedfrac_lab.reproduce import common, verdicts

SPEC = "configs/fofedavg/mnist_cnn.py"
IID_JSON = "results/fofedavg_mnist_iid.json"
ALPHA_JSON = "results/fofedavg_mnist_alpha.json"
MD = "results/fofedavg_mnist_cpu.md"
SEVERE_JSON = "results/fofedavg_mnist_severe_10.json"
JSONS = {"iid": IID_JSON, "alpha": ALPHA_JSON, "severe_10": SEVERE_JSON}
# A scenario's workdir folder -> the argument of the config it runs (the core logs
# name a cell by that argument: "severe,10/fedavg").
ARGS = {"iid": "iid", "alpha": "alpha", "severe_10": "severe,10"}
# The scenarios whose runs stop at their target (Tables V–VI): their cells are
# the rounds and uplink bytes to it (read_target_cell), not the curves.
TARGET_SCENARIOS = ("severe_10",)
MB = 1e6                  # Table VI's unit as we read it (the paper does not say)
DEVICE = "CPU, 2 cores (one process pinned per core)"
DATA = "real MNIST (60,000 / 10,000)"
# Table IV's rows -> our labels (configs/fofedavg/mnist_cnn.py alpha_methods).
ALPHA_ROWS = {"alpha=0.5": "fofedavg_a0p5", "alpha=0.6": "fofedavg_a0p6",
              "alpha=0.97": "fofedavg_a0p97", "alpha=1.5": "fofedavg_a1p5"}
SECAGG = ("refused at C = 0.2: SparseSecAgg's pairwise masks cancel only when every "
          "client uploads (configs/fofedavg/mnist_cnn.py), so it is not run here")
OVER_ROUNDS = ("over the {rounds} evaluated rounds of each run, one value a seed (the "
               "paper: 'over different communication rounds' and 'under repeated runs'; "
               "which, and n, not stated)")
N_NOT_STATED = ("not defined: the paper states neither n nor whether the interval runs "
                "over rounds or runs; ours with n = {rounds} rounds of a run")
STD_NO_INTERVAL = ("not defined: one std over our {n} seeds, which the rule gives no "
                   "interval; the paper's run count is not stated")
CI_NOT_STATED = ("not defined: the paper's run count n is not stated; ours is the 95 % "
                 "t-interval over our {n} seeds")
_START = re.compile(r"^(\S+) start (\S+) \(core (\d+)\)")
_END = re.compile(r"^(\S+) end (\S+) rc=(-?\d+) wall_s=(\d+)")


# ------------------------------------------------------------------ collect


def _config(scenario: str):
  from fedfrac import config_files
  return config_files.load_config_file(os.path.join(common.CHECKOUT_DIR, SPEC),
                                       ARGS.get(scenario, scenario))


def labels(scenario: str) -> Tuple[str, ...]:
  """The method labels of ``configs/fofedavg/mnist_cnn.py:<scenario>`` (a scenario
  named by its folder, ``severe_10``, runs ``severe,10``)."""
  return tuple(_config(scenario).methods.keys())


def seed_count(doc: dict) -> int:
  """The seeds of a document's runs (its config's while none has finished)."""
  if doc.get("cells"):
    return len(next(iter(doc["cells"].values()))["seeds"])
  return len(_config(doc.get("scenario", "iid")).seeds)


def _seed_records(workdir: str, label: str):
  """``(config.json, [(seed, record, its rows from round 1)])`` of a workdir whose
  every seed of ``label`` has a verified record with status ``ok``, else
  ``(None, why not)``."""
  from fedfrac.runner import sealed
  from fedfrac.runner.workdir import Workdir
  try:
    with open(os.path.join(workdir, "config.json")) as f:
      config = json.load(f)
  except (OSError, ValueError) as e:
    return None, f"no readable config.json ({e.__class__.__name__})"
  kept = Workdir(workdir)
  current = kept.binding(label)
  found = []
  for seed in config["seeds"]:
    try:
      rec = kept.read_record(label, int(seed), current)
    except FileNotFoundError:
      return None, f"seed {seed}: no record yet"
    except (OSError, sealed.Damaged) as e:
      return None, f"seed {seed}: record not verified ({e})"
    if rec.status != "ok":
      return None, f"seed {seed}: status {rec.status}"
    found.append((seed, rec, [r for r in rec.rows if int(r["round"]) >= 1]))
  return config, found


def read_cell(workdir: str, label: str) -> Tuple[Optional[dict], str]:
  """``(cell, "")`` of a finished workdir, else ``(None, why not)``: every seed of
  its config.json needs a verified record of ``label`` with status ``ok`` that
  reached the config's rounds."""
  config, found = _seed_records(workdir, label)
  if config is None:
    return None, found
  rounds = int(config["rounds"])
  seeds = {}
  for seed, rec, rows in found:
    if not rows or int(rows[-1]["round"]) < rounds:
      return None, f"seed {seed}: {rows[-1]['round'] if rows else 0} of {rounds} rounds"
    seeds[str(seed)] = {
        "rounds": [int(r["round"]) for r in rows],
        "accuracy": [float(r["accuracy"]) for r in rows],
        "loss": [float(r["loss"]) for r in rows],
        "final_accuracy": float(rows[-1]["accuracy"]),
        "wall_s": float(rec.wall_s), "compile_s": float(rec.compile_s)}
  return {"config": config, "rounds": rounds, "seeds": seeds}, ""


def read_target_cell(workdir: str, label: str) -> Tuple[Optional[dict], str]:
  """``(cell, "")`` of a finished workdir of a run to a target (Tables V–VI), else
  ``(None, why not)``. Every seed of its config.json needs a verified record of
  ``label`` with status ``ok`` that either stopped at the target (``stopped``: its
  ``rounds_to_target`` and ``bytes_up_to_target`` must be its rows') or ran all the
  config's rounds. Per seed: ``rounds_to_target`` (the first evaluated round whose
  accuracy reached ``target_accuracy``; None: not reached), ``bytes_up_to_target``
  (the row's ``cum_bytes_up``; None: not reached), the last round run and the
  curve up to it."""
  from fedfrac.metrics.statistics import rounds_to_target
  config, found = _seed_records(workdir, label)
  if config is None:
    return None, found
  rounds, target = int(config["rounds"]), float(config["target_accuracy"])
  seeds = {}
  for seed, rec, rows in found:
    last = int(rows[-1]["round"]) if rows else 0
    reached = rounds_to_target([int(r["round"]) for r in rows],
                               [float(r["accuracy"]) for r in rows], target)
    at = next((r for r in rows if int(r["round"]) == reached), None)
    up = None if at is None else float(at["cum_bytes_up"])
    stop = rec.stopped
    if stop is not None:
      if (stop.get("rounds_to_target"), stop.get("bytes_up_to_target")) != (reached, up):
        return None, (f"seed {seed}: its record says it stopped at the target at round "
                      f"{stop.get('rounds_to_target')}, its rows reach "
                      f"{target:g} at round {reached}")
    elif last < rounds:
      return None, f"seed {seed}: {last} of {rounds} rounds, not stopped at the target"
    seeds[str(seed)] = {
        "rounds_to_target": reached, "bytes_up_to_target": up, "last_round": last,
        "stopped": stop, "rounds": [int(r["round"]) for r in rows],
        "accuracy": [float(r["accuracy"]) for r in rows],
        "cum_bytes_up": [float(r["cum_bytes_up"]) for r in rows],
        "wall_s": float(rec.wall_s), "compile_s": float(rec.compile_s)}
  return {"config": config, "rounds": rounds, "target_accuracy": target,
          "seeds": seeds}, ""


def cell_times(paths) -> Dict[str, dict]:
  """{"<scenario>/<method>": {"core", "start", "end", "wall_s", "runs"}} of every
  cell whose last run ended with rc=0 in the logs ``paths``: ``wall_s`` sums
  every run of the cell (a run that computed the records and failed after them,
  then the rerun that found them, both count; a cell the script did not start
  again, "(done before)", is no run), ``runs`` lists them; ``killed`` counts
  its runs with a start and no end (stopped with the session: their time is
  not in the log)."""
  runs, started, killed, first = {}, {}, {}, {}
  for path in paths:
    with open(path) as f:
      for line in f:
        m = _START.match(line.strip())
        if m:
          if m.group(2) in started:   # its previous start has no end: killed at a stop
            killed[m.group(2)] = killed.get(m.group(2), 0) + 1
          started[m.group(2)] = (m.group(1), int(m.group(3)))
          first.setdefault(m.group(2), m.group(1))
          continue
        m = _END.match(line.strip())
        if m and line.rstrip().endswith("(done before)"):   # not started: no run
          started.pop(m.group(2), None)
          continue
        if m:
          start, core = started.pop(m.group(2), (None, None))
          runs.setdefault(m.group(2), []).append(
              {"core": core, "start": start, "end": m.group(1), "rc": int(m.group(3)),
               "wall_s": int(m.group(4))})
  out = {}
  for cell, each in runs.items():
    if each[-1]["rc"] != 0:
      continue
    out[cell] = {"core": each[-1]["core"], "start": first.get(cell, each[0]["start"]),
                 "end": each[-1]["end"], "wall_s": sum(r["wall_s"] for r in each),
                 "runs": each, "killed": killed.get(cell, 0)}
  return out


def command(scenario: str, label: str, config: dict, workdir: str, core=None) -> str:
  """The command that ran a cell (as the workdir's config.json says)."""
  pin = f"nice -n 19 taskset -c {core} " if core is not None else ""
  data = config.get("data", {})
  files = (f" --config.data.source=files --config.data.dir={data['dir']}"
           if data.get("source") == "files" else "")
  stop = " --config.stop_at_target=True" if config.get("stop_at_target") else ""
  return (f"{pin}python -m fedfrac.main --config={SPEC}:{ARGS.get(scenario, scenario)} "
          f"--config.only={label}{files} --workdir={workdir}{stop}")


def collect(root: str, scenario: str, times: Dict[str, dict], previous: Optional[dict],
            collect_command: str, log=print) -> dict:
  """The results document of ``scenario``: the cells of ``previous`` (a results
  JSON) with every finished workdir under ``root/<scenario>`` added or replaced
  (:func:`read_target_cell` for a scenario of :data:`TARGET_SCENARIOS`, else
  :func:`read_cell`)."""
  doc = dict(previous or {})
  cells = dict(doc.get("cells", {}))
  pending = {}
  read = read_target_cell if scenario in TARGET_SCENARIOS else read_cell
  arg = ARGS.get(scenario, scenario)
  for label in labels(scenario):
    workdir = os.path.join(root, scenario, label)
    if not os.path.isdir(workdir):
      if label not in cells:
        pending[label] = "no workdir"
      continue
    cell, why = read(workdir, label)
    if cell is None:
      if label not in cells:
        pending[label] = why
      log(f"{scenario}/{label}: not counted ({why})")
      continue
    t = times.get(f"{arg}/{label}")
    records = sum(s["wall_s"] + s["compile_s"] for s in cell["seeds"].values())
    if t is not None and t["killed"]:
      cell.update(cpu_wall_s=round(records, 1), cpu_wall_source=(
                  f"the sum of its records' wall and compile seconds ({t['killed']} of "
                  f"its runs stopped with the session that ran them, without an end line "
                  f"in the core's log; the log's {t['wall_s']} s are the last "
                  f"{len(t['runs'])})"),
                  started=t["start"], finished=t["end"], core=t["core"], runs=t["runs"])
    elif t is not None:
      cell.update(cpu_wall_s=t["wall_s"], cpu_wall_source=(
                  "from its start to its end in its core's log (data loading and "
                  "compilation included; the core shared with other work)"
                  + (f", summed over its {len(t['runs'])} runs (rc "
                     f"{', '.join(str(r['rc']) for r in t['runs'])})"
                     if len(t["runs"]) > 1 else "")),
                  started=t["start"], finished=t["end"], core=t["core"], runs=t["runs"])
    else:
      newest = max(os.path.getmtime(os.path.join(workdir, "runs", label, f"seed_{s}.json"))
                   for s in cell["seeds"])
      cell.update(cpu_wall_s=round(records, 1), cpu_wall_source="the sum of its records' "
                  "wall and compile seconds (no log line of the cell)",
                  finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(newest)))
    cell["records_wall_s"] = round(records, 1)
    cell["command"] = command(scenario, label, cell["config"], workdir,
                              t["core"] if t else None)
    cell["device"] = DEVICE
    cells[label] = cell
    log(f"{scenario}/{label}: collected ({cell['cpu_wall_s']} s)")
  doc.update(scenario=scenario, spec=f"{SPEC}:{arg}", device=DEVICE, data=DATA,
             collect_command=collect_command,
             collected=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             cells={k: cells[k] for k in labels(scenario) if k in cells},
             pending=pending)
  return doc


# ------------------------------------------------------------------ statistics


def load(scenario: str) -> dict:
  """The committed results document of ``scenario`` ({} when there is none)."""
  return common.load_results_json(JSONS[scenario]) or {}


def partition_seed(*docs: dict) -> Optional[int]:
  """``data.seed`` of the config every collected cell of ``docs`` ran with (as its
  workdir's config.json recorded it; a config without the key ran with the
  default, ``base_config().data.seed``); None without a cell; an error when the
  cells disagree (a table would then mix what its n covers)."""
  from fedfrac.config_base import base_config
  default = int(base_config().data.seed)
  seeds = {int(cell.get("config", {}).get("data", {}).get("seed", default)) for doc in docs
           for cell in doc.get("cells", {}).values()}
  if len(seeds) > 1:
    raise ValueError(f"data.seed {sorted(seeds)} across the collected cells; expected "
                     f"one value")
  return seeds.pop() if seeds else None


def covers_text(*docs: dict) -> str:
  """"**What n covers.** …" from :func:`partition_seed` of the collected cells."""
  seed = partition_seed(*docs)
  if seed is None:
    return "**What n covers.** no cell collected yet."
  return f"**What n covers.** {verdicts.n_covers(seed)}."


def round_stats(cell: dict) -> List[dict]:
  """Per seed: :func:`fedfrac.metrics.statistics.seed_stats` of the test accuracy
  over the run's evaluated rounds (mean, sample std, 95 % t half-width, n), with
  its variance."""
  from fedfrac.metrics.statistics import seed_stats
  out = []
  for seed in sorted(cell["seeds"], key=int):
    s = seed_stats(cell["seeds"][seed]["accuracy"])
    out.append({**s, "var": s["std"] ** 2, "lo": s["mean"] - s["ci95"],
                "hi": s["mean"] + s["ci95"]})
  return out


def finals(cell: dict) -> List[float]:
  return [cell["seeds"][s]["final_accuracy"] for s in sorted(cell["seeds"], key=int)]


def _undefined(published, values, note) -> verdicts.Comparison:
  c = verdicts.compare(published, values, verdicts.ACCURACY, stand_in=True)
  return c._replace(verdict=verdicts.NOT_DEFINED, note=note)


def iid_cells(doc: dict) -> List[tuple]:
  """[(table, row, column, Comparison, per-seed values, what)] of Tables II and III
  for every finished method of the iid document (rows in the paper's order)."""
  from fedfrac_lab.reproduce.published_ours import fofedavg_method_rows
  paper = common.published("fofedavg")
  out = []
  for row, label in fofedavg_method_rows().items():
    cell = doc.get("cells", {}).get(label)
    if label == "sparse_secagg" and doc.get("cells"):
      for table, cols in (("Table II", ("Mean", "Variance", "Std. Dev.")),
                          ("Table III", ("CI95_low", "CI95_high"))):
        for col in cols:
          c = verdicts.judge(paper[table][row][col], None, None, 0, verdicts.ACCURACY)
          out.append((table, row, col, c._replace(note=SECAGG), [], ""))
      continue
    if cell is None:
      continue
    stats = round_stats(cell)
    rounds = cell["rounds"]
    over = OVER_ROUNDS.format(rounds=rounds)
    t2, t3 = paper["Table II"][row], paper["Table III"][row]
    means, varis, stds = ([s[k] for s in stats] for k in ("mean", "var", "std"))
    out.append(("Table II", row, "Mean", verdicts.compare(t2["Mean"], means,
                                                          verdicts.ACCURACY), means, over))
    root = verdicts.compare(math.sqrt(t2["Variance"]), stds, verdicts.ACCURACY)
    mean, std, n = verdicts.seed_summary(varis)
    out.append(("Table II", row, "Variance", root._replace(
        published=verdicts.Published(t2["Variance"]), mean=mean, std=std, n=n,
        delta=mean - t2["Variance"], half_width=None, margin=None,
        note=f"verdict on √variance {root.published.value:.4f} against ours "
             f"{root.mean:.4f} (Δ {root.delta * 100:+.1f} pp, 90 % interval "
             f"{verdicts.interval_text(root, 1, 100)})"), varis, over))
    out.append(("Table II", row, "Std. Dev.", verdicts.compare(t2["Std. Dev."], stds,
                                                               verdicts.ACCURACY),
                stds, over))
    for col, key in (("CI95_low", "lo"), ("CI95_high", "hi")):
      values = [s[key] for s in stats]
      out.append(("Table III", row, col, _undefined(
          t3[col], values, N_NOT_STATED.format(rounds=rounds)), values,
          f"95 % t-interval over the {rounds} rounds of each run"))
  return out


def alpha_cells(doc: dict) -> List[tuple]:
  """[(table, row, column, Comparison, values, what)] of Table IV for every
  finished α of the alpha document."""
  from fedfrac.metrics.statistics import seed_stats
  paper = common.published("fofedavg")["Table IV"]
  out = []
  for row, label in ALPHA_ROWS.items():
    cell = doc.get("cells", {}).get(label)
    if cell is None:
      continue
    values = finals(cell)
    s = seed_stats(values)
    n = s["n"]
    pub = paper[row]
    out.append(("Table IV", row, "mean", verdicts.compare(
        {"mean": pub["mean"], "std": pub["std"]}, values, verdicts.ACCURACY), values,
        f"final-round accuracy ({cell['rounds']} rounds) over {n} seeds"))
    out.append(("Table IV", row, "std", _undefined(pub["std"], [s["std"]],
                                                   STD_NO_INTERVAL.format(n=n))._replace(
        n=n, std=None), [s["std"]], f"sample std over {n} seeds"))
    for col, value in (("CI_low", s["mean"] - s["ci95"]), ("CI_high", s["mean"] + s["ci95"])):
      out.append(("Table IV", row, col, _undefined(pub[col], [value],
                                                   CI_NOT_STATED.format(n=n))._replace(
          n=n, std=None), [value], f"95 % t-interval of the mean over {n} seeds"))
  return out


# Tables V–VI: the column we run, and why their cells get no verdict.
TARGET_COLUMN = "10 Clients"
TARGET_TABLES = (("Table V", "rounds_to_target", 1.0, "rounds"),
                 ("Table VI", "bytes_up_to_target", 1.0 / MB, "MB"))
NO_MARGIN = ("not defined: the rule has no margin for a count of {unit} (only an "
             "accuracy's and a Gini coefficient's); the paper's one number, its run count "
             "not stated, taken as exact")
NOT_REACHED = ("not defined: {missing} of {n} seeds did not reach test accuracy {target:g} "
               "in {rounds} rounds (a count cut off at {rounds} rounds has no mean)")


def partition_text(data: dict) -> str:
  """"IID" / "Dirichlet α = 0.1" / the partition's name, of a config's ``data``."""
  if data["partition"] == "iid":
    return "IID"
  if data["partition"] == "dirichlet":
    return f"Dirichlet α = {data['alpha']:g}"
  return data["partition"]


def setting(doc: dict, what: str = "") -> str:
  """The setting of a document's runs, as a table names it."""
  c = next(iter(doc["cells"].values()))["config"] if doc.get("cells") else None
  if c is None:
    return ""
  seeds = len(c["seeds"])
  rounds = (f"at most {c['rounds']} rounds, each run stopped at "
            f"{c['target_accuracy'] * 100:g} % test accuracy (`stop_at_target`)"
            if c.get("stop_at_target") else f"{c['rounds']} rounds")
  text = (f"{DATA}, CNNMnist, {partition_text(c['data'])}, K = "
          f"{c['data']['num_clients']} clients, C = {c['participation']:g}, B = "
          f"{c['client']['batch_size']}, E = {c['client']['local_epochs']}, {rounds}, "
          f"{seeds} seeds; the paper's settings (`{SPEC}:"
          f"{ARGS.get(doc['scenario'], doc['scenario'])}`); {DEVICE}")
  return f"{text}; {what}" if what else text


def seed_values(cell: dict, key: str, scale: float = 1.0) -> List[Optional[float]]:
  """Per seed (in seed order): ``key`` of a Tables V–VI cell times ``scale``; None
  for a seed that did not reach the target."""
  return [None if cell["seeds"][s][key] is None else cell["seeds"][s][key] * scale
          for s in sorted(cell["seeds"], key=int)]


def target_comparison(published, values: List[Optional[float]], unit: str,
                      rounds: int, target: float) -> verdicts.Comparison:
  """One Tables V–VI cell against ours: mean ± std over the seeds, Δ and the half-
  width of its 90 % interval (the rule's, t₀.₉₅,ₙ₋₁ · s / √n with the published
  value exact), verdict *not defined* (the rule has no margin for ``unit``); with a
  seed that did not reach the target, no mean either (*not defined*, said why)."""
  missing = sum(v is None for v in values)
  if missing:
    c = verdicts.judge(published, None, None, 0, verdicts.ACCURACY)
    return c._replace(n=len(values), verdict=verdicts.NOT_DEFINED, note=NOT_REACHED.format(
        missing=missing, n=len(values), target=target, rounds=rounds))
  c = verdicts.compare(published, values, verdicts.ACCURACY)
  return c._replace(margin=None, verdict=verdicts.NOT_DEFINED,
                    note=NO_MARGIN.format(unit=unit))


def target_cells(doc: dict) -> List[tuple]:
  """[(table, row, column, Comparison, per-seed values (None: not reached), what)]
  of Tables V (rounds to the target) and VI (uplink MB to it), K = 10 column, for
  every finished method of the ``severe_10`` document (rows in the paper's
  order); SparseSecAgg *not run* (refused at C = 0.2)."""
  from fedfrac_lab.reproduce.published_ours import fofedavg_method_rows
  paper = common.published("fofedavg")
  out = []
  for row, label in fofedavg_method_rows().items():
    cell = doc.get("cells", {}).get(label)
    if label == "sparse_secagg" and doc.get("cells"):
      for table, *_ in TARGET_TABLES:
        c = verdicts.judge(paper[table][row][TARGET_COLUMN], None, None, 0,
                           verdicts.ACCURACY)
        out.append((table, row, TARGET_COLUMN, c._replace(note=SECAGG), [], ""))
      continue
    if cell is None:
      continue
    rounds, target = cell["rounds"], cell["target_accuracy"]
    n = len(cell["seeds"])
    first = cell["seeds"][min(cell["seeds"], key=int)]
    per_round = first["cum_bytes_up"][0] / first["rounds"][0]
    whats = {
        "rounds": (f"n = {n} seeds: each run's first round (of at most {rounds}, "
                   f"evaluated every round) at ≥ {target * 100:g} % test accuracy; their "
                   f"mean and sample std"),
        "MB": (f"n = {n} seeds: each run's uplink bytes (`cum_bytes_up`) up to that "
               f"round, MB = 10⁶ bytes; their mean and sample std; ours "
               f"{per_round / MB:.3f} MB a round, the paper's "
               f"{paper['Table VI'][row][TARGET_COLUMN]:g} MB over "
               f"{paper['Table V'][row][TARGET_COLUMN]:g} rounds")}
    for table, key, scale, unit in TARGET_TABLES:
      values = seed_values(cell, key, scale)
      out.append((table, row, TARGET_COLUMN, target_comparison(
          paper[table][row][TARGET_COLUMN], values, unit, rounds, target), values,
          whats[unit]))
  return out


def per_seed_text(values: List[Optional[float]], digits: int, rounds: int) -> str:
  """"3 / not reached in 25 rounds / 4": per-seed values as a cell lists them."""
  return " / ".join(f"not reached in {rounds} rounds" if v is None else
                    f"{v:.{digits}f}" for v in values) or "–"


def ours() -> Dict[tuple, list]:
  """{(table, row, column): [Ours]} of every finished real-MNIST cell, each with
  its comparison (for :mod:`fedfrac_lab.reproduce.published_ours`)."""
  from fedfrac_lab.reproduce.published_ours import Ours
  out = {}
  for scenario, cells in SCENARIO_CELLS:
    doc = load(scenario)
    for table, row, col, c, values, what in cells(doc):
      if c.verdict == verdicts.NOT_RUN:          # SparseSecAgg: refused at the paper's C
        out[(table, row, col)] = [Ours(None, None, 0, setting(doc), c.note,
                                       comparison=c._replace(note=""))]
      elif c.mean is None:                       # a seed did not reach the target
        rounds = next(iter(doc["cells"].values()))["rounds"]
        out[(table, row, col)] = [Ours(None, None, c.n, setting(doc, what),
                                       "per seed " + per_seed_text(
                                           values, 0 if table == "Table V" else 3, rounds),
                                       comparison=c)]
      else:
        out[(table, row, col)] = [Ours(c.mean, c.std, c.n, setting(doc, what),
                                       comparison=c)]
  return out


def tallies() -> Dict[str, dict]:
  """{table: {verdict: cells}} of the real-MNIST cells of Tables II–VI."""
  out = {t: verdicts.tally([]) for t in ("Table II", "Table III", "Table IV", "Table V",
                                         "Table VI")}
  for scenario, cells in SCENARIO_CELLS:
    for table, _, _, c, _, _ in cells(load(scenario)):
      out[table][c.verdict] += 1
  return out


# Each scenario and the function that makes its table cells.
SCENARIO_CELLS = (("iid", iid_cells), ("alpha", alpha_cells), ("severe_10", target_cells))


def cpu_time(seconds: float) -> str:
  s = int(round(seconds))
  return f"{s // 3600} h {s % 3600 // 60} min" if s >= 3600 else f"{s // 60} min {s % 60} s"


# ------------------------------------------------------------------ table


def _row_text(label, c, values, what):
  d = "–" if c.delta is None else f"{c.delta:+.4f}"
  per = " / ".join(f"{v:.4f}" for v in values) or "–"
  notes = "; ".join(x for x in (what, c.note) if x)
  ours = (verdicts.ours_text(c, 4) if c.std is not None or c.mean is None else
          f"{c.mean:.4f} (one value over n = {c.n} seeds)")
  return (f"| {label} | {verdicts.published_text(c, 4)} | {ours} | "
          f"{per} | {d} | {verdicts.interval_text(c, 1, 100)} | "
          f"{'–' if c.margin is None else f'±{c.margin * 100:.1f} pp'} | "
          f"{verdicts.verdict_text(c)} | {notes} |")


TARGET_READING = (
    "Reading: per seed, the first evaluated round whose test accuracy reached 60 % and "
    "the uplink bytes summed up to it (a seed that did not reach it says so, and its "
    "cell has no mean); the mean and sample std run over the seeds. The paper prints "
    "one number a cell, its run count not stated. The verdict rule has a margin for an "
    "accuracy and for a Gini coefficient, none for a count of rounds or of bytes, so "
    "every cell is *not defined*: ours, Δ and its 90 % interval (t₀.₉₅,ₙ₋₁ · s / √n) "
    "are shown. Only K = 10 has run; K = 100 and 1,000 are estimated in REPRODUCTION.md.")
HEAD = ("| cell | published | ours: mean ± std over seeds (n) | per seed | Δ | 90 % "
        "interval of Δ (pp) | margin | verdict | note |\n"
        "|---|---|---|---|---|---|---|---|---|")


TARGET_HEAD = ("| cell | published | ours: mean ± std over seeds (n) | per seed | Δ | "
               "90 % interval of Δ | verdict | note |\n|---|---|---|---|---|---|---|---|")


def _target_row_text(label, c, values, what, rounds):
  """A Tables V–VI row: rounds (Table V) or MB (Table VI), in the table's units."""
  rounds_row = label.endswith("rounds")
  digits, mean_digits, delta_digits = (0, 1, 1) if rounds_row else (3, 3, 2)
  d = "–" if c.delta is None else f"{c.delta:+.{delta_digits}f}"
  ours = "–" if c.mean is None else verdicts.ours_text(c, mean_digits)
  interval = verdicts.interval_text(c, delta_digits, 1.0)
  notes = "; ".join(x for x in (what, c.note) if x)
  return (f"| {label} | {c.published.value:g} | {ours} | "
          f"{per_seed_text(values, digits, rounds)} | {d} | {interval} | "
          f"{verdicts.verdict_text(c)} | {notes} |")


def _section(title, rows, doc, pending_rows, extra=(), head=HEAD, row_text=_row_text):
  lines = [f"## {title}", ""]
  if not doc.get("cells"):
    return lines + ["No run of this table has finished yet.", ""]
  counts = verdicts.tally(c.verdict for _, c, _, _ in rows)
  lines += [f"Setting: {setting(doc)}.", "",
            f"Verdicts: {verdicts.tally_text(counts)}.", "", head]
  lines += [row_text(label, c, values, what) for label, c, values, what in rows]
  lines += [""] + list(extra)
  if pending_rows:
    lines.append("Not finished yet (no numbers): " + "; ".join(pending_rows) + ".")
    lines.append("")
  return lines


def _times(doc):
  return "; ".join(
      f"{label} {cpu_time(c['cpu_wall_s'])} ("
      + (f"core {c['core']}, " if c.get("core") is not None else "")
      + f"finished {c['finished']}; {c['cpu_wall_source']})"
      for label, c in doc.get("cells", {}).items())


def markdown(command: str = "fedfrac-reproduce fofedavg_mnist --table") -> str:
  """results/fofedavg_mnist_cpu.md from the two results files."""
  from fedfrac_lab.reproduce.published_ours import fofedavg_method_rows
  iid, alpha, severe = load("iid"), load("alpha"), load("severe_10")
  names = {v: k for k, v in fofedavg_method_rows().items()}
  collected = (iid.get('collect_command') or alpha.get('collect_command')
               or severe.get('collect_command') or '–')
  lines = ["# FOFedAvg Tables II–IV and Tables V–VI's K = 10 column on the real MNIST "
           "(CPU)", "",
           f"Produced by `{command}` from `{IID_JSON}`, `{ALPHA_JSON}` and "
           f"`{SEVERE_JSON}`; those were collected from the finished workdirs "
           f"(`{collected}`). Only a method whose every seed has a verified record with "
           "status ok and every round (Tables V–VI: every round, or stopped at the "
           "target) counts; each cell's command, config and CPU time are in the "
           "JSON files.", "", verdicts.RULE, "", covers_text(iid, alpha, severe), "",
           "Readings: Table II's mean, variance and std run " +
           OVER_ROUNDS.format(rounds=25) + "; the variance is judged on its square "
           "root (the rule's margin is one of an accuracy). Table III's n is not stated "
           "(the printed half-widths do not fit one n for every row), so its cells get "
           "no verdict. Table IV: the mean of the final-round accuracy over our seeds "
           "is judged against the published mean ± std (its run count not stated: "
           "n_p = 1); its std and interval are shown without a verdict.", ""]
  t23 = {"Table II": [], "Table III": []}
  for table, row, col, c, values, what in iid_cells(iid):
    t23[table].append((f"{row} · {col}", c, values, what))
  pending = [f"{names.get(k, k)} ({iid['pending'][k]})" for k in _paper_order("iid")
             if k in iid.get("pending", {})]
  for table, what in (("Table II", "mean / variance / std of the test accuracy over "
                                   "the rounds of a run"),
                      ("Table III", "95 % t-interval of the mean test accuracy over "
                                    "the rounds of a run")):
    seeds = seed_count(iid)
    extra = ([f"Mean over rounds: {versus_fedavg(iid)}.", ""]
             if table == "Table II" and versus_fedavg(iid) else [])
    lines += _section(f"{table}: {what} — {DATA}, IID, K = 10 clients, {seeds} seeds, "
                      f"the paper's settings, {DEVICE}", t23[table], iid, pending, extra)
  rows = [(f"{row} · {col}", c, values, what)
          for _, row, col, c, values, what in alpha_cells(alpha)]
  seeds = seed_count(alpha)
  pending = [f"{k} ({v})" for k, v in alpha.get("pending", {}).items()]
  lines += _section(f"Table IV: final-round accuracy of FOFedAvg by α — {DATA}, IID, "
                    f"K = 10 clients, {seeds} seeds, the paper's settings, {DEVICE}",
                    rows, alpha, pending)
  rows = [(f"{row} · {'rounds' if table == 'Table V' else 'MB'}", c, values, what)
          for table, row, _, c, values, what in target_cells(severe)]
  rounds = (next(iter(severe["cells"].values()))["rounds"] if severe.get("cells") else 0)
  pending = [f"{names.get(k, k)} ({severe['pending'][k]})" for k in _paper_order("severe_10")
             if k in severe.get("pending", {})]
  lines += _section(
      f"Tables V–VI: rounds and uplink MB to 60 % test accuracy — {DATA}, Dirichlet 0.1, "
      f"K = 10 clients only, {seed_count(severe)} seeds, {DEVICE}, each run stopped at "
      f"the target", rows, severe, pending, [TARGET_READING, ""], TARGET_HEAD,
      lambda *a: _target_row_text(*a, rounds))
  lines += ["## CPU time of each cell (measured)", ""]
  for name, doc in (("Tables II–III", iid), ("Table IV", alpha),
                    ("Tables V–VI (K = 10)", severe)):
    lines.append(f"- {name}: {_times(doc) or 'none finished yet'}.")
  lines.append("")
  return "\n".join(lines)


def write_table(out: str = MD) -> None:
  common.write_text(out, markdown())
  print(f"wrote {out}", file=sys.stderr)


def main(argv=None):
  p = argparse.ArgumentParser(prog="fedfrac-reproduce fofedavg_mnist",
                              description=__doc__.split("\n\n")[0])
  p.add_argument("--collect", default="", help="the folder holding <scenario>/<method> "
                 "workdirs: add every finished one to the results files")
  p.add_argument("--timings", default="", help="glob of the logs with the cells' start "
                 "and end lines (default: DIR/../core*.log of --collect)")
  p.add_argument("--scenarios", default=",".join(JSONS), help="the workdir folders "
                 "to collect, comma-separated (severe_10 runs the config's severe,10)")
  p.add_argument("--table", action="store_true", help="write --out from the results "
                 "files (also done after --collect)")
  p.add_argument("--out", default=MD)
  argv = sys.argv[1:] if argv is None else list(argv)
  args = p.parse_args(argv)
  if not args.collect and not args.table:
    p.error("give --collect=DIR or --table")
  if args.collect:
    if not os.path.isdir(args.collect):
      raise SystemExit(f"--collect={args.collect}: no such folder")
    pattern = args.timings or os.path.join(os.path.dirname(os.path.abspath(args.collect)),
                                           "core*.log")
    times = cell_times(sorted(glob.glob(pattern)))
    cmd = common.command_line("fofedavg_mnist", argv)
    for scenario in [s for s in args.scenarios.split(",") if s]:
      if scenario not in JSONS:
        p.error(f"--scenarios: {scenario!r} unknown; allowed: {', '.join(JSONS)}")
      path = os.path.join(common.CHECKOUT_DIR, JSONS[scenario])
      previous = None
      if os.path.exists(path):
        with open(path) as f:
          previous = json.load(f)
      doc = collect(args.collect, scenario, times, previous, cmd,
                    log=lambda line: print(line, file=sys.stderr))
      common.write_text(path, json.dumps(doc, indent=1, sort_keys=False) + "\n")
      print(f"wrote {path}", file=sys.stderr)
  write_table(args.out)


# ------------------------------------------------------------------ doc sentences


def _names():
  from fedfrac_lab.reproduce.published_ours import fofedavg_method_rows
  return {v: k for k, v in fofedavg_method_rows().items()}


def _paper_order(scenario: str) -> List[str]:
  """The labels of ``scenario`` in the paper's row order (Tables II–III: its
  method rows, as Tables V–VI; Table IV: its α rows)."""
  from fedfrac_lab.reproduce.published_ours import fofedavg_method_rows
  rows = ALPHA_ROWS if scenario == "alpha" else fofedavg_method_rows()
  ours = labels(scenario)
  return [label for label in rows.values() if label in ours] + [
      label for label in ours if label not in rows.values()]


def pending_names(scenario: str) -> List[str]:
  """The methods (Table IV: α values) of ``scenario`` not finished yet, in the
  paper's order."""
  doc = load(scenario)
  names = _names() if scenario != "alpha" else {v: k.replace("alpha=", "α ")
                                               for k, v in ALPHA_ROWS.items()}
  return [names.get(label, label) for label in _paper_order(scenario)
          if label not in doc.get("cells", {})]


def finished_times(scenario: str) -> List[Tuple[str, float]]:
  """[(method or α, measured CPU seconds)] of the finished cells of ``scenario``."""
  doc = load(scenario)
  names = _names() if scenario != "alpha" else {v: k.replace("alpha=", "α ")
                                               for k, v in ALPHA_ROWS.items()}
  return [(names.get(label, label), float(c["cpu_wall_s"]))
          for label, c in doc.get("cells", {}).items()]


def _short_setting(doc: dict) -> str:
  c = next(iter(doc["cells"].values()))
  return (f"the paper's data, IID, K = {c['config']['data']['num_clients']}, C = "
          f"{c['config']['participation']:g}, {c['rounds']} rounds, "
          f"{len(c['seeds'])} seeds; {DEVICE}; `{MD}`")


def versus_fedavg(doc: dict) -> str:
  """"FOFedAvg − FedAvg −0.12 pp, 90 % interval [...]: below FedAvg" of the mean
  accuracy over rounds ("" unless both have finished)."""
  cells = doc.get("cells", {})
  if "fofedavg" not in cells or "fedavg" not in cells:
    return ""
  a = [s["mean"] for s in round_stats(cells["fofedavg"])]
  b = [s["mean"] for s in round_stats(cells["fedavg"])]
  (ma, sa, na), (mb, sb, nb) = verdicts.seed_summary(a), verdicts.seed_summary(b)
  d, h = verdicts.difference({"mean": ma, "std": sa, "n": na}, {"mean": mb, "std": sb, "n": nb})
  where = ("above" if d - h > 0 else "below" if d + h < 0 else "not distinguishable from")
  return (f"FOFedAvg − FedAvg {d * 100:+.2f} pp, 90 % interval [{(d - h) * 100:+.2f}, "
          f"{(d + h) * 100:+.2f}]: FOFedAvg {where} FedAvg (the paper: 0.9812 against "
          f"0.8953)")


def t2_tally_text() -> str:
  """"agrees 5 · differs 18 · …" of the Table II cells judged on MNIST ("" while
  no run has finished)."""
  doc = load("iid")
  if not doc.get("cells"):
    return ""
  return verdicts.tally_text(verdicts.tally(x[3].verdict for x in iid_cells(doc)
                                            if x[0] == "Table II"))


def t4_tally_text() -> str:
  """The same for the Table IV means judged on MNIST ("" while none has finished)."""
  doc = load("alpha")
  if not doc.get("cells"):
    return ""
  return verdicts.tally_text(verdicts.tally(c.verdict for _, _, col, c, _, _
                                            in alpha_cells(doc) if col == "mean"))


def t2_text() -> str:
  """The MNIST part of REPRODUCTION.md's Table II notes (one paragraph)."""
  doc = load("iid")
  if not doc.get("cells"):
    return f"MNIST: no run of `{SPEC}:iid` has finished yet (`{MD}`)"
  cells = iid_cells(doc)
  means = [(row, c) for t, row, col, c, _, _ in cells
           if t == "Table II" and col == "Mean" and c.mean is not None]
  listed = ", ".join(f"{row} {c.mean:.4f} ± {c.std:.4f} (published "
                     f"{c.published.value:.4f}: {verdicts.verdict_text(c)})"
                     for row, c in means)
  pending = pending_names("iid")
  rounds = next(iter(doc["cells"].values()))["rounds"]
  return (f"MNIST ({_short_setting(doc)}): {len(doc['cells'])} of the "
          f"{len(labels('iid'))} methods run here have finished. Mean test accuracy over "
          f"the {rounds} rounds of a run, over the seeds: {listed}"
          + (f"; {versus_fedavg(doc)}" if versus_fedavg(doc) else "") + ". Table II cells: "
          + t2_tally_text()
          + (f"; not finished yet: {', '.join(pending)}" if pending else "")
          + "; SparseSecAgg refused at C = 0.2 (its masks cancel only when every client "
            "uploads)")


def t3_text() -> str:
  """REPRODUCTION.md's Table III cell (one line)."""
  doc = load("iid")
  if not doc.get("cells"):
    return f"MNIST: no run of `{SPEC}:iid` has finished yet (`{MD}`)"
  by_row: Dict[str, dict] = {}
  for t, row, col, c, _, _ in iid_cells(doc):
    if t == "Table III" and c.mean is not None:
      by_row.setdefault(row, {})[col] = c
  rounds = next(iter(doc["cells"].values()))["rounds"]
  listed = ", ".join(
      f"{row} [{v['CI95_low'].mean:.4f}, {v['CI95_high'].mean:.4f}] (published "
      f"[{v['CI95_low'].published.value:.4f}, {v['CI95_high'].published.value:.4f}])"
      for row, v in by_row.items())
  return (f"MNIST ({_short_setting(doc)}), no verdict (*{verdicts.NOT_DEFINED}*: the paper "
          f"states neither n nor whether the interval runs over rounds or runs); ours "
          f"with n = {rounds} rounds of a run, mean over the seeds: {listed}")


def t4_text() -> str:
  """The MNIST part of REPRODUCTION.md's Table IV cell (one line)."""
  doc = load("alpha")
  if not doc.get("cells"):
    return f"MNIST: no run of `{SPEC}:alpha` has finished yet (`{MD}`)"
  listed = ", ".join(
      f"α {row.split('=')[1]} {c.mean:.4f} ± {c.std:.4f} (published "
      f"{verdicts.published_text(c, 4)}: {verdicts.verdict_text(c)})"
      for _, row, col, c, _, _ in alpha_cells(doc) if col == "mean")
  pending = pending_names("alpha")
  return (f"MNIST ({_short_setting(doc)}), final-round accuracy over the seeds: {listed}"
          + (f"; not finished yet: {', '.join(pending)}" if pending else "")
          + f"; std and interval shown without a verdict (*{verdicts.NOT_DEFINED}*)")


def t56_text() -> str:
  """The MNIST part of REPRODUCTION.md's Tables V–VI notes (one paragraph): the
  K = 10 column, ours per method beside the paper's, and why there is no verdict."""
  doc = load("severe_10")
  if not doc.get("cells"):
    return f"MNIST: no run of `{SPEC}:severe,10` has finished yet (`{MD}`)"
  cells = target_cells(doc)
  first = next(iter(doc["cells"].values()))
  rounds, c = first["rounds"], first["config"]

  def listed(table, digits):
    out = []
    for t, row, _, cmp, values, _ in cells:
      if t != table or cmp.verdict == verdicts.NOT_RUN:
        continue
      ours = ("no mean" if cmp.mean is None else
              f"{cmp.mean:.{max(digits, 1)}f} ± {cmp.std:.{max(digits, 1)}f}")
      out.append(f"{row} {ours} ({per_seed_text(values, digits, rounds)}; published "
                 f"{cmp.published.value:g})")
    return ", ".join(out)
  pending = pending_names("severe_10")
  return (f"MNIST, the K = 10 column only (the paper's data, {partition_text(c['data'])}, "
          f"K = {c['data']['num_clients']}, C = {c['participation']:g}, at most {rounds} "
          f"rounds, each run stopped at {first['target_accuracy'] * 100:g} % test accuracy, "
          f"{len(first['seeds'])} seeds; {DEVICE}; `{MD}`): {len(doc['cells'])} of the "
          f"{len(labels('severe_10'))} methods run here have finished. Rounds to 60 %, "
          f"mean ± std over the seeds (per seed): {listed('Table V', 0)}. Uplink MB (10⁶ "
          f"bytes) to 60 %: {listed('Table VI', 3)}. Every cell *{verdicts.NOT_DEFINED}*: "
          f"the verdict rule has a margin for an accuracy and a Gini coefficient, none for "
          f"a count of rounds or bytes"
          + (f"; not finished yet: {', '.join(pending)}" if pending else "")
          + "; SparseSecAgg refused at C = 0.2")
