"""The summary table (summary.md, the printed table, ``Results.table()``): best
final value first with ties by name, the family of each method, the difference to
FedAvg, and diverged, partial and stand-in rows marked."""
from __future__ import annotations

import numpy as np

from fedfrac.runner.records import Results, RunRecord
from tests import helpers


def _record(method, seed, final, status="ok", algorithm=None, key="accuracy"):
  rows = [{"method": method, "algorithm": algorithm or method, "seed": seed, "round": r,
           key: float(v)} for r, v in ((1, final / 2), (2, final))]
  return RunRecord(method, algorithm or method, seed, rows, rows, status=status, wall_s=1.0)


def _rows(table):
  return [[c.strip() for c in line.strip("|").split("|")]
          for line in table.splitlines()[2:] if line.startswith("|")]


def test_rows_best_first_ties_by_name_with_family_and_difference_to_fedavg():
  records = [_record("fedprox", 0, 0.90), _record("fedavg", 0, 0.90),
             _record("fibfl", 0, 0.93), _record("fofedavg", 0, 0.85),
             _record("dp_sgd", 0, 0.80, status="partial"),
             _record("moon", 0, 0.95, status="diverged at round 2"),
             _record("fdse", 0, 0.91), _record("kuramoto_fedavg", 0, 0.88)]
  config = helpers.tiny_config()
  config.rounds = 2    # the records' length: a run of another length is marked so
  table = Results(config, records).table()
  assert table.splitlines()[0] == ("| method | family | final accuracy | vs fedavg | "
                                   "best accuracy | rounds to 80% | wall s/run | status |")
  rows = _rows(table)
  assert [r[0] for r in rows] == ["fibfl", "fdse", "fedavg", "fedprox", "kuramoto_fedavg",
                                  "fofedavg", "dp_sgd", "moon"]
  by_name = {r[0]: r for r in rows}
  assert by_name["fibfl"][1:4] == ["FIRMA ring", "0.9300", "+3.00 pp"]
  assert by_name["fedavg"][1:4] == ["baseline", "0.9000", "reference"]
  assert by_name["fofedavg"][1:4] == ["fractional", "0.8500", "-5.00 pp"]
  assert by_name["kuramoto_fedavg"][1] == "Kuramoto"
  assert by_name["dp_sgd"][1] == "privacy" and by_name["dp_sgd"][-1] == "partial"
  assert by_name["moon"][-1] == "diverged at round 2"
  assert by_name["fdse"][-1] == "ok, stand-in"
  assert table.splitlines()[-1].startswith("stand-in: built without the paper's full text (fdse")


def test_seeds_show_spread_and_a_relabelled_fedavg_is_the_reference():
  records = [_record("base", s, 0.90 + 0.01 * s, algorithm="fedavg") for s in (0, 1, 2)]
  records += [_record("scaffold", s, 0.92 + 0.01 * s) for s in (0, 1, 2)]
  table = Results(helpers.tiny_config(), records).table()
  assert "| vs base |" in table.splitlines()[0]
  rows = _rows(table)
  assert rows[0][:4] == ["scaffold", "baseline", "0.9300 ± 0.0100", "+2.00 pp"]
  assert rows[1][3] == "reference"
  assert "stand-in" not in table


def test_regression_ranks_lowest_rmse_first():
  config = helpers.tiny_config()
  config.task.loss = "mse"
  records = [_record("fedavg", 0, 120.0, key="rmse"), _record("scaffold", 0, 99.0, key="rmse"),
             _record("fo_ri_fedavg", 0, 117.5, key="rmse")]
  table = Results(config, records).table()
  rows = _rows(table)
  assert [r[0] for r in rows] == ["scaffold", "fo_ri_fedavg", "fedavg"]
  assert rows[0][3] == "-21" and rows[1][3] == "-2.5"
  assert np.isfinite(float(rows[0][2]))


def test_results_and_records_print_as_one_short_line():
  """``print(results)`` in a notebook gave every row of every run (thousands of
  characters); it is one line naming the runs and how they ended."""
  many = [dict(r, round=k) for k, r in enumerate(_record("fedavg", 0, 0.9).rows * 200, 1)]
  records = [RunRecord("fedavg", "fedavg", 0, many, many, wall_s=1.0),
             _record("fibfl", 1, 0.93, status="partial")]
  config = helpers.tiny_config()
  results = Results(config, records, failed={("moon", 0): ValueError("boom")})
  text = repr(results)
  assert "\n" not in text and len(text) < 300, text
  assert "2 runs of fedavg, fibfl over seeds [0, 1], 1 ok, 1 failed" in text
  record = repr(records[0])
  assert "\n" not in record and len(record) < 200, record
  assert "status='ok'" in record and "400 evaluated rounds, accuracy 0.9000 at round 400" in record
