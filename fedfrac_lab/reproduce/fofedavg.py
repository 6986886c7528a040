"""The fractional-order family on the offline digits stand-in: FOFedAvg
(fofedavg paper: α grid and δ), FO-/RI-/FO-RI-FedAvg (fo_ri_fedavg paper: λ and
τ_I grids, roughness-drift diagnostics), next to FedAvg.

  fedfrac-reproduce fofedavg                      # all four tables under results/
  fedfrac-reproduce fofedavg --tables=delta --out_dir=/tmp/frac   # one of them

Each table is one ``fedfrac-sweep`` over configs/fofedavg/digits.py (``SWEEPS``
holds its exact flags; the table quotes that command), so any one of them can
be re-run on its own with those flags. From a notebook:
``points = ff.reproduce.fofedavg.run("delta")`` and
``print(ff.reproduce.fofedavg.table(points, "delta"))``.

Beside each table ``X.md`` the sweep writes ``X.png``, and this command also
``X_<option>.png``: the final accuracy vs the swept option (α, δ, λ or τ_I) per
method, error bars the sample std over seeds, methods without the option drawn
flat for reference (:func:`figure`).
"""
from __future__ import annotations

import argparse
import os
import sys

from fedfrac import sweep
from fedfrac_lab.reproduce import common
from fedfrac.runner import plots

CONFIG = "configs/fofedavg/digits.py"
# Tables whose sweep uses another config than CONFIG.
CONFIGS = {"methods": "configs/fofedavg/digits_methods.py"}

# The grid: table name -> (output file, sweep flags after --config, --out).
SWEEPS = {
    "alpha": ("fractional_digits.md", [
        "--grid=alpha=0.5,0.6,0.8,0.97,1.0", "--grid_methods=fofedavg,fofedavg_round",
        "--metrics=accuracy,server/drift_mean,server/drift_cv",
        "--title=Fractional-order methods on digits (offline stand-in)"]),
    # FOFedAvg Table IV's α range (with the α > 1 heuristic) and the mean
    # fractional factor s = (‖Δw‖+δ)^(1−α)/Γ(2−α): the effective step is μ_t · s.
    "alpha_factor": ("fofedavg_alpha_digits.md", [
        "--set=only=fedavg,fofedavg", "--set=methods.fofedavg.allow_heuristic_alpha=True",
        "--grid=alpha=0.5,0.8,0.97,1.0,1.2,1.5", "--grid_methods=fofedavg",
        "--metrics=accuracy,mean:train_fractional_factor,train_fractional_factor,"
        "mean:train_update_norm",
        "--title=FOFedAvg alpha grid with the mean fractional factor on digits "
        "(offline stand-in for MNIST)"]),
    "delta": ("fractional_digits_delta.md", [
        "--set=only=fofedavg", "--set=methods.fofedavg.alpha=0.8",
        "--grid=delta=1e-06,1e-05,0.0001,0.001,0.01",
        "--metrics=accuracy,server/drift_mean",
        "--title=FOFedAvg (alpha 0.8) delta grid on digits"]),
    "lambda": ("fractional_digits_lambda.md", [
        "--set=only=fedavg,ri_fedavg", "--grid=lam=0.1,1.0,10.0",
        "--grid_methods=ri_fedavg",
        "--metrics=accuracy,server/drift_mean,mean:train_prox_coef,"
        "mean:server/spearman_roughness_drift",
        "--title=RI-FedAvg proximal strength grid on digits"]),
    "roughness": ("fractional_digits_roughness.md", [
        "--set=only=fo_fedavg,ri_fedavg,fo_ri_fedavg", "--set=methods.fo_fedavg.probe=on",
        "--grid=tau_i=1.0,0.01,0.0001", "--grid_methods=ri_fedavg,fo_ri_fedavg",
        "--metrics=accuracy,mean:server/roughness_mean,mean:server/pearson_roughness_drift,"
        "mean:server/spearman_roughness_drift,mean:server/drift_tertile_low,"
        "mean:server/drift_tertile_high,mean:train_prox_coef",
        "--title=Roughness-informed variants on digits: tau_I grid and roughness-drift "
        "diagnostics"]),
    # FOFedAvg Tables II–VI's eleven methods (FOFedAvg, MOON, FedAdam, FedNova,
    # FedAvg, FedProx, SCAFFOLD, SparseSecAgg, DPSGD, FedBM, FDSE), defaults.
    "methods": ("fofedavg_methods_digits.md", [
        "--metrics=accuracy",
        "--title=FOFedAvg and the paper's ten baselines on digits (offline stand-in "
        "for MNIST)"]),
}


