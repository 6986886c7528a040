"""The accelerator measurements a GPU window runs first (``fedfrac-campaign``'s
stage a), each a function of its sizes so that the same code runs on a CPU with
tiny ones:

* :func:`vs_torch`: fedfrac against sequential and batched PyTorch on the same
  device, rounds interleaved (CNNMnist 10 clients, the 100-client cohort of
  1,000, the FIRMA-sized MLP; ``fedfrac_lab.bench.timing.bench_workload``);
* :func:`fibfl_seeds`: FIRMA digits FibFL++ with 5 seeds vmapped against one
  seed (``fedfrac_lab.bench.studies.seeds_study``; there is no PyTorch FibFL++ here);
* :func:`conv_forms`: ``model.conv_impl`` xla vs im2col under vmap
  (:mod:`fedfrac_lab.bench.convs`);
* :func:`precision`: ``engine.matmul_precision`` per workload (round time) and
  its effect on FIRMA digits accuracy against the seeds' spread;
* :func:`points_per_hour`: FIRMA points (one run each) per hour on the real
  data with the seeds vmapped against one run at a time.

Each returns a JSON-able dict; :func:`markdown` renders any of them and
:func:`section` the whole block of ``benchmarks/results_<device>.md``.
"""
from __future__ import annotations

import argparse
import statistics
import time

import jax
import numpy as np

from fedfrac_lab.bench import convs, studies, table_rows, timing, torch_side
# The vs-PyTorch workloads and their sizes (re-exported).
from fedfrac_lab.bench.workloads import SIZES, WORKLOADS, sized_workload  # noqa: F401
from fedfrac.sim import precision as precision_lib

START = "<!-- accelerator:start -->"
END = "<!-- accelerator:end -->"


def device_name() -> str:
  """The device the measurements ran on, as JAX names it (``cpu`` on a CPU)."""
  d = jax.devices()[0]
  return "cpu" if d.platform == "cpu" else d.device_kind


def _slim(row):
  return {k: v for k, v in row.items() if k not in ("memory",)}


def vs_torch(workloads=WORKLOADS, repeats=5, sizes=None, compiled=False):
  """fedfrac vs PyTorch (sequential, batched; ``compiled``: also batched under
  ``torch.compile``, timed after the interleaved rounds) per workload."""
  sizes = sizes or {}
  have_torch = torch_side.torch_available()
  rows = []
  for name in workloads:
    w = sized_workload(name, **sizes.get(name, {}))
    row = _slim(timing.bench_workload(w, repeats, vs_torch=have_torch))
    if have_torch and compiled:
      tr_name, clients, kw = w.torch
      t = torch_side.TorchRound(tr_name, clients, style="compiled", **kw)
      times = [t() for _ in range(repeats)]
      row.update(torch_compiled_round_s=statistics.median(times),
                 torch_compiled_round_times=times, torch_compile_s=t.warmup_s,
                 speedup_vs_torch_compiled=statistics.median(times) / row["round_s"])
    rows.append(row)
  return {"device": device_name(), "torch": _torch_version() if have_torch else None,
          "rows": rows}


def _torch_version():
  import torch
  return torch.__version__


def fibfl_seeds(repeats=5, seeds=5):
  """FIRMA digits FibFL++ (N = 5): ``seeds`` seeds vmapped vs one seed."""
  return {"device": device_name(), **studies.seeds_study(repeats, seeds)}


def conv_forms(models=tuple(convs.MODELS), clients=10, batch=50, repeats=10, shape=None):
  """``fedfrac_lab.bench.convs.run``."""
  return convs.run(tuple(models), clients, batch, repeats, shape)


def precision_speed(workloads=("cnn10", "firma_mlp"), precisions=precision_lib.PRECISIONS,
                    repeats=5, sizes=None):
  """Round time of each workload at each ``engine.matmul_precision``."""
  sizes = sizes or {}
  rows = []
  for name in workloads:
    w = sized_workload(name, **sizes.get(name, {}))
    base = None
    for p in precisions:
      r = timing.bench_workload(w, repeats, engine_overrides={"matmul_precision": p})
      base = base or r["round_s"]
      rows.append({"workload": name, "description": w.description, "precision": p,
                   "round_s": r["round_s"], "round_times": r["round_times"],
                   "compile_s": r["compile_s"], "speedup_vs_first": base / r["round_s"]})
  return rows


