"""fedfrac_lab.reproduce.doc_blocks_estimates: REPRODUCTION's compute figures for the
FOFedAvg and Kuramoto runs count the workload of the command's own config and
price it only at rates measured on the same model."""
from __future__ import annotations

import pytest

from fedfrac_lab.reproduce import doc_blocks_estimates as est


def test_fofedavg_workload_is_the_configs_not_a_smaller_one():
  # 2 of 10 clients a round (C = 0.2) × 20 local epochs × 120 batches of 50:
  # 4,800 client-steps a round (the figure before counted 1,200), over the
  # config's 25 rounds, 10 methods and 3 seeds.
  w = est.workload(f"{est.FOFEDAVG}:iid")
  assert w.steps == 4_800 * 25 * 10 * 3
  assert "4,800 a round at K = 10 (2 clients × 20 local epochs × 120 batches of 50" in w.how
  five = est.workload(f"{est.FOFEDAVG}:severe", clients=(10, 100, 1000), rounds=250)
  assert five.steps == (4_800 + 4_800 + 8_000) * 250 * 10 * 3


def test_kuramoto_is_priced_at_the_cnn4_rate_and_gets_no_gpu_figure():
  text = est.kuramoto_t1_time()
  assert "1,880 a round at K = 10 (10 clients × 2 local epochs × 94 batches of 64" in text
  assert "× 100 rounds × 11 runs" in text
  assert "GPU: no rate of this model measured on a GPU yet, so no GPU figure" in text
  cnn4, cnn = est.cpu_rates()["kuramoto_cnn"], est.cpu_rates()["cnn_mnist_real"]
  assert cnn4[2] / cnn[2] == pytest.approx(35.6, abs=0.5)       # FLOPs per step
  assert f"{1000 * cnn4[0]:.1f} ms a client-step" in text


def test_a_gpu_figure_names_the_cohort_it_was_measured_at():
  # One α value of Table IV (cohort 2 of 10 clients) priced at the rate the
  # H200 window measured at cohort 10.
  spec = f"{est.FOFEDAVG}:alpha"
  w = est.workload(spec, runs=1, what="α values")
  text = est.priced(w, "cnn_mnist_real", "cnn10", 2)
  assert "cohort 10" in text and "this run's cohort of 2 was not measured" in text
  assert "was not measured" not in est.priced(w, "cnn_mnist_real", "cnn10", 10)


def test_a_table_whose_cells_have_all_run_says_only_what_they_took():
  # Table IV's four α values have run on the CPU: its text has no estimate.
  text = est.fofedavg_t4_time()
  assert text.startswith("measured on the CPU") and "estimate" not in text
  assert all(f"α {a}" in text for a in ("0.5", "0.6", "0.97", "1.5"))


# The passes over its data a client makes a round, per FIRMA method, as
# configs/firma/digits.py sets them: local_epochs 5 (FedAvg, RDFL), head 2 +
# extractor 2 (FedRep), head 1 + extractor 20 (FibFL, FibFL+, FibFL++).
FIRMA_EPOCHS = {"fedavg": 5, "rdfl": 5, "fedrep": 4, "fibfl": 21, "fibfl_plus": 21,
                "fibfl_pp": 21}


def test_firma_method_epochs_are_the_configs():
  assert est.firma_method_epochs() == FIRMA_EPOCHS


def test_firma_real_data_gpu_estimates_are_client_steps_over_the_windows_rate():
  """Tables 7–8 and 9–10: 10 clients × ⌈6,000/64⌉ = 94 batches × 77 epochs over the
  six methods = 72,380 client-steps a round; × 30 rounds × 7 scenarios × 2 modes ×
  3 seeds, divided by Σ client-steps ÷ Σ wall seconds of the Fashion-MNIST cells the
  H200 windows ran, each read here from its item file."""
  from fedfrac_lab.reproduce import common
  per_round, steps = est.firma_command_steps("t78")
  assert per_round == 10 * 94 * 77 == 72_380
  assert steps == 72_380 * 30 * 7 * 2 * 3
  files = est.firma_window_files()
  assert files and all(f.startswith("results/campaign/firma_fashion_mnist/") for f in files)
  seconds, measured = 0.0, 0
  for f in files:
    run = common.load_results_json(f)["campaign"]
    assert run["device"] == "NVIDIA H200"
    seconds += run["seconds"]
    # every item a whole cell: its 3 seeds × 30 rounds
    measured += 10 * 94 * FIRMA_EPOCHS[run["spec"]["method"]] * 30 * 3
  w = est.firma_window_rate()
  assert (w.cells, w.steps) == (len(files), measured)
  assert w.seconds == pytest.approx(seconds)
  expected = steps / (measured / seconds)
  assert est.firma_gpu_seconds("t78") == pytest.approx(expected)
  assert est.firma_gpu_seconds("t910") == pytest.approx(expected)
  shown = f"≈ {expected / 60:,.0f} min"
  assert est.firma_t78_gpu().startswith(shown) and est.firma_t910_gpu().startswith(shown)
  text = est.firma_gpu_text("t78")
  assert f"{steps:,} client-steps" in text and f"{measured / seconds:,.0f} client-steps/s" in text
  assert f"the {len(files)} Fashion-MNIST cells measured on the NVIDIA H200" in text


def test_firma_cifar10_gets_no_gpu_figure_without_a_measured_rate():
  assert est.firma_gpu_seconds("t56") is None
  assert "≈" not in est.firma_t56_gpu()
  text = est.firma_gpu_text("t56")
  assert "no GPU figure" in text and "≈" not in text
  assert f"{10 * 79 * 77 * 30 * 7 * 2 * 5:,} client-steps" in text     # 5 seeds


def test_firma_digits_gpu_estimate_is_rounds_and_compiles_measured_on_the_gpu():
  from fedfrac_lab.reproduce import common
  digits = common.load_results_json("results/firma_digits.json")
  cells = len(digits["paper"]) + len(digits["reference_code"])
  compiles = sum(t["compiles"] for t in digits["timings"].values())
  m = common.load_results_json(est.GPU_JSON)["accelerator"]["fibfl_seeds"]["result"]
  assert cells == 84
  seconds, text = est.firma_digits_gpu()
  assert seconds == pytest.approx(cells * 10 * m["many_seeds_round_s"]
                                  + compiles * m["compile_many_s"])
  assert f"{cells} cells × 10 rounds" in text and f"+ {compiles} compiles" in text
  assert est.firma_digits_gpu_block().startswith(f"≈ {seconds / 60:,.0f} min")
