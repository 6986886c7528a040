"""A workdir belongs to one experiment (fedfrac.runner.workdir): refusal of a
different config, --overwrite, every method's results kept, unwritable workdirs,
partial runs and the resume line (issue rows 2, 3, 4, 13; run status)."""
from __future__ import annotations

import csv
import json
import os

import ml_collections
import pytest

import fedfrac as ff
from fedfrac.config import ConfigError
from fedfrac.runner import workdir as workdir_lib
from tests import helpers


def _config(**overrides):
  return helpers.tiny_config(**{"rounds": 2, "eval_every": 1, **overrides})


def _metrics(path):
  with open(path / "metrics.csv") as f:
    return list(csv.DictReader(f))


def test_a_different_config_is_refused_before_compute(tmp_path):
  ff.run(_config(), workdir=str(tmp_path))
  before = (tmp_path / "metrics.csv").read_text()
  config_before = (tmp_path / "config.json").read_text()
  # Row 2: another learning rate. Row 3: another model shape.
  for key, value, shown in [("client.lr", 0.01, "client.lr 0.1 -> 0.01"),
                            ("model.hidden", (8,), "model.hidden [16] -> [8]")]:
    with pytest.raises(ConfigError, match="holds results of a different config") as e:
      ff.run(_config(**{key: value}), workdir=str(tmp_path))
    assert shown in str(e.value) and "overwrite=True" in str(e.value)
    assert "\n" not in str(e.value)
  # Nothing was touched: the old results and config stay as they were.
  assert (tmp_path / "metrics.csv").read_text() == before
  assert (tmp_path / "config.json").read_text() == config_before


def test_a_method_option_change_is_refused_and_overwrite_starts_afresh(tmp_path):
  ff.run(_config(), workdir=str(tmp_path))
  c = _config()
  c.methods.fedavg.server_lr = 0.5
  with pytest.raises(ConfigError, match="methods.fedavg.options.server_lr 1.0 -> 0.5"):
    ff.run(c, workdir=str(tmp_path))
  res = ff.run(c, workdir=str(tmp_path), overwrite=True)
  rows = _metrics(tmp_path)
  assert len(rows) == 2
  assert float(rows[-1]["accuracy"]) == pytest.approx(res.rows[-1]["accuracy"])
  stored = json.loads((tmp_path / "experiment.json").read_text())
  assert stored["methods"]["fedavg"]["options"]["server_lr"] == 0.5


def test_output_settings_and_extending_rounds_are_allowed(tmp_path):
  ff.run(_config(), workdir=str(tmp_path))
  res = ff.run(_config(rounds=4, eval_every=2, progress=False, name="other"),
               workdir=str(tmp_path))
  assert [r["round"] for r in res.record("fedavg", 0).round_rows] == [1, 2, 3, 4]


def test_every_method_and_seed_is_kept(tmp_path):
  # Row 4: a second method (and a second seed) in the same workdir adds rows.
  c = _config()
  c.methods.fedprox = ml_collections.ConfigDict(dict(name="fedprox"))
  c.only = "fedavg"
  ff.run(c, workdir=str(tmp_path))
  c.only = "fedprox"
  ff.run(c, workdir=str(tmp_path))
  c.only = "fedavg"
  c.seeds = (1,)
  ff.run(c, workdir=str(tmp_path))
  rows = _metrics(tmp_path)
  assert sorted({(r["method"], r["seed"]) for r in rows}) == [
      ("fedavg", "0"), ("fedavg", "1"), ("fedprox", "0")]
  summary = json.loads((tmp_path / "summary.json").read_text())
  assert set(summary["methods"]) == {"fedavg", "fedprox"}
  assert set(summary["methods"]["fedavg"]["seeds"]) == {"0", "1"}