def precision_accuracy(methods=("fedavg", "fibfl_pp"), scenarios=("iid", "dir0.1"),
                       seeds=3, rounds_=10, precisions=precision_lib.PRECISIONS,
                       mode="reference_code"):
  """FIRMA digits (configs/firma/digits.py, N = 5) final mean per-client accuracy
  per precision, mean ± std over ``seeds``; a precision is within noise of the
  first one when |Δmean| <= 2 × the larger std (and <= 0.005 with one seed)."""
  from fedfrac import runner
  from fedfrac_lab.reproduce import common
  digits = common.config_module("firma/digits.py")
  rows = []
  for scen in scenarios:
    for m in methods:
      ref = None
      for p in precisions:
        c = digits.firma_config(mode, scen, rounds=rounds_)
        c.only = m
        c.progress = False
        c.engine.matmul_precision = p
        recs = runner.run_many(c, seeds=tuple(range(seeds)), progress=False,
                               compile_cache=False).records   # the bench times compiles
        acc = [float(r.curve("client_accuracy_mean")[1][-1]) for r in recs]
        mean = float(np.mean(acc))
        std = float(np.std(acc, ddof=1)) if len(acc) > 1 else 0.0
        ref = ref or (mean, std)
        tol = 2 * max(std, ref[1]) if seeds > 1 else 0.005
        rows.append({"scenario": scen, "method": m, "precision": p, "mean": mean,
                     "std": std, "accuracies": acc, "delta": mean - ref[0],
                     "within_noise": abs(mean - ref[0]) <= tol})
  return rows


def precision(workloads=("cnn10", "firma_mlp"), repeats=5, sizes=None,
              accuracy=None, precisions=precision_lib.PRECISIONS):
  """:func:`precision_speed` and (``accuracy``: keywords of
  :func:`precision_accuracy`, None to skip) the accuracy check."""
  out = {"device": device_name(), "speed": precision_speed(workloads, precisions, repeats,
                                                           sizes)}
  if accuracy is not None:
    out["accuracy"] = precision_accuracy(**accuracy)
  return out


def points_per_hour(data_dir, dataset="fashion_mnist", mode="reference_code",
                    scenario="iid", method="fedavg", seeds=5, rounds_=30,
                    inputs="authors"):
  """FIRMA on the real data (``fedfrac-reproduce firma_files``' configs): the same
  ``seeds`` runs once vmapped as one program and once one run at a time, each
  timed from the first compile to the last result; points per hour = runs /
  wall time."""
  from fedfrac_lab.reproduce import firma_files
  from fedfrac_lab.reproduce import firma_groups, firma_program
  args = argparse.Namespace(dataset=dataset, dir=data_dir, rounds=rounds_,
                            inputs=inputs, parallelism="vmap")
  module = firma_files.files_config_module(args)
  run_seeds = tuple(range(seeds))
  feds = firma_program.common_shapes({mode: firma_program.build_feds(module, mode, [scenario],
                                                     run_seeds)})[mode]
  out = {"device": device_name(), "dataset": dataset, "mode": mode, "scenario": scenario,
         "method": method, "seeds": seeds, "rounds": rounds_, "forms": {}}
  quiet = lambda msg: None
  for label, batch in (("vmapped", seeds), ("one_at_a_time", 1)):
    t0 = time.perf_counter()
    res, timing = firma_groups.run_method(feds, mode, method, [scenario], run_seeds, quiet, batch)
    wall = time.perf_counter() - t0
    acc = [r["accuracy"] for r in res[(scenario, method)]["runs"]]
    out["forms"][label] = {"wall_s": wall, "compile_s": timing["compile_s"],
                           "compiles": timing["compiles"],
                           "points_per_hour": 3600.0 * seeds / wall, "accuracies": acc}
  v, o = out["forms"]["vmapped"], out["forms"]["one_at_a_time"]
  out["ratio"] = v["points_per_hour"] / o["points_per_hour"]
  out["max_accuracy_diff"] = max(abs(a - b) for a, b in zip(v["accuracies"],
                                                            o["accuracies"]))
  return out


def _window_measurements():
  from fedfrac_lab.bench import profile_summary, window_measurements as wm
  return ({"peaks": wm.peaks, "step_scaling": wm.step_scaling,
           "masked_steps": wm.masked_steps, "papers_vs_torch": wm.papers_vs_torch,
           "profile": profile_summary.profile, "fibfl_pp_replay": wm.fibfl_pp_replay},
          {"peaks": ("Matrix-product peaks", wm.peaks_md),
           "step_scaling": ("FIRMA local step against the lanes run at once",
                            wm.step_scaling_md),
           "masked_steps": ("Masked steps: Dir 0.1 against LS K=1", wm.masked_steps_md),
           "papers_vs_torch": ("The papers' workloads against PyTorch",
                               wm.papers_vs_torch_md),
           "profile": ("Where a step's time goes", profile_summary.markdown),
           "fibfl_pp_replay": ("FibFL++ runs at chance, replayed", wm.fibfl_pp_replay_md)})


