"""``fedfrac-reproduce fofedavg_mnist`` on Tables V–VI's K = 10 column: workdirs of
runs that stop at 60 % (fake ones written here, sealed as the runner seals them)
become results/fofedavg_mnist_severe_10.json, the rows of the markdown table, and
the estimate of the columns not run."""
from __future__ import annotations

import json
import math

import pytest
from scipy import stats

from fedfrac.runner import sealed
from fedfrac.runner.records import Target, stopped_entry
from fedfrac_lab.reproduce import doc_blocks_estimates as est
from fedfrac_lab.reproduce import fofedavg_mnist, published_tables, verdicts

ROUNDS = 25
PER_ROUND = 174_720.0        # 2 clients × 21,840 float32 parameters
TARGET = Target("target_accuracy", "accuracy", 0.6, True)


def _curve(reach):
  """Accuracy a round: 0.3 until round ``reach`` (None: never), 0.75 from it on."""
  return [0.75 if reach is not None and r >= reach else 0.3 for r in range(1, ROUNDS + 1)]


def _rows(reach, upto):
  return [{"round": r, "accuracy": a, "loss": 1.0 - a, "bytes_up": PER_ROUND,
           "cum_bytes_up": PER_ROUND * r}
          for r, a in zip(range(1, upto + 1), _curve(reach))]


def _workdir(root, label, reaches, partial=(), stopped_at=None):
  """ROOT/severe_10/<label>: a config.json and a sealed record a seed; seed s stops
  at round ``reaches[s]`` (None: never reaches 60 % and runs all 25 rounds); the
  seeds of ``partial`` stop at round 10 without reaching it; ``stopped_at`` = {seed:
  round} writes a ``stopped`` entry that disagrees with the rows."""
  wd = root / "severe_10" / label
  (wd / "runs" / label).mkdir(parents=True)
  config = {"seeds": [0, 1, 2], "rounds": ROUNDS, "participation": 0.2, "only": label,
            "target_accuracy": 0.6, "stop_at_target": True,
            "data": {"source": "files", "dir": "/data/mnist", "partition": "dirichlet",
                     "alpha": 0.1, "num_clients": 10},
            "client": {"batch_size": 50, "local_epochs": 20}}
  (wd / "config.json").write_text(json.dumps(config))
  for seed, reach in enumerate(reaches):
    rows = _rows(reach, 10 if seed in partial else (reach or ROUNDS))
    stop = stopped_entry(TARGET, rows)
    if stopped_at and seed in stopped_at:
      stop = dict(stop, rounds_to_target=stopped_at[seed])
    record = {"method": label, "algorithm": label, "seed": seed, "rows": rows,
              "round_rows": rows, "status": "ok",
              "compile_s": 1.0, "wall_s": 60.0, "nonfinite_allowed": []}
    if stop is not None:
      record["stopped"] = stop
    sealed.write(str(wd / "runs" / label / f"seed_{seed}.json"), record)
  return wd


@pytest.fixture
def campaign(tmp_path, monkeypatch):
  """severe_10: fedavg reaches 60 % at rounds 3, 6, 4; fofedavg's seed 1 never does
  in 25 rounds; moon's seed 0 record is edited by hand (damaged); scaffold's seed 2
  says it stopped at round 2, its rows reach 60 % at round 5; fedprox's seed 1 is
  cut at round 10 without reaching it. Core logs; results files in tmp_path."""
  root = tmp_path / "campaign" / "runs"
  _workdir(root, "fedavg", (3, 6, 4))
  _workdir(root, "fofedavg", (3, None, 4))
  moon = _workdir(root, "moon", (3, 3, 3))
  path = moon / "runs" / "moon" / "seed_0.json"
  data = json.loads(path.read_text())
  data["rows"][-1]["accuracy"] = 0.9                  # checksum no longer matches
  path.write_text(json.dumps(data))
  _workdir(root, "scaffold", (3, 3, 5), stopped_at={2: 2})
  _workdir(root, "fedprox", (3, None, 3), partial=(1,))
  (tmp_path / "campaign" / "core0.log").write_text(
      "2026-12-07T23:25:14Z start severe,10/fedavg (core 0)\n"
      "2026-12-07T23:45:40Z end severe,10/fedavg rc=0 wall_s=1226\n"
      "2026-12-08T00:24:33Z start severe,10/fedavg (core 0)\n"
      "2026-12-08T00:24:42Z end severe,10/fedavg rc=0 wall_s=9 (done before)\n")
  (tmp_path / "campaign" / "core1.log").write_text(
      "2026-12-08T00:28:09Z start severe,10/fofedavg (core 1)\n"
      "2026-12-08T00:32:27Z end severe,10/fofedavg rc=0 wall_s=258\n")
  out = tmp_path / "results"
  jsons = {k: str(out / f"{k}.json") for k in fofedavg_mnist.JSONS}
  monkeypatch.setattr(fofedavg_mnist, "JSONS", jsons)
  monkeypatch.setattr(fofedavg_mnist, "IID_JSON", jsons["iid"])
  monkeypatch.setattr(fofedavg_mnist, "ALPHA_JSON", jsons["alpha"])
  monkeypatch.setattr(fofedavg_mnist, "SEVERE_JSON", jsons["severe_10"])
  fofedavg_mnist.main([f"--collect={root}", "--scenarios=severe_10",
                       f"--out={out / 't.md'}"])
  return root, out


