"""FIRMA Tables 7–8 (Fashion-MNIST) and 9–10 (MNIST-60k) on local files: N = 10,
R = 30, Table 4 hyper-parameters, through the batched runner of Tables 11–12
(:mod:`fedfrac.reproduce.firma`: padded shapes, a cell's seeds in one program), one scenario at a
time so that a run stopped early keeps every finished scenario in ``--json`` (and
a rerun with the same flags skips them).

  fedfrac-reproduce firma_files --dir=/usr/share/datasets/fashion-mnist \
      --modes=paper,reference_code --seeds=5 --json=F.json
  fedfrac-reproduce firma_files --table=F.json,G.json --out=results/firma_fashion_mnist.md

``--inputs=authors`` (default) gives the ``reference_code`` mode the authors'
input normalisation ((x − 0.5) / 0.5, ``configs/firma/digits.py``
``AUTHORS_NORMALISATION``); ``--inputs=unit`` keeps [0, 1] in every mode. The
table has one section per (mode, inputs): every published cell beside ours
(mean ± std over seeds), Δ and a verdict (:mod:`fedfrac.reproduce.verdicts`;
FedAvg and FedRep of ``reference_code`` are reconstructions, counted apart).
"""
from __future__ import annotations

import argparse
import json
import os
import time

from fedfrac.reproduce import common, firma, firma_tables, firma_variants, verdicts
# How the runs execute here (re-exported: --parallelism and --workers).
from fedfrac.reproduce.firma_forms import cpu_backend, parallelism, workers  # noqa: F401

PUBLISHED = os.path.join(os.path.dirname(firma.__file__), "published", "firma.json")
# --dataset -> (title, Tables (accuracy, Gini), the data set's files and size)
DATASETS = {
    "fashion_mnist": ("Fashion-MNIST", ("Table 7", "Table 8"), "60,000 / 10,000",
                      "Debian's `dataset-fashion-mnist`"),
    "mnist": ("MNIST-60k", ("Table 9", "Table 10"), "60,000 / 10,000",
              "the MNIST IDX files or `mnist.pkl.gz`"),
}
# A note under the title of a data set's table (docs/design.md §3.3).
NOTES = {
    "fashion_mnist": (
        "**FibFL / FibFL+ below the paper.** Their `reference_code` rows are what the "
        "authors' public code computes; the gap is between that code and the published "
        "cells (docs/design.md §3.3, \"FibFL / FibFL+ below Tables 7–8\"). Run against "
        "the authors' `fibfl/fibfl.py` under PyTorch (`fedfrac-reproduce firma_authors`), "
        "fedfrac gives the same per-round accuracy step for step on a full-batch "
        "synthetic problem (extractors within 6.0e-4 after 4 rounds, FibFL and FibFL+) "
        "and the same curve on this data (FibFL IID: the authors' code 0.582, 0.748, "
        "0.720 at rounds 1–3; fedfrac 0.562–0.639, 0.736–0.766, 0.701–0.757 over its "
        "four runs). The peak at round 2 and the decline come from blending extractors "
        "that start from independent random draws (the authors' initialisation) after "
        "20 Adam epochs a round: after round 1 the clients reach 0.830 without mixing, "
        "0.735 from one shared initial model and 0.618 from the authors' per-client "
        "ones; from a shared start (the `paper` mode, 1 seed) FibFL IID climbs to "
        "0.805 by round 10, the published level, so the published FibFL / FibFL+ cells "
        "behave like runs from a shared start. The public runner does not parse and "
        "imports modules that are not in the repository, and the paper's §6 describes "
        "a Fibonacci client participation "
        "that neither Alg. 1–2 nor the public code has. No departure of "
        "`reference_code` from the authors' code was found; the numbers below are "
        "unchanged.\n\n"
        "**FibFL++ runs at chance.** In `reference_code` the FedAvg warm-up averages ten "
        "models drawn independently (the authors' initialisation); the average can have "
        "every unit of the extractor's last ReLU layer dead on every input, and such a "
        "run stays at chance for good (docs/design.md §3.3, \"FibFL++ runs that stay at "
        "chance\"). The authors' own code does the same: at R = 2 all six of its seeds "
        "were at chance after round 2, and nine of fedfrac's ten; from one shared "
        "initial model none was. Cells with such runs say \"k of n at chance\"."),
}
COLUMNS = {"iid": "IID", "dir0.8": "Dir 0.8", "dir0.5": "Dir 0.5", "dir0.1": "Dir 0.1",
           "ls1": "LS K=1", "ls2": "LS K=2", "ls3": "LS K=3"}
