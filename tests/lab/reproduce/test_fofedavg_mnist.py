"""``fedfrac-reproduce fofedavg_mnist``: finished workdirs (fake ones written here)
become the results JSON, the markdown table and verdicts against the published
Tables II–IV; a method with a seed missing or not ok is not counted."""
from __future__ import annotations

import json
import math

import pytest

from fedfrac.runner import sealed
from fedfrac_lab.reproduce import PAPERS, fofedavg_mnist, published_tables, verdicts

ROUNDS = 25


def _accuracy(final, seed):
  """A curve rising to ``final`` (+ a seed offset of 0.001 per seed)."""
  return [final + 0.001 * seed - 0.2 * math.exp(-r / 3.0) for r in range(1, ROUNDS + 1)]


def _workdir(root, scenario, label, final, seeds=(0, 1, 2), status=None, skip=()):
  """ROOT/<scenario>/<label> with a config.json and a sealed record per seed (a
  record of ``status`` for the seeds of ``status``, none for those in ``skip``)."""
  wd = root / scenario / label
  (wd / "runs" / label).mkdir(parents=True)
  config = {"seeds": [0, 1, 2], "rounds": ROUNDS, "participation": 0.2,
            "only": label, "data": {"source": "files", "dir": "/data/mnist",
                                    "partition": "iid", "num_clients": 10},
            "client": {"batch_size": 50, "local_epochs": 20}}
  (wd / "config.json").write_text(json.dumps(config))
  for seed in seeds:
    if seed in skip:
      continue
    acc = _accuracy(final, seed)
    rows = [{"round": r, "accuracy": a, "loss": 1.0 - a} for r, a in
            zip(range(1, ROUNDS + 1), acc)]
    sealed.write(str(wd / "runs" / label / f"seed_{seed}.json"), {
        "method": label, "algorithm": label.split("_a")[0], "seed": seed, "rows": rows,
        "round_rows": rows, "status": (status or {}).get(seed, "ok"), "compile_s": 2.0,
        "wall_s": 300.0, "nonfinite_allowed": []})
  return wd


@pytest.fixture
def campaign(tmp_path, monkeypatch):
  """A campaign folder: iid/fedavg and iid/fofedavg finished, iid/scaffold with
  a seed missing, iid/moon with a partial seed, alpha/fofedavg_a1p5 finished; the
  core logs; results files redirected into tmp_path."""
  root = tmp_path / "campaign" / "runs"
  _workdir(root, "iid", "fedavg", 0.97)
  _workdir(root, "iid", "fofedavg", 0.975)
  _workdir(root, "iid", "scaffold", 0.96, skip=(2,))
  _workdir(root, "iid", "moon", 0.96, status={1: "partial"})
  _workdir(root, "alpha", "fofedavg_a1p5", 0.99)
  (tmp_path / "campaign" / "core0.log").write_text(
      "2026-01-01T10:00:00Z start iid/fedavg (core 0)\n"
      "2026-01-01T10:18:20Z end iid/fedavg rc=0 wall_s=1100\n"
      "2026-01-02T09:00:00Z start iid/fedavg (core 0)\n"
      "2026-01-02T09:00:00Z end iid/fedavg rc=0 wall_s=0 (done before)\n"
      "2026-01-01T10:18:20Z start iid/moon (core 0)\n")
  (tmp_path / "campaign" / "core1.log").write_text(
      "2026-01-01T10:00:00Z start iid/fofedavg (core 1)\n"
      "2026-01-01T10:19:00Z end iid/fofedavg rc=1 wall_s=1133\n"
      "2026-01-01T10:20:00Z start iid/fofedavg (core 1)\n"
      "2026-01-01T10:20:07Z end iid/fofedavg rc=0 wall_s=7\n"
      "2026-01-01T11:00:00Z start alpha/fofedavg_a1p5 (core 1)\n"
      "2026-01-02T09:00:00Z start alpha/fofedavg_a1p5 (core 1)\n"
      "2026-01-02T09:03:00Z end alpha/fofedavg_a1p5 rc=0 wall_s=180\n")
  out = tmp_path / "results"
  monkeypatch.setattr(fofedavg_mnist, "JSONS", {"iid": str(out / "iid.json"),
                                                "alpha": str(out / "alpha.json"),
                                                "severe_10": str(out / "severe_10.json")})
  monkeypatch.setattr(fofedavg_mnist, "SEVERE_JSON", str(out / "severe_10.json"))
  monkeypatch.setattr(fofedavg_mnist, "IID_JSON", str(out / "iid.json"))
  monkeypatch.setattr(fofedavg_mnist, "ALPHA_JSON", str(out / "alpha.json"))
  return root, out


