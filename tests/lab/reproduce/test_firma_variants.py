"""A labelled variant of FIRMA's reference_code (one shared initial model for the
ring methods) runs with its option set, lands in a table section of its own,
and the campaign keeps its cells apart from the unchanged runs'."""
from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from fedfrac_lab.campaign import plan as plan_lib
from fedfrac_lab.reproduce import firma_files, firma_program, firma_variants


def test_the_variant_sets_init_on_every_ring_method_and_nothing_else():
  spec = {"dataset": "fashion_mnist", "dir": "/nowhere", "rounds": 2, "inputs": "authors",
          "parallelism": "vmap", "init": "shared"}
  c = firma_program.config_module(spec).firma_config("reference_code", "iid")
  assert {m: c.methods[m].get("init") for m in c.methods} == {
      "fedavg": None, "rdfl": "shared", "fedrep": "shared", "fibfl": "shared",
      "fibfl_plus": "shared", "fibfl_pp": "shared"}
  plain = firma_program.config_module(dict(spec, init=None)).firma_config(
      "reference_code", "iid")
  assert all(plain.methods[m].get("init") is None for m in plain.methods)
  with pytest.raises(ValueError, match="init='aligned': allowed values are None, shared"):
    firma_variants.apply(c, "aligned")


def test_cells_of_the_variant_are_keyed_and_titled_apart(tmp_path):
  assert firma_variants.cell_inputs("reference_code", {"inputs": "authors"}) == "authors"
  assert firma_variants.cell_inputs("reference_code", {"inputs": "authors",
                                                       "init": "shared"}) == "authors+shared"
  assert firma_variants.cell_inputs("paper", {"inputs": "authors", "init": "shared"}) == "unit"
  cell = {"runs": [{"accuracy": 0.8, "gini": 0.1}] * 3}

  def result(init):
    args = {"inputs": "authors", "seeds": 3, "rounds": 30, "device": "CPU, 2 cores"}
    if init:
      args["init"] = init
    return {"args": args, "scenarios": {"iid": {"results": {"reference_code": {
        "iid/fibfl": cell}}}}}
  paths = []
  for init in (None, "shared"):
    path = tmp_path / f"{init}.json"
    path.write_text(json.dumps(result(init)))
    paths.append(str(path))
  text = firma_files.markdown(paths, str(tmp_path / "t.md"))
  assert "## compat = reference_code, inputs (x − 0.5) / 0.5 as the authors' code " \
         "(torchvision Normalize)\n" in text
  assert "## compat = reference_code, inputs (x − 0.5) / 0.5 as the authors' code " \
         "(torchvision Normalize), one shared initial model (a labelled variant of the " \
         "authors' code)" in text


def test_the_plan_runs_the_variant_as_its_own_items():
  plan = plan_lib.load("benchmarks/gpu/plan.json")
  variant = [i for i in plan.items if i.kind == "firma" and i.spec.get("init")]
  assert [i.spec["methods"] for i in variant] == [["rdfl", "fedrep"],
                                                 ["fibfl", "fibfl_plus"], ["fibfl_pp"]]
  assert all(i.spec["mode"] == "reference_code" and len(i.spec["scenarios"]) == 7
             and i.spec["seeds"] == 3 and "init=shared" in i.label for i in variant)
  # The committed reference_code cells do not cover the variant's: only the
  # variant's own files do (its FibFL IID cell, run on the CPU).
  coverage = plan_lib.coverage(plan, ".")
  for i in variant:
    for path in coverage.get(i.id, {}).get("paths", []):
      assert "shared" in path, (i.label, path)


def test_a_firma_files_run_of_the_variant_says_so_in_its_args():
  from fedfrac_lab.reproduce.firma_files import files_spec
  args = argparse.Namespace(dataset="mnist", dir="/d", rounds=3, inputs="authors",
                            parallelism="vmap", init="shared")
  assert files_spec(args)["init"] == "shared"
  assert "init" not in files_spec(argparse.Namespace(**{**vars(args), "init": None}))