# The α-factor table on real MNIST from local files (an accelerator run: CNNMnist,
# 100 clients, C = 0.2, 100 rounds; REPRODUCTION.md gives its time estimate).
MNIST_ALPHA_FACTOR = [
    "--config=configs/fofedavg/mnist_cnn.py", "--set=data.source=files",
    "--set=data.dir=DIR/mnist.pkl.gz", "--set=only=fedavg,fofedavg",
    "--set=methods.fofedavg.allow_heuristic_alpha=True", "--set=checkpoint_every=0",
    "--grid=alpha=0.5,0.8,0.97,1.0,1.2,1.5", "--grid_methods=fofedavg",
    "--metrics=accuracy,mean:train_fractional_factor,train_fractional_factor",
    "--title=FOFedAvg alpha grid with the mean fractional factor on MNIST (CNNMnist)",
    "--out=results/fofedavg_alpha_mnist.md"]


def sweep_flags(name, out_dir="results"):
  """The full ``fedfrac-sweep`` flags of table ``name`` writing into ``out_dir``."""
  if name not in SWEEPS:
    raise ValueError(f"table={name!r}: unknown; allowed: {', '.join(SWEEPS)}")
  filename, flags = SWEEPS[name]
  out = os.path.join(out_dir, filename) if out_dir else ""
  return [f"--config={CONFIGS.get(name, CONFIG)}"] + flags + ([f"--out={out}"] if out else [])


def run(name, out_dir=""):
  """[(point, summary)] of table ``name`` (``fedfrac.sweep.main`` with its flags;
  with ``out_dir`` the markdown and JSON are written there too)."""
  flags = sweep_flags(name, out_dir)
  flags[0] = f"--config={common.find_file(CONFIGS.get(name, CONFIG))}"
  return sweep.main(flags)


def table(points, name):
  """Markdown table of ``points`` (from ``run(name)``)."""
  flags = sweep_flags(name, "")
  title = next(f.split("=", 1)[1] for f in flags if f.startswith("--title="))
  metrics = next(f.split("=", 1)[1] for f in flags if f.startswith("--metrics="))
  return sweep.markdown(points, [], metrics.split(","), title, sweep.command_line(flags),
                        [])


# Grid option -> its symbol on the figures' x axis.
SYMBOLS = {"alpha": "α", "delta": "δ", "lam": "λ", "tau_i": "τ_I"}


def grid_option(name):
  """The option table ``name`` sweeps (its ``--grid=<option>=...`` flag), or None
  for a table without a grid (e.g. ``methods``: one point per method)."""
  grid = next((f for f in SWEEPS[name][1] if f.startswith("--grid=")), None)
  return None if grid is None else grid[len("--grid="):].split("=", 1)[0]


def figure(points, name, path, metric="accuracy"):
  """Final ``metric`` vs the grid option of table ``name`` from its sweep
  ``points`` ([(config point, {run label: {metric: seed_stats}})], as ``run`` or
  ``fedfrac.sweep.main`` return them), written to ``path``: one line per method
  (mean ± sample std over seeds, as in the table); a method run without the
  option (e.g. FedAvg) is drawn flat across the grid."""
  option = grid_option(name)
  swept, flat = {}, {}
  for point, summary in points:
    suffix = "".join(f", {k}={v}" for k, v in point.items())
    for label, entry in summary.items():
      parsed = common.split_grid_label(label)
      if parsed is not None and parsed[1] == option:
        swept.setdefault(parsed[0] + suffix, []).append((parsed[2], entry[metric]))
      else:
        flat[f"{label}{suffix} (no {option})"] = entry[metric]
  xs = sorted({x for pts in swept.values() for x, _ in pts})
  lines = dict(swept)
  for label, stats in flat.items():
    lines[label] = [(x, stats) for x in xs]
  symbol = SYMBOLS.get(option, option)
  title = next(f.split("=", 1)[1] for f in SWEEPS[name][1] if f.startswith("--title="))
  return plots.sweep_figure(lines, xlabel=symbol, ylabel=f"final {metric}",
                            title=f"{title}: final {metric} vs {symbol}",
                            log_x=common.wide_range(xs), path=path)


def main(argv=None):
  p = argparse.ArgumentParser(prog="fedfrac-reproduce fofedavg",
                              description=__doc__.split("\n\n")[0])
  p.add_argument("--tables", default=",".join(SWEEPS),
                 help=f"comma-separated, from: {', '.join(SWEEPS)}")
  p.add_argument("--out_dir", default="results")
  args = p.parse_args(sys.argv[1:] if argv is None else argv)
  for name in [t for t in args.tables.split(",") if t]:
    if name not in SWEEPS:
      p.error(f"--tables: unknown table {name!r}; allowed: {', '.join(SWEEPS)}")
    points = sweep.main(sweep_flags(name, args.out_dir))
    # The sweep draws its own accuracy-per-round figure; tables with a grid also
    # get final accuracy against the swept option.
    if args.out_dir and grid_option(name) is not None:
      path = common.figure_path(os.path.join(args.out_dir, SWEEPS[name][0]),
                                grid_option(name))
      figure(points, name, path)
      print(f"wrote {path}")
