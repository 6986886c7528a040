"""``fedfrac-reproduce published``: each published cell is filled from the run that
has the paper's setting of that cell, a row per source, with the setting named;
a key missing from a results file is an error, not a dropped row. The results
files here are ones the test writes."""
from __future__ import annotations

import json

import pytest

from fedfrac_lab.reproduce import published_ours, published_tables

LABELS = ("fedavg", "fedprox", "scaffold", "fednova", "fedadam", "moon", "feddyn",
          "ri_fedavg", "fo_fedavg", "fo_ri_fedavg", "fo_ri_fedavg_lr05")


def _node(rmse):
  """Two seeds of a run whose final RMSE is rmse ± 1 (drift CV rmse / 1000)."""
  return {str(s): {"status": "ok", "curve_rmse": [[10, rmse + 50], [20, rmse + d]],
                   "final": {"rmse": rmse + d, "mae": 1.0, "mape": 2.0,
                             "server/drift_cv": rmse / 1000,
                             "server/pearson_roughness_drift": 0.1,
                             "server/spearman_roughness_drift": 0.2}}
          for s, d in ((0, -1.0), (1, 1.0))}


def _bev():
  abl = {"alpha": {"fo_ri_fedavg[alpha=1.0]": _node(301)},
         "safeguard=delta0_no_clip": {"fo_ri_fedavg": _node(302)},
         "beta_kappa": {f"fo_ri_fedavg[beta_kappa={b}]": _node(400 + i)
                        for i, b in enumerate(("0.0", "0.25", "0.5", "1.0"))}}
  for every in (1, 5, 10):
    abl[f"probe_every={every}"] = {"fo_ri_fedavg": _node(200 + every)}
  main = {label: _node(100 + i) for i, label in enumerate(LABELS)}
  return {"studies": {"main": {"main": main}, "ablations": abl}}


def _row(text, start):
  return next(line for line in text.splitlines() if line.startswith(start))


def test_fo_ri_cells_come_from_the_run_of_their_setting(tmp_path, monkeypatch):
  path = tmp_path / "bev.json"
  path.write_text(json.dumps(_bev()))
  monkeypatch.setattr(published_ours, "BEV_JSON", str(path))
  text = published_tables.markdown("fo_ri_fedavg", "cmd")
  # Table XII's spectral-gate row is β_κ = 0.5 (the β grid's third run: 402), its
  # Default (probe every round) the R_probe = 1 run (201), no safeguards δ → 0
  # without clip (302).
  assert "| 402.00 ± 1.41 (n = 2) |" in _row(text, "| Add spectral gate (beta_kappa=0.5)")
  assert "β_κ = 0.5" in _row(text, "| Add spectral gate (beta_kappa=0.5)")
  default = _row(text, "| Default (alpha=0.8")
  assert "| 201.00 ± 1.41 (n = 2) |" in default and "every round;" in default
  assert "| 302.00 ± 1.41 (n = 2) |" in _row(text, "| No safeguards")
  # Table XIV from the β grid, RMSE and the drift CV at our final round.
  assert "| 401.00 ± 1.41 (n = 2) |" in _row(text, "| beta_kappa=0.25 · VED RMSE")
  dcv = _row(text, "| beta_kappa=1.0 · VED D_cv(200)")
  assert "0.40 ± 0.00 (n = 2)" in dcv and "final round, 40 (paper: round 200)" in dcv
  # Table X: FO-RI-FedAvg has a row for each learning rate, each named.
  rows = [line for line in text.splitlines() if line.startswith("| FO-RI-FedAvg · VED RMSE")]
  assert len(rows) == 2 and "η 0.05 constant" in rows[1]
  # Every row says "stand-in" or "not run"; no cell is judged on a stand-in.
  table_rows = [line for line in text.splitlines() if " · " in line and line.startswith("|")]
  assert all("| stand-in |" in r or "| not run |" in r for r in table_rows)


def test_a_missing_key_is_an_error_not_a_dropped_row(tmp_path, monkeypatch):
  raw = _bev()
  del raw["studies"]["ablations"]["safeguard=delta0_no_clip"]
  path = tmp_path / "bev.json"
  path.write_text(json.dumps(raw))
  monkeypatch.setattr(published_ours, "BEV_JSON", str(path))
  with pytest.raises(KeyError, match="safeguard=delta0_no_clip"):
    published_tables.markdown("fo_ri_fedavg", "cmd")


