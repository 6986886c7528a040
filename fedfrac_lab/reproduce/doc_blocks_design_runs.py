"""Generated doc blocks of docs/design.md §3.3 ("FibFL / FibFL+ below Tables 7–8")
rendered from the files of the runs it reasons from: the authors' own code on
Fashion-MNIST (``results/firma_authors_fmnist.json``), the one-change runs of
fedfrac's start (``results/firma_fibfl_start_rounds.json``, remade by
``fedfrac-reproduce firma_start_rounds``) and the shared-initial-model variant's
runs (``results/firma_fashion_mnist_cpu/*_shared_*.json``) and the FibFL++
warm-up Adam ablation (``results/firma_fibfl_pp_adam_ablation_cpu.json``). Each number the
explanation rests on comes from one of them; what no file holds says so beside it
(tests/test_design_numbers.py lists every number of §3.3–3.4 with its file).
"""
from __future__ import annotations

import os
import textwrap
from typing import Dict, List, Optional

import numpy as np

from fedfrac_lab.reproduce import common, firma_files_table, firma_notes, firma_tables, verdicts
from fedfrac_lab.reproduce.doc_blocks import FMNIST_JSONS, listing, span
from fedfrac_lab.reproduce.doc_blocks_firma_files import FMNIST_AUTHORS, fmnist
from fedfrac_lab.reproduce.doc_registry import block

DESIGN = "docs/design.md"
AUTHORS_JSON = "results/firma_authors_fmnist.json"
START_JSON = "results/firma_fibfl_start_rounds.json"
SHARED = {("iid", "fibfl"): "results/firma_fashion_mnist_cpu/fibfl_shared_iid_3seeds.json",
          ("dir0.8", "fibfl"): "results/firma_fashion_mnist_cpu/fibfl_shared_dir0.8_3seeds.json",
          ("dir0.8", "fibfl_plus"):
          "results/firma_fashion_mnist_cpu/fibfl_plus_shared_dir0.8_3seeds.json"}
# The rows of the start table, in order (names of fedfrac_lab.reproduce.firma_start_rounds).
START_ROWS = ("no_mixing", "shared", "per_client")
TABLE_ROUNDS = 3


def _acc(values) -> str:
  return ", ".join(f"{v:.3f}" for v in values)


def authors_run() -> dict:
  return common.load_results_json(AUTHORS_JSON)


def start_rows() -> Dict[str, dict]:
  """{row name: {"label", "command", "record": {"curve", ...}}} of the start file
  ({} before it is made)."""
  if not os.path.exists(os.path.join(common.CHECKOUT_DIR, START_JSON)):
    return {}
  return common.load_results_json(START_JSON)["rows"]


@block("design_authors_fmnist", DESIGN, AUTHORS_JSON, inline=True)
def design_authors_fmnist():
  a = authors_run()
  acc = a["accuracy"]
  best = int(np.argmax(acc))
  return (f"{_acc(acc)} at rounds {a['rounds'][0]}–{a['rounds'][-1]} (best at round "
          f"{a['rounds'][best]} in that one run; `{AUTHORS_JSON}`, transcribed from the "
          f"printed output, as its `source` says: the command's own output was not "
          f"kept, and it cannot be remade on this machine, which has neither the "
          f"authors' checkout nor PyTorch)")


@block("design_start_rounds", DESIGN, START_JSON, AUTHORS_JSON)
def design_start_rounds():
  rows = start_rows()
  a = authors_run()
  head = " | ".join(f"round {r}" for r in range(1, TABLE_ROUNDS + 1))
  lines = [f"  | run | {head} | command |", "  |---|" + "---|" * (TABLE_ROUNDS + 1)]
  for name in START_ROWS:
    row = rows.get(name)
    if row is None:
      lines.append(f"  | {name} | " + " | ".join(["not run yet"] * TABLE_ROUNDS) + " | |")
      continue
    curve = row["record"]["curve"][:TABLE_ROUNDS]
    lines.append(f"  | {row['label']} | " + " | ".join(f"{v:.3f}" for v in curve)
                 + f" | `{row['command']}` |")
  lines.append("  | the authors' code (PyTorch), the same setting | "
               + " | ".join(f"{v:.3f}" for v in a["accuracy"][:TABLE_ROUNDS])
               + f" | `{a['command']}` (`{AUTHORS_JSON}`, transcribed; see above) |")
  cost = blend_cost(rows)
  lines.append("")
  if cost is not None:
    alone = rows["no_mixing"]["record"]["curve"][:TABLE_ROUNDS]
    lines += textwrap.wrap(
        f"Rendered from `{START_JSON}` (`fedfrac-reproduce firma_start_rounds`, each "
        f"row's command in it). Local training alone reaches {span(alone)} in rounds "
        f"1–{TABLE_ROUNDS} (20 Adam epochs a round over 6,000 samples); the blend with "
        f"the neighbours' extractors then costs {span(cost, 1)} pp over those rounds "
        f"(the shared and the per-client start against local training alone, round by "
        f"round), most when they started from independent random draws and were never "
        f"aligned.", 98, initial_indent="  ", subsequent_indent="  ",
        break_long_words=False, break_on_hyphens=False)
  return "\n".join(lines)