def test_run_many_checks_the_fingerprint_and_keeps_every_run(tmp_path):
  ff.run(_config(), workdir=str(tmp_path))
  with pytest.raises(ConfigError, match="client.lr 0.1 -> 0.01"):
    ff.run_many(_config(**{"client.lr": 0.01}), seeds=(0, 1), workdir=str(tmp_path))
  res = ff.run_many(_config(), seeds=(1, 2), workdir=str(tmp_path))
  rows = _metrics(tmp_path)
  # The earlier ``run`` (seed 0) and the batched seeds 1 and 2 are all kept.
  assert sorted({r["seed"] for r in rows}) == ["0", "1", "2"]
  last = [r for r in rows if r["seed"] == "2"][-1]
  assert float(last["accuracy"]) == pytest.approx(res.record("fedavg", 2).rows[-1]["accuracy"])


def test_results_without_a_fingerprint_are_not_mixed(tmp_path):
  (tmp_path / "metrics.csv").write_text("method\n")
  with pytest.raises(ConfigError, match="without experiment.json"):
    ff.run(_config(), workdir=str(tmp_path))


@pytest.mark.parametrize("kind", ["file_in_place", "under_a_file"])
def test_unwritable_workdir_is_one_line(tmp_path, kind):
  # Row 13: raw OS tracebacks before; now a ConfigError naming the workdir.
  blocker = tmp_path / "file"
  blocker.write_text("x")
  target = blocker if kind == "file_in_place" else blocker / "sub"
  with pytest.raises(ConfigError, match=f"workdir='{target}': cannot write there"):
    ff.run(_config(), workdir=str(target))


def test_overwrite_removes_only_what_runs_write(tmp_path):
  ff.run(_config(), workdir=str(tmp_path))
  (tmp_path / "notes.txt").write_text("mine")
  workdir_lib.clear(str(tmp_path))
  assert sorted(os.listdir(tmp_path)) == ["notes.txt"]


def test_stop_after_round_is_partial_and_resume_says_so(tmp_path, capsys):
  c = _config(rounds=4, eval_every=1)
  res = ff.run(c, workdir=str(tmp_path), stop_after_round=2)
  assert res.records[0].status == "partial"
  assert "partial" in res.table()
  summary = json.loads((tmp_path / "summary.json").read_text())
  assert summary["methods"]["fedavg"]["seeds"]["0"]["status"] == "partial"
  assert {r["status"] for r in _metrics(tmp_path)} == {"partial"}
  capsys.readouterr()
  res = ff.run(c, workdir=str(tmp_path))
  err = capsys.readouterr().err
  assert "resuming fedavg seed 0 from round 2" in err.splitlines()
  assert res.records[0].status == "ok"
  assert {r["status"] for r in _metrics(tmp_path)} == {"ok"}


def test_negative_stop_after_round_is_rejected(tmp_path):
  with pytest.raises(ConfigError, match="stop_after_round=-1: must be an integer >= 1"):
    ff.run(_config(), workdir=str(tmp_path), stop_after_round=-1)
  assert not (tmp_path / "metrics.csv").exists()


# ------------------------------------------------------------------ faults
# --overwrite deletes only what it must, a run is never reported at another
# length, and every record a table is built from is verified.


def _two(**overrides):
  """fedavg and fedprox, 2 rounds."""
  c = _config(**overrides)
  c.methods.fedprox = ml_collections.ConfigDict(dict(name="fedprox"))
  return c


def _tree(root, *parts):
  """{relative path: bytes} of every file under ``root/parts``."""
  base = root.joinpath(*parts)
  return {str(p.relative_to(root)): p.read_bytes() for p in base.rglob("*") if p.is_file()}


def _values(path, method):
  """(round, accuracy, loss) of ``method``'s metrics.csv rows."""
  return [(r["round"], r["accuracy"], r["loss"]) for r in _metrics(path)
          if r["method"] == method]


@pytest.fixture(scope="module")
def two_methods(tmp_path_factory):
  """A workdir holding a finished run of fedavg and one of fedprox."""
  root = tmp_path_factory.mktemp("two_methods")
  ff.run(_two(), workdir=str(root))
  return root


