"""Generated doc blocks of FIRMA's real-data tables: Fashion-MNIST (Tables 7–8,
and its row of Table 13) and MNIST-60k (Tables 9–10), for REPRODUCTION.md and the
guide's reproductions page (docs/design.md's notes on them:
:mod:`fedfrac_lab.reproduce.doc_blocks_design`). See
:mod:`fedfrac_lab.reproduce.docs` for the mechanism and
:mod:`fedfrac_lab.reproduce.doc_blocks` for the shared helpers and FIRMA on digits.

Verdicts are counted once per published cell
(:func:`best_verdict`: the runs with the most seeds decide, of two such runs (two
devices or input scalings) the less favourable, and every published cell counts once), a cell
with runs at chance is *collapsed* and counted apart, and the clients a run kept
(N, after the authors' label-skew rule drops the ones it starves) come from the
cells themselves.
"""
from __future__ import annotations

import functools

from fedfrac_lab.reproduce import (common, firma_notes, firma_tables,
                               firma_variants, verdicts)
from fedfrac_lab.reproduce import firma_files_table
from fedfrac_lab.reproduce.doc_blocks import (FMNIST_JSONS, FMNIST_MD, MNIST_JSONS, MNIST_MD,
                                          README, REPRODUCING, R, acc, firma_digits, listing,
                                          signed_pp, span)
from fedfrac_lab.reproduce.doc_registry import block

FMNIST_UNIT, FMNIST_AUTHORS = ("reference_code", "unit"), ("reference_code", "authors")
# The verdicts of a cell that had the seeds for one.
WITH_SEEDS = (verdicts.AGREES, verdicts.DIFFERS, verdicts.INCONCLUSIVE, verdicts.COLLAPSED)


@functools.lru_cache(maxsize=None)
def fmnist():
  """({(mode, inputs): {(scenario, method): [(cell, device)]}}, run descriptions)."""
  return firma_files_table.json_groups(list(FMNIST_JSONS))


@functools.lru_cache(maxsize=None)
def mnist():
  return firma_files_table.json_groups(list(MNIST_JSONS))


def firma_rows(group, key="accuracy", paths=None, tables=("Table 7", "Table 8")):
  """[(method, scenario, comparison, n, device)] of one (mode, inputs) section
  (of the Fashion-MNIST runs, or of ``paths`` against the published ``tables``):
  a row per run of a cell, ``device`` named where the cell ran more than once."""
  cells = (fmnist() if paths is None else firma_files_table.json_groups(list(paths)))[0][group]
  paper = firma_tables.published(tables[0] if key == "accuracy" else tables[1])
  out = []
  for (scen, m), entries in cells.items():
    for cell, device in entries:
      out.append((m, scen, firma_files_table.cell_comparison(paper.get((m, scen)), cell, key),
                  len(cell["runs"]), device if len(entries) > 1 else ""))
  return out


def _beyond(rows, key):
  """Rows whose point estimate lies beyond the margin, as "FedAvg LS K=2 +3.1 pp"
  (with the device and seeds where a cell was run more than once, and how many
  runs ended at chance where any did)."""
  out = []
  for m, scen, c, n, device in sorted(rows, key=lambda r: (
      firma_tables.METHODS.index(r[0]), firma_tables.SCENARIOS.index(r[1]), r[4], r[3])):
    if c.delta is not None and abs(c.delta) > c.margin:
      d = signed_pp(c.delta) if key == "accuracy" else f"{c.delta:+.3f}"
      notes = [f"{device.split(',')[0]}, {n} seed{'s' if n != 1 else ''}"] if device else []
      if c.at_chance:
        notes.append(f"{c.at_chance} of {n} runs at chance")
      where = f" ({'; '.join(notes)})" if notes else ""
      out.append(f"{firma_tables.LABELS[m]} {firma_tables.PAPER_COLUMNS[scen]} {d}{where}")
  return out


