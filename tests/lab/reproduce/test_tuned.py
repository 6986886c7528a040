"""fedfrac_lab.reproduce.tuned: the learning-rate grid as one vmapped program gives the
numbers of one ``ff.run_many`` per rate and split; the choice rule; the table
names every rate chosen at the edge of the grid."""
from __future__ import annotations

import numpy as np

import fedfrac as ff
from fedfrac_lab.reproduce import tuned


def _tiny_config():
  cfg = tuned.study_config("fractional", rounds=2)
  cfg.model.hidden = (16,)
  cfg.client.local_steps = 3
  return cfg


def test_grid_program_equals_one_run_many_per_rate_and_split():
  cfg, seeds = _tiny_config(), (0, 1)
  new = tuned.tune_method(cfg, "fedavg", (0.1, 0.5), seeds, metric="loss")
  for k, lr, split in ((1, 0.5, "val"), (0, 0.1, "test")):
    res = ff.run_many(tuned.with_lr(cfg, "fedavg", lr, split), seeds=seeds)
    np.testing.assert_allclose(new[split][k], tuned.final_accuracies(res, "fedavg", "loss"),
                               rtol=2e-5)
  # the rate reaches the clients, and validation and test are different rows
  assert not np.allclose(new["val"][0], new["val"][1], rtol=1e-3)
  assert not np.allclose(new["val"][0], new["test"][0], rtol=1e-3)


def test_tune_takes_paper_and_chosen_test_scores_from_the_grid_runs(monkeypatch):
  calls = []

  def fake(cfg, label, lrs, seeds, metric, cache):
    calls.append((label, list(lrs), metric))
    return {"val": [[lr, lr] for lr in lrs], "test": [[10 * lr] * 2 for lr in lrs],
            "compile_s": 0.0, "run_s": 0.0}
  monkeypatch.setattr(tuned, "tune_method", fake)
  cfg = tuned.study_config("fractional", rounds=2)
  out = tuned.tune(cfg, (0.3, 1.0), (0, 1), labels=["fedavg"], metric="loss",
                   log=lambda m: None)
  assert calls == [("fedavg", [0.3, 1.0, 0.1], "loss")]   # paper rate 0.1 runs too
  e = out["methods"]["fedavg"]
  assert set(e["val"]) == {"0.3", "1.0"} and e["chosen_lr"] == 1.0
  assert e["paper_test"] == [1.0, 1.0] and e["tuned_test"] == [10.0, 10.0]


def test_choose_lr_prefers_rates_without_diverged_seeds_then_the_smaller_rate():
  nan = float("nan")
  assert tuned.choose_lr({"0.1": [0.8, 0.8], "0.3": [0.95, nan]}) == 0.1
  assert tuned.choose_lr({"0.1": [0.9, 0.9], "0.3": [0.9, 0.9]}) == 0.1
  assert tuned.choose_lr({"0.1": [0.8, 0.9], "0.3": [0.9, 0.9]}) == 0.3
  assert tuned.choose_lr({"0.1": [nan, nan], "0.3": [0.5, nan]}) == 0.3


def _entry(chosen, val):
  return {"name": "fedavg", "paper_lr": 0.3, "val": val, "chosen_lr": chosen,
          "paper_test": [0.80, 0.82], "tuned_test": [0.85, 0.87]}


def _result(chosen):
  val = {"0.1": [0.7, 0.7], "0.3": [0.8, 0.8], "1.0": [0.9, 0.9]}
  return {"study": "fractional", "seeds": [0, 1], "lrs": [0.1, 0.3, 1.0], "rounds": 2,
          "validation_fraction": 0.2, "wall_s": 1.0, "metric": "accuracy",
          "methods": {label: _entry(lr, val) for label, lr in chosen.items()}}


def test_table_names_every_rate_chosen_at_the_edge_of_the_grid():
  text = tuned.markdown(_result({"fedavg": 1.0, "fedprox": 0.3, "scaffold": 0.1}), "cmd")
  assert "| 1 (top edge) |" in text and "| 0.1 (bottom edge) |" in text
  assert "| fedprox | 0.3 | 0.8100 ± 0.0141 | 0.3 | 0.8600 ± 0.0141 |" in text
  assert ("Chosen at the edge of the grid (0.1 … 1): fedavg (1, top), scaffold "
          "(0.1, bottom); for these the best rate may lie outside the grid") in text
  assert "fedprox (" not in text.split("## Verdict")[1]
  text = tuned.markdown(_result({"fedavg": 0.3}), "cmd")
  assert "No method's rate was chosen at the edge of the grid (0.1 … 1)" in text
  assert "edge)" not in text