def _copy(src, dst):
  import shutil
  shutil.copytree(src, dst)
  return dst


def test_damaged_checkpoints_restart_one_method_and_overwrite_keeps_the_others(
    two_methods, tmp_path, capsys):
  work = _copy(two_methods, tmp_path / "w")
  fedprox = {**_tree(work, "runs", "fedprox"), **_tree(work, "checkpoints", "fedprox")}
  fedavg = _values(work, "fedavg")
  for npz in (work / "checkpoints" / "fedavg").rglob("state.npz"):
    npz.write_bytes(npz.read_bytes()[:100])   # every fedavg step damaged
  c = _two(only="fedavg")
  capsys.readouterr()
  ff.run(c, workdir=str(work))     # before: "no intact step; rerun with --overwrite"
  err = capsys.readouterr().err
  assert "no intact step" in err and "restarting fedavg seed 0 from round 0" in err, err
  assert _values(work, "fedavg") == fedavg
  assert {**_tree(work, "runs", "fedprox"), **_tree(work, "checkpoints", "fedprox")} == fedprox
  # --overwrite=fedavg restarts fedavg alone; fedprox's files stay byte for byte.
  ff.run(c, workdir=str(work), overwrite="fedavg")
  assert {**_tree(work, "runs", "fedprox"), **_tree(work, "checkpoints", "fedprox")} == fedprox
  assert _values(work, "fedavg") == fedavg and _values(work, "fedprox")
  with pytest.raises(ConfigError, match="overwrite='nosuch': no such method"):
    ff.run(c, workdir=str(work), overwrite="nosuch")


def test_overwrite_refuses_foreign_files_then_removes_only_its_own(two_methods, tmp_path):
  work = _copy(two_methods, tmp_path / "w")
  (work / "checkpoints" / "other").mkdir()
  (work / "checkpoints" / "other" / "model.pt").write_text("mine")
  (work / "runs" / "x").mkdir()
  (work / "notes.txt").write_text("mine")
  before = _tree(work)
  with pytest.raises(ConfigError) as e:   # before: both were deleted
    ff.run(_config(), workdir=str(work), overwrite=True)
  assert "checkpoints/other/model.pt, runs/x/" in str(e.value)
  assert "\n" not in str(e.value)
  assert _tree(work) == before
  (work / "checkpoints" / "other" / "model.pt").unlink()
  (work / "checkpoints" / "other").rmdir()
  (work / "runs" / "x").rmdir()
  ff.run(_config(), workdir=str(work), overwrite=True)
  assert (work / "notes.txt").read_text() == "mine"
  assert {r["method"] for r in _metrics(work)} == {"fedavg"}   # fedprox was cleared


def test_a_run_is_not_reported_at_a_shorter_length(two_methods, tmp_path):
  work = _copy(two_methods, tmp_path / "w")
  summary = (work / "summary.json").read_text()
  # Before: the round-2 accuracy was reported under rounds: 1, with no message.
  with pytest.raises(ConfigError) as e:
    ff.run(_two(rounds=1, only="fedavg"), workdir=str(work))
  assert str(e.value).startswith(f"workdir='{work}': fedavg seed 0 already ran 2 "
                                 f"rounds, more than config.rounds=1")
  assert "overwrite='fedavg'" in str(e.value) and "\n" not in str(e.value)
  assert (work / "summary.json").read_text() == summary
  ff.run(_two(rounds=1, only="fedavg"), workdir=str(work), overwrite="fedavg")
  stored = json.loads((work / "summary.json").read_text())
  assert stored["rounds"] == 1
  assert stored["methods"]["fedavg"]["seeds"]["0"]["rounds_done"] == 1
  # fedprox, kept from the 2-round command, says its length in the table.
  assert "| fedprox |" in (work / "summary.md").read_text()
  assert "ok (2 rounds)" in (work / "summary.md").read_text()


