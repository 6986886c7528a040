"""The README's two generated tables, small enough for a front page: what
reproduces (the verdict tally of each paper's compared tables, one row per table
set and data) and the speed against PyTorch on CPU and GPU. Both are rendered from
the committed results and benchmarks, so the front page cannot drift from them;
the sentences behind each tally are on the guide's reproductions page
(``docs/api/guide/reproducing.md``) and the measurements behind each ratio on its
speed page.
"""
from __future__ import annotations

from fedfrac_lab.reproduce import common, doc_blocks_firma_files, published_tables, verdicts
from fedfrac_lab.reproduce.doc_blocks import (FIRMA_JSON, FMNIST_JSONS, MNIST_JSONS, README,
                                          firma_counts)
from fedfrac_lab.reproduce.doc_registry import block

# The guide's page of each paper (docs/api/guide/reproductions/<paper>.rst).
PAGE = "docs/api/guide/reproductions/{}.rst"
PUBLISHED = ("fofedavg", "fo_ri_fedavg", "kuramoto")
NAMES = {"firma": "FIRMA", "fofedavg": "FOFedAvg", "fo_ri_fedavg": "FO-RI-FedAvg",
         "kuramoto": "Kuramoto-FedAvg"}
STAND_IN_DATA = {"fofedavg": "scikit-learn digits for MNIST (stand-in)",
                 "fo_ri_fedavg": "a synthetic BEV fleet for VED (stand-in)",
                 "kuramoto": "scikit-learn digits for MNIST (stand-in)"}
# The cells run on a paper's own data (judged), where there are any.
REAL_DATA = {"fofedavg": ("II–IV", "MNIST (the paper's), CPU, 3 seeds, the methods "
                          "finished so far")}
CPU_BENCH, GPU_BENCH = "benchmarks/results.json", "benchmarks/results_h200.json"


def _paper(key):
  return f"[{NAMES[key]}]({PAGE.format(key)})"


def _row(paper, tables, data, tally, other):
  cells = [str(tally.get(v, 0)) for v in verdicts.JUDGED] if tally else ["–"] * 4
  return f"| {paper} | {tables} | {data} | " + " | ".join(cells) + f" | {other} |"


def _others(tally):
  """The verdicts that are no claim either way (collapsed, ...), or "–"."""
  rest = [f"{v} {tally[v]}" for v in verdicts.ORDER
          if v not in verdicts.JUDGED and tally.get(v)]
  return ", ".join(rest) or "–"


def _sum(*tallies):
  total = verdicts.tally([])
  for t in tallies:
    for k, n in t.items():
      total[k] += n
  return total


def reproduces_rows():
  """[(paper, tables, data, tally or None, other)]: FIRMA's tables on the paper's
  data with their verdicts, the three papers on stand-in data without."""
  rows = [("firma", "7–8", "Fashion-MNIST (the paper's), `reference_code`",
           doc_blocks_firma_files._tally(FMNIST_JSONS))]
  if MNIST_JSONS:
    rows.append(("firma", "9–10", "MNIST-60k (the paper's), `reference_code`",
                 doc_blocks_firma_files._tally(MNIST_JSONS, "mnist")))
  counts, _ = firma_counts()
  for mode, data in (("reference_code", "the authors' code's setting"),
                     ("paper", "as the paper describes it")):
    groups = counts[mode].values()
    rows.append(("firma", "11–12", f"MNIST-1797 (the paper's), `{mode}`: {data}",
                 _sum(*(g[key] for g in groups for key in ("accuracy", "gini")))))
  out = [(p, t, d, tally, _others(tally)) for p, t, d, tally in rows]
  for paper in PUBLISHED:
    cells, with_ours, _ = published_tables.counts(paper)
    n_real, real, n_standin, _ = published_tables.real_counts(paper)
    listed, every = published_tables.PAPERS[paper][0], published_tables.result_tables(paper)
    tables = ("its only result table" if len(every) == 1 else
              f"all {len(every)} result tables" if len(listed) == len(every) else
              f"{len(listed)} of its {len(every)} result tables")
    if n_real:
      what, data = REAL_DATA[paper]
      out.append((paper, f"{what}: {n_real} cells run", data, real, _others(real)))
    out.append((paper, f"{tables}: {cells} cells", STAND_IN_DATA[paper], None,
                f"{n_standin} cells with a stand-in number: no verdict"))
  return out