def test_collect_counts_only_finished_runs(campaign, capsys):
  root, out = campaign
  assert PAPERS["fofedavg_mnist"] is fofedavg_mnist
  fofedavg_mnist.main([f"--collect={root}", f"--out={out / 't.md'}"])
  iid = json.loads((out / "iid.json").read_text())
  assert sorted(iid["cells"]) == ["fedavg", "fofedavg"]
  # A seed missing and a partial seed: not counted, listed as pending, no numbers.
  assert "scaffold" not in iid["cells"] and "moon" not in iid["cells"]
  assert "seed 2: no record yet" in iid["pending"]["scaffold"]
  assert "seed 1: status partial" in iid["pending"]["moon"]
  fedavg = iid["cells"]["fedavg"]
  assert sorted(fedavg["seeds"]) == ["0", "1", "2"]
  assert fedavg["seeds"]["1"]["final_accuracy"] == pytest.approx(_accuracy(0.97, 1)[-1])
  assert len(fedavg["seeds"]["0"]["loss"]) == ROUNDS
  # The CPU time is the cell's own log line (a restart that did not start the
  # finished cell again is no run); the command names its core and data.
  assert fedavg["cpu_wall_s"] == 1100 and fedavg["core"] == 0
  assert len(fedavg["runs"]) == 1
  assert fedavg["finished"] == "2026-01-01T10:18:20Z"
  assert fedavg["command"].startswith("nice -n 19 taskset -c 0 python -m fedfrac.main "
                                      "--config=configs/fofedavg/mnist_cnn.py:iid "
                                      "--config.only=fedavg --config.data.source=files "
                                      "--config.data.dir=/data/mnist")
  assert fedavg["device"] == "CPU, 2 cores (one process pinned per core)"
  # A run that failed after its records and the rerun that found them: both count.
  fo = iid["cells"]["fofedavg"]
  assert fo["cpu_wall_s"] == 1140 and [r["rc"] for r in fo["runs"]] == [1, 0]
  assert "summed over its 2 runs" in fo["cpu_wall_source"]
  assert fedavg["config"]["rounds"] == ROUNDS
  alpha = json.loads((out / "alpha.json").read_text())
  # A run of the α cell stopped with its session (a start, no end): the log does
  # not hold its time, so the cell's is the sum of its records' seconds, said so.
  a15 = alpha["cells"]["fofedavg_a1p5"]
  assert a15["cpu_wall_s"] == pytest.approx(3 * 302.0)
  assert "sum of its records" in a15["cpu_wall_source"]
  assert "1 of its runs stopped with the session" in a15["cpu_wall_source"]
  assert a15["started"] == "2026-01-01T11:00:00Z" and len(a15["runs"]) == 1
  assert set(alpha["pending"]) == {"fofedavg_a0p5", "fofedavg_a0p6", "fofedavg_a0p97"}


def test_a_damaged_record_is_not_counted_and_a_rerun_keeps_finished_cells(campaign):
  root, out = campaign
  fofedavg_mnist.main([f"--collect={root}", f"--out={out / 't.md'}"])
  path = root / "iid" / "fofedavg" / "runs" / "fofedavg" / "seed_0.json"
  data = json.loads(path.read_text())
  data["rows"][-1]["accuracy"] = 0.5                 # a hand edit: checksum mismatch
  path.write_text(json.dumps(data))
  cell, why = fofedavg_mnist.read_cell(str(root / "iid" / "fofedavg"), "fofedavg")
  assert cell is None and "not verified" in why
  # Collecting again keeps the cell collected before (the file is the record).
  fofedavg_mnist.main([f"--collect={root}", f"--out={out / 't.md'}"])
  iid = json.loads((out / "iid.json").read_text())
  assert "fofedavg" in iid["cells"]