def _flip_accuracy(path):
  """Change one bit of the first accuracy digit (the file stays valid JSON)."""
  text = path.read_text()
  i = text.index('"accuracy": 0.') + len('"accuracy": 0.')
  digit = text[i]
  path.write_text(text[:i] + ("1" if digit == "0" else chr(ord(digit) ^ 1)) + text[i + 1:])


@pytest.mark.parametrize("damage,checkpoint,say", [
    ("flip", True, "(checksum mismatch); recomputed it from its checkpoint at round 2"),
    ("truncate", True, "(truncated or not JSON); recomputed it from its checkpoint"),
    ("truncate", False, "(truncated or not JSON); no intact checkpoint, so fedprox seed 0 "
                        "runs again from round 0"),
    ("truncate", "gone", "left out of the tables"),
])
def test_a_damaged_run_record_is_recomputed_not_reported(two_methods, tmp_path, capsys,
                                                         damage, checkpoint, say):
  work = _copy(two_methods, tmp_path / "w")
  fedprox = _values(work, "fedprox")
  record = work / "runs" / "fedprox" / "seed_0.json"
  if damage == "flip":
    _flip_accuracy(record)
  else:
    record.write_bytes(record.read_bytes()[:200])
  if checkpoint is not True:
    import shutil
    shutil.rmtree(work / "checkpoints" / "fedprox")
  c = _two(only="fedavg")
  if checkpoint == "gone":    # a config without fedprox cannot run it again
    del c.methods["fedprox"]
  capsys.readouterr()
  ff.run(c, workdir=str(work))   # before: a changed table, or a JSONDecodeError
  err = [l for l in capsys.readouterr().err.splitlines() if "seed_0.json" in l]
  assert len(err) == 1 and say in err[0], err
  assert err[0].startswith(f"{work}: runs/fedprox/seed_0.json failed verification")
  assert _values(work, "fedprox") == ([] if checkpoint == "gone" else fedprox)


def _rows(work, method):
  """(seed, round, accuracy, loss) of ``method``'s metrics.csv rows."""
  return [(r["seed"], r["round"], r["accuracy"], r["loss"]) for r in _metrics(work)
          if r["method"] == method]


@pytest.mark.parametrize("damage", ["truncate", "delete", "edit"])
def test_a_damaged_experiment_file_is_rebuilt_from_the_runs_that_match(
    two_methods, tmp_path, capsys, damage):
  # Before: truncated or deleted, the only way out was --overwrite of every
  # method, deleting both methods' verified results.
  work = _copy(two_methods, tmp_path / "w")
  path = work / "experiment.json"
  fedavg, fedprox = _rows(work, "fedavg"), _rows(work, "fedprox")
  config = _two()
  if damage == "truncate":
    path.write_text(path.read_text()[:100])
  elif damage == "delete":
    path.unlink()
  else:   # the stored learning rate edited to what the rerun asks for
    path.write_text(path.read_text().replace('"client.lr": 0.1', '"client.lr": 0.3'))
    config = _two(**{"client.lr": 0.3})
  before = _tree(work)
  capsys.readouterr()
  if damage == "edit":   # the runs kept are bound to client.lr 0.1: refused
    with pytest.raises(ConfigError) as e:
      ff.run(config, workdir=str(work))
    assert str(e.value).startswith(f"workdir='{work}': experiment.json failed "
                                   f"verification (checksum mismatch), and the runs of "
                                   f"fedavg, fedprox kept there are of another config "
                                   f"(client.lr 0.1 -> 0.3)")
    assert "\n" not in str(e.value)
    assert _tree(work) == before
    return
  ff.run(config, workdir=str(work))
  err = [l for l in capsys.readouterr().err.splitlines() if l.strip()]
  assert len(err) == 1 and "experiment.json" in err[0] and err[0].endswith(
      "rebuilt it from the 2 runs kept there, whose records and checkpoints match this "
      "config"), err
  assert _rows(work, "fedavg") == fedavg and _rows(work, "fedprox") == fedprox
  assert workdir_lib.stored_labels(str(work)) == ["fedavg", "fedprox"]
  with pytest.raises(ConfigError, match="client.lr 0.1 -> 0.3"):   # guarding again
    ff.run(_two(**{"client.lr": 0.3}), workdir=str(work))


