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
