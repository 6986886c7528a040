"""The accelerator measurements on a CPU with tiny sizes: batched PyTorch (the
cohort at once with torch.func) trains exactly as the sequential loop (Adam and
SGD with momentum, a sampled cohort), and the vs-PyTorch measurement runs as a
campaign item into a verified file that renders."""
from __future__ import annotations

import pytest

from fedfrac_lab.bench import accelerator, torch_side
from fedfrac_lab.campaign import files, items


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_batched_pytorch_trains_as_the_sequential_loop(optimizer):
  torch = pytest.importorskip("torch")
  tr = torch_side.reference_module()
  runs = {}
  for style in ("sequential", "batched"):
    torch.manual_seed(0)
    model, clients, make_opt, b, _ = tr.make_workload("firma_mlp", 3, per_client=40,
                                                      epochs=1)
    if optimizer == "sgd":
      make_opt = lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.5)
    g = torch.Generator().manual_seed(1)
    if style == "sequential":
      steps = [tr.fedavg_round(model, clients, make_opt, 16, 1, g, cohort=2)
               for _ in range(2)]
    else:
      opt = ("adam", 0.01) if optimizer == "adam" else ("sgd", 0.05, 0.5)
      runner = tr.BatchedFedAvg(model, clients, opt, 16, 1, cohort=2)
      steps = [runner(g) for _ in range(2)]
    runs[style] = (steps, [p.detach().clone() for p in model.parameters()])
  assert runs["sequential"][0] == runs["batched"][0] == [6, 6]   # 2 clients x 3 steps
  for a, b in zip(runs["sequential"][1], runs["batched"][1]):
    # Adam's division: seen 1 in 65,536 weights 3.6e-5 apart (torch 2.13, CPU)
    torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_the_vs_torch_measurement_runs_as_a_campaign_item(tmp_path):
  item = {"id": "m", "stage": "a", "kind": "bench", "table": "vs_torch",
          "label": "measurement vs_torch", "timing_key": "bench:vs_torch",
          "spec": {"workloads": ["firma_mlp"], "repeats": 1,
                   "sizes": {"firma_mlp": {"clients": 2, "per_client": 32, "epochs": 1}}}}
  path = items.run_item(item, str(tmp_path), str(tmp_path / "staging"), "code", print)
  obj = files.read_verified(path)
  assert obj["campaign"]["device"].startswith("CPU") and obj["campaign"]["slug"] == "cpu"
  row = obj["result"]["rows"][0]
  assert row["round_s"] > 0 and row["clients"] == 2
  text = "\n".join(accelerator.markdown("vs_torch", obj["result"]))
  if torch_side.torch_available():
    assert row["torch_device"] == "cpu" and row["torch_batched_round_s"] > 0
    assert "| FIRMA-sized MLP: FedAvg+Adam, 2 clients x 32, E=1, B=64 (digits) | cpu |" in text
  else:
    assert "PyTorch is not installed where this ran" in text


def test_precision_measures_speed_and_accuracy_per_setting():
  r = accelerator.precision(
      workloads=("firma_mlp",), repeats=1, precisions=("highest", "bfloat16"),
      sizes={"firma_mlp": {"clients": 2, "per_client": 32, "epochs": 1}},
      accuracy={"methods": ["fedavg"], "scenarios": ["iid"], "seeds": 2, "rounds_": 1,
                "precisions": ("highest",)})
  assert [x["precision"] for x in r["speed"]] == ["highest", "bfloat16"]
  assert r["speed"][0]["speedup_vs_first"] == 1.0 and r["speed"][1]["round_s"] > 0
  acc = r["accuracy"]
  assert [(x["precision"], len(x["accuracies"])) for x in acc] == [("highest", 2)]
  assert acc[0]["delta"] == 0.0 and acc[0]["within_noise"]
  text = "\n".join(accelerator.markdown("precision", r))
  assert "| iid | fedavg | highest |" in text and "| bfloat16 |" in text


def test_points_per_hour_runs_the_seeds_vmapped_and_one_at_a_time(tmp_path):
  from tests.data.test_files import write_mnist_idx
  write_mnist_idx(tmp_path, n_train=1400, n_test=300, gz=True)
  r = accelerator.points_per_hour(str(tmp_path), seeds=2, rounds_=1)
  v, o = r["forms"]["vmapped"], r["forms"]["one_at_a_time"]
  assert v["compiles"] == o["compiles"] == 1 and len(v["accuracies"]) == 2
  assert r["ratio"] == pytest.approx(v["points_per_hour"] / o["points_per_hour"])
  assert r["max_accuracy_diff"] < 1e-5       # the same runs, vmapped or not
  assert "points/hour" in accelerator.markdown("points_per_hour", r)[2]