def test_a_lost_experiment_file_offers_to_rerun_only_the_method_that_differs(
    two_methods, tmp_path):
  # Before: "holds results without experiment.json" also with --overwrite=fedavg;
  # only --overwrite (every method, fedprox's results too) was allowed.
  work = _copy(two_methods, tmp_path / "w")
  (work / "experiment.json").unlink()
  fedprox = {**_tree(work, "runs", "fedprox"), **_tree(work, "checkpoints", "fedprox")}
  c = _two(only="fedavg")
  c.methods.fedavg.server_lr = 0.5
  with pytest.raises(ConfigError) as e:
    ff.run(c, workdir=str(work))
  message = str(e.value)
  assert "the runs of fedavg kept there are of another config (methods.fedavg.options." \
         "server_lr 1.0 -> 0.5)" in message and "give overwrite='fedavg' to rerun that " \
         "method (the others' results are kept)" in message, message
  res = ff.run(c, workdir=str(work), overwrite="fedavg")
  assert {**_tree(work, "runs", "fedprox"), **_tree(work, "checkpoints", "fedprox")} == fedprox
  assert [r[2] for r in _rows(work, "fedavg")] == [
      str(r["accuracy"]) for r in res.record("fedavg", 0).rows]


def test_an_overwrite_of_a_method_the_command_does_not_run_is_refused(two_methods,
                                                                      tmp_path):
  # Before: --overwrite=fedavg with only=fedprox deleted fedavg's record,
  # checkpoints and rows, and did not run it again.
  work = _copy(two_methods, tmp_path / "w")
  before = _tree(work)
  with pytest.raises(ConfigError) as e:
    ff.run(_two(only="fedprox"), workdir=str(work), overwrite="fedavg")
  assert str(e.value).startswith("overwrite='fedavg': this command does not run fedavg "
                                 "(it runs fedprox)")
  assert "nothing was deleted" in str(e.value) and "\n" not in str(e.value)
  assert _tree(work) == before


def test_a_deleted_run_record_is_named_and_recomputed_from_its_checkpoint(
    two_methods, tmp_path, capsys):
  # Before: the run silently dropped out of metrics.csv and summary.md.
  work = _copy(two_methods, tmp_path / "w")
  fedprox = _rows(work, "fedprox")
  (work / "runs" / "fedprox" / "seed_0.json").unlink()
  capsys.readouterr()
  ff.run(_two(only="fedavg"), workdir=str(work))
  err = [l for l in capsys.readouterr().err.splitlines() if l.strip()]
  assert err == [f"{work}: runs/fedprox/seed_0.json is missing; recomputed it from its "
                 f"checkpoint at round 2"], err
  assert _rows(work, "fedprox") == fedprox
  assert "| fedprox |" in (work / "summary.md").read_text()
  assert (work / "runs" / "fedprox" / "seed_0.json").exists()


@pytest.fixture(scope="module")
def other_experiment(tmp_path_factory):
  """A workdir of fedprox at another client learning rate (another experiment)."""
  root = tmp_path_factory.mktemp("other_experiment")
  ff.run(_two(**{"client.lr": 0.5, "only": "fedprox"}), workdir=str(root))
  return root