def test_kuramoto_cells_name_each_weighting_from_the_markdown_results(tmp_path,
                                                                      monkeypatch):
  md = tmp_path / "k.md"
  md.write_text(
      "# Kuramoto\n\n## K = 10 clients, s = 3 shards per client (1 s)\n\n"
      "| method | κ0 | best accuracy | round of best |\n|---|---|---|---|\n"
      "| FedAvg | – | 0.880 ± 0.017 | 65.0 ± 10.1 |\n"
      "| coupled | 0.1 | 0.881 ± 0.016 | 70.0 ± 1.0 |\n"
      "| paper | 0.1 | 0.104 ± 0.001 | 5.0 ± 3.0 |\n")
  monkeypatch.setattr(published_ours, "KURAMOTO_MD", str(md))
  text = published_tables.markdown("kuramoto", "cmd")
  rows = [line for line in text.splitlines()
          if line.startswith("| kappa0=0.1 · MNIST · max_accuracy")]
  assert len(rows) == 2
  assert "| 88.10 ± 1.60 (n = 3) |" in rows[0] and "`coupled` weighting" in rows[0]
  assert "`paper` weighting" in rows[1]
  assert "| 88.00 ± 1.70 (n = 3) |" in _row(text, "| No-sync · MNIST · max_accuracy")
  assert "| not run |" in _row(text, "| kappa0=0.1 · CIFAR-10 · max_accuracy")
  # 24 published cells; 4 have ours (κ0 = 0.1 and No-sync, accuracy and round).
  assert "24 published cells, 4 with a number of ours" in text


def _summary(alphas):
  """A sweep summary with one FOFedAvg entry per α (mean accuracy 0.5 + α / 10)."""
  return [{"summary": {f"fofedavg[alpha={a}]": {"accuracy": {
      "mean": 0.5 + float(a) / 10, "std": 0.01, "ci95": 0.02, "n": 3}} for a in alphas}}]


def test_table_iv_takes_each_alpha_from_the_first_grid_that_has_it(tmp_path, monkeypatch):
  # The α-factor grid has no α = 0.6; the fractional family's grid (same setting,
  # the same runs at 0.5 and 0.97) has it: α = 0.6 gets a number, 0.5 no second row.
  files = {"factor.json": _summary(("0.5", "0.97", "1.5")),
           "family.json": _summary(("0.5", "0.6", "0.97")), "fmnist.json": _summary(())}
  for name, raw in files.items():
    (tmp_path / name).write_text(json.dumps(raw))
  monkeypatch.setattr(published_ours, "ALPHA_SOURCES", (
      (str(tmp_path / "factor.json"), "digits"), (str(tmp_path / "family.json"), "digits"),
      (str(tmp_path / "fmnist.json"), "Fashion-MNIST")))
  monkeypatch.setattr(published_ours.common, "load_results_json",   # only these files
                      lambda p: json.loads(open(p).read()) if p.startswith(str(tmp_path))
                      else None)
  ours = published_tables.fofedavg_ours()
  assert [o.mean for o in ours[("Table IV", "alpha=0.6", "mean")]] == [pytest.approx(0.56)]
  assert len(ours[("Table IV", "alpha=0.5", "mean")]) == 1
  assert ("Table IV", "alpha=1.5", "mean") in ours


def test_coverage_names_the_tables_set_beside_ours_and_all_the_result_tables():
  # FO-RI-FedAvg: 9 of its result tables are set beside ours; the text says so
  # instead of calling their cells the paper's.
  listed = published_tables.PAPERS["fo_ri_fedavg"][0]
  tables = published_tables.result_tables("fo_ri_fedavg")
  assert len(tables) > len(listed) and {n for n, _ in tables} >= set(listed)
  text = published_tables.coverage_text("fo_ri_fedavg")
  assert text.startswith(f"those of its {len(listed)} tables set beside ours (X, XI")
  assert f"out of {sum(n for _, n in tables)} in its {len(tables)} result tables" in text
  assert published_tables.coverage_text("fofedavg") == "all of its 5 result tables"
  assert published_tables.coverage_text("kuramoto") == "all of its only result table"
