"""Fuzzing the command line with generated configs and overrides (hypothesis).

Each generated case is the command line (``fedfrac-run``, run in this process
as ``python -m fedfrac.main`` runs it) on the quickstart config cut
down to one method, 2 rounds and a tiny model, plus 1–4 overrides drawn from
valid and invalid values of run, data, model, client, churn, method-option and
unknown keys. Every case must end in one of three ways:

* status 0: the run finished (or was marked diverged) and no output file holds
  a NaN or an infinity;
* status 2: stopped before compute, stderr is exactly one line ``error: ...``;
* status 1: only with ``on_divergence='error'``, one line ``error: ... diverged``;

never a traceback. ``EXAMPLES`` cases per run, always the same ones: generated
from the fixed ``SEED`` with no example database (about 1–5 s a case on an
idle 2-core CPU).

The fault cases below it stop before compute, in this process (no interpreter
start-up, milliseconds each): config files with a misspelt or deleted key
(generated) and with the other file faults, ``fedfrac-sweep`` flags, local data
files holding NaN, garbage, a directory or a huge label. Each is one line naming
what is wrong, never a traceback.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, assume, example, given, seed, settings
from hypothesis import strategies as st

from fedfrac import config_files, sweep
from fedfrac import main as run_main
from fedfrac.config import ConfigError, base_config
from fedfrac.data import files
from fedfrac.data.files import DataFileError
from tests import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = 10
SEED = 14

BASE = {"only": "fedavg", "rounds": "2", "progress": "False", "model.hidden": "(8,)",
        "eval_every": "1", "data.num_clients": "4"}

# key -> values as typed on the command line (string fields unquoted, as
# config_flags takes them), valid and invalid mixed.
VALUES = {
    "rounds": ["2", "1", "0", "-3", "abc", "2.5"],
    "eval_every": ["1", "2", "0", "-1"],
    "client.lr": ["0.05", "1e3", "-1.0", "x", "0.0"],
    "client.optimizer": ["sgd", "adam", "adamw", "rmsprop"],
    "client.batch_size": ["16", "0", "2.5"],
    "data.alpha": ["0.5", "0.0", "'0.5'", "-1"],
    "data.num_clients": ["4", "0", "3.5", "500"],
    "data.partition": ["iid", "dirichlet", "shards", "label_skew", "bogus"],
    "data.split_seed": ["0", "3", "-5"],
    "data.seed": ["-1", "2", "-7"],
    "participation": ["1.0", "0.5", "0.0", "1.5"],
    "model.name": ["mlp", "bogus", "logreg"],
    "model.hidden": ["(8,)", "(4, 4)", "()", "(-1,)"],
    "task.loss": ["cross_entropy", "mse", "l1"],
    "churn.p_leave": ["0.0", "0.5", "1.0", "2.0"],
    "churn.p_join": ["1.0", "0.0", "0.5"],
    "seeds": ["(0,)", "(0, 0)", "(-1,)", "()"],
    "only": ["fedavg", ",", "nosuch", "fofedavg", "fedprox"],
    "on_divergence": ["stop", "error", "bogus"],
    "methods.fofedavg.alpha": ["0.9", "-1.0", "abc", "1.5"],
    "methods.fedavg.server_lr": ["1.0", "0.5", "-2.0"],
    "methods.fedavg.client.lr": ["0.05", "-1", "1e3"],
    "methods.fedavg.mu": ["0.1"],                     # not a fedavg option
    "data.num_clientz": ["4"],                        # unknown key
    "nosuch.key": ["1"],
}

overrides = st.dictionaries(st.sampled_from(sorted(VALUES)), st.just(None),
                            min_size=1, max_size=4).flatmap(
    lambda d: st.fixed_dictionaries({k: st.sampled_from(VALUES[k]) for k in d}))

NON_FINITE = re.compile(r"\b(nan|NaN|inf|Infinity|-inf)\b")
OUTPUTS = ("metrics.csv", "metrics.jsonl", "rounds.csv", "summary.json", "summary.md")


def _run(args, workdir):
  """``fedfrac-run --config=configs/quickstart.py`` with ``args``, in this
  process (tests/helpers.run_cli_in_process): an exception it let out fails the
  test as a traceback on stderr would."""
  return helpers.run_cli_in_process(["--config=configs/quickstart.py",
                                     f"--workdir={workdir}", *args])


@seed(SEED)
@settings(max_examples=EXAMPLES, deadline=None, database=None,
          phases=(Phase.explicit, Phase.generate),   # no shrinking: bounded time
          suppress_health_check=list(HealthCheck), print_blob=True)
@given(overrides)
@example({"client.lr": "1e308"})          # overflows float32: refused, not run
def test_generated_overrides_run_or_stop_with_one_line(case):
  merged = {**BASE, **case}
  args = [f"--config.{k}={v}" for k, v in merged.items()]
  workdir = tempfile.mkdtemp(prefix="fedfrac_fuzz_")
  try:
    out = _run(args, workdir)
    context = (args, out.returncode, out.stderr[-3000:])
    assert "Traceback" not in out.stderr, context
    lines = [l for l in out.stderr.splitlines() if l.strip()]
    if out.returncode == 2:
      assert len(lines) == 1 and lines[0].startswith("error: "), context
      assert not os.path.exists(os.path.join(workdir, "metrics.csv")), context
    elif out.returncode == 1:
      assert merged.get("on_divergence") == "error", context
      errors = [l for l in lines if l.startswith("error: ")]
      assert len(errors) == 1 and "diverged" in errors[0], context
    else:
      assert out.returncode == 0, context
      for name in OUTPUTS:
        text = open(os.path.join(workdir, name)).read()
        assert not NON_FINITE.search(text), (name, context)
  finally:
    shutil.rmtree(workdir, ignore_errors=True)


# ------------------------------------------------------------ fault cases


def _leaves(node, prefix=""):
  """Dotted paths of the base config's fields (not the free-form sections)."""
  for key in node.keys():
    path = f"{prefix}.{key}" if prefix else key
    if path in ("methods", "churn.per_class"):
      continue
    if hasattr(node[key], "keys"):
      yield from _leaves(node[key], path)
    else:
      yield path