@pytest.mark.parametrize("copied", ["record", "record and checkpoints"])
def test_a_record_copied_from_another_experiment_is_not_tabulated(
    two_methods, other_experiment, tmp_path, capsys, copied):
  # Before: its checksum verified, so the other experiment's numbers were
  # tabulated as this workdir's fedprox without a word.
  import shutil
  work = _copy(two_methods, tmp_path / "w")
  fedprox = _rows(work, "fedprox")
  assert _rows(other_experiment, "fedprox") != fedprox
  shutil.copy(other_experiment / "runs" / "fedprox" / "seed_0.json",
              work / "runs" / "fedprox" / "seed_0.json")
  if copied != "record":
    shutil.rmtree(work / "checkpoints" / "fedprox")
    shutil.copytree(other_experiment / "checkpoints" / "fedprox",
                    work / "checkpoints" / "fedprox")
  capsys.readouterr()
  ff.run(_two(only="fedavg"), workdir=str(work))
  err = [l for l in capsys.readouterr().err.splitlines() if "seed_0.json" in l]
  assert len(err) == 1 and err[0].startswith(
      f"{work}: runs/fedprox/seed_0.json failed verification (a record of another "
      f"experiment: client.lr 0.5 -> 0.1)"), err
  if copied == "record":
    assert err[0].endswith("recomputed it from its checkpoint at round 2")
  else:   # its checkpoints are of the other experiment too: run again here
    assert err[0].endswith("no intact checkpoint, so fedprox seed 0 runs again from "
                           "round 0")
  assert _rows(work, "fedprox") == fedprox


@pytest.mark.parametrize("stray", ["empty folder", "garbage files"])
def test_a_stray_step_folder_is_not_rounds_run(two_methods, tmp_path, stray):
  # Before: "fedavg seed 0 already ran 400 rounds, more than config.rounds=2".
  work = _copy(two_methods, tmp_path / "w")
  step = work / "checkpoints" / "fedavg" / "seed_0" / "step_400"
  step.mkdir()
  if stray == "garbage files":
    for name in ("state.npz", "history.json", "manifest.json"):
      (step / name).write_text("garbage")
  fedavg = _rows(work, "fedavg")
  ff.run(_two(only="fedavg"), workdir=str(work))
  assert _rows(work, "fedavg") == fedavg


def test_an_empty_workdir_is_refused():
  # Before: --workdir= ran and kept nothing, without a word.
  for entry in (ff.run, ff.run_many):
    with pytest.raises(ConfigError, match="workdir='' is empty: give a directory"):
      entry(_config(), workdir="")


@pytest.mark.parametrize("entry", ["run", "run_many"])
@pytest.mark.parametrize("key,value,match", [
    ("data.num_clients", 2000, "num_clients=2000"),        # the partition is infeasible
    ("client.batch_size", 5000, "batch_size=5000"),        # larger than any client
])
def test_a_run_refused_by_a_data_check_writes_nothing(tmp_path, entry, key, value, match):
  # These checks need the data loaded; a refused run once left experiment.json
  # and config.json behind, and the corrected rerun was then refused as "a
  # different config" for that workdir.
  call = {"run": ff.run, "run_many": ff.run_many}[entry]
  workdir = tmp_path / "wd"
  with pytest.raises(ValueError, match=match):
    call(_config(**{key: value}), workdir=str(workdir))
  assert not workdir.exists() or not os.listdir(workdir)
  res = call(_config(rounds=1), workdir=str(workdir))
  assert res.records[0].status == "ok"
  assert json.loads((workdir / "config.json").read_text())["data"]["num_clients"] == 6


def test_a_workdir_holding_only_the_config_of_a_run_that_never_started(tmp_path, capsys):
  # What such a refused run left behind before the data checks came first: the
  # fingerprint and config.json of a config that never ran. Nothing of it is
  # kept, so it is not another experiment: the corrected run replaces it, in one
  # line. One whose run started (a record) still refuses another config.
  bad = _config(**{"data.num_clients": 2000})
  workdir_lib.prepare(bad, str(tmp_path))
  assert (tmp_path / "config.json").exists()
  res = ff.run(_config(rounds=1), workdir=str(tmp_path))
  assert res.records[0].status == "ok"
  assert "held only the config of a run that never started" in capsys.readouterr().err
  with pytest.raises(ConfigError, match="holds results of a different config"):
    ff.run(_config(rounds=1, **{"client.lr": 0.01}), workdir=str(tmp_path))


