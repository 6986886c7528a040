"""Cells and rows shared by the tables of ``benchmarks/results.md``
(:mod:`fedfrac_lab.bench.rounds`) and its accelerator section
(:mod:`fedfrac_lab.bench.accelerator`): the PyTorch comparison, MB and ratios.
"""
from __future__ import annotations





def mb(b):
  return f"{b / 2 ** 20:.1f}"


def ratio(x):
  return f"{x:.2f}x faster" if x >= 1 else f"{1 / x:.2f}x slower"


def args_repeats(d):
  return len(d["rows"][0][2])


def torch_section(torch_rows) -> list:
  """Markdown lines: fedfrac against the PyTorch rounds interleaved with it."""
  L = ["## Against PyTorch (same process, rounds interleaved)", "",
       "PyTorch: `benchmarks/torch_reference.py` on the device it sees. Sequential: a "
       "plain FedAvg loop (one client after another, fresh model copy per client, same "
       "model, batch size, epochs and optimizer), `torch.set_num_threads` = cores; on a "
       "CPU also on 1 thread, as a check against thread oversubscription on a loaded "
       "machine. Batched: the round's clients at once (`torch.func.vmap` of `grad` of "
       "`functional_call`, the optimizer on parameter stacks). Each timed fedfrac round "
       "is followed by one PyTorch round of each kind.", "",
       "| workload | PyTorch device | fedfrac round s | sequential PyTorch round s "
       "(threads) | fedfrac vs sequential | batched PyTorch round s | fedfrac vs batched "
       "| PyTorch 1 thread round s | vs 1 thread |", "|---|---|---|---|---|---|---|---|---|"]
  for r in torch_rows:
    one = (f"{r['torch1_round_s']:.3f} | {ratio(r['speedup_vs_torch1'])}"
           if "torch1_round_s" in r else "– | –")
    batched = (f"{r['torch_batched_round_s']:.3f} | "
               f"**{ratio(r['speedup_vs_torch_batched'])}**"
               if "torch_batched_round_s" in r else "– | –")
    L.append(f"| {r['description']} | {r.get('torch_device', 'cpu')} | "
             f"{r['round_s']:.3f} | {r['torch_round_s']:.3f} ({r['torch_threads']}) | "
             f"**{ratio(r['speedup_vs_torch'])}** | {batched} | {one} |")
  L += ["", "All timed rounds (s):", ""]
  for r in torch_rows:
    extra = "".join(f"; PyTorch {label} " + ", ".join(f"{t:.3f}" for t in r[key])
                    for key, label in (("torch_batched_round_times", "batched"),
                                       ("torch1_round_times", "1 thread")) if key in r)
    L.append(f"- {r['workload']}: fedfrac "
             f"{', '.join(f'{t:.3f}' for t in r['round_times'])}; PyTorch sequential "
             f"{', '.join(f'{t:.3f}' for t in r['torch_round_times'])}{extra}")
  return L