LEAVES = sorted(_leaves(base_config()))


def _misspell(word, position, kind):
  i = position % len(word)
  if kind == "drop" and len(word) > 1:
    return word[:i] + word[i + 1:]
  if kind == "double":
    return word[:i] + word[i] + word[i:]
  if kind == "swap" and len(word) > 1:
    j = min(i + 1, len(word) - 1)
    i = j - 1
    return word[:i] + word[j] + word[i] + word[j + 1:]
  return word[:i] + "x" + word[i + 1:]


def _config_file(tmp_path, name, line):
  path = tmp_path / f"{name}.py"
  path.write_text("from fedfrac.config import base_config\n\n\ndef get_config():\n"
                  f"  c = base_config()\n  {line}\n  return c\n")
  return str(path)


@seed(SEED)
@settings(max_examples=EXAMPLES, deadline=None, database=None,
          phases=(Phase.explicit, Phase.generate),
          suppress_health_check=list(HealthCheck), print_blob=True)
@given(st.sampled_from(LEAVES), st.integers(0, 30),
       st.sampled_from(["drop", "double", "swap", "replace", "delete"]))
def test_generated_config_file_typos_are_one_line(path, position, kind):
  """A config file that misspells (or deletes) a field of the base config."""
  import tempfile
  import pathlib
  *parents, leaf = path.split(".")
  parent = "c" + "".join(f".{p}" for p in parents)
  node = base_config()
  for p in parents:
    node = node[p]
  with tempfile.TemporaryDirectory() as tmp:
    if kind == "delete":
      file = _config_file(pathlib.Path(tmp), "deleted", f"del {parent}[{leaf!r}]")
      expected = f"the config lacks config.{path},"
    else:
      typo = _misspell(leaf, position, kind)
      assume(typo not in node)
      value = node[leaf]
      # inf / nan have no literal: the file spells them float('inf')
      finite = not isinstance(value, float) or abs(value) < float("inf")
      source = repr(value) if finite else f"float({str(value)!r})"
      file = _config_file(pathlib.Path(tmp), "typo", f"{parent}[{typo!r}] = {source}")
      dotted = ".".join(parents + [typo])
      expected = f"config.{dotted}={node[leaf]!r}: unknown key {typo!r}; "
    with pytest.raises(ConfigError) as info:
      config_files.load_config_file(file)
  message = str(info.value)
  assert message.startswith(f"--config={file}: ") and "\n" not in message, message
  assert expected in message, message


FILE_FAULTS = {
    "returns_dict": "return base_config().to_dict()",
    "returns_none": "c.rounds = 3",
    "wrong_type": "c.client.lr = 'fast'",
    "unknown_method_option": "c.methods.fedavg.server_lrr = 0.5",
    "unknown_section_key": "c.client.learning_rate = 10.0",
    "raises": "raise KeyError('rounds')",
}