def _within(rows):
  """(cells whose every run's point estimate is within the margin, cells)."""
  cells = {}
  for m, scen, c, _, _ in rows:
    cells.setdefault((m, scen), []).append(abs(c.delta) <= c.margin)
  return sum(all(v) for v in cells.values()), len(cells)


def _fmnist_section(group, label):
  acc_rows, gini_rows = firma_rows(group), firma_rows(group, "gini")
  seeds = sorted({r[3] for r in acc_rows})
  within, cells = _within(acc_rows)
  g_within, g_cells = _within(gini_rows)
  beyond = _beyond(acc_rows, "accuracy")
  return (f"{label} ({' or '.join(map(str, seeds))} seed{'s' if seeds != [1] else ''}): "
          f"accuracy within 2 pp in {within} of {cells} cells (every run of the cell)"
          + (f", {len(beyond)} runs beyond it" if beyond else "") +
          f"; Gini within its margin in {g_within} of {g_cells}")


BEYOND_LINK = f"`{FMNIST_MD}`, “{firma_files_table.BEYOND_TITLE}”"


# Why a published cell of Tables 7–10 has no run of ours: the data is here, the
# runs (`reference_code` at E_e = 20 Adam epochs) need accelerator time.
NOT_RUN_WHY = {"fashion_mnist": "needs compute (accelerator time)",
               "mnist": "needs compute (accelerator time)"}


def best_comparisons(entries, paper_value, key):
  """The comparisons of one published cell that decide its verdict, from its runs
  (``[(cell, device)]``, any section): those of the runs with the most seeds (more
  seeds beats fewer; several when the same cell ran on two devices or input
  scalings); [] without any run."""
  if not entries:
    return []
  most = max(len(cell["runs"]) for cell, _ in entries)
  return [firma_files_table.cell_comparison(paper_value, cell, key)
          for cell, _ in entries if len(cell["runs"]) == most]


def verdict_of(found):
  """The verdict of one published cell from :func:`best_comparisons`: the least
  favourable of them (:func:`fedfrac_lab.reproduce.verdicts.least_favourable`);
  *not run* without any."""
  return verdicts.least_favourable(c.verdict for c in found) if found else verdicts.NOT_RUN


def best_verdict(entries, paper_value, key):
  """The best-evidenced verdict of one published cell from its runs
  (``[(cell, device)]``, any section): :func:`verdict_of` its
  :func:`best_comparisons`."""
  return verdict_of(best_comparisons(entries, paper_value, key))


def cell_comparisons(paths, dataset="fashion_mnist", variants=False, mode="reference_code"):
  """[(the rule's margin, :func:`best_comparisons`)] of every published cell of
  the data set's two tables (accuracy, then Gini), from the runs of ``mode``: of
  the authors' code as published (``variants=False``) or of its labelled
  variants (``True``), never the two together; [] comparisons for a cell not run."""
  groups, _ = firma_files_table.json_groups(list(paths))
  picked = [cells for (m, inputs), cells in groups.items()
            if m == mode and firma_notes.is_variant(inputs) == variants]
  out = []
  for table, key in zip(firma_files_table.DATASETS[dataset][1], ("accuracy", "gini")):
    for (method, scen), value in firma_tables.published(table).items():
      if value is None:
        continue
      entries = [e for cells in picked for e in cells.get((scen, method), [])]
      out.append((firma_tables.MARGINS[key], best_comparisons(entries, value, key)))
  return out


def tally(paths, dataset="fashion_mnist", variants=False, mode="reference_code"):
  """Verdict counts over the published cells of the data set's two tables
  (accuracy and Gini), each counted exactly once (:func:`best_verdict` over every
  section and device of ``mode`` that ran it, *not run* for the rest;
  :func:`cell_comparisons`), so the counts add up to the published cell count: of
  the authors' code as published (``variants=False``) or of its labelled variants
  (``True``), never the two together. This is the one count every page quotes."""
  total = verdicts.tally([])
  for _, found in cell_comparisons(paths, dataset, variants, mode):
    total[verdict_of(found)] += 1
  return total


