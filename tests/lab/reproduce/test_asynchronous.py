"""The asynchronous study's collector reads a finished workdir: time to the
target per seed from metrics.csv, the run's own summary, and a figure."""
from __future__ import annotations

import json

import pytest

from fedfrac_lab.reproduce import asynchronous


def _workdir(tmp_path):
  rows = ["method,seed,round,clock/time,accuracy"]
  for m, times in (("fedavg", (100, 200, 300)), ("fedbuff", (20, 40, 60))):
    for s in (0, 1):
      for r, (t, a) in enumerate(zip(times, (0.5, 0.72, 0.8)), start=1):
        rows.append(f"{m},{s},{10 * r},{t + s},{a - 0.03 * s}")
  (tmp_path / "metrics.csv").write_text("\n".join(rows) + "\n")
  (tmp_path / "summary.md").write_text("| method | final |\n|---|---|\n| fedavg | 0.8 |\n")
  (tmp_path / "config.json").write_text(json.dumps({"target_accuracy": 0.7}))
  return tmp_path


def test_time_to_target_per_seed_and_a_figure(tmp_path):
  (tmp_path / "wd").mkdir()
  wd = _workdir(tmp_path / "wd")
  out = tmp_path / "results" / "study.md"
  out.parent.mkdir()
  asynchronous.main([f"--collect={wd}", f"--out={out}", "--device=CPU"])
  text = out.read_text()
  # seed 0 reaches 0.72 at its second evaluation, seed 1 (0.69) only at its third
  assert "| fedavg | 200 | 301 | 0.8000 / 0.7700 |" in text
  assert "| fedbuff | 40 | 61 | 0.8000 / 0.7700 |" in text
  assert "(CPU, 2 seeds)" in text and "|---|---|---|---|\n" in text
  assert "## Summary (the run's own table)" in text and "| fedavg | 0.8 |" in text
  assert (out.parent / "async_fashion_mnist_cpu.png").stat().st_size > 0


def test_a_workdir_without_the_study_is_one_line(tmp_path):
  with pytest.raises(SystemExit, match="no metrics.csv there; run the study first"):
    asynchronous.main([f"--collect={tmp_path}", f"--out={tmp_path / 'x.md'}"])


def test_a_deadline_arm_says_how_many_clients_it_dropped(tmp_path):
  wd = _workdir(tmp_path)
  rows = ["method,seed,round,cohort,clock/dropped,clock/step_time"]
  for s in (0, 1):
    rows += [f"fedavg,{s},{r},10,,{100 + r}" for r in (1, 2)]
    rows += [f"fedbuff,{s},{r},8,{2 + s},50" for r in (1, 2)]
  (wd / "rounds.csv").write_text("\n".join(rows) + "\n")
  (wd / "config.json").write_text(json.dumps({
      "target_accuracy": 0.7, "clock": {"server": "sync", "deadline": float("inf")},
      "methods": {"fedavg": {"name": "fedavg"},
                  "fedbuff": {"name": "fedavg", "clock": {"deadline": 50.0}}}}))
  out = tmp_path / "study.md"
  asynchronous.main([f"--collect={wd}", f"--out={out}"])
  text = out.read_text()
  # fedbuff is here a synchronous arm with a deadline: no paper direction claimed
  assert "- fedbuff reaches 70% sooner in 2 of 2 seeds.\n" in text
  assert ("- fedbuff (`clock.deadline` = 50): of the 10 clients sampled a round, 2.50 "
          "missed the deadline and sent nothing, on average (per seed 2.00 / 3.00); a "
          "round lasted 50.0 time units on average, 101.5 for fedavg without a "
          "deadline.") in text
