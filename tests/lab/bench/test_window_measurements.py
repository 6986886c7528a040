"""The measurements that size and explain a GPU window, on a CPU with tiny
sizes: each runs, reports what its table shows, and renders; the step-time
curve the batch planner reads interpolates the measured points."""
from __future__ import annotations

import pytest

from fedfrac_lab.bench import accelerator, profile_summary, torch_side
from fedfrac_lab.bench import window_measurements as wm
from fedfrac_lab.campaign import items


def test_peaks_and_the_step_curve_of_firma():
  r = wm.peaks(n=128, repeats=2)
  assert [x["name"] for x in r["rows"]] == ["float32_highest", "tensorfloat32", "bfloat16"]
  assert all(x["tflops"] > 0 for x in r["rows"])
  s = wm.step_scaling(runs=(1, 2), clients=2, per_client=64, epochs=1, repeats=1)
  assert [x["lanes"] for x in s["rows"]] == [2, 4]
  assert all(x["step_s"] > 0 and x["tflops"] > 0 for x in s["rows"])
  text = "\n".join(accelerator.markdown("step_scaling", s))
  assert "| 1 | 2 |" in text and "| 2 | 4 |" in text


def test_the_step_time_curve_interpolates_and_grows_with_the_lanes_beyond():
  curve = items.step_time_curve([[10, 1.0], [100, 2.0]])
  assert curve(5) == 1.0 and curve(55) == pytest.approx(1.5)
  assert curve(200) == pytest.approx(4.0)        # compute-bound beyond the last point
  assert items.step_time_curve([]) is None


def test_masked_steps_runs_each_form(tmp_path):
  from tests.data.test_files import write_mnist_idx
  write_mnist_idx(tmp_path, n_train=1400, n_test=300, gz=True)
  # One scenario with all ten clients: each form compiles its own program (a
  # batch of several scenarios equal to each alone is the FIRMA groups' test,
  # tests/lab/reproduce/test_firma_groups.py).
  r = wm.masked_steps(str(tmp_path), scenarios=("iid",), seeds=1, extractor_epochs=1,
                      buckets=2)
  forms = [(x["form"], tuple(x["scenarios"])) for x in r["forms"]]
  assert forms == [("one bucket, each alone", ("iid",)),
                   ("2 step buckets, each alone", ("iid",)),
                   ("one bucket, both in one batch", ("iid",))]
  # The same runs in every form: the same accuracies to float rounding.
  alone = r["forms"][0]["accuracy"]["iid"]
  assert r["forms"][1]["accuracy"]["iid"] == pytest.approx(alone, abs=1e-4)
  assert r["forms"][2]["accuracy"]["iid"] == pytest.approx(alone, abs=1e-4)
  assert all(x["compile_s"] > 0 and x["run_s"] > 0 for x in r["forms"])
  assert "| 2 step buckets, each alone | iid |" in "\n".join(
      accelerator.markdown("masked_steps", r))


def test_the_profile_summarises_a_trace_and_times_a_variant():
  r = profile_summary.profile(runs=1, clients=2, per_client=64, epochs=1, cnn_clients=2,
                              cnn_per_client=50, variants=("default",))
  for key in ("firma", "cnn"):
    assert r[key]["events"] > 0 and r[key]["local_steps"] >= 1
    assert r[key]["source"] == "host thunks (no device plane)"
    assert 0 <= r[key]["matmul_share"] <= 1 and r[key]["top"]
  v, = r["variants"]
  assert v["name"] == "default" and v["round_s"] > 0, v
  assert "| default |" in "\n".join(accelerator.markdown("profile", r))


def test_a_summary_counts_kernels_matrix_products_and_host_copies():
  device = [("sm90_xmma_gemm_f32", 30.0), ("fusion_12", 10.0), ("copy_3", 10.0),
            ("fusion_12", 10.0)]
  host = [("MemcpyD2H", 1.0), ("MemcpyD2H", 1.0), ("cuLaunchKernel", 1.0)]
  s = profile_summary.summarize(device, host, local_steps=2)
  assert s["events_per_step"] == 2 and s["d2h_per_step"] == 1
  assert s["matmul_share"] == pytest.approx(0.5) and s["copy_share"] == pytest.approx(1 / 6)
  assert s["top"][0] == {"name": "sm90_xmma_gemm_f32", "count": 1, "us": 30.0}
  assert s["top"][1]["count"] == 2


def test_the_papers_workloads_against_pytorch():
  r = wm.papers_vs_torch(("kuramoto_cnn4",), repeats=1, peak_n=128,
                         sizes={"kuramoto_cnn4": {"clients": 2, "per_client": 64,
                                                  "epochs": 1}})
  row, = r["rows"]
  assert row["round_s"] > 0 and row["tflops"] > 0 and 0 < row["peak_share"]
  assert row["step_gflop"] == pytest.approx(64 * 72384512 / 1e9)   # CNN4, SAME, B = 64
  if torch_side.torch_available():
    assert row["torch_sequential_round_s"] > 0 and row["torch_batched_round_s"] > 0
  assert "Kuramoto CNN4 FedAvg, 2 clients x 64" in "\n".join(
      accelerator.markdown("papers_vs_torch", r))


def test_the_fibfl_pp_replay_runs_the_seeds_together_and_alone(tmp_path):
  from tests.data.test_files import write_mnist_idx
  write_mnist_idx(tmp_path, n_train=1400, n_test=300, gz=True)
  r = wm.fibfl_pp_replay(str(tmp_path), seeds=2, rounds_=2, warmup_rounds=1)
  together, alone = r["forms"]["seeds vmapped"], r["forms"]["one at a time"]
  assert [x["seed"] for x in together] == [x["seed"] for x in alone] == [0, 1]
  assert all(len(x["curve"]) == 2 for x in together + alone)
  # Round 1 is the warm-up's average of per-client models in both forms.
  for a, b in zip(together, alone):
    assert a["curve"][0] == pytest.approx(b["curve"][0], abs=0.02)
  assert "| seeds vmapped | 0 |" in "\n".join(accelerator.markdown("fibfl_pp_replay", r))
