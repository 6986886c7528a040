"""fedfrac-reproduce firma_start_rounds: each row is one firma_authors fedfrac
command, kept with its printed record; a row already in the file with the same
command is not run again."""
from __future__ import annotations

import json

import pytest

from fedfrac_lab.reproduce import firma_start_rounds as fsr


def test_unknown_row_is_refused_before_any_run(tmp_path, capsys):
  with pytest.raises(SystemExit):
    fsr.main([f"--out={tmp_path / 'x.json'}", "--rows=shared,nope"])
  assert "'nope' is not a row" in capsys.readouterr().err
  assert not (tmp_path / "x.json").exists()


def test_rows_are_written_with_their_command_and_kept_on_a_rerun(tmp_path, monkeypatch):
  ran = []

  def fake(row, data):
    ran.append(row.name)
    return {"label": row.label, "command": row.command(data),
            "record": {"curve": [0.5, 0.6, 0.7]}, "process_wall_s": 1.0}

  monkeypatch.setattr(fsr, "run_row", fake)
  out = tmp_path / "start.json"
  assert fsr.main([f"--out={out}", "--rows=no_mixing,shared"]) == 0
  doc = json.loads(out.read_text())
  assert doc["command"] == f"fedfrac-reproduce firma_start_rounds --out={out}"
  assert doc["rows"]["shared"]["command"] == (
      "fedfrac-reproduce firma_authors fedfrac --method=fibfl --rounds=3 --set=init=shared")
  assert ran == ["no_mixing", "shared"]
  fsr.main([f"--out={out}", "--rows=no_mixing,shared,per_client"])
  assert ran == ["no_mixing", "shared", "per_client"]      # the first two kept
  # another data directory is another command: that row runs again
  fsr.main([f"--out={out}", "--rows=shared", "--data=/elsewhere"])
  assert ran[-1] == "shared"
  assert json.loads(out.read_text())["rows"]["shared"]["command"].endswith("--data=/elsewhere")
