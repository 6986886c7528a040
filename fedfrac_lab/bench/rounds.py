"""Performance figures for fedfrac: the single source of speed and memory numbers.

  fedfrac-bench                      # every workload -> benchmarks/results.md
  fedfrac-bench --vs-torch           # + sequential PyTorch, same process
  fedfrac-bench --workloads=cnn10,firma --repeats=5
  fedfrac-bench --only-table         # workload table only (no extra studies)
  fedfrac-bench --vs-torch --workloads=firma_fmnist,cnn_mnist_real,kuramoto_cnn
                --epochs=2 --repeats=3 --json=benchmarks/results.json
                                     # the campaign's workloads, per CPU-second

Workloads (``--workloads``, comma-separated):

  cnn10        (1) CNNMnist FedAvg, 10 clients x 600 samples, B=50, E=1
  cnn100       (2) the same, 100 clients, C=0.1
  cnn1000      (2) the same, 1,000 clients, C=0.1
  firma_mlp    the FIRMA-sized MLP: FedAvg with Adam, 5 clients x 84 steps, B=64
  firma        (3) FIRMA digits FibFL++ (N=5, R=10; configs/firma/digits.py); the
               FIRMA-sized MLP until ``fibfl_pp`` is registered
  fori         (4) FO-RI-FedAvg with the roughness probe on (configs/bev/base.py);
               the FIRMA-sized MLP until ``fo_ri_fedavg`` is registered
  dirichlet    (5) Dirichlet alpha=0.1, very unequal client sizes (2NN MLP)

The CPU campaign's own workloads (:mod:`fedfrac_lab.bench.campaign`; not in the
default list) time fedfrac and PyTorch per CPU-second and write their own section
of ``--out`` (kept by the other runs) and the ``campaign`` key of ``--json``:

  firma_fmnist    FIRMA FibFL, 784-input MLP, N=10 x 6,000, B=64, Adam, E_h=1 + E_e
  cnn_mnist_real  FOFedAvg's CNNMnist on 28x28, 10 clients x 6,000, C=0.2, B=50
  kuramoto_cnn    Kuramoto-FedAvg's CNN4 on 28x28, 2 clients x 6,000, B=64

``--epochs`` sets their local epochs (FIRMA: E_e; default the protocol's: 20, 20,
2), ``--clients`` / ``--per-client`` their sizes (for quick checks).

Each workload builds a Simulation exactly as ``ff.run`` does, compiles one round
ahead of time (compile seconds reported separately) and times whole compiled
rounds: the median of ``--repeats`` rounds after one warm-up round. With
``--vs-torch`` the PyTorch reference rounds (``benchmarks/torch_reference.py``:
sequential and batched, on CUDA when PyTorch sees a GPU;
:mod:`fedfrac_lab.bench.torch_side`) are interleaved with the JAX rounds of
workloads (1), (2) at 1,000 clients and the FIRMA-sized MLP (A, B, A, B, ...),
so all see the same machine load.

Extra studies (skipped with ``--only-table``): masked work on (5) before and
after step bucketing, 5 seeds vmapped vs 1 seed on (3), and 1,000 CNNMnist
clients with persistent per-client state (bytes per client).

XLA flags must be set before JAX initialises: pass them in the environment,
e.g. ``XLA_FLAGS=--xla_force_host_platform_device_count=2 fedfrac-bench``;
the flags in effect are recorded in the results file.

This module is the command and its report (``benchmarks/results.md``); the
pieces it runs are modules of their own, and every name stays importable from
here: :mod:`fedfrac_lab.bench.workloads` (the workloads and their data),
:mod:`fedfrac_lab.bench.timing` (one compiled round timed, FLOPs, memory, machine),
:mod:`fedfrac_lab.bench.studies` (the extra studies) and
:mod:`fedfrac_lab.bench.table_rows` (table rows shared with the accelerator section).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from fedfrac_lab.bench import campaign, campaign_report
from fedfrac_lab.bench.studies import (  # noqa: F401  (re-exported)
    diagnostics_study, masked_work_study, memory_study, persistent_state_algorithm, seeds_study)
from fedfrac_lab.bench.table_rows import (  # noqa: F401  (re-exported)
    mb, ratio, args_repeats, torch_section)
from fedfrac_lab.bench.timing import (  # noqa: F401  (re-exported)
    bench_workload, build, device_peak_mb, machine_description, matmul_peak_gflops,
    memory_of, rss_mb, step_flops, time_rounds, torch_rounds_for)
from fedfrac_lab.bench.workloads import (  # noqa: F401
    cnn_config, cnn_workload, digits_clients, dirichlet_data, dirichlet_workload,
    firma_mlp_fedavg_config, firma_mlp_workload, firma_workload, fori_workload, load_config_module,
    only_method, SUBSTITUTE, synthetic_images, Workload, workloads)
from fedfrac.config_base import base_config  # noqa: F401


def write_markdown(path, command, machine, loads, results, masked=None, seeds=None,
                   memory=None, diagnostics=None):
  L = ["# fedfrac benchmarks", "",
       "Produced by `fedfrac-bench` in one run; do not edit by hand.", "",
       f"Command: `{command}`", "",
       "Machine: " + ", ".join(f"{k}={v}" for k, v in machine.items() if v != ""), "",
       f"Load average (1/5/15 min) at start: {loads[0]}; at end: {loads[1]} "
       f"(the machine has {os.cpu_count()} cores; other jobs may share it).", "",
       f"Measured matmul peak (f32 2048x2048, best of 10): **{results[0]['peak_gflops']:.0f}"
       " GFLOP/s**." if results else "", "",
       "## Workloads", "",
       "Times are medians over the timed rounds after a warm-up round; compile time is "
       "separate. GFLOP/s = the matrix products and convolutions of one local step, "
       "counted from the layer shapes (fedfrac_lab.bench.flops), x active steps / "
       "round time. Masked = fraction of executed local steps that were masked (padding "
       "of unequal clients). Memory = compiled round program: arguments + outputs + "
       "temporaries.", "",
       "| workload | parallelism | compile s | round s | rounds/s | client-steps/s | "
       "samples/s | GFLOP/s (% peak) | masked | memory MB | state bytes/client |",
       "|---|---|---|---|---|---|---|---|---|---|---|"]
  for r in results:
    mem = r["memory"]
    mem_s = mb(mem["args"] + mem["out"] + mem["temp"]) if mem else "n/a"
    par = r["parallelism"] + (f", {r['step_buckets']} buckets"
                              if r["parallelism"] == "vmap" and r["step_buckets"] > 1 else "")
    if r["shards"] > 1:
      par += f", {r['shards']} shards"
    L.append(
        f"| {r['description']} | {par} | {r['compile_s']:.1f} | {r['round_s']:.3f} | "
        f"{r['rounds_per_s']:.2f} | {r['client_steps_per_s']:.0f} | "
        f"{r['samples_per_s']:.0f} | {r['gflops']:.1f} "
        f"({100 * r['gflops'] / r['peak_gflops']:.0f}%) | "
        f"{r['masked_step_fraction']:.1%} | {mem_s} | {r['client_state_bytes']:.0f} |")
  if any(r["workload"] == "fori" for r in results):
    L += ["", "GFLOP/s of (4) counts the local training steps only, not the roughness "
          "probe's M·(m+1) loss evaluations per probed client, which take most of its "
          "round; it is not a measure of the machine's use there."]
  notes = [r["note"] for r in results if r.get("note")]
  for n in dict.fromkeys(notes):
    L += ["", f"Note: {n}."]
  torch_rows = [r for r in results if "torch_round_s" in r]
  if torch_rows:
    L += [""] + torch_section(torch_rows)
  if masked:
    L += ["", "## Masked work with very unequal client sizes (workload 5)", "",
          "| variant | step buckets | round s | masked steps |", "|---|---|---|---|"]
    for r in masked:
      L.append(f"| {r['variant']} | {r['step_buckets']} | {r['round_s']:.3f} | "
               f"{r['masked_step_fraction']:.1%} |")
  if diagnostics:
    d = diagnostics
    L += ["", "## Roughness probe and diagnostics share (workload 4's setting)", "",
          "FO-RI-FedAvg on the synthetic BEV fleet (10 vehicles, C = 0.5, paper probe "
          f"M 10, m 100, B_probe 128); median s/round over {args_repeats(d)} "
          f"interleaved chunks of {d['rounds_per_chunk']} rounds.", "",
          "| variant | ms/round | all chunks (ms/round) |", "|---|---|---|"]
    for label, med, ts in d["rows"]:
      L.append(f"| {label} | {med * 1e3:.1f} | " + ", ".join(f"{t * 1e3:.1f}" for t in ts)
               + " |")
    L += ["", f"Share of the round in roughness probes: **{d['probe_share_r1']:.0%} at "
          f"R_probe = 1, {d['probe_share_r5']:.0%} at R_probe = 5** (amortised: a client "
          f"probes on every R_probe-th participation); R_probe 1 rounds take "
          f"{d['probe1_vs_probe5']:.1f}x the R_probe 5 ones. Share in the per-round "
          f"drift/roughness diagnostics: **{d['diagnostics_share']:.1%}** (round time with "
          f"them on vs off: {d['diagnostics_on_vs_off']:+.1%}; a negative value is "
          f"timing noise)."]
  if seeds:
    L += ["", "## Seeds vmapped as one program (workload 3)", "",
          f"{seeds['workload']}: one seed {seeds['one_seed_round_s']:.3f} s/round, "
          f"{seeds['seeds']} seeds vmapped {seeds['many_seeds_round_s']:.3f} s/round "
          f"= **{seeds['ratio']:.2f}x** the time of one seed (compile "
          f"{seeds['compile_one_s']:.1f} s vs {seeds['compile_many_s']:.1f} s)."
          + (f" Note: {seeds['note']}." if seeds.get("note") else ""),
          "",
          f"Client steps per second: one seed {seeds['one_seed_steps_per_s']:.0f}, "
          f"{seeds['seeds']} seeds vmapped {seeds['many_seeds_steps_per_s']:.0f}. "
          "Vmapping seeds pays when one run leaves the device idle (small models, few "
          "clients, accelerators); here one FIBFL++ run already keeps both CPU cores "
          "busy with its matrix products, so 5 seeds are close to 5x the work at the "
          "same or lower throughput."]
  if memory:
    m = memory
    mem = m["memory"]
    L += ["", "## Memory: 1,000 CNNMnist clients with per-client persistent state", "",
          f"Algorithm: {m['algorithm']}; {m['clients']} clients, {m['cohort']} per round.",
          "",
          f"- model parameters: {m['params_bytes']} bytes",
          f"- persistent client state: {m['client_state_bytes_total'] / 2 ** 20:.1f} MB = "
          f"**{m['bytes_per_client']:.0f} bytes per client**",
          f"- data on device (uint8 images, labels, index table): {mb(m['data_bytes'])} MB",
          f"- compiled round: arguments {mb(mem.get('args', 0))} MB, outputs "
          f"{mb(mem.get('out', 0))} MB, temporaries {mb(mem.get('temp', 0))} MB",
          f"- process peak RSS so far: {m['rss_mb']:.0f} MB",
          f"- round time {m['round_s']:.2f} s (compile {m['compile_s']:.1f} s)"]
  L += ["", "Sharding over devices and multi-host runs: see `docs/scaling.md`.", ""]
  os.makedirs(os.path.dirname(path), exist_ok=True)
  text = "\n".join(L)
  from fedfrac_lab.bench import accelerator
  from fedfrac_lab.bench import sweep as sweep_bench
  if os.path.exists(path):   # keep the sections ``fedfrac-bench sweep`` and
    with open(path) as f:    # ``fedfrac-campaign collect`` write
      old = f.read()
    for start, end in ((sweep_bench.START, sweep_bench.END),
                       (accelerator.START, accelerator.END),
                       (campaign_report.START, campaign_report.END)):
      if start in old and end in old:
        text += "\n" + old[old.index(start):old.index(end) + len(end)] + "\n"
  with open(path, "w") as f:
    f.write(text)


def main(argv=None):
  all_workloads = workloads()
  parser = argparse.ArgumentParser(prog="fedfrac-bench", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--workloads", default=",".join(all_workloads))
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--vs-torch", action="store_true",
                      help="interleave PyTorch rounds (sequential and batched, on the "
                      "GPU when PyTorch sees one) for cnn10, cnn1000 and firma_mlp")
  parser.add_argument("--only-table", action="store_true",
                      help="skip the masked-work, seeds and memory studies")
  parser.add_argument("--parallelism", default=None, help="vmap | map (default: auto)")
  parser.add_argument("--shard-clients", action="store_true")
  parser.add_argument("--epochs", type=int, default=None,
                      help="local epochs of the campaign workloads (FIRMA: E_e)")
  parser.add_argument("--clients", type=int, default=None,
                      help="clients of the campaign workloads (default: theirs)")
  parser.add_argument("--per-client", type=int, default=None,
                      help="samples per client of the campaign workloads")
  parser.add_argument("--out", default=os.path.join("benchmarks", "results.md"))
  parser.add_argument("--json", default=None, help="also write all figures as JSON")
  argv = sys.argv[1:] if argv is None else list(argv)
  args = parser.parse_args(argv)
  names = [n for n in args.workloads.split(",") if n]
  known = list(all_workloads) + list(campaign.WORKLOADS)
  for n in names:
    if n not in known:
      parser.error(f"--workloads: unknown {n!r}; known: {', '.join(known)}")
  for flag in ("epochs", "clients", "per_client"):
    value = getattr(args, flag)
    if value is not None and value < (2 if flag == "clients" else 1):
      parser.error(f"--{flag.replace('_', '-')}={value}: must be an integer >= "
                   f"{2 if flag == 'clients' else 1}")
  campaign_names = [n for n in names if n in campaign.WORKLOADS]
  names = [n for n in names if n not in campaign.WORKLOADS]
  sized = [f for f in ("epochs", "clients", "per_client") if getattr(args, f) is not None]
  if sized and not campaign_names:
    parser.error(f"--{sized[0].replace('_', '-')}: sizes only the campaign workloads "
                 f"({', '.join(campaign.WORKLOADS)}), and --workloads names none")
  if campaign_names and args.vs_torch:
    from fedfrac_lab.bench import torch_side
    if not torch_side.torch_available():
      parser.error("--vs-torch: PyTorch is not installed here (import torch failed)")
  overrides = {}
  if args.parallelism:
    overrides["client_parallelism"] = args.parallelism
  if args.shard_clients:
    overrides["shard_clients"] = True
  load_start = os.getloadavg()
  machine = machine_description()
  peak = matmul_peak_gflops() if names else None
  print(json.dumps({"machine": machine, "load": load_start, "peak_gflops": peak}),
        flush=True)
  command = ("fedfrac-bench " + " ".join(argv)).strip()
  if machine["XLA_FLAGS"]:
    command = f"XLA_FLAGS={machine['XLA_FLAGS']} {command}"
  campaign_figures = None
  if campaign_names:
    campaign_figures = run_campaign(campaign_names, args, machine, command)
  if not names:
    if args.json:
      campaign_report.update_json(args.json, campaign_figures)
    print(f"wrote {args.out}")
    return
  results = []
  for n in names:
    r = bench_workload(all_workloads[n], args.repeats, args.vs_torch, overrides, peak)
    print(json.dumps(r), flush=True)
    results.append(r)
  masked = seeds = memory = diagnostics = None
  if not args.only_table:
    diagnostics = diagnostics_study(args.repeats)
    print(json.dumps({k: v for k, v in diagnostics.items() if k != "rows"}), flush=True)
    masked = masked_work_study(args.repeats)
    seeds = seeds_study(args.repeats)
    print(json.dumps(seeds), flush=True)
    memory = memory_study(max(2, args.repeats // 2))
    print(json.dumps(memory), flush=True)
  load_end = os.getloadavg()
  loads = tuple(", ".join(f"{x:.2f}" for x in l) for l in (load_start, load_end))
  write_markdown(args.out, command, machine, loads, results, masked, seeds, memory,
                 diagnostics)
  if args.json:
    campaign_figures = campaign_report.kept(args.json, campaign_figures)
    with open(args.json, "w") as f:
      json.dump({"machine": machine, "loads": loads, "results": results, "masked": masked,
                 "diagnostics": diagnostics,
                 "seeds": seeds, "memory": memory, "campaign": campaign_figures}, f,
                indent=1, default=str)
  print(f"wrote {args.out}")


def run_campaign(names, args, machine, command) -> dict:
  """The campaign workloads ``names`` (:mod:`fedfrac_lab.bench.campaign`) with the
  measured matmul peak; writes their section of ``args.out`` and returns the
  figures for the results JSON."""
  load_start = os.getloadavg()
  if hasattr(os, "sched_getaffinity"):
    machine = dict(machine, cores_used=len(os.sched_getaffinity(0)))
  peaks = campaign_report.matmul_peaks(with_torch=args.vs_torch)
  print(json.dumps({"matmul_peaks": peaks}), flush=True)
  results = []
  for n in names:
    r = campaign.bench_campaign(n, args.repeats, args.vs_torch, args.epochs, args.clients,
                                args.per_client, peaks["peak_per_core"])
    print(json.dumps(r), flush=True)
    results.append(r)
  loads = tuple(", ".join(f"{x:.2f}" for x in l) for l in (load_start, os.getloadavg()))
  campaign_report.update_section(
      args.out, campaign_report.section(command, machine, loads, peaks, results))
  return {"command": command, "machine": machine, "loads": loads, "peaks": peaks,
          "results": results}


if __name__ == "__main__":
  main()
