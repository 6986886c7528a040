"""scripts/sweep.py: argument parsing, config axes × a vmapped grid, markdown output."""
from __future__ import annotations

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def sweep():
  spec = importlib.util.spec_from_file_location("sweep", os.path.join(ROOT, "scripts",
                                                                      "sweep.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_parse_values_and_assignments(sweep):
  assert sweep.parse_assignment("rounds=5", "--set") == ("rounds", 5)
  assert sweep.parse_assignment("client.schedule=inv_sqrt", "--set") == (
      "client.schedule", "inv_sqrt")
  assert sweep.parse_assignment("alpha=0.5,1.0", "--grid", many=True) == (
      "alpha", [0.5, 1.0])
  assert sweep.parse_assignment("model.hidden=(8,);(16, 8)", "--sweep", many=True) == (
      "model.hidden", [(8,), (16, 8)])
  with pytest.raises(SystemExit, match="KEY=VALUE"):
    sweep.parse_assignment("rounds", "--set")


def test_axes_times_grid_table(sweep, tmp_path):
  out = tmp_path / "table.md"
  points = sweep.main([
      "--config", os.path.join(ROOT, "configs", "quickstart.py"),
      "--set=rounds=1", "--set=model.hidden=(8,)", "--set=only=fedavg",
      "--set=data.num_clients=4", "--sweep=client.lr=0.05,0.2",
      "--grid=server_lr=0.5,1.0", "--seeds=0,1", f"--out={out}"])
  assert [p for p, _ in points] == [{"client.lr": 0.05}, {"client.lr": 0.2}]
  for _, summary in points:
    assert list(summary) == ["fedavg[server_lr=0.5]", "fedavg[server_lr=1.0]"]
    assert all(entry["accuracy"]["n"] == 2 for entry in summary.values())
  acc = [s["fedavg[server_lr=1.0]"]["accuracy"]["mean"] for _, s in points]
  assert acc[0] != acc[1]
  text = out.read_text()
  assert "| client.lr | method | final accuracy |" in text
  assert text.count("| fedavg[server_lr=") == 4 and " ± " in text
  assert (tmp_path / "table.json").exists()