def test_a_setting_added_later_at_its_default_keeps_older_results(tmp_path):
  # A workdir written before the `clock` section existed: its fingerprint has
  # none of clock's keys. The same command now carries them at their defaults
  # (the behaviour from before), so it extends the kept run; the same key at
  # another value is a different experiment and is refused, naming it.
  ff.run(_config(), workdir=str(tmp_path))
  path = str(tmp_path / "experiment.json")
  stored = workdir_lib.sealed.read(path)
  assert any(k.startswith("clock.") for k in stored["shared"])
  stored["shared"] = {k: v for k, v in stored["shared"].items() if not k.startswith("clock.")}
  workdir_lib.sealed.write(path, stored, indent=2)
  res = ff.run(_config(rounds=3), workdir=str(tmp_path))
  assert [r["round"] for r in res.rows][-1] == 3
  assert any(k.startswith("clock.") for k in workdir_lib.sealed.read(path)["shared"])
  workdir_lib.sealed.write(path, stored, indent=2)
  with pytest.raises(ConfigError, match=r"clock.speed_mean \(absent\) -> 2.0"):
    ff.run(_config(rounds=3, **{"clock.speed_mean": 2.0}), workdir=str(tmp_path))


def test_a_method_option_added_later_at_its_default_is_no_difference():
  bound = {"shared": {"client": {"lr": 0.1}},
           "method": {"name": "fibfl_pp", "options": {"warmup_rounds": 2}}}
  current = {"shared": {"client": {"lr": 0.1}, "clock": {"server": "none"}},
             "method": {"name": "fibfl_pp",
                        "options": {"warmup_rounds": 2, "warmup_optimizer": "keep"}}}
  assert workdir_lib.binding_differences(bound, current, "fibfl_pp") == []
  current["method"]["options"]["warmup_optimizer"] = "reset"
  current["shared"]["clock"]["server"] = "fedbuff"
  assert workdir_lib.binding_differences(bound, current, "fibfl_pp") == [
      "clock.server (absent) -> 'fedbuff'",
      "methods.fibfl_pp.options.warmup_optimizer (absent) -> 'reset'"]


@pytest.mark.parametrize("where", ["a kept run's record", "the record of a run to come"])
def test_a_folder_where_a_record_is_written_is_refused_before_compute(two_methods, tmp_path,
                                                                      where):
  # Before: a traceback (IsADirectoryError from os.replace) after the compute.
  work = _copy(two_methods, tmp_path / "w")
  seed = 0 if where == "a kept run's record" else 1
  record = work / "runs" / "fedavg" / f"seed_{seed}.json"
  if record.exists():
    record.unlink()
  record.mkdir()
  fedavg, fedprox = _rows(work, "fedavg"), _rows(work, "fedprox")
  before = _tree(work)
  with pytest.raises(ConfigError) as e:
    ff.run(_two(seeds=(0, 1)), workdir=str(work))
  assert str(e.value) == (
      f"workdir='{work}': {record} is a folder, where fedfrac writes a file; move it "
      f"away (or remove it) and call it again (nothing was computed or changed; the "
      f"results kept there stay as they are)")
  assert _tree(work) == before        # finished work kept, nothing written
  record.rmdir()
  res = ff.run(_two(seeds=(0, 1)), workdir=str(work))
  assert [r for r in _rows(work, "fedprox") if r[0] == "0"] == fedprox
  assert [r for r in _rows(work, "fedavg") if r[0] == "0"] == fedavg
  assert (record.is_file() and res.record("fedavg", 1).status == "ok")


