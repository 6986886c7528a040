"""``fedfrac-reproduce firma_start_rounds``: the per-round runs behind docs/design.md
§3.3's table "Why they peak and decline" (FibFL, Fashion-MNIST IID, N = 10, the
authors' partition, seed 0), each one ``fedfrac-reproduce firma_authors fedfrac``
command with one change, written with its command and its output to one results
file that the design page renders its table from.

  fedfrac-reproduce firma_start_rounds --out=results/firma_fibfl_start_rounds.json

A row already in the file with the same command is kept, not rerun (``--rows`` picks
rows by name); each row's record is the JSON line its command printed, verbatim.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Dict, List, NamedTuple, Tuple

OUT = "results/firma_fibfl_start_rounds.json"
PREFIX = "fedfrac-reproduce firma_authors fedfrac"


class Row(NamedTuple):
  name: str
  label: str
  flags: Tuple[str, ...]

  def command(self, data: str) -> str:
    extra = [] if data == DATA else [f"--data={data}"]
    return " ".join([PREFIX, *self.flags, *extra])


DATA = "/usr/share/datasets/fashion-mnist"
ROWS = (
    Row("no_mixing", "no mixing (γ = 1): local training only",
        ("--method=fibfl", "--rounds=3", "--set=gamma=1.0")),
    Row("shared", "one shared initial model (`init=\"shared\"`)",
        ("--method=fibfl", "--rounds=3", "--set=init=shared")),
    Row("per_client", "the authors' per-client initial models",
        ("--method=fibfl", "--rounds=3")),
    Row("paper", "the `paper` mode (shared initial model, [0, 1] inputs, its own IID "
        "partition)", ("--method=fibfl", "--rounds=10", "--set=mode=paper",
                       "--set=inputs=unit")),
)
NAMES = tuple(r.name for r in ROWS)


def load(path: str) -> Dict:
  if not os.path.exists(path):
    return {"what": __doc__.split("\n\n")[0].split(": ", 1)[1].replace("\n", " "),
            "command": f"fedfrac-reproduce firma_start_rounds --out={path}",
            "rows": {}}
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def run_printed(flags: Tuple[str, ...], data: str, command: str) -> Tuple[Dict, float]:
  """Run ``fedfrac-reproduce firma_authors fedfrac <flags> --data=<data>`` in a child
  process (``command`` names it in an error); (the JSON line it printed last, the
  wall seconds of the whole process)."""
  argv = [sys.executable, "-m", "fedfrac_lab.reproduce", "firma_authors", "fedfrac",
          *flags, f"--data={data}"]
  t0 = time.time()
  done = subprocess.run(argv, capture_output=True, text=True, check=False)
  if done.returncode != 0:
    raise SystemExit(f"{command} exited {done.returncode}: "
                     f"{done.stderr.strip().splitlines()[-1:]}")
  return json.loads(done.stdout.strip().splitlines()[-1]), round(time.time() - t0, 1)


def run_row(row: Row, data: str) -> Dict:
  """Run one row's command in a child process; its printed JSON line, with the
  command and the wall time of the whole process."""
  record, wall = run_printed(row.flags, data, row.command(data))
  return {"label": row.label, "command": row.command(data), "record": record,
          "process_wall_s": wall}


def main(argv: List[str] | None = None) -> int:
  p = argparse.ArgumentParser(prog="fedfrac-reproduce firma_start_rounds",
                              description=__doc__.split("\n\n")[0])
  p.add_argument("--out", default=OUT)
  p.add_argument("--data", default=DATA, help="the Fashion-MNIST IDX files")
  p.add_argument("--rows", default=",".join(NAMES),
                 help=f"comma-separated, of {', '.join(NAMES)}")
  args = p.parse_args(argv)
  picked = [x for x in args.rows.split(",") if x]
  unknown = [x for x in picked if x not in NAMES]
  if unknown:
    p.error(f"--rows: {unknown[0]!r} is not a row; allowed: {', '.join(NAMES)}")
  doc = load(args.out)
  for row in ROWS:
    if row.name not in picked:
      continue
    have = doc["rows"].get(row.name)
    if have and have["command"] == row.command(args.data):
      continue
    doc["rows"][row.name] = run_row(row, args.data)
    with open(args.out, "w", encoding="utf-8") as f:
      json.dump(doc, f, indent=1, ensure_ascii=False)
      f.write("\n")
    print(f"{row.name}: {doc['rows'][row.name]['record']['curve']}", flush=True)
  return 0