def blend_cost(rows) -> Optional[List[float]]:
  """Points lost to the blend, round by round over the table's rounds: local
  training alone minus the shared and the per-client start (None before the
  three rows are in the file)."""
  if not all(name in rows for name in START_ROWS):
    return None
  alone = rows["no_mixing"]["record"]["curve"][:TABLE_ROUNDS]
  return [100 * (a - b) for name in ("shared", "per_client")
          for a, b in zip(alone, rows[name]["record"]["curve"][:TABLE_ROUNDS])]


@block("design_paper_mode", DESIGN, START_JSON, inline=True)
def design_paper_mode():
  row = start_rows().get("paper")
  if row is None:
    return ("not in the start file yet (`fedfrac-reproduce firma_start_rounds "
            "--rows=paper`); an earlier run of it, not kept, climbed to the published "
            "level by round 9–10")
  curve = row["record"]["curve"]
  pub = firma_tables.published("Table 7")[("fibfl", "iid")]
  within = [i + 1 for i, v in enumerate(curve) if abs(v - pub) <= verdicts.ACCURACY.absolute]
  if not within:
    reach = f"never within 2 pp of the published {pub:.4f} in its {len(curve)} rounds"
  elif within == list(range(within[0], len(curve) + 1)):
    reach = f"within 2 pp of the published {pub:.4f} from round {within[0]} on"
  else:
    reach = (f"within 2 pp of the published {pub:.4f} at rounds "
             f"{', '.join(map(str, within))}")
  return (f"{_acc(curve)} at rounds 1–{len(curve)}, {reach} (`{START_JSON}`, "
          f"`{row['command']}`)")


# ------------------------------------------------------------ the shared start


def _shared(scen, method):
  """(per-seed finals, comparison, wall minutes, processes) of a variant cell."""
  raw = common.load_results_json(SHARED[(scen, method)])
  entry = raw["scenarios"][scen]
  cell = entry["results"]["reference_code"][f"{scen}/{method}"]
  finals = [r["accuracy"] for r in cell["runs"]]
  pub = firma_tables.published("Table 7")[(method, scen)]
  c = firma_files_table.cell_comparison(pub, cell)
  return finals, c, entry["wall_s"] / 60, int(entry.get("workers") or 1)


def _per_client(scen, method):
  """(comparison, device) of the same cell from the authors' per-client draws
  (the run with the most seeds)."""
  cells, devices = firma_files_table.best_cells(fmnist()[0][FMNIST_AUTHORS])
  pub = firma_tables.published("Table 7")[(method, scen)]
  return firma_files_table.cell_comparison(pub, cells[(scen, method)]), devices[(scen, method)]


def _where(device: str) -> str:
  """"the CPU" or "the NVIDIA H200": where a cell's run was made."""
  return "the " + ("CPU" if device.startswith("CPU") else device.split(",")[0])


def _ends(finals, c):
  pp = 100 * c.delta
  lo, hi = 100 * (c.delta - c.half_width), 100 * (c.delta + c.half_width)
  return (f"ends at {', '.join(f'{v:.4f}' for v in finals[:-1])} and {finals[-1]:.4f}, "
          f"{c.mean:.4f} ± {c.std:.4f} against the published {c.published.value:.4f} "
          f"({pp:+.1f} pp, interval [{lo:+.1f}, {hi:+.1f}] pp: {verdicts.verdict_text(c)})")


@block("design_shared_iid", DESIGN, *SHARED.values(), *FMNIST_JSONS, inline=True)
def design_shared_iid():
  finals, c, minutes, _ = _shared("iid", "fibfl")
  plain = firma_notes.curve_summary(fmnist()[0])
  return (f"FibFL IID at {len(finals)} seeds, 30 rounds (`{SHARED[('iid', 'fibfl')]}`, "
          f"CPU, one core, {minutes:.0f} min) {_ends(finals, c)}, where the same cell "
          f"from the authors' per-client draws ends at {span(plain.finals)}")


@block("design_shared_dir08", DESIGN, *SHARED.values(), *FMNIST_JSONS, inline=True)
def design_shared_dir08():
  parts, times = [], []
  for method in ("fibfl", "fibfl_plus"):
    finals, c, minutes, _ = _shared("dir0.8", method)
    before, device = _per_client("dir0.8", method)
    times.append(minutes)
    parts.append(f"{firma_tables.LABELS[method]} {_ends(finals, c)}, where the "
                 f"per-client draws gave {before.mean:.4f} on {_where(device)} "
                 f"({100 * before.delta:+.1f} pp, {verdicts.verdict_text(before)})")
  files = ", ".join(f"`{os.path.basename(SHARED[('dir0.8', m)])}`"
                    for m in ("fibfl", "fibfl_plus"))
  return (f"(3 seeds, 30 rounds, CPU, one process per core, {span(times, 0)} min each; "
          f"{files}): {'; '.join(parts)}")