ROWS = {"fedavg": "FedAvg", "rdfl": "RDFL", "fedrep": "FedRep", "fibfl": "FibFL",
        "fibfl_plus": "FibFL+", "fibfl_pp": "FibFL++"}


def published_table(path, name):
  """{row: {column: value}} of table ``name`` in a published-values file."""
  with open(path) as f:
    data = json.load(f)
  tables = data.get("tables", data)
  entry = tables[name]
  return entry.get("rows", entry)


def _fmt(value):
  return "n/f" if value is None else f"{value:.4f}"


def verdict(paper, values, key="accuracy"):
  """The :mod:`fedfrac.reproduce.verdicts` comparison of one cell (accuracy or
  Gini margin by ``key``)."""
  return verdicts.compare(paper, values, firma_tables.MARGINS[key])


INPUTS = {"unit": "inputs in [0, 1]",
          "authors": "inputs (x − 0.5) / 0.5 as the authors' code (torchvision Normalize)"}


# A run that ends at chance (10 classes) within this margin is named in the
# accuracy and Gini cells: its number is real (it counts in the mean and the
# verdict), but it is a run whose model stopped learning, not a spread of
# accuracies (FibFL++ `reference_code`: docs/design.md §3.3, "FibFL++ runs that
# stay at chance").
CHANCE, CHANCE_MARGIN = 0.10, 0.02


def at_chance(runs) -> int:
  """How many of ``runs`` end with accuracy <= chance + CHANCE_MARGIN."""
  return sum(1 for r in runs if r["accuracy"] <= CHANCE + CHANCE_MARGIN)


def json_cells(d):
  """(mode, inputs, scenario, method, cell) of every cell of one ``--json`` result
  ``d``; ``inputs`` counts only for ``reference_code`` (else ``"unit"``), with a
  labelled variant's name (:func:`fedfrac.reproduce.firma_variants.cell_inputs`)."""
  for entry in d["scenarios"].values():
    for mode, res in entry["results"].items():
      inputs = firma_variants.cell_inputs(mode, d["args"])
      for key, cell in res.items():
        yield (mode, inputs, *key.split("/"), cell)


def _groups(json_paths):
  """``{(mode, inputs): {(scenario, method): [(cell, device), ...]}}`` and the run
  descriptions of each group, over the ``--json`` files of runs (a cell run in
  several files keeps every run, one table row each)."""
  groups, sources = {}, {}
  for path in json_paths:
    with open(common.find_file(path)) as f:
      d = json.load(f)
    a = d["args"]
    device = a.get("device", "unknown device")
    ran = {}
    for mode, inputs, s, method, cell in json_cells(d):
      groups.setdefault((mode, inputs), {}).setdefault((s, method), []).append((cell, device))
      ran.setdefault((mode, inputs), {}).setdefault(method, []).append(s)
    note = f"; {a['note']}" if a.get("note") else ""
    for group, methods in ran.items():
      what = ", ".join(f"{ROWS.get(m, m)} {'/'.join(COLUMNS.get(x, x) for x in scen)}"
                       for m, scen in methods.items())
      sources.setdefault(group, []).append(
          f"{what}: {a['seeds']} seed{'s' if a['seeds'] != 1 else ''}, "
          f"R = {a['rounds']}, {device}{note}")
  return groups, sources