@block("readme_reproduces", README, FIRMA_JSON, *FMNIST_JSONS, *MNIST_JSONS,
       *(f"results/published_{p}.md" for p in PUBLISHED), "results/fofedavg_mnist_iid.json",
       "results/fofedavg_mnist_alpha.json")
def readme_reproduces():
  head = ("| paper | tables | data | " + " | ".join(verdicts.JUDGED)
          + " | no claim either way |")
  lines = [head, "|" + "---|" * (4 + len(verdicts.JUDGED))]
  previous = None
  for paper, tables, data, tally, other in reproduces_rows():
    lines.append(_row(_paper(paper) if paper != previous else "", tables, data, tally, other))
    previous = paper
  return "\n".join(lines)


# ------------------------------------------------------------------ speed


def _ratio(r):
  return f"{r:.2f}× faster" if r >= 1 else f"{1 / r:.2f}× slower"


def _workload(text):
  """"(1) CNNMnist FedAvg, 10 clients x 600, B=50, E=1" -> "CNNMnist FedAvg, 10
  clients × 600, B=50, E=1"."""
  text = text.split(") ", 1)[1] if text.startswith("(") else text
  return text.replace(" x ", " × ")


def speed_rows():
  """[(workload, machine, fedfrac, PyTorch sequential, ratio, batched, ratio)]."""
  rows = []
  cpu = common.load_results_json(CPU_BENCH)
  machine = f"CPU, {cpu['machine']['cores']}-core {cpu['machine']['cpu']}"
  for r in cpu["results"]:
    if r.get("speedup_vs_torch"):
      rows.append((_workload(r["description"]), machine, f"{r['round_s']:.3f} s/round",
                   f"{r['torch_round_s']:.3f} s/round", _ratio(r["speedup_vs_torch"]),
                   "–", "–"))
  campaign = cpu.get("campaign", {})
  where = (f"CPU, 1 core of a {campaign['machine']['cores']}-core "
           f"{campaign['machine']['cpu'].replace('(R)', '').split(' Processor')[0]}"
           if campaign else "")
  for r in campaign.get("results", []):
    sides = {s["side"]: s for s in r["sides"]}
    ours, seq = sides.get("fedfrac, 1 seed, clients map"), sides.get("sequential")
    batched = sides.get("batched (torch.func)")
    if not (ours and seq):
      continue
    rows.append((_workload(r["description"]), where,
                 f"{1e3 * ours['cpu_s_per_step']:.2f} ms CPU/step",
                 f"{1e3 * seq['cpu_s_per_step']:.2f} ms CPU/step",
                 _ratio(seq["cpu_s_per_step"] / ours["cpu_s_per_step"]),
                 f"{1e3 * batched['cpu_s_per_step']:.2f} ms CPU/step" if batched else "–",
                 _ratio(batched["cpu_s_per_step"] / ours["cpu_s_per_step"])
                 if batched else "–"))
  gpu = common.load_results_json(GPU_BENCH)
  result = gpu["accelerator"]["vs_torch"]["result"]
  for r in result["rows"]:
    rows.append((_workload(r["description"]), result["device"], f"{r['round_s']:.3f} s/round",
                 f"{r['torch_round_s']:.3f} s/round", _ratio(r["speedup_vs_torch"]),
                 f"{r['torch_batched_round_s']:.3f} s/round",
                 _ratio(r["speedup_vs_torch_batched"])))
  return rows


@block("readme_speed", README, CPU_BENCH, GPU_BENCH)
def readme_speed():
  lines = ["| workload | machine | fedfrac | PyTorch, sequential | | PyTorch, batched "
           "(`torch.func`) | |", "|---|---|---|---|---|---|---|"]
  lines += ["| " + " | ".join(row) + " |" for row in speed_rows()]
  return "\n".join(lines)