def published_cells(dataset="fashion_mnist"):
  """How many cells the paper prints in the data set's two tables."""
  return sum(v is not None for table in firma_files_table.DATASETS[dataset][1]
             for v in firma_tables.published(table).values())


def _lead(total):
  """"74 cells have the 3 seeds a verdict needs: agrees … (cells of …)"."""
  judged = sum(total.get(k, 0) for k in WITH_SEEDS)
  return ("no cell has the 3 seeds a verdict needs" if not judged else
          f"{judged} cells have the 3 seeds a verdict needs")


def clients_text(groups):
  """"N = 10 clients (9 at LS K=2, 5 at LS K=3, where the authors' label-skew
  rule drops the clients it starves)", from the cells' ``num_clients``."""
  text = firma_files_table.clients_text(groups)
  if "(" not in text:
    return f"{text} clients"
  head, fewer = text.split(" (", 1)
  return (f"{head} clients ({fewer[:-1]}, where the authors' label-skew rule drops the "
          f"clients it starves)")


@block("firma_t78_status", R, *FMNIST_JSONS, inline=True)
def firma_t78_status():
  groups, _ = fmnist()
  covered = {k for g, cells in groups.items()
             if g[0] == "reference_code" and not firma_notes.is_variant(g[1]) for k in cells}
  return (f"in part: {len(covered)} of the 42 `reference_code` cells (`{FMNIST_MD}`); "
          f"the rest and the `paper` mode need accelerator time")


@block("firma_t910", R, *MNIST_JSONS, inline=True)
def firma_t910():
  """Tables 9-10 (MNIST-60k): what has run and its verdicts."""
  if not MNIST_JSONS:
    return "not run yet; the GPU plan has it after Fashion-MNIST"
  groups, _ = mnist()
  total = tally(MNIST_JSONS, "mnist")
  parts = []
  for (mode, inputs), cells in sorted(groups.items()):
    devices = sorted({d for entries in cells.values() for _, d in entries})
    parts.append(f"`{mode}`, {'the authors' if inputs == 'authors' else '[0, 1]'} "
                 f"inputs: {methods_text(cells)} ({listing(devices)})")
  return (f"started (`{MNIST_MD}`): {'; '.join(parts)}; {verdicts.tally_text(total)} "
          f"over the {published_cells('mnist')} cells of Tables 9–10; the rest is in the "
          f"GPU plan")


def methods_text(cells):
  """"FedAvg, RDFL and FedRep in all 7 scenarios; FibFL at IID": the methods of a
  section grouped by the scenarios they ran."""
  by = {}
  for m in firma_tables.METHODS:
    scen = tuple(s for s in firma_tables.SCENARIOS if (s, m) in cells)
    if scen:
      by.setdefault(scen, []).append(firma_tables.LABELS[m])
  return "; ".join(
      f"{listing(ms)} " + (f"in all {len(scen)} scenarios" if len(scen) == len(
          firma_tables.SCENARIOS) else "at " + listing(firma_tables.PAPER_COLUMNS[x]
                                                       for x in scen))
      for scen, ms in by.items())


def _variants_text(paths, dataset="fashion_mnist"):
  """"; labelled variants of reference_code, counted apart: …" (or "")."""
  total = tally(paths, dataset, variants=True)
  ran = {k: n for k, n in total.items() if k != verdicts.NOT_RUN}
  if not sum(ran.values()):
    return ""
  return (f"; labelled variants of `reference_code` (their own sections), counted "
          f"apart on the {sum(ran.values())} cells they ran: {verdicts.tally_text(ran)}")


@block("firma_t78", R, *FMNIST_JSONS, inline=True)
def firma_t78():
  total = tally(FMNIST_JSONS)
  return f"{verdicts.tally_text(total)} (the {published_cells()} cells, each once)"