def section_rows(cells, paper, key, mode):
  """[(method, row text, comparison or None)] of one table of one section: every
  published cell, a row per run of it (None: not run)."""
  out = []
  for method, row in ROWS.items():
    label = firma_tables.row_label(method, mode)
    for s, col in COLUMNS.items():
      p_val = paper.get(row, {}).get(col)
      if (s, method) not in cells:
        out.append((method, f"| {label} | {col} | {_fmt(p_val)} | – | | | | | "
                            f"{verdicts.NOT_RUN} |", None))
        continue
      for cell, device in cells[(s, method)]:
        c = verdict(p_val, [r[key] for r in cell["runs"]], key)
        d = "" if c.delta is None else f"{c.delta:+.4f}"
        margin = "–" if c.margin is None else f"±{c.margin:.4f}"
        stuck = at_chance(cell["runs"])
        ours = verdicts.ours_text(c, 4) + (
            f"; {stuck} of {len(cell['runs'])} at chance" if stuck else "")
        out.append((method, f"| {label} | {col} | {_fmt(p_val)} | "
                            f"{ours} | {device} | {d} | "
                            f"{verdicts.interval_text(c, 4, 1.0)} | {margin} | "
                            f"{c.verdict} |", c))
  return out


def tables(json_paths, published=PUBLISHED, dataset="fashion_mnist"):
  """{(mode, inputs): {table: {group: tally}}}: the verdict counts of every
  section of :func:`write_table`, per row group (the authors' methods apart from
  the reconstructed baselines in ``reference_code``)."""
  title, names, size, files = DATASETS[dataset]
  groups, _ = _groups(json_paths)
  out = {}
  for group, cells in groups.items():
    mode = group[0]
    out[group] = {}
    for table, key in zip(names, ("accuracy", "gini")):
      rows = section_rows(cells, published_table(published, table), key, mode)
      out[group][table] = {
          name: verdicts.tally(c.verdict for m, _, c in rows if c and m in members)
          for name, members in firma_tables.row_groups(mode)}
  return out


def markdown(json_paths, out, published=PUBLISHED, dataset="fashion_mnist"):
  """Tables 7 (accuracy) and 8 (Gini) on the runs in ``json_paths``, one section per
  (compat mode, input scaling): every cell of the paper beside ours (mean ± std
  over seeds), Δ, the 90 % interval, the margin and the verdict
  (:mod:`fedfrac.reproduce.verdicts`)."""
  title, names, size, files = DATASETS[dataset]
  groups, sources = _groups(json_paths)
  counts = tables(json_paths, published, dataset)
  order = sorted(groups, key=lambda g: (g[0] != "reference_code", g[1] != "authors"))
  numbers = f"{names[0].split()[1]}–{names[1].split()[1]}"
  run_on = sorted({dev for cells in groups.values() for entries in cells.values()
                   for _, dev in entries})
  lines = [f"# FIRMA Tables {numbers} on the real {title} ({size}), N = 10 "
           f"(devices: {'; '.join(run_on) or 'none yet'})", ""]
  if dataset in NOTES:
    lines += [NOTES[dataset], ""]
  lines += ["Table 4 hyper-parameters of `configs/firma/digits.py` with N = 10 and "
            f"R = 30, data through the `files` source ({files}), made by "
            f"`fedfrac-reproduce firma_files --dataset={dataset} --dir=DIR --modes=MODE "
            "--inputs=INPUTS --scenarios=... --methods=... --seeds=S --json=...` "
            "(one scenario at a time), then `--table`. n = seeds; a cell run more "
            "than once (another device or input scaling) has a row per run. A cell "
            "without ours was not run: on the 2-core CPU one run of 30 rounds takes "
            "about 45 min for FibFL / FibFL+ / FibFL++ (E_e = 20) and 4–11 min for "
            "FedRep, FedAvg and RDFL (measured, two runs side by side).", "",
            f"Rendered by `fedfrac-reproduce firma_files --dataset={dataset} "
            f"--table={','.join(json_paths)} --out={out}`.", "",
            verdicts.RULE, "", firma_tables.RECONSTRUCTED_NOTE, "", "## Summary", "",
            f"| compat | inputs | devices | rows | {names[0]} (accuracy) | "
            f"{names[1]} (Gini) |", "|---|---|---|---|---|---|"]
  body = []
  for group in order:
    mode, inputs = group
    cells = groups[group]
    devices = sorted({dev for entries in cells.values() for _, dev in entries})
    for name, _ in firma_tables.row_groups(mode):
      lines.append(f"| {mode} | {firma_variants.title(inputs, INPUTS)} | "
                   f"{', '.join(devices)} | {name} | "
                   f"{verdicts.tally_text(counts[group][names[0]][name])} | "
                   f"{verdicts.tally_text(counts[group][names[1]][name])} |")
    body += [f"## compat = {mode}, {firma_variants.title(inputs, INPUTS)}", "",
             "Runs:", ""] + [f"- {line}" for line in sources[group]] + [""]
    for table, key, label in ((names[0], "accuracy", "mean per-client test accuracy"),
                              (names[1], "gini", "Gini of per-client accuracy")):
      rows = section_rows(cells, published_table(published, table), key, mode)
      body += [f"### {table}: {label}", "",
               "| method | scenario | paper | ours: mean ± std (n seeds) | device | Δ | "
               "90 % interval of Δ | margin | verdict |",
               "|---|---|---|---|---|---|---|---|---|"] + [r for _, r, _ in rows]
      if any("at chance |" in r for _, r, _ in rows):
        body += ["", f"*k of n at chance*: k runs ended with accuracy ≤ "
                 f"{CHANCE + CHANCE_MARGIN:.2f} (chance {CHANCE:.2f}); they count in "
                 "the mean, the spread and the verdict."]
      body += ["", "Verdicts — " + "; ".join(
          f"{name}: {verdicts.tally_text(t)}" for name, t in counts[group][table].items())
          + ".", ""]
  return "\n".join(lines + [""] + body)


