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
  five = est.workload(f"{est.FOFEDAVG}:severe", clients=(10, 100, 1000),
                      rounds=est.TABLE_V_ROUNDS)
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
  text = est.fofedavg_t2_time()
  assert "cohort 10" in text and "this run's cohort of 2 was not measured" in text


def test_firma_gpu_estimates_follow_from_their_inputs():
  """Tables 7–8: 10 clients × ⌈6,000/64⌉ = 94 steps × E_e 20 = 18,800 client-steps
  a round; × 30 rounds × 7 scenarios × 6 methods × 2 modes × 3 seeds at 45,000/s
  is 3,158 s ≈ 53 min (5 seeds would be ≈ 88 min). Tables 5–6: 15,800 a round,
  at 5 seeds and 20,000/s ≈ 2.8 h."""
  from fedfrac_lab.reproduce import doc_blocks_estimates as est
  per_round, seconds = est.firma_gpu_estimate(est.FirmaRun(6_000, 3, 45_000))
  assert per_round == 18_800
  assert seconds == pytest.approx(18_800 * 30 * 7 * 6 * 2 * 3 / 45_000)
  assert round(seconds / 60) == 53
  five = est.firma_gpu_estimate(est.FirmaRun(6_000, 5, 45_000))[1]
  assert round(five / 60) == 88
  per_round, seconds = est.firma_gpu_estimate(est.FIRMA_RUNS["t56"])
  assert per_round == 15_800 and round(seconds / 3600, 1) == 2.8
  assert est.firma_t78_gpu().startswith("≈ 53 min")
  assert est.firma_t56_gpu().startswith("≈ 2.8 h")
  assert "18,800 client-steps/round" in est.firma_gpu_text("t78")