@block("firma_real_notes", R, *FMNIST_JSONS, *MNIST_JSONS)
def firma_real_notes():
  """The paragraphs under REPRODUCTION.md's FIRMA table on Tables 7–10: what the
  counts count, the point estimates, and what an interval covers."""
  total = tally(FMNIST_JSONS)
  return (f"**Tables 7–8 (Fashion-MNIST).** {_lead(total)}: "
          f"{verdicts.tally_text(total)}. Each of the {published_cells()} published "
          f"cells counts once: its runs with the most seeds decide, and of two such runs "
          f"(two devices or input scalings) the less favourable verdict; *collapsed*: "
          f"runs at chance; *not run*: {NOT_RUN_WHY['fashion_mnist']}"
          f"{_variants_text(FMNIST_JSONS)}. Point estimates — "
          f"{_fmnist_section(FMNIST_UNIT, '[0, 1] inputs')}. "
          f"{_fmnist_section(FMNIST_AUTHORS, 'Authors’ inputs')}. Every run beyond the "
          f"margin, cell by cell: {BEYOND_LINK}.\n\n{PARTITION_NOTE}")


# What n seeds of a real-data cell cover (Tables 7–10).
PARTITION_NOTE = ("**What an interval covers.** Every seed of a real-data cell (Tables "
                  "7–10, `reference_code`) uses the one partition the authors' code "
                  "draws with its fixed seed (42), so n = 3 seeds vary the initial "
                  "models and the batch order only, not the partition: an interval "
                  "says nothing of another draw of the clients' data.")


def _fibfl_check():
  """(published, [0, 1] accuracy, authors' accuracy, peak round, peak) of the
  FibFL IID input-scaling runs on the CPU."""
  groups, _ = fmnist()

  def cpu_run(group):
    return next(cell for cell, device in groups[group][("iid", "fibfl")]
                if device.startswith("CPU"))
  unit, authors = cpu_run(FMNIST_UNIT), cpu_run(FMNIST_AUTHORS)
  curve = authors["runs"][0]["curve"]
  peak = max(range(len(curve)), key=curve.__getitem__)
  return (firma_tables.published("Table 7")[("fibfl", "iid")], unit["runs"][0]["accuracy"],
          authors["runs"][0]["accuracy"], peak + 1, curve[peak])


@block("firma_t78_differs", R, *FMNIST_JSONS)
def firma_t78_differs():
  pub, unit, authors, rnd, peak = _fibfl_check()
  s = firma_notes.curve_summary(fmnist()[0])
  all_results, *_ = firma_digits()
  digits = {m: verdicts.tally_text(firma_tables.tallies(firma_tables.comparisons(
      all_results["reference_code"], list(firma_tables.SCENARIOS), [m], "accuracy",
      "reference_code"), [m])) for m in ("fibfl", "fibfl_plus")}
  return (f"**Input scaling and the FibFL gap.** The authors' code normalises inputs "
          f"to [−1, 1] ((x − 0.5) / 0.5); `reference_code` does too now. That does not "
          f"explain the FibFL gap: the same FibFL IID run (seed 0, CPU) "
          f"gives {acc(unit)} with [0, 1] inputs and {acc(authors)} with the authors' "
          f"(published {pub:.3f}); with the authors' inputs that run is best at round "
          f"{rnd} ({acc(peak)}) and ends lower after 30 rounds of E_e = 20 Adam epochs "
          f"(over the cell's {s.runs} runs: {firma_notes.best_rounds_text(s)}, final "
          f"{span(s.finals)}). Nor is the FibFL/FibFL+ gap a departure of "
          f"`reference_code`: run against the authors' own code (`firma_authors` in "
          f"`fedfrac_lab.reproduce`) it computes the same accuracy step for step and the same "
          f"curve on this data, so the gap lies between the public code and the "
          f"published cells (docs/design.md §3.3); on digits (`reference_code`, 5 "
          f"seeds) FibFL's seven accuracy cells read {digits['fibfl']} and FibFL+'s "
          f"{digits['fibfl_plus']}.")