MEASUREMENTS = {"vs_torch": vs_torch, "fibfl_seeds": fibfl_seeds, "conv_forms": conv_forms,
                "precision": precision, "points_per_hour": points_per_hour,
                **_window_measurements()[0]}


# ------------------------------------------------------------------ markdown


def _vs_torch_md(r):
  rows = [x for x in r["rows"] if "torch_round_s" in x]
  lines = [] if rows else ["PyTorch is not installed where this ran: fedfrac only."]
  lines += table_rows.torch_section(rows)[2:] if rows else []
  if any("torch_compiled_round_s" in x for x in r["rows"]):
    lines += ["", "| workload | torch.compile batched round s (compile s) | fedfrac vs it |",
              "|---|---|---|"]
    lines += [f"| {x['description']} | {x['torch_compiled_round_s']:.4f} "
              f"({x['torch_compile_s']:.1f}) | "
              f"{table_rows.ratio(x['speedup_vs_torch_compiled'])} |"
              for x in r["rows"] if "torch_compiled_round_s" in x]
  lines += ["", "| workload | fedfrac round s | compile s | client-steps/s | GFLOP/s |",
            "|---|---|---|---|---|"]
  lines += [f"| {x['description']} | {x['round_s']:.4f} | {x['compile_s']:.1f} | "
            f"{x['client_steps_per_s']:.0f} | {x['gflops']:.1f} |" for x in r["rows"]]
  return lines


def _fibfl_md(r):
  return [f"{r['workload']}: one seed {r['one_seed_round_s']:.4f} s/round, {r['seeds']} "
          f"seeds vmapped {r['many_seeds_round_s']:.4f} s/round = **{r['ratio']:.2f}x** "
          f"the time of one seed; client steps/s {r['one_seed_steps_per_s']:.0f} vs "
          f"{r['many_seeds_steps_per_s']:.0f}. No PyTorch FibFL++ exists in this "
          "repository, so this row has no PyTorch side."]


def _precision_md(r):
  lines = ["| workload | precision | round s | speed-up vs highest | compile s |",
           "|---|---|---|---|---|"]
  lines += [f"| {x['description']} | {x['precision']} | {x['round_s']:.4f} | "
            f"{x['speedup_vs_first']:.2f}x | {x['compile_s']:.1f} |" for x in r["speed"]]
  if r.get("accuracy"):
    lines += ["", "FIRMA digits (N = 5), final mean per-client accuracy per precision; "
              "within noise: |Δ| <= 2 × the larger std over seeds.", "",
              "| scenario | method | precision | mean ± std | Δ vs highest | within noise |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {x['scenario']} | {x['method']} | {x['precision']} | "
              f"{x['mean']:.4f} ± {x['std']:.4f} | {x['delta']:+.4f} | "
              f"{'yes' if x['within_noise'] else 'no'} |" for x in r["accuracy"]]
  return lines


def _points_md(r):
  v, o = r["forms"]["vmapped"], r["forms"]["one_at_a_time"]
  return [f"FIRMA {r['dataset']} `{r['mode']}` {r['scenario']} {r['method']}, "
          f"{r['seeds']} seeds x R = {r['rounds']}: vmapped {v['points_per_hour']:.0f} "
          f"points/hour ({v['wall_s']:.1f} s, {v['compiles']} compile, "
          f"{v['compile_s']:.1f} s), one at a time {o['points_per_hour']:.0f} points/hour "
          f"({o['wall_s']:.1f} s): **{r['ratio']:.2f}x**; largest accuracy difference "
          f"between the two {r['max_accuracy_diff']:.1e}."]


RENDER = {"vs_torch": ("PyTorch side by side", _vs_torch_md),
          "fibfl_seeds": ("FibFL++ seeds vmapped", _fibfl_md),
          "conv_forms": ("Convolution forms under vmap",
                         lambda r: convs.markdown(r).splitlines()),
          "precision": ("Matrix-product precision", _precision_md),
          "points_per_hour": ("FIRMA points per hour", _points_md),
          **_window_measurements()[1]}


def markdown(name, result) -> list:
  """Markdown lines of measurement ``name``'s ``result``."""
  title, render = RENDER[name]
  return [f"### {title}", ""] + render(result)


def section(measurements: dict, device: str) -> str:
  """The accelerator block of ``benchmarks/results_<device>.md`` from
  ``{name: {"result", "command", "date"}}``."""
  lines = [START, f"## Accelerator measurements on {device}", "",
           "Written by `fedfrac-campaign collect` from the campaign's archives "
           "(`benchmarks/gpu/campaign.sh`); each block names the window it came from.", ""]
  for name in [n for n in RENDER if n in measurements]:
    m = measurements[name]
    lines += markdown(name, m["result"]) + ["", f"From `{m['command']}`, {m['date']}.", ""]
  return "\n".join(lines + [END]) + "\n"