def test_statistics_verdicts_and_table(campaign):
  root, out = campaign
  fofedavg_mnist.main([f"--collect={root}", f"--out={out / 't.md'}"])
  iid = fofedavg_mnist.load("iid")
  cells = {(t, r, c): (cmp, v) for t, r, c, cmp, v, _ in fofedavg_mnist.iid_cells(iid)}
  # Table II: the mean over the 25 rounds of each seed, then over the 3 seeds.
  c, values = cells[("Table II", "FedAvg", "Mean")]
  want = [sum(_accuracy(0.97, s)) / ROUNDS for s in range(3)]
  assert values == pytest.approx(want)
  assert c.n == 3 and c.mean == pytest.approx(sum(want) / 3)
  # Published FedAvg 0.8953: ours ~0.95, the seeds 0.001 apart: differs.
  assert c.verdict == verdicts.DIFFERS
  # FOFedAvg's published mean 0.9812 and ours ~0.955: differs as well (no kinder).
  assert cells[("Table II", "FOFedAvg", "Mean")][0].verdict == verdicts.DIFFERS
  # Std over rounds: ours ~0.047 against 0.04 -> within 2 pp, seeds agree closely.
  assert cells[("Table II", "FOFedAvg", "Std. Dev.")][0].verdict == verdicts.AGREES
  # Variance judged on its square root; its Δ is in the table's units.
  var, _ = cells[("Table II", "FedAvg", "Variance")]
  assert var.published.value == 0.0228 and "√variance" in var.note
  assert var.verdict == verdicts.DIFFERS      # √0.0228 = 0.151 against ~0.047
  # Table III: n not stated -> no verdict, ours shown.
  lo, _ = cells[("Table III", "FedAvg", "CI95_low")]
  assert lo.verdict == verdicts.NOT_DEFINED and lo.mean is not None
  assert "states neither n" in lo.note and "n = 25 rounds" in lo.note
  # SparseSecAgg: refused at C = 0.2, said in its cell.
  secagg, _ = cells[("Table II", "SparseSecAgg", "Mean")]
  assert secagg.verdict == verdicts.NOT_RUN and "C = 0.2" in secagg.note
  # Methods not finished have no cell.
  assert ("Table II", "SCAFFOLD", "Mean") not in cells
  # Table IV: the final round over seeds, judged against mean ± std; std and CI not.
  alpha = {(r, c): cmp for _, r, c, cmp, _, _ in
           fofedavg_mnist.alpha_cells(fofedavg_mnist.load("alpha"))}
  assert alpha[("alpha=1.5", "mean")].mean == pytest.approx(0.99 + 0.001 - 0.2 * math.exp(
      -ROUNDS / 3.0))
  assert alpha[("alpha=1.5", "mean")].verdict == verdicts.AGREES   # 0.991 vs 0.9908
  assert alpha[("alpha=1.5", "std")].verdict == verdicts.NOT_DEFINED
  assert alpha[("alpha=1.5", "CI_low")].verdict == verdicts.NOT_DEFINED
  assert ("alpha=0.5", "mean") not in alpha
  text = (out / "t.md").read_text()
  assert "## Table II: mean / variance / std" in text
  assert "real MNIST (60,000 / 10,000), IID, K = 10 clients, 3 seeds" in text
  assert "CPU, 2 cores (one process pinned per core)" in text
  assert "| FedAvg · Mean | 0.8953 |" in text
  assert "SCAFFOLD (seed 2: no record yet)" in text
  assert "iid/fedavg" not in text or "fedavg 18 min 20 s" in text
  assert "fedavg 18 min 20 s (core 0" in text
  row = next(line for line in text.splitlines() if line.startswith("| SparseSecAgg · Mean"))
  assert "refused at C = 0.2" in row and "| not run |" in row