def _cpu_s(entry):
  """CPU seconds a scenario's runs took, all modes together."""
  return sum(t["cpu_s"] for t in entry["timings"].values())


def _processes(entry):
  """Processes a scenario ran in: its ``workers``, or for files written before
  that was kept, its CPU seconds over its wall seconds, rounded."""
  if entry.get("workers"):
    return int(entry["workers"])
  return max(1, round(_cpu_s(entry) / entry["wall_s"]))


def cpu_times(paths):
  """{(seeds, what, processes): [minutes]} of every CPU scenario entry in
  ``paths``: ``what`` is "FibFL" or "the three baselines" (by the file's
  methods); the minutes are the wall time for 1-seed runs (clients vmapped in one
  two-threaded process) and for several processes, the CPU time for one process
  on one core (its wall time on a free core)."""
  out = {}
  for path in paths:
    raw = common.load_results_json(path)
    a = raw["args"]
    if not a.get("device", "CPU").startswith("CPU"):
      continue                          # a GPU window's item: not a CPU time
    what = ("FibFL" if a["methods"] == "fibfl" else
            "the three baselines" if a["methods"] == "fedavg,rdfl,fedrep" else a["methods"])
    for entry in raw["scenarios"].values():
      n = 0 if a["seeds"] == 1 else _processes(entry)
      out.setdefault((a["seeds"], what, n), []).append(
          (_cpu_s(entry) if n == 1 else entry["wall_s"]) / 60)
  return out


@block("firma_t78_time", R, *FMNIST_JSONS)
def firma_t78_time():
  times = cpu_times(FMNIST_JSONS)
  single = [f"{what} {span(m, 0)} min per {'run' if what == 'FibFL' else 'scenario'}"
            for (seeds, what, _), m in sorted(times.items(), key=lambda kv: kv[0][1] != "FibFL")
            if seeds == 1]
  parts = [f"CPU measured, 1 seed (clients vmapped in one two-threaded process, wall "
           f"time): {listing(single)}"] if single else []
  for seeds in sorted({k[0] for k in times if k[0] > 1}):
    forms = [f"{what} {span(m, 0)} min per scenario "
             + ("of CPU in one process on one core" if n == 1 else
                f"in {n} processes, each pinned to its core")
             for (sd, what, n), m in sorted(times.items(), key=lambda kv: (
                 kv[0][1] == "FibFL", -kv[0][2])) if sd == seeds]
    parts.append(f"{seeds} seeds in the CPU campaign form (clients mapped): "
                 f"{'; '.join(forms)}")
  return "**CPU time of Tables 7–8.** " + ("; ".join(parts) or "no CPU run") + "."


def _fmnist_missing():
  """"FibFL, FibFL+ and FibFL++ at Dir 0.1 and LS K=3; the `paper` mode": the
  `reference_code` cells no results file holds (methods grouped by the scenarios
  they lack), and the modes without any run."""
  groups, _ = fmnist()
  ran = {k for g, cells in groups.items()
         if g[0] == "reference_code" and not firma_notes.is_variant(g[1]) for k in cells}
  by_scenarios = {}
  for m in firma_tables.METHODS:
    lacking = tuple(s for s in firma_tables.SCENARIOS if (s, m) not in ran)
    if lacking:
      by_scenarios.setdefault(lacking, []).append(firma_tables.LABELS[m])
  parts = [f"{listing(ms_)} at {listing(firma_tables.PAPER_COLUMNS[s] for s in scen)}"
           for scen, ms_ in by_scenarios.items()]
  modes = [f"the `{m}` mode" for m in firma_tables.MODES
           if not any(g[0] == m for g in groups)]
  return "; ".join(parts + modes) or "nothing"


