"""The campaign workloads of ``fedfrac-bench --vs-torch`` at tiny sizes: both sides
run end to end and give every figure the table needs, the client-steps counted
are the steps run (fedfrac's ``client_steps`` metric, the PyTorch loops' count and
the protocol's formula agree), the FLOP count is the layer-shape count by hand,
batched PyTorch FibFL trains as the sequential one, the matmul peak is measured,
and the section renders, survives the other runs and reaches the JSON."""
from __future__ import annotations

import json
import math

import pytest

from fedfrac_lab.bench import campaign, campaign_report, rounds, torch_side

TINY = dict(clients=2, per_client=128, epochs=1)
FIELDS = ("round_s", "cpu_s", "client_steps", "cpu_s_per_step", "gflops",
          "gflop_per_cpu_s", "peak_share", "ratio_per_cpu_s")


def _expected_steps(name, cohort, per_client, epochs):
  w = campaign.WORKLOADS[name]
  per_epoch = math.ceil(per_client / w.batch_size)
  return cohort * per_epoch * ((1 + epochs) if name == "firma_fmnist" else epochs)


@pytest.fixture(scope="module")
def tiny_rows():
  pytest.importorskip("torch")
  # FIRMA's seeds forms only (each extra form is another FibFL compile).
  return {name: campaign.bench_campaign(name, repeats=1, peak_per_core=100.0,
                                        firma_forms=("seeds",), **TINY)
          for name in ("firma_fmnist", "kuramoto_cnn")}


@pytest.mark.parametrize("name", ["firma_fmnist", "kuramoto_cnn"])
def test_both_sides_run_and_count_the_steps_they_ran(tiny_rows, name):
  r = tiny_rows[name]
  sides = [s["side"] for s in r["sides"]]
  if name == "firma_fmnist":
    assert sides == ["fedfrac, 1 seed, clients map",
                     f"fedfrac, {campaign.SEEDS} seeds mapped, clients map",
                     f"fedfrac, {campaign.SEEDS} seeds vmapped, clients map",
                     "sequential", "batched (torch.func)"]
  else:
    assert sides[1:] == ["sequential"] and sides[0].startswith("fedfrac, 1 seed")
  steps = _expected_steps(name, r["cohort"], TINY["per_client"], TINY["epochs"])
  assert r["cohort"] == 2 and steps == (8 if name == "firma_fmnist" else 4)
  for side in r["sides"]:
    runs = campaign.SEEDS if " seeds " in side["side"] else 1
    assert side["client_steps"] == runs * steps, side["side"]
    if side["side"].startswith("fedfrac"):
      assert side["torch_sequential_over_this"] > 0
    for key in FIELDS:
      assert math.isfinite(side[key]) and side[key] > 0, (side["side"], key)
    assert side["threads"] >= 1 and len(side["round_times"]) == len(side["cpu_times"]) == 1
  assert r["round_gflop"] > 0 and r["compile_s"] > 0 and r["epochs"] == 1
  assert "2 x 128" in r["description"] or "2 clients x 128" in r["description"]
  assert r["sides"][0]["ratio_per_cpu_s"] == 1.0


def test_flops_are_counted_from_the_layer_shapes():
  # Two layers of a and b multiply-adds: forward 2(a+b); both trained: weight
  # gradients 2(a+b) and the second layer's input gradient 2b.
  assert campaign.chain_flops((3, 5), (True, True)) == 2 * 8 + 2 * 8 + 2 * 5
  assert campaign.chain_flops((3, 5), (False, True)) == 2 * 8 + 2 * 5
  assert campaign.chain_flops((3, 5), (True, False)) == 2 * 8 + 2 * 3 + 2 * 5
  p = sum(campaign.FIRMA_MACS)
  ext = campaign.chain_flops(campaign.FIRMA_MACS, (True, True, True, False))
  assert 4 * p < ext < 6 * p                       # below the 3 x forward estimate
  per_round = campaign.round_flops("firma_fmnist", 10, 6000, 20)
  head = campaign.chain_flops(campaign.FIRMA_MACS, (False, False, False, True))
  assert per_round == 60000 * (head + 20 * ext + 2 * p)


def test_batched_fibfl_trains_as_the_sequential_loop():
  torch = pytest.importorskip("torch")
  tr = torch_side.reference_module()
  data = tr.random_clients(3, 32, (20,))
  seq = tr.FibFLSequential(data, 20, batch_size=32, head_epochs=1, extractor_epochs=2)
  bat = tr.FibFLBatched(data, 20, batch_size=32, head_epochs=1, extractor_epochs=2)
  assert [seq() for _ in range(2)] == [bat() for _ in range(2)] == [9, 9]
  for k, model in enumerate(seq.models):
    for name, p in model.named_parameters():
      # Adam's division: seen 1 in 65,536 weights 3.6e-5 apart (torch 2.13, CPU)
      torch.testing.assert_close(p.detach(), bat.params[name][k], atol=1e-4, rtol=1e-4)