@block("design_shared_rest", DESIGN, *SHARED.values(), inline=True)
def design_shared_rest():
  _, c, _, _ = _shared("dir0.8", "fibfl_plus")
  return f"about {abs(100 * c.delta):.0f} pp"


# ------------------------------------------------- the FibFL++ warm-up Adam ablation

ABLATION_JSON = "results/firma_fibfl_pp_adam_ablation_cpu.json"
WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def _left_chance(accuracy: float) -> bool:
  """Above chance by more than the tables' margin (firma_files_table.at_chance)."""
  return accuracy > firma_files_table.CHANCE + firma_files_table.CHANCE_MARGIN


def _seeds(seeds: List[int]) -> str:
  """"1–4" for consecutive seeds, else "1, 3 and 4"."""
  seeds = sorted(seeds)
  if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
    return f"{seeds[0]}–{seeds[-1]}"
  return listing(map(str, seeds))


def _units(round_units: List[int]) -> str:
  """Live units of one round over the clients: one number when all clients agree
  (after a warm-up average they hold the same params), else "lo–hi"."""
  return span(round_units, 0)


def ablation_runs() -> Dict[str, Dict[int, dict]]:
  """{variant: {seed: run}} of the ablation file, each run with ``curve`` (mean
  per-client accuracy per round) and ``live_units`` (per round, per client)."""
  out: Dict[str, Dict[int, dict]] = {}
  for run in common.load_results_json(ABLATION_JSON)["runs"]:
    out.setdefault(run["variant"], {})[run["seed"]] = run
  return out


def _none_escapes(runs: Dict[int, dict]) -> Optional[str]:
  """"0 units and 0.100" when no run of a variant ever leaves chance (its units
  and accuracy over all its rounds and seeds), else None."""
  if any(_left_chance(a) for r in runs.values() for a in r["curve"]):
    return None
  units = [u for r in runs.values() for row in r["live_units"] for u in row]
  accs = [a for r in runs.values() for a in r["curve"]]
  return f"{_units(units)} units and {span(accs)}"


@block("design_adam_ablation", DESIGN, ABLATION_JSON, inline=True)
def design_adam_ablation():
  return adam_ablation_text(replay=True)


def adam_ablation_text(replay):
  """What the ablation file shows: which seeds of each variant leave chance, their
  live units and accuracy per round (``replay``: say which escaping seeds the
  replay file's runs are)."""
  runs = ablation_runs()
  keep = runs["keep"]
  out = [s for s in sorted(keep) if _left_chance(keep[s]["curve"][-1])]
  stay = [s for s in sorted(keep) if s not in out]
  arrows = [" → ".join(_units(row) for row in keep[s]["live_units"]) for s in out]
  rounds = len(keep[out[0]]["curve"]) if out else 0
  early = [s for s in out if _left_chance(keep[s]["curve"][-2])] if rounds > 1 else []
  text = (f"seeds {_seeds(out)} escape{' (1 and 2 as in the replay)' if replay else ''}: "
          f"{listing(arrows)} units "
          f"alive after rounds 1–{rounds}, accuracy "
          f"{listing(_acc([keep[s]['curve'][-1]]) for s in out)} at round {rounds}")
  if early:
    text += (f" (seed{'s' if len(early) > 1 else ''} {_seeds(early)} already "
             f"{listing(_acc([keep[s]['curve'][-2]]) for s in early)} at round "
             f"{rounds - 1})")
  for s in stay:
    r = keep[s]
    text += (f"; seed {s} stays at {_units(r['live_units'][-1])} units and "
             f"{r['curve'][-1]:.3f}")
  reset, average = runs["reset"], runs["average"]
  flat = _none_escapes(reset)
  text += (". Reset to a fresh state at every warm-up average (`reset`), "
           + (f"none of the {WORDS[len(reset)]} escapes: {flat} after each of the "
              f"{WORDS[rounds]} rounds" if flat else
              f"seeds {_seeds([s for s in reset if _left_chance(reset[s]['curve'][-1])])} "
              f"escape"))
  flat = _none_escapes(average)
  text += (". With the clients' moments averaged like the params (`average`, seeds "
           f"{_seeds(list(average))}), "
           + (f"none escapes either ({flat.replace(' and ', ', ')} after each round)"
              if flat else
              f"seeds {_seeds([s for s in average if _left_chance(average[s]['curve'][-1])])}"
              f" escape"))
  return text


FIRMA_PAGE = "docs/api/guide/reproductions/firma.rst"


@block("firma_page_adam_ablation", FIRMA_PAGE, ABLATION_JSON)
def firma_page_adam_ablation():
  """The FIRMA page's account of the warm-up optimizer ablation: the text of
  design.md §3.3's block (:func:`adam_ablation_text`), in reST."""
  device = common.load_results_json(ABLATION_JSON)["device"].split(" (")[0]
  return (f"**The warm-up optimizer ablation** (``{ABLATION_JSON}``, {device}; "
          f"FibFL++ ``reference_code``, Fashion-MNIST IID, every round a warm-up "
          f"round): with each client's warm-up Adam state kept across the average "
          f"(``keep``, the authors' code), "
          + adam_ablation_text(replay=False).replace("`", "``") + ".")