@block("readme_firma_fmnist", REPRODUCING, *FMNIST_JSONS)
def readme_firma_fmnist():
  groups, _ = fmnist()
  total = tally(FMNIST_JSONS)
  pub, unit, authors, *_ = _fibfl_check()
  n_unit = sorted({r[3] for r in firma_rows(FMNIST_UNIT)})
  n_authors = sorted({r[3] for r in firma_rows(FMNIST_AUTHORS)})
  return (f"- **FIRMA on the real Fashion-MNIST** (Tables 7–8, `reference_code`, "
          f"{clients_text(groups)}; {len(groups[FMNIST_UNIT])} cells with inputs in "
          f"[0, 1] at {' or '.join(map(str, n_unit))} seeds and "
          f"{len(groups[FMNIST_AUTHORS])} with the authors' [−1, 1] inputs at "
          f"{' or '.join(map(str, n_authors))} seeds; `{FMNIST_MD}`): {_lead(total)} "
          f"({verdicts.tally_text(total)}: each of the {published_cells()} cells of the two "
          f"tables once, its runs with the most seeds deciding and the less favourable of "
          f"two such runs, *collapsed* = runs at chance, *not run*: "
          f"{NOT_RUN_WHY['fashion_mnist']}){_variants_text(FMNIST_JSONS)}. Point estimates "
          f"for the rest: "
          f"{_fmnist_section(FMNIST_UNIT, 'with [0, 1] inputs')}; "
          f"{_fmnist_section(FMNIST_AUTHORS, 'with the authors’ inputs')}. FibFL IID is "
          f"{acc(unit)} / {acc(authors)} with either input scaling against the "
          f"published {pub:.3f}. Not run: {_fmnist_missing()}.")


@block("readme_firma_mnist", REPRODUCING, *MNIST_JSONS)
def readme_firma_mnist():
  if not MNIST_JSONS:
    return "- **FIRMA on the real MNIST-60k** (Tables 9–10): not run yet."
  groups, _ = mnist()
  total = tally(MNIST_JSONS, "mnist")
  parts = []
  for group in sorted(groups):
    rows = {key: firma_rows(group, key, MNIST_JSONS, ("Table 9", "Table 10"))
            for key in ("accuracy", "gini")}
    cells = groups[group]
    methods = [m for m in firma_tables.METHODS if any(c[1] == m for c in cells)]
    missing = [m for m in firma_tables.METHODS if m not in methods]
    devices = sorted({d for entries in cells.values() for _, d in entries})
    seeds = sorted({r[3] for r in rows["accuracy"]})
    beyond = {key: _beyond(r, key) for key, r in rows.items()}
    parts.append(
        f"`{group[0]}` with {firma_variants.title(group[1], firma_files_table.INPUTS)}: "
        f"{listing([firma_tables.LABELS[m] for m in methods])} in "
        f"{len({c[0] for c in cells})} of the {len(firma_tables.SCENARIOS)} scenarios "
        f"({' or '.join(map(str, seeds))} seeds, {listing(devices)}); beyond the margin "
        f"in accuracy: {listing(beyond['accuracy']) or 'none'}; in Gini: "
        f"{listing(beyond['gini']) or 'none'}"
        + (f"; not run: {listing([firma_tables.LABELS[m] for m in missing])}"
           if missing else ""))
  return (f"- **FIRMA on the real MNIST-60k** (Tables 9–10, {clients_text(groups)}; "
          f"`{MNIST_MD}`): {_lead(total)} ({verdicts.tally_text(total)}, each of the "
          f"{published_cells('mnist')} cells once). "
          + " ".join(p[0].upper() + p[1:] + "." for p in parts))


# ------------------------------------------------------------------ Table 13


