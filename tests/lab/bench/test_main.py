"""fedfrac_lab.bench: the ``fedfrac-bench`` command dispatches to the round and the
fractional benchmarks and rejects an unknown workload before timing anything."""
from __future__ import annotations

import pytest

from fedfrac_lab.bench import __main__ as bench_cli
from fedfrac_lab.bench import rounds


def test_fractional_subcommand_reaches_its_own_flags(capsys):
  with pytest.raises(SystemExit) as exit_info:
    bench_cli.main(["fractional", "--help"])
  assert exit_info.value.code == 0
  out = capsys.readouterr().out
  assert "usage: fedfrac-bench fractional" in out and "--paper_probe" in out


def test_round_benchmark_rejects_an_unknown_workload(capsys):
  assert {"cnn10", "firma", "dirichlet"} <= set(rounds.workloads())
  with pytest.raises(SystemExit) as exit_info:
    bench_cli.main(["--workloads=cnn10,nope"])
  assert exit_info.value.code == 2
  assert "unknown 'nope'" in capsys.readouterr().err


def test_sweep_subcommand_reaches_its_own_flags(capsys):
  with pytest.raises(SystemExit) as exit_info:
    bench_cli.main(["sweep", "--help"])
  assert exit_info.value.code == 0
  out = capsys.readouterr().out
  assert "usage: fedfrac-bench sweep" in out and "--parallel" in out


def test_sweep_bench_runs_one_main_per_point_and_keeps_its_section(tmp_path):
  from fedfrac_lab.bench import sweep as sweep_bench
  axes = [("client.lr", [0.05, 0.2]), ("model.hidden", [(8,), (16, 8)])]
  commands = sweep_bench.per_point_commands("python", "c.py", ["rounds=2"], axes, [0, 1],
                                            str(tmp_path))
  assert len(commands) == 8 and len({c[3] for c in commands}) == 8
  point, seed, argv, _ = commands[-1]
  assert point == {"client.lr": 0.2, "model.hidden": (16, 8)} and seed == 1
  assert argv[1:3] == ["-m", "fedfrac.main"]
  assert {"--config.seeds=(1,)", "--config.rounds=2", "--config.client.lr=0.2",
          "--config.model.hidden=(16, 8)"} <= set(argv)
  assert sweep_bench.parse_axis("model.hidden=(8,);(16,8)") == (
      "model.hidden", [(8,), (16, 8)])
  # The section replaces itself and survives the round benchmark's rewrite.
  results = tmp_path / "results.md"
  results.write_text("# fedfrac benchmarks\n\nold table\n")
  sweep_bench.write_section(str(results), "## Sweep throughput\n\nfirst\n")
  sweep_bench.write_section(str(results), "## Sweep throughput\n\nsecond\n")
  text = results.read_text()
  assert "old table" in text and "second" in text and "first" not in text
  assert text.count(sweep_bench.START) == 1
  from fedfrac_lab.bench import accelerator
  with open(results, "a") as f:     # the block fedfrac-campaign collect writes
    f.write(f"\n{accelerator.START}\n## Accelerator measurements\n{accelerator.END}\n")
  rounds.write_markdown(str(results), "fedfrac-bench", {"cpu": "x"}, ("0", "0"), [])
  text = results.read_text()
  assert "old table" not in text and "second" in text and text.count(sweep_bench.END) == 1
  assert text.count("## Accelerator measurements") == 1