def write_table(json_paths, out, published=PUBLISHED, dataset="fashion_mnist"):
  """Write :func:`markdown` to ``out``."""
  common.write_text(out, markdown(json_paths, out, published, dataset))


def files_spec(args) -> dict:
  """The data of a ``firma_files`` run as :func:`fedfrac.reproduce.firma_program.config_module`
  takes it (a plain dict: it travels to worker processes and into point keys)."""
  spec = {"dataset": args.dataset, "dir": os.path.abspath(args.dir), "rounds": args.rounds,
          "inputs": args.inputs, "parallelism": parallelism(args.parallelism)}
  if getattr(args, "step_buckets", None) is not None:
    spec["step_buckets"] = int(args.step_buckets)
  if getattr(args, "init", None):
    spec["init"] = args.init
  return spec


def files_config_module(args):
  """A stand-in for ``configs/firma/digits.py`` whose ``firma_config(mode,
  scenario)`` gives the digits protocol with N = 10, ``args.rounds`` rounds, the
  ``files`` source at ``args.dir``, ``args.inputs`` and ``args.parallelism``."""
  return firma.config_module(files_spec(args))


def dataset_widths(args, scenarios=None) -> dict:
  """The padded widths (:func:`fedfrac.reproduce.firma_program.table_widths`)
  of every scenario (default: all seven) of ``args``' dataset, modes and seeds:
  given to :func:`run_scenarios`, each scenario's runs get the same array shapes,
  so one compiled program per method (and number of clients) serves them all
  through a shared compilation cache. Builds the partitions only (host NumPy)."""
  import warnings
  module = files_config_module(args)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")    # expected label-skew drops (K = 3)
    return firma.table_widths({mode: firma.build_feds(module, mode,
                                                      scenarios or firma.SCENARIOS,
                                                      tuple(range(args.seeds)))
                               for mode in args.modes.split(",")})


def run_scenarios(args, log=print, cache_dir=None, widths=None):
  """Run ``args.scenarios`` one at a time, saving ``args.json`` after each; a
  scenario already in an existing ``args.json`` written with the same flags is
  kept, not run again. ``cache_dir`` and ``widths`` (:func:`dataset_widths`) go
  to :func:`fedfrac.reproduce.firma.run`: with both, a scenario after the first
  finds its compiled program in the cache (the numbers do not change)."""
  import jax
  flags = {k: v for k, v in vars(args).items()
           if k not in ("json", "table", "out", "published", "workers")}
  flags["parallelism"] = parallelism(args.parallelism)
  for key in ("step_buckets", "init"):      # defaults: files written before them match
    if flags.get(key) is None:
      flags.pop(key, None)
  dev = jax.devices()[0]
  device = f"CPU, {os.cpu_count()} cores" if dev.platform == "cpu" else dev.device_kind
  out = {"args": {**flags, "device": device}, "scenarios": {}}
  if os.path.exists(args.json):
    with open(args.json) as f:
      old = json.load(f)
    same = {k: v for k, v in old.get("args", {}).items() if k != "scenarios"}
    if same == {k: v for k, v in out["args"].items() if k != "scenarios"}:
      out["scenarios"] = old["scenarios"]
  spec = files_spec(args)
  for scenario in [s for s in args.scenarios.split(",") if s]:
    if scenario in out["scenarios"]:
      log(f"{scenario}: already in {args.json}")
      continue
    t0 = time.perf_counter()
    results, timings, _ = firma.run(args.modes.split(","), [scenario],
                                    args.methods.split(","), args.seeds,
                                    batch_runs=args.seeds, workers=workers(args.workers),
                                    files=spec, cache_dir=cache_dir, widths=widths)
    out["scenarios"][scenario] = {
        "wall_s": time.perf_counter() - t0, "timings": timings,
        "workers": workers(args.workers),
        "results": {mode: {f"{s}/{m}": v for (s, m), v in res.items()}
                    for mode, res in results.items()}}
    tmp = args.json + ".tmp"
    with open(tmp, "w") as f:
      json.dump(out, f, default=float)
    os.replace(tmp, args.json)
    log(f"{scenario}: {time.perf_counter() - t0:.0f} s")
  return out