@block("firma_t13_fmnist", R, *FMNIST_JSONS, inline=True)
def firma_t13_fmnist():
  """Table 13's Fashion-MNIST row from the authors'-inputs runs at Dir 0.1."""
  cells, _ = firma_files_table.best_cells(fmnist()[0][FMNIST_AUTHORS])
  methods = ("fibfl", "fibfl_plus", "fibfl_pp")
  missing = [firma_tables.LABELS[m] for m in methods if ("dir0.1", m) not in cells]
  if missing:
    return f"Fashion-MNIST: not run ({listing(missing)} at Dir 0.1 lack a run)"
  rows = firma_tables.ablation_rows(cells, "Fashion-MNIST")
  accs = verdicts.tally_text(verdicts.tally(c.verdict for _, c, _ in rows[:3]))
  gains = verdicts.tally_text(verdicts.tally(c.verdict for _, c, _ in rows[3:]))
  seeds = sorted({len(cells[("dir0.1", m)]["runs"]) for m in methods})
  return (f"Fashion-MNIST (`reference_code`, authors' inputs, "
          f"{' or '.join(map(str, seeds))} seeds): accuracies {accs}; gains {gains}; "
          f"`{FMNIST_MD}`; MNIST-60k, CIFAR-10: not run")


# ------------------------------------------------------------------ the shared-start variant


def shared_variant_text():
  """The paragraph on `reference_code`'s labelled shared-initial-model variant:
  what it changes, that the paper does not say, what its runs found and on which
  cells (each beside the same cell from the authors' per-client draws)."""
  groups, _ = fmnist()
  variant = {g: cells for g, cells in groups.items()
             if g[0] == "reference_code" and firma_notes.is_variant(g[1])}
  if not variant:
    return ""
  paper = firma_tables.published("Table 7")
  parts, seeds, rounds = [], set(), set()
  plain, _ = firma_files_table.best_cells(groups.get(FMNIST_AUTHORS, {}))
  for cells in variant.values():
    for (scen, m), entries in sorted(cells.items(), key=lambda kv: (
        firma_tables.SCENARIOS.index(kv[0][0]), firma_tables.METHODS.index(kv[0][1]))):
      cell, _ = max(entries, key=lambda e: len(e[0]["runs"]))
      c = firma_files_table.cell_comparison(paper.get((m, scen)), cell)
      seeds.add(len(cell["runs"]))
      rounds.update(len(r.get("curve", [])) for r in cell["runs"])
      before = plain.get((scen, m))
      was = ("" if before is None else "; the authors' per-client draws: mean "
             f"{firma_files_table.cell_comparison(paper.get((m, scen)), before).mean:.4f}")
      parts.append(f"{firma_tables.LABELS[m]} {firma_tables.PAPER_COLUMNS[scen]} "
                   f"{verdicts.ours_text(c, 4)} vs published {paper[(m, scen)]:.4f} "
                   f"({verdicts.verdict_text(c)}{was})")
  return (f"**The shared-initial-model variant.** FIRMA's `reference_code` draws each "
          f"client's initial model independently, as the authors' public code does; "
          f"the paper does not say how the clients are initialised (Alg. 1–3, line 2: "
          f"“for each i”). A labelled variant, `fedfrac-reproduce firma_files "
          f"--init=shared`, starts every client of the ring methods from one shared "
          f"model and is counted apart from the authors' code. On Fashion-MNIST with "
          f"the authors' inputs ({' or '.join(map(str, sorted(seeds)))} seeds, "
          f"{' or '.join(map(str, sorted(rounds)))} rounds): {'; '.join(parts)}. These "
          f"cells were chosen after the FibFL / FibFL+ gap was seen (IID, and Dir 0.8 "
          f"where the gap was largest), so they test a hypothesis about the gap, not a "
          f"random draw of cells; the other cells are not run under it "
          f"(`{FMNIST_MD}`, its own section).")


@block("firma_shared_variant", R, *FMNIST_JSONS)
def firma_shared_variant():
  return shared_variant_text()


@block("readme_firma_shared", README, *FMNIST_JSONS)
def readme_firma_shared():
  return shared_variant_text()