def test_collect_reads_rounds_and_bytes_to_the_target(campaign):
  root, out = campaign
  doc = json.loads((out / "severe_10.json").read_text())
  assert doc["scenario"] == "severe_10"
  assert doc["spec"] == "configs/fofedavg/mnist_cnn.py:severe,10"
  assert sorted(doc["cells"]) == ["fedavg", "fofedavg"]
  fedavg = doc["cells"]["fedavg"]
  assert [fedavg["seeds"][s]["rounds_to_target"] for s in "012"] == [3, 6, 4]
  assert [fedavg["seeds"][s]["bytes_up_to_target"] for s in "012"] == [
      3 * PER_ROUND, 6 * PER_ROUND, 4 * PER_ROUND]
  assert fedavg["seeds"]["1"]["stopped"]["reason"] == "target_accuracy 0.6 reached at round 6"
  # The CPU time is the cell's own log line, found under the config's argument
  # "severe,10" though its folder is severe_10; a restart that found it done is no run.
  assert fedavg["cpu_wall_s"] == 1226 and fedavg["core"] == 0 and len(fedavg["runs"]) == 1
  assert fedavg["command"] == (
      "nice -n 19 taskset -c 0 python -m fedfrac.main "
      "--config=configs/fofedavg/mnist_cnn.py:severe,10 --config.only=fedavg "
      "--config.data.source=files --config.data.dir=/data/mnist "
      f"--workdir={root / 'severe_10' / 'fedavg'} --config.stop_at_target=True")
  assert fedavg["device"] == fofedavg_mnist.DEVICE
  # A seed that ran its 25 rounds without reaching 60 % counts, with no number.
  fo = doc["cells"]["fofedavg"]["seeds"]["1"]
  assert fo["rounds_to_target"] is None and fo["bytes_up_to_target"] is None
  assert fo["last_round"] == ROUNDS and fo["stopped"] is None
  # A damaged record, a stopped entry its rows contradict, a run cut short: pending.
  assert "record not verified" in doc["pending"]["moon"]
  assert ("seed 2: its record says it stopped at the target at round 2, its rows reach "
          "0.6 at round 5") == doc["pending"]["scaffold"]
  assert doc["pending"]["fedprox"] == "seed 1: 10 of 25 rounds, not stopped at the target"
  assert doc["pending"]["dp_sgd"] == "no workdir"


def test_cells_say_what_n_is_and_why_there_is_no_verdict(campaign):
  cells = {(t, r): (c, v, what) for t, r, _, c, v, what in
           fofedavg_mnist.target_cells(fofedavg_mnist.load("severe_10"))}
  c, values, what = cells[("Table V", "FedAvg")]
  assert values == [3, 6, 4] and c.n == 3
  s = math.sqrt(((3 - 13 / 3) ** 2 + (6 - 13 / 3) ** 2 + (4 - 13 / 3) ** 2) / 2)
  assert c.mean == pytest.approx(13 / 3) and c.std == pytest.approx(s)
  assert c.delta == pytest.approx(13 / 3 - 17)                 # the paper's FedAvg: 17
  assert c.half_width == pytest.approx(stats.t.ppf(0.95, 2) * s / math.sqrt(3))
  assert c.verdict == verdicts.NOT_DEFINED and c.margin is None
  assert "no margin for a count of rounds" in c.note
  assert what.startswith("n = 3 seeds: each run's first round (of at most 25")
  mb, values, what = cells[("Table VI", "FedAvg")]
  assert values == pytest.approx([0.52416, 1.04832, 0.69888])
  assert mb.published.value == 249 and "no margin for a count of MB" in mb.note
  assert "ours 0.175 MB a round, the paper's 249 MB over 17 rounds" in what
  # A seed that did not reach 60 %: no mean, said in the cell.
  fo, values, _ = cells[("Table V", "FOFedAvg")]
  assert values == [3, None, 4] and fo.mean is None and fo.delta is None
  assert fo.verdict == verdicts.NOT_DEFINED
  assert "1 of 3 seeds did not reach test accuracy 0.6 in 25 rounds" in fo.note
  assert cells[("Table V", "SparseSecAgg")][0].verdict == verdicts.NOT_RUN
  assert ("Table V", "MOON") not in cells                        # not counted