def main(argv=None):
  p = argparse.ArgumentParser(prog="fedfrac-reproduce firma_files",
                              description=__doc__.split("\n")[0])
  p.add_argument("--dataset", default="fashion_mnist", choices=tuple(DATASETS),
                 help="which of the paper's tables: fashion_mnist (7–8), mnist (9–10)")
  p.add_argument("--dir", help="data.dir of the files source")
  p.add_argument("--table", default="", help="comma-separated --json files: write "
                 "the markdown table of them to --out instead of running")
  p.add_argument("--out", default="results/firma_fashion_mnist.md")
  p.add_argument("--published", default=PUBLISHED)
  p.add_argument("--modes", default="reference_code")
  p.add_argument("--scenarios", default=",".join(firma.SCENARIOS))
  p.add_argument("--methods", default=",".join(firma.METHODS))
  p.add_argument("--seeds", type=int, default=2)
  p.add_argument("--rounds", type=int, default=30)
  p.add_argument("--parallelism", default="auto", choices=("auto", "vmap", "map"),
                 help="engine.client_parallelism; auto: map on a CPU, vmap on an "
                 "accelerator")
  p.add_argument("--workers", type=int, default=0,
                 help="processes running the methods of a scenario side by side; 0: "
                 "one per core, each pinned to it, on a CPU, 1 on an accelerator")
  p.add_argument("--step-buckets", type=int, default=None,
                 help="engine.step_buckets with clients vmapped (default: the engine's "
                 "choice by client sizes; 1 gives every scenario the same program)")
  p.add_argument("--inputs", default="authors", choices=tuple(INPUTS),
                 help="authors: the reference_code mode normalises inputs as the "
                 "authors' code, (x - 0.5) / 0.5; unit: every mode keeps [0, 1]")
  p.add_argument("--init", default=None, choices=firma_variants.INITS,
                 help="a labelled variant of reference_code: shared = one shared "
                 "initial model for the ring methods (its own table section)")
  p.add_argument("--note", default="", help="a line about this run, kept in --json "
                 "and printed with its runs in the table")
  p.add_argument("--json", default="")
  args = p.parse_args(argv)
  if args.table:
    write_table(args.table.split(","), args.out, args.published, args.dataset)
    return
  if not args.dir or not args.json:
    p.error("--dir and --json are needed to run")
  if args.workers < 0:
    p.error(f"--workers={args.workers}: allowed values are 0 (one per core on a CPU, "
            "1 on an accelerator) or a positive count")
  if args.step_buckets is not None and args.step_buckets < 1:
    p.error(f"--step-buckets={args.step_buckets}: allowed values are integers >= 1 "
            "(or leave it out for the engine's choice)")
  for key, allowed in (("modes", firma.MODES), ("scenarios", firma.SCENARIOS),
                       ("methods", firma.METHODS)):
    bad = [v for v in getattr(args, key).split(",") if v and v not in allowed]
    if bad:
      p.error(f"--{key}={getattr(args, key)}: {bad[0]!r} unknown; allowed: "
              f"{', '.join(allowed)}")
  run_scenarios(args)