def test_matmul_peaks_are_measured():
  pytest.importorskip("torch")
  peaks = campaign_report.matmul_peaks(n=64, step_calls=2, repeats=1)
  keys = ("jax_square_gflops", "jax_square_gflop_per_cpu_s", "jax_step_gflops",
          "jax_step_gflop_per_cpu_s", "torch1_square_gflops", "torch1_step_gflops")
  assert all(math.isfinite(peaks[k]) and peaks[k] > 0 for k in keys)
  assert peaks["peak_per_core"] == max(peaks["torch1_square_gflops"],
                                       peaks["jax_square_gflop_per_cpu_s"])


def _peaks():
  return {"n": 2048, "step_shape": [64, 784, 256], "step_calls": 200,
          "jax_square_gflops": 120.0, "jax_square_gflop_per_cpu_s": 110.0,
          "jax_step_gflops": 90.0, "jax_step_gflop_per_cpu_s": 80.0,
          "torch1_square_gflops": 140.0, "torch1_step_gflops": 130.0,
          "peak_per_core": 140.0}


def test_the_section_renders_and_survives_the_other_runs(tiny_rows, tmp_path):
  machine = {"cpu": "Test CPU", "cores": 2, "jax": "x", "torch": "y", "date": "d"}
  lines = campaign_report.section("fedfrac-bench --vs-torch --workloads=firma_fmnist",
                                  machine, ("1.00", "2.00"), _peaks(),
                                  list(tiny_rows.values()))
  text = "\n".join(lines)
  assert lines[0] == campaign_report.START and lines[-1] == campaign_report.END
  assert "Command: `fedfrac-bench --vs-torch --workloads=firma_fmnist`" in text
  assert "Device: Test CPU, 2 cores" in text and "**Per CPU-second**" in text
  assert "Peak per core" in text and "**140.0 GFLOP/s**" in text
  assert "| E_h=1, E_e=1 (20) | batched (torch.func) | 1 |" in text
  assert "| E=1 (2) | sequential | 1 |" in text
  path = tmp_path / "results.md"
  path.write_text("# old\n")
  campaign_report.update_section(str(path), lines)
  campaign_report.update_section(str(path), lines)    # replaced, not appended twice
  assert path.read_text().count(campaign_report.START) == 1
  assert path.read_text().startswith("# old\n")
  rounds.write_markdown(str(path), "fedfrac-bench", machine, ("0", "0"), [])
  kept = path.read_text()
  assert kept.startswith("# fedfrac benchmarks") and text in kept


def test_the_command_writes_the_section_and_the_json_key(tmp_path):
  pytest.importorskip("torch")
  out, js = tmp_path / "results.md", tmp_path / "results.json"
  js.write_text(json.dumps({"results": [1]}))
  rounds.main(["--vs-torch", "--workloads=cnn_mnist_real", "--clients=5",
               "--per-client=64", "--epochs=2", "--repeats=1", f"--out={out}",
               f"--json={js}"])
  data = json.loads(js.read_text())
  assert data["results"] == [1]                         # the other keys are kept
  row = data["campaign"]["results"][0]
  assert row["workload"] == "cnn_mnist_real" and row["epochs"] == 2
  assert data["campaign"]["peaks"]["peak_per_core"] > 0
  # C = 0.2 of 5 clients: a cohort of 1, whose 2 epochs of 64 samples at B = 50
  # are 4 steps on both sides.
  assert row["cohort"] == 1
  assert [s["client_steps"] for s in row["sides"]] == [4, 4]
  assert "--workloads=cnn_mnist_real --clients=5" in out.read_text()
  # A later run of the other workloads keeps these figures in the JSON it rewrites.
  assert campaign_report.kept(str(js), None) == data["campaign"]
  assert campaign_report.kept(str(js), {"new": 1}) == {"new": 1}
  assert campaign_report.kept(str(tmp_path / "none.json"), None) is None


@pytest.mark.parametrize("flag", ["--epochs=0", "--clients=1", "--per-client=0"])
def test_bad_sizes_are_one_error_line(flag, capsys):
  with pytest.raises(SystemExit) as exit_info:
    rounds.main(["--workloads=firma_fmnist", flag])
  assert exit_info.value.code == 2
  err = capsys.readouterr().err
  assert f"error: {flag}: must be an integer >= " in err


def test_sizes_without_a_campaign_workload_are_one_error_line(capsys):
  with pytest.raises(SystemExit) as exit_info:
    rounds.main(["--workloads=cnn10", "--epochs=2"])
  assert exit_info.value.code == 2
  assert "error: --epochs: sizes only the campaign workloads" in capsys.readouterr().err
