"""The CPU campaign's plan (benchmarks/cpu/plan.tsv) and its runner
(scripts/cpu_campaign.sh): every cell names a config and method that exist, with
flags its command accepts, and the runner starts the command each kind of cell
needs."""
from __future__ import annotations

import os
import pathlib
import shlex
import subprocess

import pytest

from fedfrac import config_files, config_keys
from fedfrac_lab.reproduce import PAPERS, firma_tables, firma_variants

ROOT = pathlib.Path(__file__).resolve().parents[3]
PLAN = ROOT / "benchmarks" / "cpu" / "plan.tsv"


def cells():
  rows = [line.split("\t") for line in PLAN.read_text().splitlines()
          if line and not line.startswith("#")]
  return [row + [""] * (7 - len(row)) for row in rows]


def test_every_cell_has_its_columns_and_an_estimate():
  rows = cells()
  assert rows and all(len(r) == 7 for r in rows)
  for config, arg, method, table, est, cost, _ in rows:
    assert config and arg and method and table, (config, arg, method)
    assert float(est) > 0
    assert cost == "-" or cost == "" or cost.split()[0].replace(".", "").isdigit(), cost
  workdirs = [(r[1].replace(",", "_"), r[2]) for r in rows]
  assert len(workdirs) == len(set(workdirs)), "two cells would share a workdir"


@pytest.mark.parametrize("spec", sorted({(r[0], r[1]) for r in cells()
                                         if not r[0].startswith("reproduce:")}))
def test_config_cells_name_methods_and_keys_of_their_config(spec):
  config_path, arg = spec
  config = config_files.load_config_file(str(ROOT / config_path), arg)
  for c, a, method, *_, flags in cells():
    if (c, a) != spec:
      continue
    assert method in config.methods, (arg, method)
    for flag in shlex.split(flags):
      key = flag.split("=", 1)[0]
      assert key.startswith("--config."), flag
      config_keys.check_override_key(config, key[len("--config."):])


def test_reproduce_cells_name_a_paper_and_values_it_allows():
  allowed = {"scenarios": firma_tables.SCENARIOS, "methods": firma_tables.METHODS,
             "modes": firma_tables.MODES, "init": firma_variants.INITS,
             "dataset": ("mnist", "fashion_mnist"), "inputs": ("authors", "unit")}
  n = 0
  for config, arg, method, *_, flags in cells():
    if not config.startswith("reproduce:"):
      continue
    n += 1
    assert config.split(":", 1)[1] in PAPERS
    opts = dict(f[2:].split("=", 1) for f in shlex.split(flags))
    assert "dir" not in opts and "json" not in opts, "the runner gives --dir and --json"
    for key, values in allowed.items():
      for v in opts.get(key, "").split(",") if key in opts else ():
        assert v in values, (arg, method, key, v)
  assert n > 0


def test_the_runner_starts_each_kind_of_cell(tmp_path):
  """With an interpreter that only echoes its arguments, the runner starts every
  cell of one core's share: fedfrac.main with the config, method and data of a
  config cell, fedfrac-reproduce with --dir and --json of a reproduce cell."""
  fake = tmp_path / "python"
  fake.write_text("#!/bin/sh\necho \"$@\"\n")
  fake.chmod(0o755)
  root, data = tmp_path / "runs", tmp_path / "data"
  out = subprocess.run(["bash", str(ROOT / "scripts" / "cpu_campaign.sh"), "0", "1",
                        str(root), str(data)], env={**os.environ, "PYTHON": str(fake)},
                       capture_output=True, text=True, timeout=120)
  assert out.returncode == 0, out.stderr
  rows = cells()
  assert out.stdout.count(" start ") == len(rows)
  assert out.stdout.count(" rc=0 ") == len(rows)
  config_cell = next(r for r in rows if not r[0].startswith("reproduce:"))
  log = (root / config_cell[1].replace(",", "_") / f"{config_cell[2]}.log").read_text()
  assert log.startswith("-m fedfrac.main") and f"--config.only={config_cell[2]}" in log
  assert f"--config.data.dir={data}/mnist" in log
  firma_cell = next(r for r in rows if "--dataset=fashion_mnist" in r[6])
  log = (root / firma_cell[1] / f"{firma_cell[2]}.log").read_text()
  assert log.startswith("-m fedfrac_lab.reproduce firma_files")
  assert f"--dir={data}/fashion-mnist" in log
  assert f"--json={root}/{firma_cell[1]}/{firma_cell[2]}.json" in log
  # Started again, a config cell that ended with rc 0 is not started by the same
  # command (no run, said "(done before)"); a changed command starts it again.
  done = [r for r in rows if not r[0].startswith("reproduce:")]
  (root / config_cell[1].replace(",", "_") / f"{config_cell[2]}.log").unlink()
  again = subprocess.run(["bash", str(ROOT / "scripts" / "cpu_campaign.sh"), "0", "1",
                          str(root), str(data)], env={**os.environ, "PYTHON": str(fake)},
                         capture_output=True, text=True, timeout=120)
  assert again.returncode == 0, again.stderr
  assert again.stdout.count("(done before)") == len(done)
  assert not (root / config_cell[1].replace(",", "_") / f"{config_cell[2]}.log").exists()
  other = subprocess.run(["bash", str(ROOT / "scripts" / "cpu_campaign.sh"), "0", "1",
                          str(root), str(tmp_path / "other")],
                         env={**os.environ, "PYTHON": str(fake)},
                         capture_output=True, text=True, timeout=120)
  assert other.stdout.count("(done before)") == 0