def test_predictions_put_the_threshold_halfway_and_outcome_reads_it():
  """A prediction's threshold is the midpoint between the authors'-draw mean and
  the published value, on the published side; a cell without an authors'-draw
  mean predicts agreement only."""
  published = {("fibfl", "dir0.5"): 0.70, ("fibfl", "ls3"): 0.88}
  [low, none] = firma_variants.predictions(
      published, {("dir0.5", "fibfl"): 0.60}, [("dir0.5", "fibfl"), ("ls3", "fibfl")])
  assert low["threshold"] == 0.65 and low["authors_draw_mean"] == 0.6
  assert none["threshold"] is None and none["prediction"] == "agrees with the published value"
  assert firma_variants.outcome(low, 0.66, "differs") == "confirmed"
  assert firma_variants.outcome(low, 0.64, "differs") == "refuted"
  assert firma_variants.outcome(low, 0.55, "agrees") == "confirmed"
  assert firma_variants.outcome(none, 0.87, "inconclusive") == "refuted"
  # a gap on the other side: the published value below the authors' draw
  [above] = firma_variants.predictions({("fibfl", "iid"): 0.70}, {("iid", "fibfl"): 0.80},
                                       [("iid", "fibfl")])
  assert firma_variants.outcome(above, 0.74, "differs") == "confirmed"
  assert firma_variants.outcome(above, 0.76, "differs") == "refuted"


def test_the_committed_predictions_name_their_command_and_cells():
  """The committed file says what each cell predicts, before the variant runs it,
  and the command that remade it."""
  import pathlib
  root = pathlib.Path(__file__).resolve().parents[3]
  d = json.loads((root / "results/firma_shared_variant_predictions.json").read_text())
  assert d["command"].startswith("fedfrac-reproduce firma_files --predict=shared")
  assert {(c["scenario"], c["method"]) for c in d["cells"]} == {
      (s, m) for s in ("dir0.5", "dir0.1", "ls1", "ls2", "ls3")
      for m in ("fibfl", "fibfl_plus")}


def test_a_partition_per_seed_gives_each_seed_its_own_draw_and_its_own_section(tmp_path):
  """--partition=per_seed sets data.seed = -1 (the authors' code pins 42), so two
  seeds build different partitions; its cells are keyed and titled apart, and the
  table says what their n covers."""
  from tests.data.test_files import write_mnist_idx
  write_mnist_idx(tmp_path, n_train=600, n_test=100, gz=True)
  spec = {"dataset": "fashion_mnist", "dir": str(tmp_path), "rounds": 2,
          "inputs": "authors", "parallelism": "vmap"}
  module = firma_program.config_module(dict(spec, partition="per_seed"))
  assert module.firma_config("reference_code", "dir0.5").data.seed == -1
  assert firma_program.config_module(spec).firma_config(
      "reference_code", "dir0.5").data.seed == 42
  _, (a, b) = firma_program.build_feds(module, "reference_code", ("dir0.5",), (0, 1))["dir0.5"]
  _, (c, d) = firma_program.build_feds(firma_program.config_module(spec), "reference_code",
                                       ("dir0.5",), (0, 1))["dir0.5"]
  assert c is d                                     # one pinned draw for both seeds
  assert a is not b and not np.array_equal(a.class_counts, b.class_counts)
  assert firma_variants.cell_inputs(
      "reference_code", {"inputs": "authors", "partition": "per_seed"}) == "authors+per_seed"
  cell = {"runs": [{"accuracy": 0.8, "gini": 0.1}] * 3}
  path = tmp_path / "per_seed.json"
  path.write_text(json.dumps({"args": {"inputs": "authors", "partition": "per_seed",
                                       "seeds": 3, "rounds": 30, "device": "CPU"},
                              "scenarios": {"iid": {"results": {"reference_code": {
                                  "iid/fibfl": cell}}}}}))
  text = firma_files.markdown([str(path)], str(tmp_path / "t.md"))
  assert "each seed its own partition (`data.seed = -1`, a labelled variant" in text
  assert "Sections with “each seed its own partition”: each seed draws its own" in text
  with pytest.raises(ValueError, match="partition='fixed': allowed values are None, per_seed"):
    firma_variants.apply(module.firma_config("reference_code", "iid"), None, "fixed")
