"""The straggler study's bookkeeping (fedfrac_lab.reproduce.stragglers), without runs."""
from types import SimpleNamespace

from fedfrac import algorithms
from fedfrac_lab.reproduce import stragglers


def test_time_to_target_sums_the_simulated_round_durations():
  rounds = [{"round": r + 1, "system/wall_time": w} for r, w in enumerate([3.0, 5.0, 2.0])]
  rows = [{"round": 1, "accuracy": 0.5}, {"round": 2, "accuracy": 0.79},
          {"round": 3, "accuracy": 0.81}]
  record = SimpleNamespace(round_rows=rounds, rows=rows)
  assert stragglers.time_to_target(record, 0.8) == 10.0
  assert stragglers.time_to_target(record, 0.5) == 3.0
  assert stragglers.time_to_target(record, 0.9) is None


def test_study_takes_every_registered_method_and_sets_the_policy(monkeypatch):
  names = stragglers.methods_available()
  assert names[:3] == ("fedavg", "fednova", "fedprox")
  assert ("fedel" in names) == ("fedel" in algorithms.names())
  monkeypatch.setattr(algorithms, "names", lambda: ("fedavg", "fedel", "fednova"))
  assert stragglers.methods_available() == ("fedavg", "fednova", "fedel", "fedel_window0")
  v = stragglers.study_config("drop", ("fedel", "fedel_window0"))
  assert (v.methods.fedel_window0.name, v.methods.fedel_window0.window) == ("fedel", 0)
  assert "window" not in v.methods.fedel
  c = stragglers.study_config("drop", ("fedavg",), sigma=0.5, deadline=7.0)
  assert (c.system.policy, c.system.deadline, c.system.sigma) == ("drop", 7.0, 0.5)
  assert stragglers.study_config("none", ("fedavg",)).system.deadline == float("inf")


def test_a_one_seed_table_shows_no_nan():
  # Before: "0.5000 ± nan" (a sample std of one value).
  from fedfrac.metrics import statistics
  from fedfrac_lab.reproduce import stragglers
  numbers = {"final_accuracy": [0.5], "status": ["ok"], "time_to_target": [None],
             "simulated_time": [10.0], "steps_run": [4], "dropped_per_round": [0.0]}
  text = stragglers.table([("drop", "fedavg", numbers)], 0.8)
  assert "nan" not in text and "| fedavg | drop | 0.5000 |" in text, text
  assert statistics.format_mean_std([0.5]) == "0.5000"
  assert statistics.format_mean_std([0.5, 0.7], digits=2) == "0.60 ± 0.14"
