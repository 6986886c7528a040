"""The README's two generated tables, small enough for a front page: what
reproduces (the verdict tally of each paper's compared tables, one row per table
set and data) and the speed against PyTorch on CPU and GPU. Both are rendered from
the committed results and benchmarks, so the front page cannot drift from them;
the sentences behind each tally are on the guide's reproductions page
(``docs/api/guide/reproducing.md``) and the measurements behind each ratio on its
speed page.
"""
from __future__ import annotations

from fedfrac_lab.reproduce import (common, doc_blocks_firma_files, firma_tables, published_tables,
                                   verdicts)
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
REAL_DATA = {"fofedavg": ("II–IV, V–VI (K = 10)", "MNIST (the paper's; CPU, 3 seeds)")}
CPU_BENCH, GPU_BENCH = "benchmarks/results.json", "benchmarks/results_h200.json"


# Why a stand-in paper's cells without a number of ours have none.
STAND_IN_NOT_RUN = {
    "fofedavg": "needs compute (V–VI, K ≥ 100{unfinished}); SparseSecAgg refused at C = 0.2",
    "fo_ri_fedavg": "no data here (VED/eVED) and no stand-in run of them yet",
    "kuramoto": "not yet (CIFAR-10 and FMNIST columns)",
}
# The README table's verdict columns, then the cells counted apart.
COLUMNS = verdicts.JUDGED + (verdicts.COLLAPSED, verdicts.NOT_DEFINED, verdicts.STAND_IN,
                             verdicts.NOT_RUN)


def _fofedavg_unfinished() -> str:
  """``"; Table IV runs not finished"``: the MNIST tables whose CPU runs are still
  going (``""`` when every one has finished)."""
  from fedfrac_lab.reproduce import fofedavg_mnist
  parts = [text for text, scenario in (("Tables II–III runs not finished", "iid"),
                                       ("Table IV runs not finished", "alpha"),
                                       ("K = 10 running", "severe_10"))
           if fofedavg_mnist.pending_names(scenario)]
  return "".join(f"; {p}" for p in parts)


def _paper(key):
  return f"[{NAMES[key]}]({PAGE.format(key)})"


def _row(paper, tables, data, published, tally, why):
  cells = [str(tally.get(v, 0)) for v in COLUMNS]
  if tally.get(verdicts.NOT_RUN):
    cells[-1] += f": {why}"
  return f"| {paper} | {tables} | {data} | {published} | " + " | ".join(cells) + " |"


def _sum(*tallies):
  total = verdicts.tally([])
  for t in tallies:
    for k, n in t.items():
      total[k] += n
  return total


def reproduces_rows():
  """[(paper, tables, data, published cells, tally, why not run)]: every row
  counts each published cell of its tables exactly once (FIRMA's real-data cells
  by :func:`fedfrac_lab.reproduce.doc_blocks_firma_files.tally`), so its tally
  adds up to the published cell count; the three papers on stand-in data have no
  verdict, only the cells with a stand-in number of ours and the rest not run."""
  rows = []
  for dataset, tables, data, paths in (
      ("fashion_mnist", "7–8", "Fashion-MNIST (the paper's), `reference_code`", FMNIST_JSONS),
      ("mnist", "9–10", "MNIST-60k (the paper's), `reference_code`", MNIST_JSONS)):
    rows.append(("firma", tables, data, doc_blocks_firma_files.published_cells(dataset),
                 doc_blocks_firma_files.tally(paths, dataset),
                 doc_blocks_firma_files.NOT_RUN_WHY[dataset]))
  counts, _ = firma_counts()
  published = sum(v is not None for t in ("Table 11", "Table 12")
                  for v in firma_tables.published(t).values())
  for mode, data in (("reference_code", "the authors' code's setting"),
                     ("paper", "as the paper describes it")):
    groups = counts[mode].values()
    total = _sum(*(g[key] for g in groups for key in ("accuracy", "gini")))
    total[verdicts.NOT_RUN] += published - sum(total.values())
    rows.append(("firma", "11–12", f"MNIST-1797 (the paper's), `{mode}`: {data}",
                 published, total, "not yet"))
  for paper in PUBLISHED:
    cells, with_ours, _ = published_tables.counts(paper)
    n_real, real, n_standin, _ = published_tables.real_counts(paper)
    listed, every = published_tables.PAPERS[paper][0], published_tables.result_tables(paper)
    tables = ("its only result table" if len(every) == 1 else
              f"all {len(every)} result tables" if len(listed) == len(every) else
              f"{len(listed)} of its {len(every)} result tables")
    total = verdicts.tally([])
    data = STAND_IN_DATA[paper]
    if n_real:   # cells on the paper's own data keep their verdict; the rest stand in
      total = _sum(total, real)
      what, real_data = REAL_DATA[paper]
      data = f"{real_data}: {n_real} cells of {what}; digits (stand-in): the rest"
    total[verdicts.STAND_IN] = n_standin
    total[verdicts.NOT_RUN] += cells - n_real - n_standin
    rows.append((paper, tables, data, cells, total,
                 STAND_IN_NOT_RUN[paper].format(unfinished=_fofedavg_unfinished())))
  return rows


@block("readme_reproduces", README, FIRMA_JSON, *FMNIST_JSONS, *MNIST_JSONS,
       *(f"results/published_{p}.md" for p in PUBLISHED), "results/fofedavg_mnist_iid.json",
       "results/fofedavg_mnist_alpha.json", "results/fofedavg_mnist_severe_10.json")
def readme_reproduces():
  head = ("| paper | tables | data | published cells | " + " | ".join(COLUMNS[:-1])
          + " (no verdict) | not run: why |")
  lines = [head, "|" + "---|" * (4 + len(COLUMNS))]
  previous = None
  for paper, tables, data, published, tally, why in reproduces_rows():
    lines.append(_row(_paper(paper) if paper != previous else "", tables, data, published,
                      tally, why))
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