@pytest.mark.parametrize("name", sorted(FILE_FAULTS))
def test_fedfrac_run_stops_on_a_faulty_config_file(tmp_path, capsys, name):
  """``fedfrac-run``'s flag parsing (in this process: it stops before absl parses)."""
  body = FILE_FAULTS[name]
  path = tmp_path / f"{name}.py"
  if name in ("returns_dict", "returns_none", "raises"):
    path.write_text(f"from fedfrac.config import base_config\n\n\ndef get_config():\n"
                    f"  c = base_config()\n  {body}\n")
  else:
    path = _config_file(tmp_path, name, body)
  with pytest.raises(SystemExit) as stopped:
    run_main.parse_flags(["fedfrac-run", f"--config={path}", f"--workdir={tmp_path}/w"])
  err = capsys.readouterr().err
  assert stopped.value.code == 2 and "Traceback" not in err, err
  lines = [l for l in err.splitlines() if l.strip()]
  assert len(lines) == 1 and lines[0].startswith(f"error: --config={path}: "), lines


QUICKSTART = os.path.join(ROOT, "configs", "quickstart.py")
SWEEP_FAULTS = [
    "--grid=server_lr=abc", "--seeds=-1", "--sweep=client.lr=-1,0.1",
    "--set=client.lr=nan", "--set=client.lr=1e308", "--set=data.alhpa=0.05",
    "--sweep=data.alpha=0.1 --sweep=data.alpha=0.5", "--metrics=acuracy",
    "--out=BLOCKER/t.md",
    # Before: accepted, each doing something other than what was typed.
    "--grid=server_lr=0.5 --grid=server_lr=1.0",       # the first value dropped
    "--metrics=accuracy,accuracy",                      # a column twice
    "--seeds=",                                         # the config's seeds
    "--claim_timeout=5",                                # read by nothing
    "--set=client.batch_size=1000000",                  # 800x slower
    "--set=data.dir=/tmp",                              # not read by digits
    # Before: a traceback, the second mid-sweep after the first point ran.
    "--seeds=9223372036854775808",
    "--sweep=data.num_clients=5,5000",
]


@pytest.mark.parametrize("flags", SWEEP_FAULTS)
def test_fedfrac_sweep_stops_on_bad_flags(tmp_path, capsys, flags):
  blocker = tmp_path / "file"
  blocker.write_text("")
  argv = [f"--config={QUICKSTART}", "--set=only=fedavg", "--set=rounds=1",
          "--set=model.hidden=(8,)", "--workers=1", "--no_progress",
          *flags.replace("BLOCKER", str(blocker)).split()]
  if "--out" not in flags:
    argv.append(f"--out={tmp_path / 't.md'}")
  with pytest.raises(SystemExit) as stopped:
    sweep.main(argv)
  err = capsys.readouterr().err
  assert stopped.value.code == 2 and "Traceback" not in err, err
  lines = [l for l in err.splitlines() if l.strip()]
  assert len(lines) == 1 and lines[0].startswith("error: "), lines
  assert not (tmp_path / "t.points").exists()


def _npz(path, x_train=None, y_train=None):
  r = np.random.default_rng(0)
  np.savez(path, x_train=r.random((12, 4, 4)) if x_train is None else x_train,
           y_train=r.integers(0, 3, 12) if y_train is None else y_train,
           x_test=r.random((4, 4, 4)), y_test=r.integers(0, 3, 4))


DATA_FAULTS = {
    "nan": (lambda d: _npz(d / "d.npz", x_train=np.full((12, 4, 4), np.nan)),
            "d.npz:x_train: holds 192 NaN values"),
    "inf": (lambda d: _npz(d / "d.npz", x_train=np.full((12, 4, 4), np.inf)),
            "d.npz:x_train: holds 192 inf values"),
    "huge_label": (lambda d: _npz(d / "d.npz", y_train=np.full(12, 10**9)),
                   "d.npz:y_train: labels span 1000000000..1000000000"),
    "garbage": (lambda d: (d / "d.npz").write_bytes(b"garbage, not a zip"),
                "d.npz: holds text ('garbage, not a zip'...)"),
    "truncated": (lambda d: (_npz(d / "whole.npz"), (d / "d.npz").write_bytes(
        (d / "whole.npz").read_bytes()[:200]), os.remove(d / "whole.npz")),
                  "d.npz: is a truncated or corrupt zip archive"),
    "directory": (lambda d: (d / "d.npz").mkdir(), "d.npz: is a directory"),
}


@pytest.mark.parametrize("name", sorted(DATA_FAULTS))
def test_bad_data_files_are_named_at_load_time(tmp_path, name):
  make, fragment = DATA_FAULTS[name]
  make(tmp_path)
  with pytest.raises(DataFileError) as info:
    files.load_files(str(tmp_path / "d.npz"))
  message = str(info.value)
  assert message.startswith("data file ") and "\n" not in message, message
  assert fragment in message, message
