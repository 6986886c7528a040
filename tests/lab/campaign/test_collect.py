"""Checksummed item files and collect: an edited or truncated file is not a
result; a FIRMA item re-renders its table beside the committed runs with every
device in the title; a measurement lands in results_<device>.json/.md without
touching the rest of that file; collecting twice changes nothing."""
from __future__ import annotations

import json

from fedfrac_lab.campaign import collect, files


def _firma_item(device="NVIDIA H100 80GB HBM3", item="abc123"):
  cell = {"num_clients": 10, "runs": [{"accuracy": 0.88, "gini": 0.01},
                                      {"accuracy": 0.90, "gini": 0.02}]}
  return {"args": {"seeds": 2, "rounds": 30, "device": device, "inputs": "authors",
                   "dataset": "fashion_mnist"},
          "scenarios": {"iid": {"results": {"reference_code": {"iid/fedavg": cell}}}},
          "campaign": {"item": item, "stage": "b", "kind": "firma",
                       "table": "firma_fashion_mnist", "device": device, "slug": "h100",
                       "seconds": 30.0, "date": "2026-11-26T10:00"}}


def test_an_edited_or_truncated_item_file_is_not_a_result(tmp_path):
  path = tmp_path / "a.json"
  obj = files.write_item(str(path), _firma_item())
  assert files.read_verified(str(path)) == obj
  text = path.read_text()
  path.write_text(text.replace("0.88", "0.98"))
  assert files.read_verified(str(path)) is None
  path.write_text(text[:len(text) // 2])
  assert files.read_verified(str(path)) is None
  assert files.done_items(str(tmp_path)) == {}


def _archive(tmp_path, members, device):
  staging = tmp_path / "staging"
  for name, obj in members.items():
    files.write_item(str(staging / name), obj)
  files.write_json_atomic(str(staging / "timings.json"), [
      {"key": "k", "device": device, "seconds": 30.0, "item": "abc123", "label": "l",
       "stage": "b", "date": "2026-11-26"}])
  archive = tmp_path / "campaign.tar.gz"
  files.pack(str(staging), str(archive), {"device": {"device": device, "slug": "h100",
                                                     "platform": "gpu"},
                                          "dry_run": False, "started": "2026-11-26T10:00:00"})
  return str(archive)


def test_collect_renders_the_firma_table_and_the_device_block(tmp_path):
  root = tmp_path / "checkout"
  committed = root / "results" / "firma_fashion_mnist_cpu" / "old.json"
  committed.parent.mkdir(parents=True)
  old = _firma_item("CPU, 2 cores")
  del old["campaign"]
  committed.write_text(json.dumps(old))
  bench_md = root / "benchmarks" / "results_h100.md"
  bench_md.parent.mkdir(parents=True)
  bench_md.write_text("# fedfrac benchmarks\n\nthe round table\n")
  device = "NVIDIA H100 80GB HBM3"
  vs_torch = {"device": device, "torch": "2.11", "rows": [{
      "workload": "cnn10", "description": "CNNMnist 10", "round_s": 0.01, "compile_s": 3.0,
      "client_steps_per_s": 12000.0, "gflops": 100.0, "round_times": [0.01],
      "torch_round_s": 0.5, "torch_round_times": [0.5], "torch_threads": 16,
      "speedup_vs_torch": 50.0, "torch_device": "cuda", "torch_batched_round_s": 0.05,
      "torch_batched_round_times": [0.05], "speedup_vs_torch_batched": 5.0}]}
  measurement = {"result": vs_torch, "command": "fedfrac-campaign run, measurement vs_torch",
                 "campaign": {"item": "m1", "stage": "a", "kind": "bench",
                              "table": "vs_torch", "device": device, "slug": "h100",
                              "seconds": 60.0, "date": "2026-11-26T10:00"}}
  archive = _archive(tmp_path, {"items/firma_fashion_mnist/abc123.json": _firma_item(),
                                "measurements/vs_torch.json": measurement}, device)
  plan = tmp_path / "plan.json"
  plan.write_text(json.dumps({"tables": {"firma_fashion_mnist": {
      "kind": "firma", "dataset": "fashion_mnist", "out": "results/firma_fashion_mnist.md",
      "include": ["results/firma_fashion_mnist_cpu/*.json"]}}}))
  lines = []
  out = collect.collect(archive, str(plan), str(root), log=lines.append)
  assert out["status"] == {"items/firma_fashion_mnist/abc123.json": "new",
                           "measurements/vs_torch.json": "merged"}
  table = (root / "results" / "firma_fashion_mnist.md").read_text()
  assert table.splitlines()[0].endswith(f"(devices: CPU, 2 cores; {device})")
  assert (f"| FedAvg (reconstructed) | IID | 10 | 0.8938 | 0.8900 ± 0.0141 (n = 2) | {device} |"
          in table)
  assert ("| FedAvg (reconstructed) | IID | 10 | 0.8938 | 0.8900 ± 0.0141 (n = 2) | CPU, 2 cores |"
          in table)
  md = bench_md.read_text()
  assert md.startswith("# fedfrac benchmarks\n\nthe round table\n")
  assert f"## Accelerator measurements on {device}" in md
  assert "| CNNMnist 10 | cuda | 0.010 | 0.500 (16) | **50.00x faster** | 0.050 | " \
         "**5.00x faster** | – | – |" in md
  data = json.loads((root / "benchmarks" / "results_h100.json").read_text())
  assert data["accelerator"]["vs_torch"]["result"] == vs_torch
  # Collecting the same archive again changes nothing.
  before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
  again = collect.collect(archive, str(plan), str(root), log=lines.append)
  assert again["status"]["items/firma_fashion_mnist/abc123.json"] == "same"
  assert again["timings_added"] == 0
  assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def _fresh_archive(tmp_path, name, members, device):
  """:func:`_archive` packed from its own staging folder ``name``."""
  (tmp_path / name).mkdir()
  return _archive(tmp_path / name, members, device)


def _plan(tmp_path):
  plan = tmp_path / "plan.json"
  plan.write_text(json.dumps({"tables": {}}))
  return str(plan)


def _refused(tmp_path, archive, match, capsys):
  """collect refuses ``archive`` with one line matching ``match`` and writes nothing."""
  import re
  root = tmp_path / "checkout"
  root.mkdir(exist_ok=True)
  assert collect.main([archive, "--plan", _plan(tmp_path), "--root", str(root)]) == 2
  err = capsys.readouterr().err
  assert len(err.strip().splitlines()) == 1 and re.search(match, err), err
  assert [p for p in root.rglob("*") if p.is_file()] == []


def test_a_path_field_of_an_item_or_measurement_never_leaves_the_root(tmp_path, capsys):
  escaped = _firma_item()
  escaped["campaign"]["table"] = "../../../../escaped_table"
  archive = _fresh_archive(tmp_path, "a", {"items/firma_fashion_mnist/abc123.json": escaped},
                           "d")
  _refused(tmp_path, archive, r"^error: archive .*: items/firma_fashion_mnist/abc123.json: "
           r"campaign.table='../../../../escaped_table' is not a plain name", capsys)
  measurement = {"result": {}, "command": "c", "campaign": {
      "table": "vs_torch", "device": "d", "slug": "../../x", "seconds": 1.0, "date": "t"}}
  archive = _fresh_archive(tmp_path, "b", {"measurements/vs_torch.json": measurement}, "d")
  _refused(tmp_path, archive, r"measurements/vs_torch.json: campaign.slug='../../x' is "
           r"not a plain name", capsys)
  assert not list(tmp_path.rglob("escaped_table*")) and not (tmp_path / "x.json").exists()


def test_a_garbled_archive_or_timings_file_is_one_line(tmp_path, capsys):
  import tarfile
  no_campaign = _firma_item()
  del no_campaign["campaign"]
  archive = _fresh_archive(tmp_path, "a", {"items/t/abc.json": no_campaign}, "d")
  _refused(tmp_path, archive, r"items/t/abc.json: has no 'campaign' object", capsys)
  bad_manifest = tmp_path / "bad.tar.gz"
  with tarfile.open(bad_manifest, "w:gz") as tar:
    tar.add(tmp_path / "plan.json", arcname="MANIFEST.json")
  (tmp_path / "plan.json").write_text("{not json")
  with tarfile.open(bad_manifest, "w:gz") as tar:
    tar.add(tmp_path / "plan.json", arcname="MANIFEST.json")
  _refused(tmp_path, str(bad_manifest), r"MANIFEST.json is not JSON", capsys)
  staging = tmp_path / "a" / "staging"
  (staging / "items" / "t" / "abc.json").unlink()
  (staging / "timings.json").write_text("garbage")
  files.pack(str(staging), str(tmp_path / "t.tar.gz"), {"device": {"slug": "h100"}})
  _refused(tmp_path, str(tmp_path / "t.tar.gz"), r"timings.json: is not JSON", capsys)
  # A local timings file that is garbage: one line, and the archive's item not left behind.
  good = _fresh_archive(tmp_path, "b", {"items/t/abc123.json": _firma_item()}, "d")
  local = tmp_path / "checkout" / "results" / "campaign" / "timings.json"
  local.parent.mkdir(parents=True)
  local.write_text("[{")
  assert collect.main([good, "--plan", _plan(tmp_path), "--root",
                       str(tmp_path / "checkout")]) == 2
  err = capsys.readouterr().err
  assert err.startswith(f"error: {local}: not readable as JSON") and err.count("\n") == 1
  assert [p.name for p in local.parent.rglob("*") if p.is_file()] == ["timings.json"]


def test_collect_names_the_file_each_member_was_written_to(tmp_path):
  archive = _archive(tmp_path, {"items/firma_fashion_mnist/abc123.json": _firma_item()}, "d")
  lines = []
  root = tmp_path / "checkout"
  collect.collect(archive, _plan(tmp_path), str(root), log=lines.append)
  dest = root / "results" / "campaign" / "firma_fashion_mnist" / "abc123.json"
  assert f"new    items/firma_fashion_mnist/abc123.json -> {dest}" in lines


def test_an_item_its_table_cannot_render_is_refused_and_one_already_kept_is_named(
    tmp_path, capsys):
  plan = tmp_path / "plan.json"
  tables = {"firma_fashion_mnist": {"kind": "firma", "dataset": "fashion_mnist",
                                    "out": "results/firma_fashion_mnist.md", "include": []}}
  plan.write_text(json.dumps({"tables": tables}))
  root = tmp_path / "checkout"
  root.mkdir()
  bad = _firma_item()
  del bad["scenarios"]
  archive = _fresh_archive(tmp_path, "a", {"items/firma_fashion_mnist/abc123.json": bad}, "d")
  assert collect.main([archive, "--plan", str(plan), "--root", str(root)]) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and err.startswith("error: archive ")
  assert ("items/firma_fashion_mnist/abc123.json: not a readable firma item of table "
          "'firma_fashion_mnist' (KeyError: 'scenarios')") in err
  assert [p for p in root.rglob("*") if p.is_file()] == []
  # An unreadable item already in results/campaign/ (kept by an earlier collect):
  # a later collect into its table names it and writes nothing, instead of a traceback.
  kept = root / "results" / "campaign" / "firma_fashion_mnist" / "old.json"
  files.write_item(str(kept), bad)
  good = _fresh_archive(tmp_path, "b", {"items/firma_fashion_mnist/def456.json":
                                        _firma_item(item="def456")}, "d")
  assert collect.main([good, "--plan", str(plan), "--root", str(root)]) == 2
  err = capsys.readouterr().err
  assert err == (f"error: {kept}: not a readable firma item of table 'firma_fashion_mnist' "
                 f"(KeyError: 'scenarios'), so the table cannot be rendered; move it out of "
                 f"{kept.parent} and collect again\n")
  assert sorted(p.name for p in root.rglob("*") if p.is_file()) == ["old.json"]
  kept.unlink()
  assert collect.main([good, "--plan", str(plan), "--root", str(root)]) == 0
  assert (root / "results" / "firma_fashion_mnist.md").exists()