def test_a_folder_made_at_a_record_during_the_run_is_one_line(two_methods, tmp_path):
  # A folder made after the check before compute: the record cannot be written,
  # one line says where the run's result is (its checkpoint) and how to get it.
  work = _copy(two_methods, tmp_path / "w")
  wd = workdir_lib.Workdir(work)
  rec = wd.read_record("fedavg", 0)
  path = wd.record_path("fedavg", 0)
  os.remove(path)
  os.makedirs(path)
  with pytest.raises(ConfigError) as e:
    wd.save_record(rec)
  assert str(e.value).startswith(f"workdir='{work}': {path} is a folder, where fedfrac "
                                 f"writes a file; its run's checkpoint and the other runs' "
                                 f"results are kept")
  assert os.path.isdir(wd.checkpoint_dir("fedavg", 0))


def test_a_foreign_experiment_file_says_removing_it_keeps_the_runs(
    two_methods, other_experiment, tmp_path, capsys):
  # Before: "use another workdir, or overwrite=True": both abandon the intact
  # runs kept there, which are bound to this command's settings.
  import shutil
  from fedfrac import _validation
  work = _copy(two_methods, tmp_path / "w")
  fedavg, fedprox = _rows(work, "fedavg"), _rows(work, "fedprox")
  shutil.copy(other_experiment / "experiment.json", work / "experiment.json")
  with pytest.raises(ConfigError) as e:
    ff.run(_two(), workdir=str(work))
  message = str(e.value)
  assert message.startswith(f"workdir='{work}' holds results of a different config "
                            f"(client.lr 0.5 -> 0.1")
  assert (f"but the 2 runs kept there are bound to this config's settings, so that file "
          f"is not theirs: remove {work / 'experiment.json'} and call it again to "
          f"rebuild it from them (their results are kept), or use another workdir, or "
          f"overwrite=True to start afresh") in message, message
  _validation.name_flags()     # as fedfrac.main does: the flags are named
  try:
    with pytest.raises(ConfigError) as e:
      ff.run(_two(), workdir=str(work))
  finally:
    _validation.name_flags(False)
  assert "and rerun the same command to rebuild it" in str(e.value)
  assert "use another --workdir, or --overwrite to start afresh" in str(e.value)
  (work / "experiment.json").unlink()     # the way out it names
  capsys.readouterr()
  ff.run(_two(), workdir=str(work))
  assert "rebuilt it from the 2 runs kept there" in capsys.readouterr().err
  assert _rows(work, "fedavg") == fedavg and _rows(work, "fedprox") == fedprox


def test_a_changed_setting_does_not_offer_to_remove_the_experiment_file(two_methods,
                                                                        tmp_path):
  # The kept runs are bound to client.lr 0.1: the file is theirs, and removing it
  # would not let another learning rate in.
  work = _copy(two_methods, tmp_path / "w")
  with pytest.raises(ConfigError) as e:
    ff.run(_two(**{"client.lr": 0.3}), workdir=str(work))
  assert "holds results of a different config (client.lr 0.1 -> 0.3)" in str(e.value)
  assert "remove" not in str(e.value)


def test_config_json_records_an_optax_server_optimizer_as_the_fingerprint_does(tmp_path):
  # Before: config.json held ["function init_fn", "function update_fn"].
  import optax
  c = _config()
  c.methods.fedavg.server_optimizer = optax.adam(0.1)
  ff.run(c, workdir=str(tmp_path))
  recorded = json.loads((tmp_path / "config.json").read_text())
  value = recorded["methods"]["fedavg"]["server_optimizer"]
  fingerprint = workdir_lib.sealed.read(str(tmp_path / "experiment.json"))
  assert value == fingerprint["methods"]["fedavg"]["options"]["server_optimizer"]
  assert value.startswith("optax chain") and "scale_by_adam" in value
  assert "step_size=-0.1" in value and "init_fn" not in value
  assert list(recorded) == list(json.loads(c.to_json_best_effort()))   # keys in order