def test_published_table_sets_real_cells_first_and_judges_them(campaign):
  root, out = campaign
  fofedavg_mnist.main([f"--collect={root}", f"--out={out / 't.md'}"])
  text = published_tables.markdown("fofedavg", "cmd")
  rows = [line for line in text.splitlines() if line.startswith("| FedAvg · Mean |")]
  assert len(rows) == 2                          # the real MNIST, then the digits stand-in
  assert "real MNIST" in rows[0] and "| differs |" in rows[0]
  assert "scikit-learn digits" in rows[1] and "| stand-in |" in rows[1]
  n_real, real, n_standin, rest = published_tables.real_counts("fofedavg")
  # Tables II–III: 2 methods × 5 cells, SparseSecAgg's 5 (not run); Table IV: 4.
  assert n_real == 2 * 5 + 5 + 4
  assert real[verdicts.NOT_RUN] == 5 and real[verdicts.NOT_DEFINED] == 2 * 2 + 3
  assert "rows on the paper's own data" in text
  assert "the paper's own data where run" in text.splitlines()[0]


def test_docs_put_the_real_cells_first_and_the_measured_time_in_place_of_the_estimate(
    campaign):
  from fedfrac_lab.reproduce import doc_blocks_estimates, doc_blocks_fractional
  from fedfrac_lab.reproduce import doc_blocks_readme
  root, out = campaign
  fofedavg_mnist.main([f"--collect={root}", f"--out={out / 't.md'}"])
  t2 = doc_blocks_fractional.fofedavg_t2()
  assert t2.startswith("MNIST (the paper's data")
  assert t2.index("MNIST (the paper's data") < t2.index("Digits stand-in")
  assert "2 of the 10 methods run here have finished" in t2
  assert "FedAvg 0.9508 ± 0.0010 (published 0.8953: differs)" in t2
  assert ("not finished yet: MOON, FedAdam, FedNova, FedProx, SCAFFOLD, DPSGD, FedBM, "
          "FDSE;") in t2                                         # the paper's order
  assert "SparseSecAgg refused at C = 0.2" in t2
  # FOFedAvg's rounds mean is 0.5 pp above FedAvg's, the seeds 0.1 pp apart.
  assert "FOFedAvg − FedAvg +0.50 pp" in t2 and "FOFedAvg above FedAvg" in t2
  t3 = doc_blocks_fractional.fofedavg_t3()
  assert "no verdict (*not defined*" in t3 and "(published [0.8374, 0.9532])" in t3
  t4 = doc_blocks_fractional.fofedavg_t4()
  assert t4.startswith("MNIST (")
  assert "α 1.5 0.9910 ± 0.0010 (published 0.9908 ± 0.0006: agrees)" in t4
  assert "not finished yet: α 0.5, α 0.6, α 0.97" in t4
  time2 = doc_blocks_estimates.fofedavg_t2_time()
  assert "FedAvg 18 min 20 s, FOFedAvg 19 min 0 s" in time2
  # The estimate stays for what has not run, labelled so: 8 methods × 25 × 3 × 4,800.
  assert "estimate for the 8 methods not run yet" in time2
  assert "× 25 rounds × 8 methods × 3 seeds" in time2
  time4 = doc_blocks_estimates.fofedavg_t4_time()
  assert "α 1.5 15 min 6 s" in time4 and "estimate for the 3 α values not run yet" in time4
  rows = [r for r in doc_blocks_readme.reproduces_rows() if r[0] == "fofedavg"]
  assert len(rows) == 1                  # one row: each published cell counted once
  _, _, data, published, tally, _ = rows[0]
  assert "MNIST (the paper's" in data and "stand-in" in data
  assert tally[verdicts.DIFFERS] >= 2 and sum(tally.values()) == published
  header, _, *lines = doc_blocks_readme.readme_reproduces().splitlines()
  for line in lines:
    assert line.count(" | ") == header.count(" | ") and len(line) <= 500, line