def test_rendered_rows_and_published_table(campaign):
  _, out = campaign
  text = (out / "t.md").read_text()
  assert ("## Tables V–VI: rounds and uplink MB to 60 % test accuracy — real MNIST "
          "(60,000 / 10,000), Dirichlet 0.1, K = 10 clients only, 3 seeds, CPU") in text
  assert "each run stopped at the target" in text
  rows = {line.split(" | ")[0][2:]: line for line in text.splitlines()
          if line.startswith("| ") and " · " in line}
  assert rows["FedAvg · rounds"].startswith(
      "| FedAvg · rounds | 17 | 4.3 ± 1.5 (n = 3) | 3 / 6 / 4 | -12.7 | [")
  assert "| not defined |" in rows["FedAvg · rounds"]
  assert rows["FedAvg · MB"].startswith(
      "| FedAvg · MB | 249 | 0.757 ± 0.267 (n = 3) | 0.524 / 1.048 / 0.699 | -248.24 |")
  assert rows["FOFedAvg · rounds"].startswith(
      "| FOFedAvg · rounds | 4 | – | 3 / not reached in 25 rounds / 4 | – | – | "
      "not defined |")
  assert "| not run |" in rows["SparseSecAgg · MB"]
  assert "MOON (seed 0: record not verified" in text
  assert "Tables V–VI (K = 10): fedavg 20 min 26 s (core 0" in text
  # The published table sets ours beside the K = 10 cells only, as real data.
  table = published_tables.markdown("fofedavg", "cmd")
  line = next(x for x in table.splitlines() if x.startswith("| FedAvg · 10 Clients | 17 |"))
  assert "4.33 ± 1.53 (n = 3)" in line and "| not defined |" in line
  line = next(x for x in table.splitlines() if x.startswith("| FOFedAvg · 10 Clients | 4 |"))
  assert "per seed 3 / not reached in 25 rounds / 4" in line
  assert next(x for x in table.splitlines()
              if x.startswith("| FedAvg · 100 Clients |")).endswith("| not run |  |")


def test_estimate_prices_runs_stopped_at_the_assumed_rounds(campaign):
  """K = 100 and 1,000: our K = 10 mean × the paper's ratio for the method, rounded
  up to the evaluation period (1 at K = 100, 5 at K = 1000), capped at the config's
  rounds (50, 250); a method whose K = 10 seed did not reach 60 % runs to the cap; a
  method not measured at K = 10 takes the measured mean (FedAvg's 13/3, the only
  one that reached it in every seed)."""
  assert est.measured_rounds_to_target() == {"fedavg": pytest.approx(13 / 3),
                                             "fofedavg": None}
  runs = {(r.clients, r.label): r for r in est.target_runs()}
  assert (10, "fedavg") not in runs and (10, "fofedavg") not in runs   # measured
  assert runs[(100, "fedavg")].rounds == math.ceil(13 / 3 * 39 / 17) == 10
  assert runs[(1000, "fedavg")].rounds == 55                 # 13/3 × 215/17 = 54.8 → 55
  assert runs[(100, "fofedavg")].rounds == 50 and runs[(1000, "fofedavg")].rounds == 250
  assert runs[(100, "fofedavg")].how == "did not reach 60 % at K = 10"
  assert runs[(10, "moon")].rounds == 5                      # ⌈13/3⌉, the paper's ratio 1
  assert runs[(1000, "fednova")].rounds == 105               # 13/3 × 189/8 = 102.4
  steps, capped, seeds = est._target_prices(list(runs.values()))
  per = {10: 4_800, 100: 4_800, 1000: 8_000}
  assert seeds == 3
  assert steps == 3 * sum(r.rounds * per[r.clients] for r in runs.values())
  assert capped == 3 * sum({10: 25, 100: 50, 1000: 250}[r.clients] * per[r.clients]
                           for r in runs.values())
  text = est.fofedavg_t5_time()
  assert "rounds to 60 % at K = 100 and 1,000 are not measured; assumed:" in text
  assert "FedAvg 4.3, FOFedAvg not reached" in text
  assert f"= {steps:,}" in text and f"is {capped:,} client-steps" in text
  assert "a method not measured at K = 10 takes the mean of those measured (4.3)" in text
  assert "its config's rounds (25 / 50 / 250 at K = 10 / 100 / 1,000)" in text
  row = est.fofedavg_t5_time_row()
  assert row.startswith("K = 10: 2 measured (CPU); the rest, stopped at 60 %")
